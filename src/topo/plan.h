// Planning helpers: where this process sits (NUMA node, nearest NIC) and a
// ring order that keeps each host's ranks together and spreads cross-host
// edges over distinct NICs (rails).
#pragma once

#include "core/status.h"
#include "topo/system.h"

#include <string>
#include <vector>

namespace conflux::topo {

// The NUMA node whose CPU affinity covers most of `cpus` (logical CPU ids);
// -1 when the topology has no affinity masks or `cpus` is empty.
int numa_of_cpus(const System& sys, const std::vector<int>& cpus);

// This process's CPU binding (sched_getaffinity), as logical CPU ids.
std::vector<int> current_cpu_binding();

// Binds the calling thread to one logical CPU; false where the kernel refuses.
bool pin_this_thread(int cpu);

struct NicChoice {
  int device = -1;      // index in sys.devices (a NIC), -1 when there is none
  std::string name;     // mlx5_0, eth0, or the bus id when unnamed
  std::string ifname;   // kernel interface for TCP, when known
  PathType type = PathType::kDis;
  double bw = 0;
};

// The NIC nearest the CPU of NUMA node `numa`: best path class, then
// bandwidth; among equals the `spread`-th (pass the local rank so ranks on
// one NUMA node use all its rails). numa -1: the first NUMA node.
NicChoice nearest_nic(const System& sys, int numa, int spread = 0);

struct Placement {
  int numa = -1;
  NicChoice nic;
};
// numa_of_cpus(current binding) + nearest_nic.
Placement place_this_process(const System& sys, int local_rank = 0);

struct RankLocation {
  std::string host;  // host identity (hostname or host hash)
  int numa = -1;
  std::string nic;
};

// A ring over all ranks: hosts in order of their lowest rank, each host's
// ranks contiguous and ordered by (NUMA, NIC, rank); host h's sequence is
// rotated so it is entered on its (h mod nics)-th NIC, spreading the
// cross-host edges over rails. Logs the order at CONFLUX_DEBUG=INFO.
std::vector<int> order_ring(const std::vector<RankLocation>& ranks);

}  // namespace conflux::topo
