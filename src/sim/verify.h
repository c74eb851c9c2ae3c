// Symbolic verifier: runs every rank's schedule of one collective together
// on symbolic data and proves, for those arguments, that the algorithm is
// right. Each element slot holds (input index, set of contributing ranks);
// a reduction unions two disjoint sets of the same index, so "every rank's
// contribution exactly once" is a set equality.
//
// What it checks:
//  - matching: every send meets a receive of the same size, FIFO per link;
//  - one-sided steps: a read, write or reduce-from of a peer's memory is a
//    race unless ordered, across ranks (messages and signal -> wait edges),
//    with every other access to those elements: reading a slice before its
//    owner produced it, and overwriting a slice a peer still reads, both
//    fail. The caller touches its buffers when a call returns (reads its
//    output, writes its next input), so a peer's access after the owner
//    returned fails too. A wait for a peer's k-th signal of a call needs k
//    signals in that peer's schedule of that call (else a later call's flag
//    would satisfy it: a flag reused too early), and a rank's signals must
//    be ordered among themselves (peers count them). Peers must share the
//    rank's host;
//  - progress: every step completes (no deadlock), under the executor's
//    contract: a step is posted once its deps are done and, for sends and
//    receives, once the previous one on the same (peer, direction) queue
//    completed; a send completes only when its receive is posted
//    (rendezvous, the strictest transport);
//  - hazards: every pair of steps of one rank that touch the same element,
//    one of them writing, is ordered by deps or queue order (happens-before).
//    Race freedom is checked exactly (FastTrack-style shadow memory over
//    one complete run), so it does not depend on the scheduling seed;
//  - no reads of undefined memory, no writes to the caller's send buffer
//    out of place, slices inside their buffers, element-aligned;
//  - outputs equal the collective's definition (for a placed exchange, the
//    listed pieces: every rank's arguments must list every rank's); for Barrier, every rank's
//    completion transitively follows every rank's arrival.
// The order in which ready steps run is randomised from `seed`.
#pragma once

#include "algo/algorithms.h"

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace conflux::sim {

struct VerifyResult {
  bool ok = true;
  std::string error;    // the first failure: rank, step, what was wrong
  size_t steps = 0;     // steps run over all ranks
  size_t messages = 0;  // send/receive pairs matched
};

using ScheduleBuilder = std::function<algo::Schedule(const algo::CollArgs&)>;

// args[r] are rank r's arguments (they may differ, e.g. AlltoAllv counts).
VerifyResult verify(const std::vector<algo::CollArgs>& args, const ScheduleBuilder& build, uint64_t seed = 1);
// Same arguments on every rank except `rank`.
VerifyResult verify(const algo::CollArgs& args, const ScheduleBuilder& build, uint64_t seed = 1);

// One call of a sequence: each rank's arguments and the builder.
struct VerifyCall {
  std::vector<algo::CollArgs> args;
  ScheduleBuilder build;
};
// Consecutive calls on the same ranks, each started only once the rank's
// previous one returned (and its caller touched the buffers). Each call has
// fresh user buffers; scratch and the staging areas persist, and calls
// that use staging alternate its halves, as the executor does: this proves
// that no call reuses a half a slower peer may still read. Every call's
// outputs are checked when its rank returns.
VerifyResult verify_sequence(const std::vector<VerifyCall>& calls, uint64_t seed = 1);
// A call's arguments on every rank (rank filled in).
std::vector<algo::CollArgs> on_every_rank(const algo::CollArgs& args);

}  // namespace conflux::sim
