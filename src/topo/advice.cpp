#include "topo/advice.h"

#include <algorithm>
#include <map>
#include <set>

namespace conflux::topo {
namespace {

constexpr const char* kInjectHint =
    "Fix: inject a topology file (CONFLUX_TOPO_FILE, or NCCL_TOPO_FILE for NCCL) that describes the host's "
    "switches, or have the hypervisor give the guest PCIe switches as on the host";


void numa_masks(const System& sys, std::vector<Diagnostic>& out) {
  std::map<std::string, std::vector<int>> by_mask;
  for (int c : sys.of_kind(DeviceKind::kCpu))
    if (!sys.devices[c].affinity.empty()) by_mask[sys.devices[c].affinity].push_back(sys.devices[c].numa);
  for (const auto& [mask, numas] : by_mask) {
    if (numas.size() < 2) continue;
    std::string list;
    for (int n : numas) list += (list.empty() ? "" : ",") + std::to_string(n);
    out.push_back({Diagnostic::Level::kWarn, "numa-affinity-identical",
                   "NUMA nodes " + list + " all claim the same CPU affinity mask " + mask +
                       ": the topology cannot say which cores are near which GPU/NIC, so ranks get "
                       "pinned to the wrong socket and cross it for every transfer. A vendor file with "
                       "this fault (Azure NDv4, 2023) also had its NUMA domains swapped: use a current "
                       "file, or drop the file's affinity attributes so discovery fills them"});
  }
}

void pci_shape(const System& sys, std::vector<Diagnostic>& out) {
  std::vector<int> gpus = sys.of_kind(DeviceKind::kGpu);
  std::vector<int> nics = sys.of_kind(DeviceKind::kNic);
  std::vector<int> switches = sys.of_kind(DeviceKind::kPciSwitch);
  bool devices = !gpus.empty() || !nics.empty();

  // Virtual bridges reporting a 2.5 GT/s x1 uplink (IBM Cloud VSIs).
  std::vector<std::string> slow;
  for (int s : switches) {
    const Device& d = sys.devices[s];
    if (d.link_width == 1 && d.link_speed.rfind("2.5 GT/s", 0) == 0) slow.push_back(d.busid);
  }
  if (!slow.empty()) {
    out.push_back({Diagnostic::Level::kWarn, "virtual-bridge-2.5gt-x1",
                   std::to_string(slow.size()) + " PCI bridge(s) (first " + slow.front() +
                       ") report 2.5 GT/s x1, i.e. " + std::to_string(pci_bw("2.5 GT/s", 1)).substr(0, 6) +
                       " GB/s: typical of virtual bridges in a VM. Any path that leaves the switch "
                       "through the CPU is rated at that, so traffic between a GPU and a NIC or peer "
                       "under different bridges is planned as if it crawled; only paths inside one "
                       "switch or over NVLink (PXN) keep their bandwidth. " + std::string(kInjectHint)});
  }

  if (devices && switches.empty()) {
    bool vm = !sys.virtualization.empty();
    out.push_back({Diagnostic::Level::kWarn, vm ? "vm-flat-pci" : "flat-pci",
                   std::string(vm ? "running in a virtual machine (" + sys.virtualization + ") with a flat PCI tree"
                                  : "flat PCI tree") +
                       ": every GPU and NIC hangs directly off the root complex, as passthrough shows "
                       "it, so GPU-NIC paths are PHB or SYS. NCCL then turns GPUDirect RDMA off and "
                       "narrows channels (nccl-tests #256: 475 GB/s bare metal, 3-57 GB/s in the VM). " +
                       std::string(kInjectHint)});
  } else if (!sys.virtualization.empty()) {
    out.push_back({Diagnostic::Level::kInfo, "vm",
                   "running in a virtual machine (" + sys.virtualization +
                       "): the PCI tree the guest sees may not be the host's"});
  }

  // GPUs and NICs with no common switch.
  if (!gpus.empty() && !nics.empty()) {
    bool any_close = false;
    for (int g : gpus)
      for (int n : nics)
        if (sys.path(g, n).type <= PathType::kPxb) any_close = true;
    if (!any_close)
      out.push_back({Diagnostic::Level::kWarn, "gpu-nic-no-switch",
                     "no GPU shares a PCIe switch with any NIC (best GPU-NIC path is PHB or worse): "
                     "network traffic is staged through host memory, GPUDirect RDMA stays off "
                     "(NCCL's default NCCL_NET_GDR_LEVEL is PXB). If the host has such switches, " +
                         std::string(kInjectHint)});
  }

  // Injected virtual switches: fine, but say so.
  int virtual_switches = 0;
  for (int s : switches)
    if (sys.devices[s].busid.rfind("ffff:", 0) == 0 || sys.devices[s].vendor == "0xffff") ++virtual_switches;
  if (virtual_switches > 0)
    out.push_back({Diagnostic::Level::kInfo, "virtual-switches",
                   std::to_string(virtual_switches) +
                       " PCI switch(es) are synthetic (bus id ffff:ff:xx or vendor 0xffff): an injected "
                       "file grouping each GPU with its NIC, as cloud vendors ship for VMs"});
}

}  // namespace

std::vector<Diagnostic> advise(const System& sys) {
  std::vector<Diagnostic> out = sys.diagnostics;
  numa_masks(sys, out);
  pci_shape(sys, out);
  return out;
}

}  // namespace conflux::topo
