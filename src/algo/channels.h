// Multi-channel schedules: one collective split into `channels` independent
// sub-collectives over disjoint parts of the data, each on its own
// connections (Step::channel). A single TCP flow often cannot fill a link
// (clouds cap each flow: AWS allows 5 Gbit/s per flow outside a placement
// group; one core may not keep up with a fast NIC), so NCCL spreads its
// socket traffic over several connections. Each sub-schedule is the chosen
// algorithm on its part, so every algorithm keeps its proofs; the verifier
// pairs messages per (peer, channel) as the executor does.
#pragma once

#include "algo/algorithms.h"

#include <optional>

namespace conflux::algo {

using Builder = Schedule (*)(const CollArgs&);

// Whether `build`'s schedules for `c` split into per-channel parts with the
// caller's layout: AllReduce, Broadcast and Reduce (one contiguous vector)
// with any algorithm; AllGather, ReduceScatter and AlltoAll (per-rank
// blocks, each split) with the algorithms whose every message stays inside
// one block (ring, pairwise). It depends on nothing but (c, build), so all
// ranks agree.
bool channels_can_split(Coll c, Builder build);

// `build`'s schedule for `a` split over `channels` parts (part c on
// channel c). nullopt when channels_can_split says no, when a has fewer
// elements than channels, or when a sub-schedule moves a slice that spans
// two per-rank blocks (a builder wrongly listed as splittable).
std::optional<Schedule> split_channels(const CollArgs& a, int channels, Builder build);

}  // namespace conflux::algo
