// Runs one rank's Schedule on its links: posts each step once its
// dependencies are done, advances the head message of every link and
// direction, runs local and one-sided steps (copies, reads and writes of
// peers' memory, reductions, signals) as soon as they are ready, checks
// the flags it waits on, and waits (spin, then sleep) when nothing moves. Every wait has
// a deadline; peers are checked for liveness while waiting; an abort flag
// stops it from another thread.
#pragma once

#include "algo/schedule.h"
#include "bootstrap/socket.h"
#include "core/coll.h"
#include "transport/peer_memory.h"
#include "transport/transport.h"

#include <atomic>
#include <functional>
#include <span>
#include <vector>

namespace conflux {

class ShmWaiter;  // sleeps on this rank's shared-memory doorbell

struct ExecContext {
  // The links live as long as their communicator: the context only views them.
  std::span<Link* const> links;      // by peer rank (nullptr for self)
  // Extra connections for multi-channel schedules: channel_links[c - 1][peer]
  // carries Step::channel c; a missing one (nullptr, or too few channels)
  // means channel 0's link.
  std::span<const std::vector<Link*>> channel_links;
  std::vector<uint8_t*> buffers;     // bound to algo::BufIndex values (kStaging is bound here)
  std::vector<OpSig> sigs;           // by Step::sig
  ReduceFn reduce = nullptr;         // for kRecvReduce
  cfxDataType_t dtype = cfxFloat32;  // for kReduceFrom
  cfxRedOp_t op = cfxSum;
  size_t elem_size = 1;
  // One-sided steps: the transport's access to same-host peers, this
  // call's epoch (grows from call to call, the same on every rank) and how
  // far peers may reach into this rank's send and receive buffers.
  PeerMemory* peer_memory = nullptr;
  uint64_t epoch = 0;  // 0: not a call of the sequence (a send/recv group)
  size_t send_bytes = 0, recv_bytes = 0;
  Deadline deadline = Deadline::max();
  const std::atomic<bool>* abort = nullptr;
  ShmWaiter* shm_waiter = nullptr;   // null when no shm links
  int spin_iterations = 2000;
  // Whether a spinning rank hands its core over now and then: where another
  // rank of the job may be queued on that core. With a core to itself a
  // yield only gives the core to an unrelated task for its whole slice.
  bool yield_while_waiting = true;
  int rank = 0;
};

// What execute() keeps between calls: its vectors, so that a communicator
// running call after call does not allocate them again. One per thread of
// calls (a communicator runs one operation at a time).
struct ExecWorkspace {
  struct StepState {
    SendOp send;
    RecvOp recv;
    bool posted = false;
  };
  // The messages of one lane (a peer and one connection to it), in order.
  struct PeerQueues {
    std::vector<int> sends, recvs;
    size_t send_head = 0, recv_head = 0;
  };
  std::vector<uint8_t*> bufs;
  std::vector<StepState> state;
  std::vector<uint32_t> pending;
  std::vector<PeerQueues> queues;
  std::vector<int> active_lanes, ready, waits;
  std::vector<uint8_t> tmp, checked;
  std::vector<int> batch;                  // one-sided transfers run together
  std::vector<PeerMemory::Piece> pieces;  // their pieces
};

Status execute(const algo::Schedule& schedule, const ExecContext& ctx, ExecWorkspace* workspace = nullptr);

}  // namespace conflux
