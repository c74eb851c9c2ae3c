// Algorithm choice: every candidate that may serve the call (CONFLUX_ALGO
// permitting) is simulated on the communicator's modelled cluster, and the
// fastest predicted wins. The simulation is the alpha-beta cost model read
// off the schedule itself: per-message latency (alpha) along the critical
// path plus bytes over the busiest port / bandwidth (beta), with the
// pipelining and contention the schedule actually has.
#pragma once

#include "sim/sim.h"
#include "tune/algo_filter.h"
#include "tune/candidates.h"

#include <atomic>
#include <map>
#include <tuple>
#include <mutex>

namespace conflux::tune {

// Between hosts on a wire-bound network (its bandwidth at most
// 1/kWireBoundCopyRatio of a shared-memory copy's), ring wins over a model's
// best that is predicted at most kNetworkRingTieMargin faster (see decide()).
inline constexpr double kNetworkRingTieMargin = 0.15;
inline constexpr double kWireBoundCopyRatio = 8.0;

struct Prediction {
  std::string algo;
  std::string why_not;  // non-empty: not usable (cannot serve, or excluded by CONFLUX_ALGO)
  sim::SimResult sim;
};

struct Decision {
  const Candidate* chosen = nullptr;
  std::vector<Prediction> predictions;  // every candidate, in registry order
  std::string reason;                   // one line: why this one
};

struct DecideOptions {
  size_t max_steps = 400'000;  // simulation budget per candidate (chunks coarsen above it)
  bool simulate_single = false;  // simulate even when only one candidate is usable (for plan)
  bool use_model = true;         // false (CONFLUX_TUNE=0): the first usable candidate, no simulation
  // Measured table for this layout (measured_table.h): where it names a
  // usable algorithm and CONFLUX_ALGO has no rule, it wins over the model.
  const AlgoFilter* measured = nullptr;
  std::string measured_source;  // the table's file, for the reason line
};

Result<Decision> decide(const algo::CollArgs& a, const sim::ClusterModel& m, const AlgoFilter& f,
                        const DecideOptions& opt = {});

// Calls the tuner plays back to back to price one: collectives run in
// loops (a training step's buckets, a benchmark), and there a pipelined
// algorithm overlaps a call with the next. A prediction is the steady
// state's time per call (sim::SimOptions::calls).
inline constexpr int kCallsPriced = 3;

// Simulates one candidate (symmetry used when the candidate and model allow
// it), priced as one of kCallsPriced calls back to back.
Result<sim::SimResult> predict(const Candidate& c, const algo::CollArgs& a, const sim::ClusterModel& m,
                               size_t max_steps, int calls = kCallsPriced);

// Sets a.host_of from the model when the caller left it empty (hierarchical
// algorithms read it).
void fill_hosts(algo::CollArgs* a, const sim::ClusterModel& m);

// Per-communicator memo of decisions, keyed by (collective, bytes).
class Tuner {
 public:
  Tuner(sim::ClusterModel model, AlgoFilter filter, bool use_model = true, std::string layout = "")
      : model_(std::move(model)), filter_(std::move(filter)), layout_(std::move(layout)), use_model_(use_model) {}
  Result<const Candidate*> choose(const algo::CollArgs& a);
  const sim::ClusterModel& model() const { return model_; }
  // Use a measured table (from `conflux tune`) for this communicator's layout.
  void set_measured(AlgoFilter table, std::string source);
  // Replace the CONFLUX_ALGO filter (`conflux tune` forces each algorithm in turn).
  void set_filter(AlgoFilter filter);
  // The cost model's own decision for a, ignoring CONFLUX_ALGO and the
  // table: its choice, and every candidate that can serve a (empty why_not).
  Result<Decision> model_decision(const algo::CollArgs& a);
  // The measured table's layout key (measured_table.h) this tuner was made for.
  const std::string& layout() const { return layout_; }
  // Changes whenever the choices may change (a new filter or table): callers
  // that keep built schedules compare it.
  uint64_t generation() const { return generation_.load(std::memory_order_acquire); }

 private:
  sim::ClusterModel model_;
  AlgoFilter filter_;
  AlgoFilter measured_;
  std::string measured_source_;
  std::string layout_;
  bool use_model_ = true;
  std::atomic<uint64_t> generation_{0};
  std::mutex mutex_;
  std::map<std::tuple<int, size_t, bool, int>, const Candidate*> memo_;  // (collective, bytes, registered, channels)
};

// Bytes the size ranges of CONFLUX_ALGO and the memo refer to: the call's
// count times the element size; for an AlltoAllv whose traffic every rank
// knows, what a rank moves on average (the same on every rank).
inline size_t call_bytes(const algo::CollArgs& a) {
  if (a.all_sendcounts != nullptr && a.nranks > 0) {
    size_t total = 0;
    for (size_t i = 0; i < static_cast<size_t>(a.nranks) * static_cast<size_t>(a.nranks); ++i) total += a.all_sendcounts[i];
    return total * a.elem / static_cast<size_t>(a.nranks);
  }
  return a.count * a.elem;
}

}  // namespace conflux::tune
