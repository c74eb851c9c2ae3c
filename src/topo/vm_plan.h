// `conflux vm plan`: a q35 guest PCIe tree that groups passed-through GPUs
// and NICs as the host does. Each host NUMA node with devices becomes an
// expander bus (pxb-pcie, numa_node) of the guest; each host PCI switch
// (as NCCL sees it, Broadcom sub-switches already merged into their parent)
// becomes an x3130-upstream port with an xio3130-downstream port per child,
// under a root port; a device straight under the host's root complex gets a
// root port of its own. The guest bus numbers are predicted as SeaBIOS and
// OVMF assign them (depth first, in slot order, each expander from its
// bus_nr), and the /sys those numbers give is run through NCCL's own walk
// (sysfs_pci.h) to produce the guest topology file and the path classes the
// guest will see.
#pragma once

#include "core/status.h"
#include "topo/sysfs_pci.h"
#include "topo/system.h"
#include "topo/vm_map.h"
#include "topo/xml_tree.h"

#include <string>
#include <vector>

namespace conflux::topo {

enum class VmLayout {
  kSwitch,  // the host's grouping
  kFlat,    // every device on its own root port of pcie.0, as libvirt and most clouds do
};
const char* to_string(VmLayout layout);

struct VmPlanOptions {
  VmLayout layout = VmLayout::kSwitch;
  int vcpus_per_node = 0;      // 0: the host node's CPU count (1 when the host file has none)
  int mem_mib_per_node = 1024;
};

struct VmController {
  enum class Kind { kExpander, kRootPort, kUpstream, kDownstream } kind = Kind::kRootPort;
  std::string id;            // QEMU id: pxb0, rp0, sw0, sw0p1
  int parent = -1;           // controller index; -1: pcie.0
  int slot = 0;              // address on the parent's bus
  int function = 0;
  bool multifunction = false;
  int numa = -1;             // expander: its guest NUMA node
  int bus_nr = -1;           // expander: the number of the root bus it opens
  int chassis = 0;           // ports: unique per port (QEMU's chassis is 8-bit)
  int port = 0;              // ports: PCIe port number among its siblings
  int secondary = -1;        // ports: the bus the firmware gives the port's link
  int subordinate = -1;      //        and the last bus below it
  int host_switch = -1;      // upstream port: the host switch (device index) it stands for
  std::string busid;         // its own predicted guest address
};

struct VmDevice {
  int host = -1;             // index into the host System
  DeviceKind kind = DeviceKind::kGpu;
  std::string host_busid;
  std::string qemu_id;       // gpu0, nic0
  std::string guest_busid;   // predicted
  int port = -1;             // controller it plugs into
  int host_numa = -1;
  int guest_numa = -1;       // -1 on a flat layout: pcie.0 has no NUMA node
  std::string host_switch;   // bus id of its NCCL parent on the host, "" = the CPU
  std::string guest_switch;  // the same in the guest
};

struct VmNumaNode {
  int node = 0;
  int host_node = -1;        // the host node whose devices it carries, -1 none
  std::vector<int> cpus;     // guest vCPUs
  int mem_mib = 0;
};

struct VmPair {
  int a = 0, b = 0;          // indices into VmPlan::devices (a is a GPU)
  PathType host = PathType::kDis;
  PathType guest = PathType::kDis;
};

struct VmPlan {
  VmLayout layout = VmLayout::kSwitch;
  std::string host_source;
  std::vector<VmNumaNode> numa;
  std::vector<VmController> controllers;
  std::vector<VmDevice> devices;
  int buses_used = 0;                 // highest guest bus number + 1
  std::vector<Diagnostic> warnings;
  SysfsSnapshot guest_sysfs;          // the /sys the guest will show
  XmlNode guest_topo;                 // guest-topo.xml (NCCL's format)
  std::vector<VmPair> pairs;          // every GPU-GPU and GPU-NIC pair

  int changed_pairs() const;          // pairs whose guest class differs from the host's
  bool numa_preserved() const;        // same host node <=> same guest node, for every pair
};

// The host's PCI path classes: the system rebuilt without NVLink and C2C
// links, which the guest's driver finds for itself.
Result<System> pci_only(const System& sys);

Result<VmPlan> plan_vm(const System& host, const PassthroughMap& map, const VmPlanOptions& opt);

// PCIe speed as a string NCCL knows ("16.0 GT/s PCIe"); an unknown or empty
// speed becomes the Gen3 NCCL assumes for it, so the guest file states what
// the host model used.
std::string nccl_link_speed(const std::string& speed);

}  // namespace conflux::topo
