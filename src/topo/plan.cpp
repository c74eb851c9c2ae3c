#include "topo/plan.h"

#include "core/log.h"

#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <map>
#include <set>
#include <sstream>

namespace conflux::topo {
namespace {

// NCCL's mask "0000ffff,ffff0000": 32-bit hex words, most significant first.
bool mask_has(const std::string& mask, int cpu) {
  std::vector<std::string> words;
  std::stringstream ss(mask);
  std::string w;
  while (std::getline(ss, w, ',')) words.push_back(w);
  size_t idx = static_cast<size_t>(cpu / 32);
  if (idx >= words.size()) return false;
  const std::string& word = words[words.size() - 1 - idx];
  unsigned long v = std::strtoul(word.c_str(), nullptr, 16);
  return (v >> (cpu % 32)) & 1u;
}

}  // namespace

int numa_of_cpus(const System& sys, const std::vector<int>& cpus) {
  int best = -1, best_count = 0;
  for (int c : sys.of_kind(DeviceKind::kCpu)) {
    const Device& d = sys.devices[c];
    if (d.affinity.empty()) continue;
    int count = 0;
    for (int cpu : cpus) count += mask_has(d.affinity, cpu);
    if (count > best_count) {
      best = d.numa;
      best_count = count;
    }
  }
  return best;
}

std::vector<int> current_cpu_binding() {
  std::vector<int> out;
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) != 0) return out;
  for (int i = 0; i < CPU_SETSIZE; ++i)
    if (CPU_ISSET(i, &set)) out.push_back(i);
  return out;
}

bool pin_this_thread(int cpu) {
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(cpu, &one);
  return pthread_setaffinity_np(pthread_self(), sizeof one, &one) == 0;
}

NicChoice nearest_nic(const System& sys, int numa, int spread) {
  std::vector<int> cpus = sys.of_kind(DeviceKind::kCpu);
  int cpu = -1;
  for (int c : cpus)
    if (sys.devices[c].numa == numa) cpu = c;
  if (cpu < 0 && !cpus.empty()) cpu = cpus.front();
  std::vector<int> nics = sys.of_kind(DeviceKind::kNic);
  if (cpu < 0 || nics.empty()) return {};
  auto better = [&](int a, int b) {
    const Path& pa = sys.path(cpu, a);
    const Path& pb = sys.path(cpu, b);
    if (pa.type != pb.type) return pa.type < pb.type;
    return pa.bw > pb.bw;
  };
  std::stable_sort(nics.begin(), nics.end(), better);
  size_t equal = 1;
  while (equal < nics.size() && !better(nics[0], nics[equal]) && !better(nics[equal], nics[0])) ++equal;
  int pick = nics[static_cast<size_t>(std::max(spread, 0)) % equal];
  const Device& d = sys.devices[pick];
  return NicChoice{pick, d.name, d.ifname, sys.path(cpu, pick).type, sys.path(cpu, pick).bw};
}

Placement place_this_process(const System& sys, int local_rank) {
  Placement p;
  p.numa = numa_of_cpus(sys, current_cpu_binding());
  p.nic = nearest_nic(sys, p.numa, local_rank);
  return p;
}

std::vector<int> order_ring(const std::vector<RankLocation>& ranks) {
  std::vector<std::string> hosts;  // order of first appearance = lowest rank
  std::map<std::string, std::vector<int>> members;
  for (size_t r = 0; r < ranks.size(); ++r) {
    if (!members.count(ranks[r].host)) hosts.push_back(ranks[r].host);
    members[ranks[r].host].push_back(static_cast<int>(r));
  }
  std::vector<int> order;
  for (size_t h = 0; h < hosts.size(); ++h) {
    std::vector<int>& m = members[hosts[h]];
    std::stable_sort(m.begin(), m.end(), [&](int a, int b) {
      if (ranks[a].numa != ranks[b].numa) return ranks[a].numa < ranks[b].numa;
      if (ranks[a].nic != ranks[b].nic) return ranks[a].nic < ranks[b].nic;
      return a < b;
    });
    // Distinct NICs in ring order; enter this host on the (h mod k)-th.
    std::vector<std::string> nics;
    for (int r : m)
      if (std::find(nics.begin(), nics.end(), ranks[r].nic) == nics.end()) nics.push_back(ranks[r].nic);
    if (hosts.size() > 1 && nics.size() > 1) {
      const std::string& entry = nics[h % nics.size()];
      auto it = std::find_if(m.begin(), m.end(), [&](int r) { return ranks[r].nic == entry; });
      std::rotate(m.begin(), it, m.end());
    }
    order.insert(order.end(), m.begin(), m.end());
  }
  if (log::enabled(log::Level::kInfo, log::kTopo)) {
    std::string line;
    for (int r : order)
      line += " " + std::to_string(r) + "(" + ranks[r].host + "/numa" + std::to_string(ranks[r].numa) + "/" +
              (ranks[r].nic.empty() ? "-" : ranks[r].nic) + ")";
    CFX_INFO(kTopo, "ring order (rank(host/numa/nic)):%s", line.c_str());
  }
  return order;
}

}  // namespace conflux::topo
