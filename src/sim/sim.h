// Discrete-event simulation of schedules on a modelled cluster. Every rank's
// schedule (the one the executor would run) is built, compacted to what
// timing needs, and played: a send starts when its dependencies and the
// previous send to the same peer are done and its ports are free (FIFO per
// port: a rank's core, which copies what it sends and receives inside its
// host over shm or loopback TCP; a host's NIC egress and ingress), lasts
// bytes/bandwidth and arrives latency later; the matching
// receive (k-th send <-> k-th receive on a directed pair, as the executor
// matches them) completes when its data has arrived and its own
// dependencies are done.
//
// Scale: schedules are built one rank at a time and only a compact form is
// kept (about 60 bytes a step). An algorithm whose schedules are symmetric
// under rotation by whole hosts (ring over a host-major ring order) can be
// simulated from one representative host (`period`): rank r + k*period
// behaves exactly as rank r, so only `period` schedules are built. Chunking
// is coarsened (chunk size doubled) until the step count fits `max_steps`.
#pragma once

#include "algo/algorithms.h"
#include "core/status.h"
#include "sim/sim_model.h"

#include <functional>

namespace conflux::sim {

using Builder = std::function<algo::Schedule(const algo::CollArgs&)>;

struct SimOptions {
  size_t max_steps = 2'000'000;  // coarsen chunks above this many simulated steps
  int period = 0;                // >0: rotation symmetry by `period` ranks (must divide nranks)
  // Calls played back to back, each rank starting its next call when its
  // own steps of the previous one are done (as the executor runs a loop of
  // blocking calls). With more than one, time_us is the steady state: the
  // time between the last rank's completion of the first call and of the
  // last, per call, and no less than the work per call booked on the cores
  // where ranks outnumber them. Pipelined algorithms (a chain, a tree)
  // overlap consecutive calls there, which one call alone cannot show.
  int calls = 1;
};

struct SimResult {
  double time_us = 0;            // completion of the last step on any rank (calls > 1: per call, steady state)
  double first_call_us = 0;      // completion of the first call alone
  size_t steps = 0;              // steps simulated per call (representatives only in period mode)
  size_t messages = 0;           // per call
  int critical_hops = 0;         // messages on the first call's longest dependency chain (the "steps" of alpha)
  double bottleneck_bytes = 0;   // bytes per call through the busiest port
  std::string bottleneck;        // which port, e.g. "host 3 NIC egress", "rank 0 sent+received"
  size_t chunk_bytes = 0;        // chunk size actually simulated (after coarsening)
  bool symmetric = false;        // period mode used
};

// Simulates `build` for every rank of `model` with `args` (rank and nranks
// are filled in per rank). Errors: a send without a matching receive, a
// dependency cycle (deadlock), a period that does not divide nranks.
Result<SimResult> simulate(const ClusterModel& model, const algo::CollArgs& args, const Builder& build,
                           const SimOptions& opt = {});

// busbw factor nccl-tests uses for a collective over n ranks.
double busbw_factor(Coll c, int n);

}  // namespace conflux::sim
