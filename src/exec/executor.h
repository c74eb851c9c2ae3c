// Runs one rank's Schedule on its links: posts each step once its
// dependencies are done, advances the head message of every link and
// direction, and waits (spin, then sleep) when nothing moves. Every wait has
// a deadline; peers are checked for liveness while waiting; an abort flag
// stops it from another thread.
#pragma once

#include "algo/schedule.h"
#include "bootstrap/socket.h"
#include "core/coll.h"
#include "transport/transport.h"

#include <atomic>
#include <functional>
#include <vector>

namespace conflux {

class ShmWaiter;  // sleeps on this rank's shared-memory doorbell

struct ExecContext {
  std::vector<Link*> links;          // by peer rank (nullptr for self)
  // Extra connections for multi-channel schedules: channel_links[c - 1][peer]
  // carries Step::channel c; a missing one (nullptr, or too few channels)
  // means channel 0's link.
  std::vector<std::vector<Link*>> channel_links;
  std::vector<uint8_t*> buffers;     // bound to algo::BufIndex values
  std::vector<OpSig> sigs;           // by Step::sig
  ReduceFn reduce = nullptr;         // for kRecvReduce
  size_t elem_size = 1;
  Deadline deadline = Deadline::max();
  const std::atomic<bool>* abort = nullptr;
  ShmWaiter* shm_waiter = nullptr;   // null when no shm links
  int spin_iterations = 2000;
  int rank = 0;
};

Status execute(const algo::Schedule& schedule, const ExecContext& ctx);

}  // namespace conflux
