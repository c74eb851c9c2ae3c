// The PCI view of a Linux /sys tree, and the NCCL-dialect tree NCCL builds
// from it. `conflux vm check` reads a guest's /sys with this; `conflux vm
// plan` builds the same snapshot for the guest it predicts, so the planned
// grouping and the checked one come out of one walk (NCCL's, in
// src/graph/xml.cc: a device's parent is two sysfs levels up, so a switch's
// downstream port and the root port above a switch are skipped).
#pragma once

#include "core/status.h"
#include "topo/system.h"
#include "topo/xml_tree.h"

#include <map>
#include <string>
#include <vector>

namespace conflux::topo {

struct PciFunction {
  std::string busid;              // "0000:13:00.0"
  std::vector<std::string> path;  // below /sys/devices: "pci0000:10", "0000:10:00.0", ..., busid
  std::string pci_class;          // "0x030200"
  std::string vendor, device, subsystem_vendor, subsystem_device;  // "0x10de"
  std::string link_speed;         // max_link_speed, as the kernel prints it
  int link_width = -1;            // max_link_width, -1 when absent
  int numa = -1;                  // numa_node
};

struct SysfsSnapshot {
  std::vector<PciFunction> functions;          // in bus id order
  std::vector<int> online_cpus;                // /sys/devices/system/cpu/online
  std::map<int, std::vector<int>> node_cpus;   // NUMA node -> its CPUs (nodeN/cpulist)
  const PciFunction* find(const std::string& busid) const;
};

// Reads root + "/sys" (root "" or "/": this machine). Only what is missing
// altogether (no /sys/bus/pci/devices) is an error; a function with an
// unreadable attribute keeps the attribute empty.
Result<SysfsSnapshot> read_sysfs(const std::string& root);

// "0-3,8,10-11" -> {0,1,2,3,8,10,11}; nullopt-like empty result with ok=false on junk.
Result<std::vector<int>> parse_cpulist(const std::string& text);
// NCCL's cpumask layout (32-bit hex words, most significant first, commas).
std::string cpumask_of(const std::vector<int>& cpus);
// The CPUs a cpumask names; an error for anything but hex words and commas.
Result<std::vector<int>> cpus_of_mask(const std::string& mask);
// "0-3,8": the short form for messages.
std::string cpulist_of(const std::vector<int>& cpus);

// True for "dddd:bb:dd.f" in lower case, as NCCL writes and matches bus ids.
bool is_canonical_busid(const std::string& busid);

// NCCL's device type from a PCI class: GPU for 0x03..., NIC for 0x02...,
// switch for 0x0604; kPciOther for the rest.
DeviceKind kind_of_class(const std::string& pci_class);
// The guest devices conflux treats as GPUs and NICs when no plan names them:
// discovery's rule (3D controllers, displays of GPU vendors, network class).
bool is_gpu_or_nic(const PciFunction& f);

struct Endpoint {
  std::string busid;
  DeviceKind kind = DeviceKind::kGpu;
};

// The <system> NCCL's sysfs walk gives for `endpoints`: each endpoint's
// <pci> under its parent switch (the <pci> two levels up), switches under
// the CPU of their NUMA node (numaid -1 where the kernel knows none).
// Endpoints missing from the snapshot are left out; the caller reports them.
XmlNode nccl_tree_from_sysfs(const SysfsSnapshot& snap, const std::vector<Endpoint>& endpoints);

// The bus id of the <pci> NCCL puts `busid` under, "" when it is the CPU.
std::string nccl_parent(const SysfsSnapshot& snap, const std::string& busid);

}  // namespace conflux::topo
