// `conflux run -n N conflux tune [-b 64 -e 16M -f 4] [--write]`: measure
// every usable algorithm of each collective at each size on this layout
// (interleaved rounds, slowest rank's time, best round kept), print the
// table and the fastest algorithm per size (the cost model's choice where it
// is within 5% of the fastest), and with --write store the
// result as this layout's entry in the measured table (measured_table.h),
// which later communicators of the same layout prefer over the cost model.
#include "command_registry.h"

#include "core/comm.h"
#include "core/config.h"
#include "tune/algo_filter.h"
#include "tune/comm_tuning.h"
#include "tune/measured_table.h"
#include "tune/tuner.h"

#include <conflux/conflux.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace {

using namespace conflux;

struct TuneOptions {
  std::string colls = "allreduce,allgather,reducescatter,broadcast,reduce,alltoall";
  std::string min_bytes = "64";
  std::string max_bytes = "16M";
  int factor = 4;
  int rounds = 3;
  bool write = false;
};

// Timed iterations per size: enough to rise above timer and scheduling
// noise for small calls, few for large ones (about 4 MiB of buffer each).
int iterations_for(size_t bytes) {
  return static_cast<int>(std::clamp<size_t>((size_t{4} << 20) / std::max<size_t>(bytes, 1), 3, 200));
}

cfxResult_t issue(Coll coll, const float* send, float* recv, size_t count, cfxComm_t comm) {
  switch (coll) {
    case Coll::kAllReduce: return cfxAllReduce(send, recv, count, cfxFloat32, cfxSum, comm);
    case Coll::kAllGather: return cfxAllGather(send, recv, count, cfxFloat32, comm);
    case Coll::kReduceScatter: return cfxReduceScatter(send, recv, count, cfxFloat32, cfxSum, comm);
    case Coll::kBroadcast: return cfxBroadcast(send, recv, count, cfxFloat32, 0, comm);
    case Coll::kReduce: return cfxReduce(send, recv, count, cfxFloat32, cfxSum, 0, comm);
    case Coll::kAlltoAll: return cfxAlltoAll(send, recv, count, cfxFloat32, comm);
    default: return cfxInvalidArgument;
  }
}

bool per_rank_count(Coll c) { return c == Coll::kAllGather || c == Coll::kReduceScatter || c == Coll::kAlltoAll; }

struct Tuning {
  cfxComm_t comm = nullptr;
  tune::Tuner* tuner = nullptr;
  int rank = 0, nranks = 1;
  std::vector<float> send, recv;
};

// Mean seconds per call of the slowest rank, with algo forced.
Result<double> time_algo(Tuning& t, Coll coll, size_t count, const std::string& algo, int iters) {
  CFX_ASSIGN_OR_RETURN(tune::AlgoFilter forced, tune::AlgoFilter::parse(std::string(coll_name(coll)) + ":" + algo));
  t.tuner->set_filter(std::move(forced));
  auto fail = [&](const char* what) {
    return internal_error(std::string(what) + " " + coll_name(coll) + " with " + algo + ": " + cfxGetLastError(t.comm));
  };
  for (int i = 0; i < 2; ++i)
    if (issue(coll, t.send.data(), t.recv.data(), count, t.comm) != cfxSuccess) return fail("warm-up of");
  if (cfxBarrier(t.comm) != cfxSuccess) return fail("barrier before");
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < iters; ++i)
    if (issue(coll, t.send.data(), t.recv.data(), count, t.comm) != cfxSuccess) return fail("timing");
  double mine = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() / iters;
  t.tuner->set_filter({});
  double slowest = 0;
  if (cfxAllReduce(&mine, &slowest, 1, cfxFloat64, cfxMax, t.comm) != cfxSuccess) return fail("agreeing on the time of");
  return slowest;
}

