// `conflux plan allreduce 1M [--ranks N --hosts H ...]`: what the tuner
// would do for one call, and why: every candidate, its predicted time (and
// the alpha-beta terms behind it), the choice. CONFLUX_ALGO applies, so a
// forced algorithm that cannot serve the call is reported here too.
#include "command_registry.h"

#include "sim/sim.h"
#include "cluster_flags.h"
#include "moe_sim.h"
#include "tune/tuner.h"
#include "core/config.h"

#include <cstdio>
#include <cstdlib>
#include <memory>

namespace {

using namespace conflux;

struct PlanOptions {
  sim::ClusterFlags cluster;
  std::string coll = "allreduce";
  std::string size = "1M";
  std::string algos;  // default: $CONFLUX_ALGO
  std::string chunk = "512K";
  std::string dtype_bytes = "4";
  tools::MoeSimArgs moe;  // `conflux plan moe TOKENS`
};

int run_plan(const PlanOptions& o) {
  if (o.coll == "moe") {  // size: tokens per rank
    tools::MoeSimArgs args = o.moe;
    auto tokens = tune::parse_size(o.size);
    if (!tokens.ok()) {
      std::fprintf(stderr, "conflux plan: %s\n", tokens.status().message().c_str());
      return 2;
    }
    args.tokens = *tokens;
    std::string source;
    return tools::print_moe_prediction(o.cluster.model(&source), source, args, 2'000'000);
  }
  auto coll = tune::parse_coll(o.coll);
  auto bytes = tune::parse_size(o.size);
  auto chunk = tune::parse_size(o.chunk);
  if (!coll.ok() || !bytes.ok() || !chunk.ok()) {
    std::fprintf(stderr, "conflux plan: %s\n",
                 (!coll.ok() ? coll.status() : !bytes.ok() ? bytes.status() : chunk.status()).message().c_str());
    return 2;
  }
  const std::string spec = o.algos.empty() ? config().algo : o.algos;
  auto filter = tune::AlgoFilter::parse(spec);
  if (!filter.ok()) {
    std::fprintf(stderr, "conflux plan: %s\n", filter.status().message().c_str());
    return 2;
  }
  std::string source;
  sim::ClusterModel m = o.cluster.model(&source);
  algo::CollArgs a;
  a.coll = *coll;
  a.registered = o.cluster.registered;
  a.elem = std::max(1, std::atoi(o.dtype_bytes.c_str()));
  size_t total = std::max(*bytes, a.elem) / a.elem;
  bool per_rank = *coll == Coll::kAllGather || *coll == Coll::kReduceScatter || *coll == Coll::kAlltoAll ||
                  *coll == Coll::kGather || *coll == Coll::kScatter;
  a.count = per_rank ? std::max<size_t>(1, total / size_t(m.nranks)) : total;
  a.chunk_bytes = *chunk;
  std::printf("plan: %s of %zu bytes (count %zu x %zu B) on %s\n", coll_name(*coll), *bytes, a.count, a.elem,
              m.describe().c_str());
  std::printf("constants: %s\n", source.c_str());
  if (!spec.empty()) std::printf("CONFLUX_ALGO: %s\n", spec.c_str());
  tune::DecideOptions opt;
  opt.simulate_single = true;
  opt.max_steps = 2'000'000;
  auto d = tune::decide(a, m, *filter, opt);
  if (!d.ok()) {
    std::printf("error: %s\n", d.status().message().c_str());
    return 1;
  }
  std::printf("%-14s %12s %8s %14s  %s\n", "candidate", "time (us)", "hops", "busiest port", "notes");
  for (const tune::Prediction& p : d->predictions) {
    if (!p.why_not.empty()) {
      std::printf("%-14s %12s %8s %14s  %s\n", p.algo.c_str(), "-", "-", "-", p.why_not.c_str());
      continue;
    }
    const sim::SimResult& s = p.sim;
    std::printf("%-14s %12.2f %8d %12.0f B  %s; %zu steps%s, chunk %zu%s\n", p.algo.c_str(), s.time_us, s.critical_hops,
                s.bottleneck_bytes, s.bottleneck.c_str(), s.steps, s.symmetric ? " (one host simulated)" : "",
                s.chunk_bytes, p.algo == d->chosen->name ? "  <== chosen" : "");
  }
  std::printf("choice: %s\nwhy: %s\n", d->chosen->name.c_str(), d->reason.c_str());
  return 0;
}

const conflux::tools::RegisterCommand kPlan{
    "plan", "Explain the tuner's choice for one collective call: candidates, predicted times, choice",
    [](CLI::App& app) {
      auto o = std::make_shared<PlanOptions>();
      app.add_option("collective", o->coll,
                     "allreduce, allgather, reducescatter, broadcast, reduce, alltoall, ...; moe: dispatch + combine")
          ->required();
      app.add_option("size", o->size, "Message size in bytes (K/M/G suffixes); for moe, tokens per rank")->required();
      o->cluster.add_to(app);
      app.add_option("--algo", o->algos, "Algorithm rules, CONFLUX_ALGO grammar (default: $CONFLUX_ALGO)");
      app.add_option("--chunk", o->chunk, "Pipelining chunk (CONFLUX_CHUNK_SIZE)");
      app.add_option("--elem", o->dtype_bytes, "Bytes per element");
      tools::add_moe_options(app, &o->moe, "moe: the layer's routing (size is the tokens per rank)", false);
      return [o] { return run_plan(*o); };
    }};

}  // namespace
