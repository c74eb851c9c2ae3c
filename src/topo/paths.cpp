// Path search, after NCCL's src/graph/paths.cc: a breadth-first search from
// every device keeps, for each other device, the shortest route with the best
// bottleneck bandwidth; the route's class is its worst hop, where a hop
// between two PCI switches is PXB, a PCIe hop to or from a CPU is PHB, and two
// NVLink hops through a GPU are NVB.
#include "topo/system.h"

#include <algorithm>

namespace conflux::topo {
namespace {

bool is_pci_node(DeviceKind k) { return k == DeviceKind::kPciSwitch || k == DeviceKind::kPciOther; }

PathType link_path_type(LinkType t) {
  switch (t) {
    case LinkType::kLoc: return PathType::kLoc;
    case LinkType::kNvl: return PathType::kNvl;
    case LinkType::kC2c: return PathType::kC2c;
    case LinkType::kPci: return PathType::kPix;
    case LinkType::kSys: return PathType::kSys;
    case LinkType::kNet: return PathType::kLoc;  // the NIC->port hop says nothing about the route
  }
  return PathType::kDis;
}

// Paths from every device toward `base`: out[d] is the path d -> base.
void search_from(System& sys, int base) {
  const int n = static_cast<int>(sys.devices.size());
  for (int d = 0; d < n; ++d) sys.paths[d][base] = Path{};
  sys.paths[base][base] = Path{PathType::kLoc, 5000.0, 0};
  std::vector<int> frontier{base};
  while (!frontier.empty()) {
    std::vector<int> next;
    for (int node : frontier) {
      const Path cur = sys.paths[node][base];
      const Device& nd = sys.devices[node];
      for (const Link& link : nd.links) {
        const int rem = link.to;
        const Device& rd = sys.devices[rem];
        // A GPU is a waypoint only for NVLink to another GPU (NVB).
        if (node != base && nd.kind == DeviceKind::kGpu &&
            (link.type != LinkType::kNvl || rd.kind != DeviceKind::kGpu))
          continue;
        Path& rp = sys.paths[rem][base];
        double bw = std::min(cur.bw, link.bw);
        if ((rp.bw == 0 || rp.hops > cur.hops) && rp.bw < bw) {
          rp.hops = cur.hops + 1;
          rp.bw = bw;
          PathType type = link_path_type(link.type);
          if (is_pci_node(nd.kind) && is_pci_node(rd.kind)) type = PathType::kPxb;
          if (link.type == LinkType::kPci && (nd.kind == DeviceKind::kCpu || rd.kind == DeviceKind::kCpu))
            type = PathType::kPhb;
          if (nd.kind == DeviceKind::kGpu && cur.type == PathType::kNvl && type == PathType::kNvl && rp.hops > 1)
            type = PathType::kNvb;
          rp.type = std::max(cur.type, type);
          next.push_back(rem);
        }
      }
    }
    frontier = std::move(next);
  }
}

bool is_nic_like(DeviceKind k) { return k == DeviceKind::kNic || k == DeviceKind::kNet; }

// The GPU closest to a NIC (best class, then bandwidth): NCCL's local GPU.
int local_gpu(const System& sys, int nic, const std::vector<int>& gpus) {
  int best = -1;
  for (int g : gpus) {
    const Path& p = sys.paths[g][nic];
    if (best < 0 || p.type < sys.paths[best][nic].type ||
        (p.type == sys.paths[best][nic].type && p.bw > sys.paths[best][nic].bw))
      best = g;
  }
  return best;
}

}  // namespace

void compute_paths(System& sys) {
  const size_t n = sys.devices.size();
  sys.paths.assign(n, std::vector<Path>(n));
  for (size_t b = 0; b < n; ++b) search_from(sys, static_cast<int>(b));

  std::vector<int> gpus = sys.of_kind(DeviceKind::kGpu);
  std::vector<int> nics;
  for (size_t i = 0; i < n; ++i)
    if (is_nic_like(sys.devices[i].kind)) nics.push_back(static_cast<int>(i));

  // P2C: a GPU with a C2C link to its CPU reaches a NIC on that CPU's PCIe
  // through C2C rather than through its own PCIe link.
  for (int g : gpus) {
    int cpu = sys.devices[g].cpu;
    if (cpu < 0 || sys.paths[g][cpu].type != PathType::kC2c) continue;
    for (int nic : nics) {
      Path& p = sys.paths[g][nic];
      const Path& c2c = sys.paths[g][cpu];
      const Path& tail = sys.paths[cpu][nic];
      if (p.type >= PathType::kPhb && tail.type <= PathType::kPhb) {
        p = Path{PathType::kP2c, std::min(c2c.bw, tail.bw), c2c.hops + tail.hops};
      }
    }
  }

  // PXN: reach a NIC through an NVLink peer that sits next to it, when that
  // avoids the CPU or gives more bandwidth (GPU -> NIC direction, as NCCL).
  for (int nic : nics) {
    int peer = local_gpu(sys, nic, gpus);
    if (peer < 0) continue;
    for (int g : gpus) {
      if (g == peer) continue;
      Path& p = sys.paths[g][nic];
      const Path& via = sys.paths[peer][nic];
      const Path& nvl = sys.paths[g][peer];
      if (via.type <= PathType::kPxb && nvl.type <= PathType::kNvl &&
          (via.bw > p.bw || p.type > PathType::kPxb)) {
        p = Path{PathType::kPxn, std::min(via.bw, nvl.bw), via.hops + nvl.hops};
      }
    }
  }
}

}  // namespace conflux::topo