// Ranges over the measured sizes, boundaries at the geometric midpoints,
// equal neighbours merged: "allreduce:0-181:rd#allreduce:181-inf:ring".
std::string ranges(Coll coll, const std::vector<size_t>& sizes, const std::vector<std::string>& best) {
  std::string out;
  size_t lo = 0;
  for (size_t i = 0; i < sizes.size(); ++i) {
    if (i + 1 < sizes.size() && best[i + 1] == best[i]) continue;
    const size_t hi = i + 1 < sizes.size()
                          ? static_cast<size_t>(std::sqrt(static_cast<double>(sizes[i]) * static_cast<double>(sizes[i + 1])))
                          : SIZE_MAX;
    out += (out.empty() ? "" : "#") + std::string(coll_name(coll)) + ":" + std::to_string(lo) + "-" +
           (hi == SIZE_MAX ? "inf" : std::to_string(hi)) + ":" + best[i];
    lo = hi;
  }
  return out;
}

Result<std::string> tune_collective(Tuning& t, Coll coll, const std::vector<size_t>& sizes, int rounds) {
  std::vector<std::string> best_algo;
  for (size_t bytes : sizes) {
    algo::CollArgs a;
    a.coll = coll;
    a.nranks = t.nranks;
    a.rank = t.rank;
    a.elem = sizeof(float);
    a.count = std::max<size_t>(1, bytes / a.elem);
    a.chunk_bytes = config().chunk_bytes;
    // One model decision gives both what can serve the call and the model's choice.
    CFX_ASSIGN_OR_RETURN(tune::Decision modelled, t.tuner->model_decision(a));
    std::vector<std::string> algos;
    for (const tune::Prediction& p : modelled.predictions)
      if (p.why_not.empty()) algos.push_back(p.algo);
    std::map<std::string, double> best;
    for (int r = 0; r < rounds; ++r)
      for (const std::string& algo : algos) {
        CFX_ASSIGN_OR_RETURN(double s, time_algo(t, coll, a.count, algo, iterations_for(bytes)));
        auto it = best.find(algo);
        if (it == best.end() || s < it->second) best[algo] = s;
      }
    auto fastest = std::min_element(best.begin(), best.end(), [](auto& x, auto& y) { return x.second < y.second; });
    // The measurement overrides the model only where it clearly disagrees:
    // within kSameWithin of the fastest, the model's choice is kept, so
    // noise between near-equal algorithms does not flip the table.
    constexpr double kSameWithin = 1.05;
    auto m = best.find(modelled.chosen->name);
    const bool keep_model = m != best.end() && m->second <= kSameWithin * fastest->second;
    best_algo.push_back(keep_model ? m->first : fastest->first);
    // What this communicator chooses now (the table in effect, if any):
    // bench/tuner_score scores it against the times measured here.
    CFX_ASSIGN_OR_RETURN(const tune::Candidate* now, t.tuner->choose(a));
    if (t.rank == 0) {
      std::printf("%-14s %10zu  best %-9s %-10s  tuner %-9s", coll_name(coll), bytes, best_algo.back().c_str(),
                  keep_model ? "(model's)" : "(measured)", now->name.c_str());
      for (auto& [algo, s] : best) std::printf("  %s %.1f us", algo.c_str(), s * 1e6);
      std::printf("\n");
      std::fflush(stdout);
    }
  }
  return ranges(coll, sizes, best_algo);
}

