// `conflux sim`: runs the library's own schedules on a modelled cluster and
// prints, per message size, each algorithm's predicted time, algbw and
// busbw (nccl-tests conventions), then where the fastest algorithm changes.
#include "command_registry.h"

#include "sim/moe_traffic.h"
#include "sim/sim.h"
#include "cluster_flags.h"
#include "moe_routing.h"
#include "tune/algo_filter.h"
#include "tune/tuner.h"

#include <chrono>
#include <cstdio>
#include <algorithm>
#include <memory>

namespace {

using namespace conflux;

struct SimOptionsCli {
  sim::ClusterFlags cluster;
  std::string coll = "allreduce";
  std::string algos;  // CONFLUX_ALGO grammar; empty = every candidate
  std::string min_bytes = "8", max_bytes = "1G";
  double factor = 4;
  std::string chunk = "512K";
  size_t max_steps = 2'000'000;
  bool quiet = false;
  // --coll moe
  size_t tokens = 512, hidden = 7168, elem_bytes = 2;
  int experts = 64, top_k = 8;
  std::string routing = "uniform";
};

// `conflux sim --coll moe`: one dispatch and combine of the benchmark's
// routing (tools/moe_routing.h, iteration 0), flat and hierarchical.
int run_moe_sim(const SimOptionsCli& o) {
  std::string source;
  sim::ClusterModel m = o.cluster.model(&source);
  moe_routing routing{};
  if (moe_parse_routing(o.routing.c_str(), &routing) != 0 || o.experts < o.top_k || o.top_k < 1 ||
      o.experts < m.nranks || o.experts % m.nranks != 0) {
    std::fprintf(stderr, "conflux sim: bad MoE routing, top-k or experts (experts must be a multiple of the ranks)\n");
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
  std::printf("# conflux sim: MoE dispatch + combine on %s\n# constants from %s\n", m.describe().c_str(),
              source.c_str());
  std::printf("# %zu tokens per rank, hidden %zu x %zu B, %d experts (blocked), top-%d, routing %s\n", o.tokens,
              o.hidden, o.elem_bytes, o.experts, o.top_k, o.routing.c_str());
  auto p = sim::predict_moe(m, r, traffic, o.max_steps);
  if (!p.ok()) {
    std::fprintf(stderr, "conflux sim: %s\n", p.status().message().c_str());
    return 1;
  }
  const double mib = 1.0 / (1 << 20);
  std::printf("#%13s %16s %16s %13s %13s %15s\n", "path", "dispatch net MiB", "combine net MiB", "dispatch us",
              "combine us", "round trip us");
  const double flat = p->flat_dispatch_us + p->flat_combine_us, hier = p->hier_dispatch_us + p->hier_combine_us;
  if (!traffic.placed_dispatch.empty())  // one host: what the layer runs
    std::printf("%14s %16.2f %16.2f %13.1f %13.1f %15.1f\n", "placed", 0.0, 0.0, p->placed_dispatch_us,
                p->placed_combine_us, p->placed_dispatch_us + p->placed_combine_us);
  std::printf("%14s %16.2f %16.2f %13.1f %13.1f %15.1f\n", "flat", traffic.flat_dispatch.network_bytes * mib,
              traffic.flat_combine.network_bytes * mib, p->flat_dispatch_us, p->flat_combine_us, flat);
  std::printf("%14s %16.2f %16.2f %13.1f %13.1f %15.1f\n", "hierarchical",
              (traffic.hier_dispatch_net.network_bytes + traffic.hier_dispatch_host.network_bytes) * mib,
              (traffic.hier_combine_net.network_bytes + traffic.hier_combine_host.network_bytes) * mib,
              p->hier_dispatch_us, p->hier_combine_us, hier);
  // Partial sums in float cross back as hidden x 4 bytes per (token, host):
  // where a token's experts are on different hosts that is more than the
  // rows themselves, so the mixed path sends the rows back directly.
  const double mixed = p->hier_dispatch_us + p->flat_combine_us;
  std::printf("%14s %16.2f %16.2f %13.1f %13.1f %15.1f\n", "hier+flat",
              (traffic.hier_dispatch_net.network_bytes + traffic.hier_dispatch_host.network_bytes) * mib,
              traffic.flat_combine.network_bytes * mib, p->hier_dispatch_us, p->flat_combine_us, mixed);
  const double placed = traffic.placed_dispatch.empty() ? 1e300 : p->placed_dispatch_us + p->placed_combine_us;
  const double best = std::min({flat, hier, mixed, placed});
  std::printf("# fastest: %s (%.2fx the flat round trip)\n",
              best == placed ? "placed"
              : best == flat ? "flat"
              : best == hier ? "hierarchical"
                             : "hier+flat (hierarchical dispatch, flat combine)",
              flat / best);
  std::printf("# the layer runs: %s\n", traffic.placed_dispatch.empty()
                                             ? "flat (its message path; the hierarchical paths are priced, not built)"
                                             : "placed (one host)");
  return 0;
}

// Per-rank count for a buffer of `bytes` (nccl-tests: AllGather's size is the gathered buffer).
size_t count_for(Coll c, size_t bytes, size_t elem, int n) {
  size_t total = bytes / elem;
  switch (c) {
    case Coll::kAllGather:
    case Coll::kReduceScatter:
    case Coll::kAlltoAll:
    case Coll::kGather:
    case Coll::kScatter: return std::max<size_t>(1, total / size_t(n));
    default: return std::max<size_t>(1, total);
  }
}

int run_sim(const SimOptionsCli& o) {
  if (o.coll == "moe") return run_moe_sim(o);
  auto coll = tune::parse_coll(o.coll);
  auto lo = tune::parse_size(o.min_bytes), hi = tune::parse_size(o.max_bytes), chunk = tune::parse_size(o.chunk);
  auto filter = tune::AlgoFilter::parse(o.algos);
  if (!coll.ok() || !lo.ok() || !hi.ok() || !chunk.ok() || !filter.ok()) {
    std::fprintf(stderr, "conflux sim: bad argument\n");
    return 2;
  }
  std::string source;
  sim::ClusterModel m = o.cluster.model(&source);
  std::printf("# conflux sim: %s on %s\n# constants from %s; chunk %s\n", o.coll.c_str(), m.describe().c_str(),
              source.c_str(), o.chunk.c_str());
  std::vector<const tune::Candidate*> cands;
  for (const tune::Candidate* c : tune::candidates_for(*coll)) {
    const tune::AlgoRule* rule = filter->rule_for(*coll, 0);
    if (tune::AlgoFilter::allows(rule, c->name)) cands.push_back(c);
  }
  std::printf("#%11s", "size");
  for (auto* c : cands) std::printf(" %14s %9s %9s", (c->name + " us").c_str(), "algbw", "busbw");
  std::printf("  best\n");
  std::string prev_best;
  std::vector<std::string> changes;
  const size_t elem = 4;
  for (size_t bytes = *lo; bytes <= *hi; bytes = std::max(bytes + 1, size_t(double(bytes) * o.factor))) {
    algo::CollArgs a;
    a.coll = *coll;
    a.registered = o.cluster.registered;
    a.elem = elem;
    a.count = count_for(*coll, std::max(bytes, elem), elem, m.nranks);
    a.chunk_bytes = *chunk;
    size_t size = bytes;
    std::printf("%12zu", size);
    double best_t = 1e300;
    std::string best;
    for (auto* c : cands) {
      auto t0 = std::chrono::steady_clock::now();
      auto r = tune::predict(*c, a, m, o.max_steps);
      double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      if (!r.ok()) {
        std::printf(" %14s %9s %9s", "n/a", "-", "-");
        if (!o.quiet) std::fprintf(stderr, "%s: %s\n", c->name.c_str(), r.status().message().c_str());
        continue;
      }
      double t = r->time_us;
      double algbw = t > 0 ? double(size) / (t * 1e3) : 0;
      std::printf(" %14.2f %9.3f %9.3f", t, algbw, algbw * sim::busbw_factor(*coll, m.nranks));
      if (!o.quiet)
        std::fprintf(stderr, "  [%s %zuB: %zu steps%s, chunk %zu, %.2fs]\n", c->name.c_str(), size, r->steps,
                     r->symmetric ? " (one host, rotation symmetry)" : "", r->chunk_bytes, wall);
      if (t < best_t) best_t = t, best = c->name;
    }
    std::printf("  %s\n", best.c_str());
    if (!prev_best.empty() && best != prev_best) changes.push_back("at " + tune::size_string(size) + " bytes: " + prev_best + " -> " + best);
    prev_best = best;
    if (bytes >= *hi) break;
  }
  if (changes.empty()) std::printf("# choice never changes: %s throughout\n", prev_best.c_str());
  for (auto& c : changes) std::printf("# choice changes %s\n", c.c_str());
  return 0;
}

const conflux::tools::RegisterCommand kSim{
    "sim", "Simulate collectives on a modelled cluster: time, algbw, busbw per algorithm and size",
    [](CLI::App& app) {
      auto o = std::make_shared<SimOptionsCli>();
      o->cluster.add_to(app);
      app.add_option("--coll,-c", o->coll, "Collective (allreduce, allgather, broadcast, ...; moe: dispatch + combine)");
      app.add_option("--algo", o->algos, "Algorithms to compare, CONFLUX_ALGO grammar (default all)");
      app.add_option("-b,--minbytes", o->min_bytes, "Smallest size (K/M/G suffixes)");
      app.add_option("-e,--maxbytes", o->max_bytes, "Largest size");
      app.add_option("-f,--stepfactor", o->factor, "Size multiplier");
      app.add_option("--chunk", o->chunk, "Pipelining chunk (CONFLUX_CHUNK_SIZE)");
      app.add_option("--max-steps", o->max_steps, "Coarsen chunks above this many simulated steps");
      app.add_flag("--quiet,-q", o->quiet, "No per-simulation details on stderr");
      auto* moe = app.add_option_group("moe", "--coll moe: one MoE dispatch and combine, flat and hierarchical");
      moe->add_option("--tokens", o->tokens, "Tokens per rank");
      moe->add_option("--hidden", o->hidden, "Elements per token");
      moe->add_option("--elem-bytes", o->elem_bytes, "Bytes per element (2: bf16)");
      moe->add_option("--experts", o->experts, "Experts (blocked over the ranks)");
      moe->add_option("--topk", o->top_k, "Experts per token");
      moe->add_option("--routing", o->routing, "uniform, zipfS (e.g. zipf1.5) or half");
      return [o] { return run_sim(*o); };
    }};

}  // namespace
