#include "tune/comm_model.h"


#include <algorithm>
#include <numeric>
#include <utility>
#include <vector>

namespace conflux::tune {
namespace {

// The cores a host gives its ranks: the CPUs of its ranks' distinct
// affinity sets, added up (ranks bound to a core each use as many cores as
// they are; unbound ranks share one set). The fewest of any host, from the
// table every rank holds alike, so every rank builds the same model. 0 when
// a rank could not read its set.
int cores_per_host(const std::vector<RankInfo>& table) {
  int fewest = 0;
  std::vector<uint64_t> hosts;
  for (const RankInfo& r : table) {
    if (std::find(hosts.begin(), hosts.end(), r.host_hash) != hosts.end()) continue;
    hosts.push_back(r.host_hash);
    std::vector<uint64_t> sets;
    int cores = 0;
    for (const RankInfo& q : table) {
      if (q.host_hash != r.host_hash || std::find(sets.begin(), sets.end(), q.cpu_set_hash) != sets.end()) continue;
      if (q.cpu_set_size <= 0) return 0;
      sets.push_back(q.cpu_set_hash);
      cores += q.cpu_set_size;
    }
    fewest = fewest == 0 ? cores : std::min(fewest, cores);
  }
  return fewest;
}

// Hosts that run on one kernel's cores (containers or network namespaces
// on one machine, each with its own hostname) share a CPU set identity:
// cpu_set_hash includes the kernel's boot id. When those shared sets join
// every host into one group, the hosts are one machine: returns the CPUs of
// all the ranks' distinct sets, else 0 (separate machines, or only some
// hosts sharing one, which the model's single machine-wide pool cannot say).
int machine_cores(const std::vector<RankInfo>& table, const std::vector<int>& host_of_rank, int nhosts) {
  if (nhosts < 2) return 0;
  // Hosts linked by a CPU set that ranks on both use, joined into groups.
  std::vector<int> group(static_cast<size_t>(nhosts));
  std::iota(group.begin(), group.end(), 0);
  auto root = [&](int h) {
    while (group[static_cast<size_t>(h)] != h) h = group[static_cast<size_t>(h)];
    return h;
  };
  // Each distinct set, with the host of the first rank that uses it.
  std::vector<std::pair<uint64_t, int>> sets;
  int cpus = 0;
  for (size_t r = 0; r < table.size(); ++r) {
    if (table[r].cpu_set_size <= 0) return 0;
    auto seen = std::find_if(sets.begin(), sets.end(), [&](const auto& s) { return s.first == table[r].cpu_set_hash; });
    if (seen == sets.end()) {
      sets.emplace_back(table[r].cpu_set_hash, host_of_rank[r]);
      cpus += table[r].cpu_set_size;
    } else {
      group[static_cast<size_t>(root(seen->second))] = root(host_of_rank[r]);
    }
  }
  for (int h = 1; h < nhosts; ++h)
    if (root(h) != root(0)) return 0;
  return cpus;
}

}  // namespace

sim::ClusterModel model_of(const std::vector<RankInfo>& table, bool same_host_tcp, const Constants& c) {
  sim::ClusterModel m;
  m.nranks = static_cast<int>(table.size());
  std::vector<uint64_t> seen;
  m.host.resize(table.size());
  int max_per_host = 0;
  std::vector<int> per_host;
  for (size_t r = 0; r < table.size(); ++r) {
    auto it = std::find(seen.begin(), seen.end(), table[r].host_hash);
    if (it == seen.end()) {
      seen.push_back(table[r].host_hash);
      per_host.push_back(0);
      it = seen.end() - 1;
    }
    int h = static_cast<int>(it - seen.begin());
    m.host[r] = h;
    max_per_host = std::max(max_per_host, ++per_host[h]);
  }
  const int shared_cores = machine_cores(table, m.host, static_cast<int>(seen.size()));
  // A regular host-major layout needs no explicit table (and lets the
  // simulator use rotation symmetry).
  bool regular = true;
  for (size_t r = 0; r < table.size(); ++r) regular &= m.host[r] == static_cast<int>(r) / std::max(1, max_per_host);
  m.ranks_per_host = std::max(1, max_per_host);
  if (regular && m.nranks % m.ranks_per_host == 0) m.host.clear();
  m.same_host_tcp = same_host_tcp;
  m.cores_per_host = cores_per_host(table);
  c.apply_to(&m);
  // Hosts on one machine share its cores for every message's overheads and
  // its kernel's copy bandwidth for every inter-host byte. The probe's
  // bandwidth is per direction with both directions busy, so the kernel
  // copies twice that in all (as the emulated-host validation measures it).
  m.machine_cores = shared_cores;
  if (m.machine_cores > 0) m.machine_net_gbps = 2 * m.params(sim::PathClass::kNet).gbps;
  return m;
}

}  // namespace conflux::tune