int run_tune(const TuneOptions& o) {
  auto lo = tune::parse_size(o.min_bytes);
  auto hi = tune::parse_size(o.max_bytes);
  if (!lo.ok() || !hi.ok() || *lo < 4 || *hi < *lo || o.factor < 2 || o.rounds < 1) {
    std::fprintf(stderr, "conflux tune: bad sizes, factor (>= 2) or rounds (>= 1)\n");
    return 2;
  }
  std::vector<Coll> colls;
  for (size_t start = 0; start <= o.colls.size();) {
    size_t end = o.colls.find(',', start);
    if (end == std::string::npos) end = o.colls.size();
    auto c = tune::parse_coll(o.colls.substr(start, end - start));
    if (!c.ok() || !(per_rank_count(*c) || *c == Coll::kAllReduce || *c == Coll::kBroadcast || *c == Coll::kReduce)) {
      std::fprintf(stderr, "conflux tune: cannot tune '%s' (allreduce, allgather, reducescatter, broadcast, reduce, alltoall)\n",
                   o.colls.substr(start, end - start).c_str());
      return 2;
    }
    colls.push_back(*c);
    start = end + 1;
  }
  std::vector<size_t> sizes;
  for (size_t s = *lo; s <= *hi; s *= static_cast<size_t>(o.factor)) sizes.push_back(s / 4 * 4);

  Tuning t;
  if (cfxCommInitFromEnv(&t.comm) != cfxSuccess) {
    std::fprintf(stderr, "conflux tune: %s\n", cfxGetLastError(nullptr));
    return 1;
  }
  cfxCommUserRank(t.comm, &t.rank);
  cfxCommCount(t.comm, &t.nranks);
  auto done = [&](int rc) {
    cfxCommDestroy(t.comm);
    return rc;
  };
  // Buffers for the largest call: AllGather/AlltoAll receive nranks blocks.
  const size_t max_count = *hi / sizeof(float);
  t.send.assign(max_count * size_t(t.nranks), 1.0f);
  t.recv.assign(max_count * size_t(t.nranks), 0.0f);
  // One collective installs the communicator's tuner.
  float one = 1, sum = 0;
  if (cfxAllReduce(&one, &sum, 1, cfxFloat32, cfxSum, t.comm) != cfxSuccess) {
    std::fprintf(stderr, "conflux tune: %s\n", cfxGetLastError(t.comm));
    return done(1);
  }
  t.tuner = t.comm->tuner();
  if (t.tuner == nullptr) {
    if (t.rank == 0) std::fprintf(stderr, "conflux tune: one rank: no algorithm to choose\n");
    // Nobody exits before rank 0 has said why: a launcher stops the other
    // ranks as soon as one fails.
    (void)cfxBarrier(t.comm);
    return done(t.nranks < 2 ? 0 : 2);
  }
  const std::string& layout = t.tuner->layout();
  if (t.rank == 0) std::printf("# conflux tune: %s, %d round(s), slowest rank's time per call\n", layout.c_str(), o.rounds);
  std::string rules;
  for (Coll c : colls) {
    auto r = tune_collective(t, c, sizes, o.rounds);
    if (!r.ok()) {
      std::fprintf(stderr, "conflux tune: rank %d: %s\n", t.rank, r.status().message().c_str());
      return done(1);
    }
    rules += (rules.empty() ? "" : "#") + r.value();
  }
  if (t.rank == 0) {
    std::printf("# rules: %s\n", rules.c_str());
    if (o.write) {
      const std::string path = tune::measured_table_file();
      Status st = tune::store_measured_table(path, layout, rules);
      if (!st.ok()) {
        std::fprintf(stderr, "conflux tune: %s\n", st.message().c_str());
        return done(1);
      }
      std::printf("# written to %s (communicators of this layout now prefer these choices)\n", path.c_str());
    }
  }
  return done(0);
}

const conflux::tools::RegisterCommand kTune{
    "tune", "Measure every algorithm per collective and size on this layout; --write stores the fastest per size",
    [](CLI::App& app) {
      auto o = std::make_shared<TuneOptions>();
      app.add_option("--colls", o->colls, "Comma-separated collectives");
      app.add_option("-b,--minbytes", o->min_bytes, "Smallest call (bytes of the call's buffer; per rank for "
                                                    "allgather/reducescatter/alltoall)");
      app.add_option("-e,--maxbytes", o->max_bytes, "Largest call");
      app.add_option("-f,--stepfactor", o->factor, "Multiply the size by this each step");
      app.add_option("-r,--rounds", o->rounds, "Interleaved rounds (the best of them is kept)");
      app.add_flag("--write", o->write, "Store the result in the measured table (CONFLUX_TUNE_TABLE, else the cache dir)");
      return [o] { return run_tune(*o); };
    }};

}  // namespace
