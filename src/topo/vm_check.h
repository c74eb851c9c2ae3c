// `conflux vm check`, run inside a guest: does its /sys show the planned
// tree (addresses, NCCL's parent switch of each device, NUMA nodes, links)?
// Does an injected topology file name devices that exist, with the classes
// they have and CPU masks within the online CPUs? `conflux topo` runs the
// file half whenever a topology file is injected.
#pragma once

#include "topo/sysfs_pci.h"
#include "topo/system.h"
#include "topo/vm_output.h"
#include "topo/xml_tree.h"

#include <string>
#include <vector>

namespace conflux::topo {

struct CheckFinding {
  enum class Severity { kMismatch, kDegraded, kWarn, kInfo } severity = Severity::kMismatch;
  std::string code;     // device-missing, wrong-switch, wrong-numa, busid-missing, cpumask-outside, ...
  std::string message;
};

struct CheckReport {
  std::vector<CheckFinding> findings;
  std::string matrix;   // the guest's path classes beside the host's
  // 0: as planned; 1: a mismatch; 2: degraded (the guest, or the plan it
  // matches, loses the host's grouping: a flat tree).
  int exit_code() const;
  bool has(const std::string& code) const;
};

// Plan against /sys (expect may be null: then the guest's GPUs and NICs by
// class, and whether its tree is flat).
CheckReport check_guest(const SysfsSnapshot& guest, const VmExpectation* expect);

// An NCCL topology file against /sys; findings are appended to `report`.
void check_topo_file(const XmlNode& file, const SysfsSnapshot& guest, CheckReport& report);

std::string to_text(const CheckReport& report);

}  // namespace conflux::topo
