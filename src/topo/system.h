// The topology model: devices (CPU/NUMA node, PCI switch, GPU, NIC, network
// port, NVSwitch), links with bandwidths, and the path between every pair of
// devices with NCCL's class (its worst hop) and bottleneck bandwidth.
// Built from an NCCL-dialect tree (xml_tree.h) by build_system(); planning
// reads only this, so any topology file can be tested on any machine.
#pragma once

#include "core/status.h"
#include "topo/xml_tree.h"

#include <string>
#include <vector>

namespace conflux::topo {

enum class DeviceKind { kCpu, kPciSwitch, kPciOther, kGpu, kNic, kNet, kNvSwitch };

// NCCL's link types (a link's contribution to a path's class).
enum class LinkType { kLoc, kNvl, kC2c, kPci, kSys, kNet };

// NCCL's path classes, best to worst; a path's class is its worst hop.
enum class PathType { kLoc = 0, kNvl, kNvb, kC2c, kPix, kPxb, kP2c, kPxn, kPhb, kSys, kNet, kDis };

const char* to_string(DeviceKind kind);
const char* to_string(PathType type);  // "LOC", "NVL", ... as NCCL prints them
const char* to_string(LinkType type);

struct Link {
  int to = -1;
  LinkType type = LinkType::kLoc;
  double bw = 0;  // GB/s
};

struct Path {
  PathType type = PathType::kDis;
  double bw = 0;   // GB/s, bottleneck along the path
  int hops = 0;
};

struct Device {
  DeviceKind kind = DeviceKind::kCpu;
  std::string id;      // "GPU0", "NIC1", "CPU0", "PCI3" (nvidia-smi numbering: bus id order)
  std::string busid;   // PCI devices, normalised
  std::string name;    // NIC/NET: network name (mlx5_0, eth0; the bus id when the file names none)
  std::string ifname;  // NIC/NET: the kernel network interface, when known
  int numa = -1;       // NUMA node of the CPU above it (CPU: its own)
  int parent = -1;     // PCI tree parent (device index), -1 for CPUs
  int cpu = -1;        // the CPU (NUMA) device it hangs off
  int nic = -1;        // NET: its NIC
  // Attributes the planner and the advice read.
  std::string affinity;       // CPU: NCCL cpumask ("0000ffff,ffff0000")
  std::string vendor;         // CPU: GenuineIntel/AuthenticAMD; PCI: 0x10de
  std::string pci_class;      // "0x030200"
  std::string link_speed;     // raw, as in the file
  int link_width = -1;        // raw; 0 means 16 to NCCL, -1 absent
  int sm = 0;                 // GPU compute capability (80, 90), 0 unknown
  int gpu_dev = -1;           // GPU: CUDA device index from the file
  double net_speed_gbs = 0;   // NET/NIC: port speed, GB/s
  std::vector<Link> links;
};

struct Diagnostic {
  enum class Level { kInfo, kWarn } level = Level::kWarn;
  std::string code;     // stable key for tests and JSON ("pci-no-class", ...)
  std::string message;  // what it means and what to do
};

class System {
 public:
  std::vector<Device> devices;
  // paths[a][b], filled by compute_paths(); empty until then.
  std::vector<std::vector<Path>> paths;
  std::vector<Diagnostic> diagnostics;  // gaps found while building (missing class, ...)
  XmlNode tree;                         // the NCCL-dialect tree it was built from
  std::string source;                   // "file:/path", "hwloc", "fused:/path"
  std::string virtualization;           // discovery's evidence of a VM, "" if none

  std::vector<int> of_kind(DeviceKind kind) const;  // in id order
  int find_busid(const std::string& busid) const;   // first PCI device with that bus id, -1
  int find_id(const std::string& id) const;         // "GPU3" -> index, -1
  int find_net(const std::string& name) const;      // NET (or NIC) device by name, -1
  const Path& path(int from, int to) const { return paths[from][to]; }
  int numa_count() const { return static_cast<int>(of_kind(DeviceKind::kCpu).size()); }
  bool has_warning(const std::string& code) const;
};

// Bandwidth rules, NCCL's numbers (GB/s).
double pci_bw(const std::string& link_speed, int link_width);  // Gen3 x16 = 12; "" -> Gen3, 0 -> x16
double nvlink_bw_per_link(int sm);                             // sm80 20, sm90 20.6, ...
double inter_cpu_bw(const std::string& arch, const std::string& vendor, int family, int model);
double net_bw(long long speed_mbps);                           // <= 0 -> 10000 Mb/s

// Builds devices and links from the tree (NCCL's ncclTopoGetSystemFromXml
// rules, Broadcom switch flattening included) and computes all paths.
Result<System> build_system(XmlNode tree, std::string source);

// Fills System::paths: NCCL's breadth-first search for the best path from
// every device, then PXN (a GPU reaching a NIC through an NVLink peer) and P2C
// (GPU over C2C to its CPU, then PCI to the NIC).
void compute_paths(System& sys);

}  // namespace conflux::topo
