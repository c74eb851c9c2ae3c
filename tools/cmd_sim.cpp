// `conflux sim`: runs the library's own schedules on a modelled cluster and
// prints, per message size, each algorithm's predicted time, algbw and
// busbw (nccl-tests conventions), then where the fastest algorithm changes.
#include "command_registry.h"

#include "sim/sim.h"
#include "cluster_flags.h"
#include "moe_sim.h"
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
  int calls = tune::kCallsPriced;
  bool quiet = false;
  tools::MoeSimArgs moe;  // --coll moe
};

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
  if (o.coll == "moe") {
    std::string source;
    const sim::ClusterModel m = o.cluster.model(&source);
    return tools::print_moe_prediction(m, source, o.moe, o.max_steps);
  }
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
      auto r = tune::predict(*c, a, m, o.max_steps, o.calls);
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
      app.add_option("--calls", o->calls, "Calls played back to back; the time is the steady state's per call "
                     "(1: one call alone)")
          ->check(CLI::Range(1, 64));
      app.add_flag("--quiet,-q", o->quiet, "No per-simulation details on stderr");
      tools::add_moe_options(app, &o->moe, "--coll moe: one MoE dispatch and combine, flat and hierarchical");
      return [o] { return run_sim(*o); };
    }};

}  // namespace
