// What a MoE dispatch and combine move, for a given routing, flat or
// hierarchical, and what the simulator predicts for them on a modelled
// cluster (`conflux sim --coll moe`).
//
// Flat (the layer's message path): each token goes once to each rank that
// holds one of its experts, with a record of those experts; combine brings
// back one row per (token, expert) pair.
// Hierarchical: each token crosses the network once per destination host,
// to the rank of that host with the sender's local index (its proxy),
// which forwards it to the host's expert ranks over shared memory; combine
// gathers the expert rows on the proxy, which adds them weighted (float)
// and sends one partial sum per (token, host) back. The partial sums make
// the result depend on where experts live (sums are regrouped by host), so
// it is a prediction of a design, not the layer's contract of j-order sums.
#pragma once

#include "algo/algorithms.h"
#include "core/status.h"
#include "sim/sim_model.h"

#include <cstddef>
#include <cstdint>
#include <vector>

namespace conflux::sim {

struct MoeRouting {
  int top_k = 1;
  size_t row_bytes = 0;     // bytes per token row
  size_t partial_bytes = 0;  // bytes per partial sum (hidden x 4: float)
  std::vector<int> expert_rank;                // by expert id
  std::vector<std::vector<int32_t>> experts;   // by rank: ntokens x top_k expert ids
};

// Byte matrices [s * n + d] of one exchange.
struct MoeExchange {
  std::vector<size_t> bytes;
  size_t network_bytes = 0;  // between ranks of different hosts
};

struct MoeTraffic {
  // Every rank on one host: the rows the layer's placed path copies, one
  // placement per (token, expert) pair (rows of row_bytes), dispatch's
  // into the expert blocks and combine's back into the token ranks'
  // receive rows. Empty across hosts.
  std::vector<algo::Placement> placed_dispatch, placed_combine;
  MoeExchange flat_dispatch, flat_combine;
  MoeExchange hier_dispatch_net, hier_dispatch_host;  // across hosts to the proxies, then inside hosts
  MoeExchange hier_combine_host, hier_combine_net;
};

// Record bytes beside each row on the flat path: a count and, per expert
// on the destination rank, its id and weight.
inline size_t moe_record_bytes(size_t targets) { return 4 + 8 * targets; }

MoeTraffic moe_traffic(const MoeRouting& routing, const ClusterModel& model);

struct MoePrediction {
  double placed_dispatch_us = 0, placed_combine_us = 0;  // one host only
  double flat_dispatch_us = 0, flat_combine_us = 0;
  double hier_dispatch_us = 0, hier_combine_us = 0;
};

// Each exchange simulated as a sparse AlltoAllv of its byte matrix (the
// phases of the hierarchical one after each other); on one host the placed
// path's schedules too.
Result<MoePrediction> predict_moe(const ClusterModel& model, const MoeRouting& routing, const MoeTraffic& traffic,
                                  size_t max_steps);

}  // namespace conflux::sim
