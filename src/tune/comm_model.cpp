#include "tune/comm_model.h"

#include "topo/plan.h"

#include <algorithm>

namespace conflux::tune {

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
  // A regular host-major layout needs no explicit table (and lets the
  // simulator use rotation symmetry).
  bool regular = true;
  for (size_t r = 0; r < table.size(); ++r) regular &= m.host[r] == static_cast<int>(r) / std::max(1, max_per_host);
  m.ranks_per_host = std::max(1, max_per_host);
  if (regular && m.nranks % m.ranks_per_host == 0) m.host.clear();
  m.same_host_tcp = same_host_tcp;
  // Hosts are assumed alike: ours tells how many cores a host gives its ranks.
  m.cores_per_host = static_cast<int>(topo::current_cpu_binding().size());  // 0 when unknown
  c.apply_to(&m);
  return m;
}

}  // namespace conflux::tune
