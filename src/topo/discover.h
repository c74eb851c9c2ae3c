// Live discovery through hwloc: the PCI tree (folded the way NCCL folds
// sysfs), NUMA nodes and their CPU masks, GPUs, NICs and their network names.
// hwloc honours HWLOC_XMLFILE and HWLOC_FSROOT, so tests feed it fake trees.
#pragma once

#include "core/status.h"
#include "topo/system.h"
#include "topo/xml_tree.h"

#include <string>

namespace conflux::topo {

struct Discovered {
  XmlNode tree;                // NCCL-dialect <system version="1">
  std::string virtualization;  // why we think this is a VM ("hypervisor cpu flag", "QEMU"), or ""
};

// hwloc_xml empty: this machine (or what HWLOC_XMLFILE / HWLOC_FSROOT name).
Result<Discovered> discover_tree(const std::string& hwloc_xml = "");

// discover_tree + build_system.
Result<System> discover();
Result<System> discover_hwloc_xml(const std::string& hwloc_xml);

// Turns hwloc's PCI bridge chain into NCCL's parents. `chain` lists the bus
// ids of the PCI-PCI bridges above a device, nearest first. NCCL walks sysfs
// up two levels at a time (a switch's downstream port, then the root port are
// skipped), so a <pci> bridge is a whole switch. Returns the bridges NCCL
// keeps, nearest first: chain[1], chain[3], ...
std::vector<std::string> nccl_bridges(const std::vector<std::string>& chain);

// PCIe generation and width from hwloc's link speed (GB/s after encoding),
// as NCCL's sysfs strings: 15.75 -> {"8.0 GT/s PCIe", 16}. {"", 0} for 0.
std::pair<std::string, int> pcie_from_hwloc_speed(double gbs);

}  // namespace conflux::topo
