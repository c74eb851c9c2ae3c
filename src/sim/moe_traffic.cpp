// MoE traffic and its prediction: see sim/moe_traffic.h.
#include "sim/moe_traffic.h"

#include "algo/algorithms.h"
#include "sim/sim.h"

#include <algorithm>

namespace conflux::sim {

namespace {

int host_of(const ClusterModel& m, int r) {
  return m.host.empty() ? r / std::max(1, m.ranks_per_host) : m.host[static_cast<size_t>(r)];
}

MoeExchange exchange(const ClusterModel& m) {
  MoeExchange x;
  x.bytes.assign(static_cast<size_t>(m.nranks) * m.nranks, 0);
  return x;
}

void add(MoeExchange& x, const ClusterModel& m, int s, int d, size_t bytes) {
  x.bytes[static_cast<size_t>(s) * m.nranks + d] += bytes;
  if (host_of(m, s) != host_of(m, d)) x.network_bytes += bytes;
}

// The placed path's rows: each expert's block on its rank holds its rows
// in (source rank, token) order; combine returns pair p of rank s to row
// p of s's receive rows.
void place_rows(const MoeRouting& r, int n, MoeTraffic* t) {
  const size_t E = r.expert_rank.size(), k = static_cast<size_t>(r.top_k);
  std::vector<size_t> per_expert(E, 0), start(E, 0), rows(static_cast<size_t>(n), 0);
  for (const auto& ex : r.experts)
    for (int32_t e : ex) ++per_expert[static_cast<size_t>(e)];
  for (size_t e = 0; e < E; ++e) {
    start[e] = rows[static_cast<size_t>(r.expert_rank[e])];
    rows[static_cast<size_t>(r.expert_rank[e])] += per_expert[e];
  }
  for (int s = 0; s < n && s < static_cast<int>(r.experts.size()); ++s) {
    const std::vector<int32_t>& ex = r.experts[static_cast<size_t>(s)];
    for (size_t p = 0; p < ex.size(); ++p) {
      const size_t e = static_cast<size_t>(ex[p]);
      const int d = r.expert_rank[e];
      const size_t row = start[e]++;
      t->placed_dispatch.push_back({s, d, p / k, row, 1});
      if (d != s) t->placed_combine.push_back({d, s, row, p, 1});
    }
  }
}

}  // namespace

MoeTraffic moe_traffic(const MoeRouting& r, const ClusterModel& m) {
  const int n = m.nranks, k = r.top_k;
  // Ranks by host, in rank order: a rank's local index is its position.
  std::vector<std::vector<int>> ranks_on;
  std::vector<int> local(static_cast<size_t>(n));
  for (int q = 0; q < n; ++q) {
    const int h = host_of(m, q);
    if (static_cast<int>(ranks_on.size()) <= h) ranks_on.resize(static_cast<size_t>(h) + 1);
    local[static_cast<size_t>(q)] = static_cast<int>(ranks_on[static_cast<size_t>(h)].size());
    ranks_on[static_cast<size_t>(h)].push_back(q);
  }
  MoeTraffic t;
  t.flat_dispatch = t.flat_combine = exchange(m);
  t.hier_dispatch_net = t.hier_dispatch_host = t.hier_combine_host = t.hier_combine_net = exchange(m);
  std::vector<int> targets_on(static_cast<size_t>(n), 0), hosts_hit;
  for (int s = 0; s < n && s < static_cast<int>(r.experts.size()); ++s) {
    const std::vector<int32_t>& ex = r.experts[static_cast<size_t>(s)];
    for (size_t tok = 0; tok * k < ex.size(); ++tok) {
      std::vector<int> ranks_hit;
      for (int j = 0; j < k; ++j) {
        const int d = r.expert_rank[static_cast<size_t>(ex[tok * k + j])];
        if (targets_on[static_cast<size_t>(d)]++ == 0) ranks_hit.push_back(d);
      }
      hosts_hit.clear();
      for (int d : ranks_hit) {
        const int pairs = targets_on[static_cast<size_t>(d)];
        add(t.flat_dispatch, m, s, d, r.row_bytes + moe_record_bytes(static_cast<size_t>(pairs)));
        add(t.flat_combine, m, d, s, r.row_bytes * static_cast<size_t>(pairs));
        const int h = host_of(m, d);
        const std::vector<int>& on = ranks_on[static_cast<size_t>(h)];
        const int proxy = on[static_cast<size_t>(local[static_cast<size_t>(s)]) % on.size()];
        if (std::find(hosts_hit.begin(), hosts_hit.end(), h) == hosts_hit.end()) {
          hosts_hit.push_back(h);
          add(t.hier_dispatch_net, m, s, proxy, r.row_bytes);  // its records are counted per target below
          add(t.hier_combine_net, m, proxy, s, r.partial_bytes);
        }
        add(t.hier_dispatch_net, m, s, proxy, 8 * static_cast<size_t>(pairs));  // the record's targets on d
        if (proxy != d) {  // a proxy keeps its own experts' rows where they arrived
          add(t.hier_dispatch_host, m, proxy, d, r.row_bytes);
          add(t.hier_combine_host, m, d, proxy, r.row_bytes * static_cast<size_t>(pairs));
        }
      }
      for (int d : ranks_hit) targets_on[static_cast<size_t>(d)] = 0;
    }
  }
  if (ranks_on.size() == 1) place_rows(r, n, &t);
  return t;
}

namespace {

Result<double> simulate_exchange(const ClusterModel& m, const MoeExchange& x, size_t max_steps) {
  const int n = m.nranks;
  std::vector<size_t> counts(x.bytes.begin(), x.bytes.end()), sdispls(counts.size()), rdispls(counts.size());
  for (int s = 0; s < n; ++s) {
    size_t at = 0;
    for (int d = 0; d < n; ++d) sdispls[static_cast<size_t>(s) * n + d] = at, at += counts[static_cast<size_t>(s) * n + d];
  }
  for (int d = 0; d < n; ++d) {
    size_t at = 0;
    for (int s = 0; s < n; ++s) rdispls[static_cast<size_t>(d) * n + s] = at, at += counts[static_cast<size_t>(s) * n + d];
  }
  algo::CollArgs a;
  a.coll = Coll::kAlltoAllv;
  a.nranks = n;
  a.elem = 1;
  a.all_sendcounts = counts.data();
  a.all_sdispls = sdispls.data();
  a.all_rdispls = rdispls.data();
  SimOptions opt;
  opt.max_steps = max_steps;
  CFX_ASSIGN_OR_RETURN(SimResult res, simulate(m, a, algo::sparse_alltoallv, opt));
  return res.time_us;
}

Result<double> simulate_placed(const ClusterModel& m, const MoeRouting& r, const std::vector<algo::Placement>& pl,
                               bool writes, size_t max_steps) {
  algo::CollArgs a;
  a.coll = Coll::kAlltoAllv;
  a.nranks = m.nranks;
  a.elem = r.row_bytes;
  a.placements = pl.data();
  a.placement_count = pl.size();
  SimOptions opt;
  opt.max_steps = max_steps;
  CFX_ASSIGN_OR_RETURN(SimResult res, simulate(m, a, writes ? algo::placed_writes : algo::placed_reads, opt));
  return res.time_us;
}

}  // namespace

Result<MoePrediction> predict_moe(const ClusterModel& m, const MoeRouting& r, const MoeTraffic& t, size_t max_steps) {
  MoePrediction p;
  if (!t.placed_dispatch.empty()) {
    CFX_ASSIGN_OR_RETURN(p.placed_dispatch_us, simulate_placed(m, r, t.placed_dispatch, true, max_steps));
    CFX_ASSIGN_OR_RETURN(p.placed_combine_us, simulate_placed(m, r, t.placed_combine, false, max_steps));
  }
  CFX_ASSIGN_OR_RETURN(p.flat_dispatch_us, simulate_exchange(m, t.flat_dispatch, max_steps));
  CFX_ASSIGN_OR_RETURN(p.flat_combine_us, simulate_exchange(m, t.flat_combine, max_steps));
  CFX_ASSIGN_OR_RETURN(double a, simulate_exchange(m, t.hier_dispatch_net, max_steps));
  CFX_ASSIGN_OR_RETURN(double b, simulate_exchange(m, t.hier_dispatch_host, max_steps));
  CFX_ASSIGN_OR_RETURN(double c, simulate_exchange(m, t.hier_combine_host, max_steps));
  CFX_ASSIGN_OR_RETURN(double d, simulate_exchange(m, t.hier_combine_net, max_steps));
  p.hier_dispatch_us = a + b;
  p.hier_combine_us = c + d;
  return p;
}

}  // namespace conflux::sim
