// See tools/moe_sim.h. The routing is the benchmark's (tools/moe_routing.h,
// iteration 0, seed 1), experts blocked over the ranks.
#include "moe_sim.h"

#include "core/config.h"
#include "moe_routing.h"
#include "sim/moe_traffic.h"

#include <algorithm>
#include <cstdio>
#include <vector>

namespace conflux::tools {

void add_moe_options(CLI::App& app, MoeSimArgs* o, const std::string& group, bool with_tokens) {
  auto* moe = app.add_option_group("moe", group);
  if (with_tokens) moe->add_option("--tokens", o->tokens, "Tokens per rank");
  moe->add_option("--hidden", o->hidden, "Elements per token");
  moe->add_option("--elem-bytes", o->elem_bytes, "Bytes per element (2: bf16)");
  moe->add_option("--experts", o->experts, "Experts (blocked over the ranks)");
  moe->add_option("--topk", o->top_k, "Experts per token");
  moe->add_option("--routing", o->routing, "uniform, zipfS (e.g. zipf1.5) or half");
}

int print_moe_prediction(const sim::ClusterModel& m, const std::string& source, const MoeSimArgs& o,
                         size_t max_steps) {
  moe_routing routing{};
  if (moe_parse_routing(o.routing.c_str(), &routing) != 0 || o.experts < o.top_k || o.top_k < 1 ||
      o.experts < m.nranks || o.experts % m.nranks != 0) {
    std::fprintf(stderr, "conflux: bad MoE routing, top-k or experts (experts must be a multiple of the ranks)\n");
    return 2;
  }
  sim::MoeRouting r;
  r.top_k = o.top_k;
  r.row_bytes = o.hidden * o.elem_bytes;
  r.partial_bytes = o.hidden * 4;
  for (int e = 0; e < o.experts; ++e) r.expert_rank.push_back(e / (o.experts / m.nranks));
  std::vector<double> cdf(static_cast<size_t>(o.experts));
  moe_popularity(&routing, o.experts, 0, cdf.data());
  std::vector<float> w(static_cast<size_t>(o.top_k));
  r.experts.resize(static_cast<size_t>(m.nranks));
  for (int q = 0; q < m.nranks; ++q) {
    r.experts[q].resize(o.tokens * static_cast<size_t>(o.top_k));
    for (size_t t = 0; t < o.tokens; ++t)
      moe_route(&routing, cdf.data(), o.experts, o.top_k, 1, q, 0, t, &r.experts[q][t * o.top_k], w.data());
  }
  const sim::MoeTraffic traffic = sim::moe_traffic(r, m);
  std::printf("# MoE dispatch + combine on %s\n# constants from %s\n", m.describe().c_str(),
              source.c_str());
  std::printf("# %zu tokens per rank, hidden %zu x %zu B, %d experts (blocked), top-%d, routing %s\n", o.tokens,
              o.hidden, o.elem_bytes, o.experts, o.top_k, o.routing.c_str());
  auto p = sim::predict_moe(m, r, traffic, max_steps);
  if (!p.ok()) {
    std::fprintf(stderr, "conflux: %s\n", p.status().message().c_str());
    return 1;
  }
  const double mib = 1.0 / (1 << 20);
  std::printf("#%13s %16s %16s %13s %13s %15s\n", "path", "dispatch net MiB", "combine net MiB", "dispatch us",
              "combine us", "round trip us");
  auto row = [&](const char* path, size_t dispatch_net, size_t combine_net, double dispatch_us, double combine_us) {
    std::printf("%14s %16.2f %16.2f %13.1f %13.1f %15.1f\n", path, dispatch_net * mib, combine_net * mib, dispatch_us,
                combine_us, dispatch_us + combine_us);
    return dispatch_us + combine_us;
  };
  if (!traffic.placed_dispatch.empty())  // one host: what the layer runs
    row("placed", 0, 0, p->placed_dispatch_us, p->placed_combine_us);
  const size_t hier_dispatch_net = traffic.hier_dispatch_net.network_bytes + traffic.hier_dispatch_host.network_bytes;
  const double flat = row("flat", traffic.flat_dispatch.network_bytes, traffic.flat_combine.network_bytes,
                          p->flat_dispatch_us, p->flat_combine_us);
  const double hier = row("hierarchical", hier_dispatch_net,
                          traffic.hier_combine_net.network_bytes + traffic.hier_combine_host.network_bytes,
                          p->hier_dispatch_us, p->hier_combine_us);
  // Partial sums in float cross back as hidden x 4 bytes per (token, host):
  // where a token's experts are on different hosts that is more than the
  // rows themselves, so the mixed path sends the rows back directly.
  const double mixed = row("hier+flat", hier_dispatch_net, traffic.flat_combine.network_bytes, p->hier_dispatch_us,
                           p->flat_combine_us);
  const double placed = traffic.placed_dispatch.empty() ? 1e300 : p->placed_dispatch_us + p->placed_combine_us;
  const double best = std::min({flat, hier, mixed, placed});
  std::printf("# fastest: %s (%.2fx the flat round trip)\n",
              best == placed ? "placed"
              : best == flat ? "flat"
              : best == hier ? "hierarchical"
                             : "hier+flat (hierarchical dispatch, flat combine)",
              flat / best);
  // The layer's own choice (src/core/moe.cpp): placed on one host; across
  // hosts proxies for dispatch unless CONFLUX_MOE_HIER=0, and the contract's
  // exact combine on the flat routes unless the layer asks for host sums.
  const char* runs = !traffic.placed_dispatch.empty() ? "placed (one host)"
                     : config().moe_hier
                         ? "hier+flat (dispatch through a proxy per host; the exact combine on the flat routes, or the "
                           "hierarchical combine with cfxMoeConfig_t.host_partial_sums)"
                         : "flat (CONFLUX_MOE_HIER=0)";
  std::printf("# the layer runs: %s\n", runs);
  return 0;
}

}  // namespace conflux::tools
