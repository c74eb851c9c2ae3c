#include "exec/executor.h"

#include "core/copy.h"
#include "core/log.h"
#include "exec/reduce.h"
#include "exec/wait_policy.h"
#include "transport/shm/shm_waiter.h"

#include <poll.h>
#include <sched.h>

#include <algorithm>
#include <cstring>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define CFX_CPU_RELAX() _mm_pause()
#else
#define CFX_CPU_RELAX() asm volatile("" ::: "memory")
#endif

namespace conflux {
namespace {

using algo::Step;
using algo::StepKind;

constexpr auto kCheckAllLinksAfter = std::chrono::seconds(2);
// A rank with a core of its own spins through that time instead.
constexpr auto kOwnCoreSpinBudget = std::chrono::microseconds(100);
// Polls of the flags an in-order schedule waits on before its general wait
// loop: about a microsecond (each poll includes a pause).
constexpr int kQuickPolls = 32;
constexpr const char* kNoPeerMemory = "a one-sided schedule on a communicator without shared memory";


using algo::runs_at_once;

using StepState = ExecWorkspace::StepState;
using PeerQueues = ExecWorkspace::PeerQueues;

class Run {
 public:
  Run(const algo::Schedule& s, const ExecContext& ctx, ExecWorkspace& w)
      : sched_(s), ctx_(ctx), bufs_(w.bufs), state_(w.state), pending_(w.pending),
        shape_(s.shape()), queues_(w.queues),
        active_lanes_(w.active_lanes), ready_copies_(w.ready), waits_(w.waits), tmp_(w.tmp), checked_(w.checked),
        batch_(w.batch), pieces_(w.pieces) {
    bufs_.assign(ctx.buffers.begin(), ctx.buffers.end());
    for (int lane : active_lanes_) {  // the previous call's lanes: emptied, capacity kept
      PeerQueues& q = queues_[lane];
      q.sends.clear();
      q.recvs.clear();
      q.send_head = q.recv_head = 0;
    }
    active_lanes_.clear();
    ready_copies_.clear();
    waits_.clear();
  }

  Status go();

 private:
  // Runs steps until done_ reaches `target`, waiting (spin, yield, sleep)
  // whenever nothing moves.
  Status drive(size_t target);
  // Shape::in_order schedules: in schedule order, without the graph.
  Status go_in_order();
  Status run_now(int i);
  uint8_t* ptr(const algo::Slice& sl) const { return bufs_[sl.buf] + sl.offset; }
  Status run_local(int i);
  Status run_transfers(int first);
  Status run_reduce_from(const Step& step);
  Status check_waits(bool* progressed);
  Status start_one_sided();
  // Lanes: peer p's channel-0 link is lane p, an extra connection for
  // channel c is lane c x n + p (n = ctx_.links.size()).
  int lane_of(const Step& s) const;
  int lane_peer(int lane) const { return lane % static_cast<int>(ctx_.links.size()); }
  Link* lane_link(int lane) const;
  std::string lane_name(int lane) const;
  void complete(int i);
  Status pass(bool* progressed);
  Status with_other_failures(Status st, int failed_peer) const;
  Status advance_sends(int lane, PeerQueues& q, bool* progressed);
  Status advance_recvs(int lane, PeerQueues& q, bool* progressed);
  Status wait_for_work();
  std::string waiting_on() const;
  std::string stragglers() const;

  const algo::Schedule& sched_;
  const ExecContext& ctx_;
  // The workspace's vectors, reused from call to call (no allocation once
  // they have grown).
  std::vector<uint8_t*>& bufs_;
  std::vector<StepState>& state_;
  std::vector<uint32_t>& pending_;
  const algo::Schedule::Shape& shape_;  // dependents, what is ready at the start
  std::vector<PeerQueues>& queues_;  // by lane
  std::vector<int>& active_lanes_;
  std::vector<int>& ready_copies_;  // copies and one-sided steps that run at once
  std::vector<int>& waits_;         // posted waits for peers' flags
  std::vector<uint8_t>& tmp_;       // pieces of peers' inputs read through the kernel
  std::vector<uint8_t>& checked_;   // by peer: its call was compared with ours
  std::vector<int>& batch_;         // run_transfers' steps
  std::vector<PeerMemory::Piece>& pieces_;
  uint32_t signals_ = 0;            // this rank's signals so far in this call
  size_t done_ = 0;
  Clock::time_point next_liveness_check_{};
  bool collective_ = true;  // no Send/Recv signature among the steps
  bool in_order_ = false;   // go_in_order: completing a step releases nothing
  Clock::time_point stalled_since_{};  // when waiting began without progress since
};

int Run::lane_of(const Step& s) const {
  const size_t c = s.channel;
  if (c == 0 || c > ctx_.channel_links.size()) return s.peer;
  const std::vector<Link*>& extra = ctx_.channel_links[c - 1];
  if (static_cast<size_t>(s.peer) >= extra.size() || extra[s.peer] == nullptr) return s.peer;
  return static_cast<int>(c * ctx_.links.size()) + s.peer;
}

Link* Run::lane_link(int lane) const {
  const size_t n = ctx_.links.size(), c = static_cast<size_t>(lane) / n;
  return c == 0 ? ctx_.links[lane] : ctx_.channel_links[c - 1][static_cast<size_t>(lane) % n];
}

std::string Run::lane_name(int lane) const {
  const size_t c = static_cast<size_t>(lane) / ctx_.links.size();
  return "rank " + std::to_string(lane_peer(lane)) + (c == 0 ? "" : " (channel " + std::to_string(c) + ")");
}

void Run::complete(int i) {
  ++done_;
  if (in_order_) return;
  for (uint32_t k = shape_.dependents_begin[i]; k < shape_.dependents_begin[i + 1]; ++k) {
    int d = static_cast<int>(shape_.dependents[k]);
    if (--pending_[d] != 0) continue;
    if (runs_at_once(sched_.steps[d].kind)) ready_copies_.push_back(d);
    else if (sched_.steps[d].kind == StepKind::kWait) waits_.push_back(d);
  }
}

Status Run::advance_sends(int lane, PeerQueues& q, bool* progressed) {
  while (q.send_head < q.sends.size()) {
    int i = q.sends[q.send_head];
    StepState& st = state_[i];
    if (!st.posted) {
      if (pending_[i] > 0) return Status::Ok();
      const Step& step = sched_.steps[i];
      st.send.buf = ptr(step.src);
      st.send.bytes = step.src.bytes;
      st.send.sig = ctx_.sigs[step.sig];
      st.posted = true;
    }
    CFX_RETURN_IF_ERROR(lane_link(lane)->progress_send(st.send, progressed));
    if (!st.send.complete) return Status::Ok();
    ++q.send_head;
    complete(i);
  }
  return Status::Ok();
}

Status Run::advance_recvs(int lane, PeerQueues& q, bool* progressed) {
  while (q.recv_head < q.recvs.size()) {
    int i = q.recvs[q.recv_head];
    StepState& st = state_[i];
    if (!st.posted) {
      if (pending_[i] > 0) return Status::Ok();
      const Step& step = sched_.steps[i];
      st.recv.dst = ptr(step.dst);
      st.recv.bytes = step.dst.bytes;
      st.recv.sig = ctx_.sigs[step.sig];
      if (step.kind == StepKind::kRecvReduce) {
        st.recv.reduce_with = ptr(step.with);
        st.recv.reduce = ctx_.reduce;
        st.recv.elem_size = ctx_.elem_size;
      }
      st.posted = true;
    }
    CFX_RETURN_IF_ERROR(lane_link(lane)->progress_recv(st.recv, progressed));
    if (!st.recv.complete) return Status::Ok();
    ++q.recv_head;
    complete(i);
  }
  return Status::Ok();
}

Status Run::run_reduce_from(const Step& step) {
  const size_t bytes = step.dst.bytes;
  if (bytes == 0) return Status::Ok();
  const algo::Source* src = sched_.sources.data() + step.src_begin;
  const void* inputs[64];
  std::vector<const void*> many;
  const void** list = inputs;
  if (step.src_count > 64) {
    many.resize(step.src_count);
    list = many.data();
  }
  // Mapped sources are reduced in place; the others are read first, each
  // into its own part of tmp_ (sized before any pointer into it is kept).
  size_t kernel_reads = 0;
  for (uint32_t k = 0; k < step.src_count; ++k) {
    const algo::Source& s = src[k];
    if (s.peer < 0) {
      list[k] = ptr(s.slice);
    } else {
      list[k] = ctx_.peer_memory->view(s.peer, s.slice.buf, s.slice.offset, bytes);
      if (list[k] == nullptr) ++kernel_reads;
    }
  }
  if (kernel_reads > 0) {
    if (tmp_.size() < kernel_reads * bytes) tmp_.resize(kernel_reads * bytes);
    size_t used = 0;
    for (uint32_t k = 0; k < step.src_count; ++k) {
      const algo::Source& s = src[k];
      if (list[k] != nullptr) continue;
      uint8_t* at = tmp_.data() + used;
      used += bytes;
      CFX_RETURN_IF_ERROR(ctx_.peer_memory->read(s.peer, s.slice.buf, s.slice.offset, at, bytes));
      list[k] = at;
    }
  }
  reduce_many(ptr(step.dst), list, static_cast<int>(step.src_count), bytes / ctx_.elem_size, ctx_.dtype, ctx_.op);
  return Status::Ok();
}

Status Run::run_local(int i) {
  const Step& step = sched_.steps[i];
  switch (step.kind) {
    case StepKind::kCopy:
      if (step.src.bytes > 0 && ptr(step.src) != ptr(step.dst)) move_bytes(ptr(step.dst), ptr(step.src), step.src.bytes);
      return Status::Ok();
    case StepKind::kReduceFrom: return run_reduce_from(step).prepend("one-sided reduction: ");
    case StepKind::kSignal:
      if (ctx_.peer_memory == nullptr) return internal_error(kNoPeerMemory);
      if (signals_ == kMaxSignalsPerCall) return internal_error("a schedule signals more than 255 times in one call");
      ctx_.peer_memory->signal(++signals_);
      return Status::Ok();
    default: return internal_error("step of this kind does not run at once");
  }
}

Status Run::check_waits(bool* progressed) {
  if (ctx_.peer_memory == nullptr) return internal_error(kNoPeerMemory);
  for (size_t k = 0; k < waits_.size();) {
    const int i = waits_[k];
    const Step& step = sched_.steps[i];
    const uint64_t seen = ctx_.peer_memory->flag(step.peer);
    if (!flag_reached(seen, ctx_.epoch, step.count)) {
      // A peer in a point-to-point call of this epoch never signals.
      CFX_RETURN_IF_ERROR(ctx_.peer_memory->check_call(step.peer, seen));
      ++k;
      continue;
    }
    // The first sign of the peer in this call: before anything reads what
    // it published, check that it is in the same call.
    if (!checked_[step.peer]) {
      CFX_RETURN_IF_ERROR(ctx_.peer_memory->check_call(step.peer, seen));
      checked_[step.peer] = 1;
    }
    waits_[k] = waits_.back();
    waits_.pop_back();
    *progressed = true;
    complete(i);
  }
  return Status::Ok();
}

Status Run::start_one_sided() {
  if (ctx_.peer_memory == nullptr) return internal_error(kNoPeerMemory);
  for (int peer : shape_.one_sided_peers)
    if (!ctx_.peer_memory->reaches(peer))
      return internal_error("one-sided step names rank " + std::to_string(peer) + ", which is not on this host");
  const bool staging = shape_.uses_staging;
  if (staging && ctx_.peer_memory->staging_bytes() == 0) return internal_error("no staging area for an eager schedule");
  // Where the staging halves lie depends on the stated extent (the same on
  // every rank): a schedule that reaches past it would miss its peers' data.
  if (sched_.staging_extent > 0 && shape_.staging_reach > sched_.staging_extent)
    return internal_error("schedule '" + sched_.algorithm + "' reaches " + std::to_string(shape_.staging_reach) +
                          " bytes into the staging area, past the " + std::to_string(sched_.staging_extent) +
                          " it states");
  const int half = ctx_.peer_memory->begin_call(ctx_.epoch, ctx_.sigs.empty() ? OpSig{} : ctx_.sigs[0],
                                                bufs_[algo::kSendBuf], ctx_.send_bytes, bufs_[algo::kRecvBuf],
                                                ctx_.recv_bytes, staging, sched_.staging_extent,
                                                // Peers reach this rank's buffers in every one-sided
                                                // algorithm but the eager ones, which go through staging
                                                // (a rank's own schedule cannot tell: a Gather root reads
                                                // buffers whose owners' schedules only signal).
                                                !staging);
  checked_.assign(ctx_.links.size(), 0);
  if (bufs_.size() <= algo::kStaging) bufs_.resize(algo::kStaging + 1, nullptr);
  if (half >= 0) bufs_[algo::kStaging] = ctx_.peer_memory->staging(half);
  return Status::Ok();
}

// A ready one-sided read or write, with every other ready one of the same
// kind, peer and peer buffer: schedules that move many small pieces (rows
// of a MoE exchange) reach a peer's memory in one transfer call.
Status Run::run_transfers(int first) {
  const Step& f = sched_.steps[first];
  const bool to_peer = f.kind == StepKind::kWrite;
  auto remote_buf = [to_peer](const Step& s) { return to_peer ? s.dst.buf : s.src.buf; };
  batch_.assign(1, first);
  size_t kept = 0;
  for (int i : ready_copies_) {
    const Step& s = sched_.steps[i];
    if (s.kind == f.kind && s.peer == f.peer && remote_buf(s) == remote_buf(f)) batch_.push_back(i);
    else ready_copies_[kept++] = i;
  }
  ready_copies_.resize(kept);
  pieces_.clear();
  for (int i : batch_) {
    const Step& s = sched_.steps[i];
    pieces_.push_back(to_peer ? PeerMemory::Piece{s.dst.offset, ptr(s.src), s.src.bytes}
                              : PeerMemory::Piece{s.src.offset, ptr(s.dst), s.dst.bytes});
  }
  if (ctx_.peer_memory == nullptr) return internal_error(kNoPeerMemory);
  Status st = ctx_.peer_memory->transfer(f.peer, remote_buf(f), to_peer, pieces_.data(), pieces_.size());
  if (!st.ok())
    return st.prepend(std::string("one-sided ") + (to_peer ? "write to" : "read from") + " rank " +
                      std::to_string(f.peer) + ": ");
  for (int i : batch_) complete(i);
  return Status::Ok();
}

Status Run::pass(bool* progressed) {
  while (!ready_copies_.empty()) {
    int i = ready_copies_.back();
    ready_copies_.pop_back();
    const StepKind kind = sched_.steps[i].kind;
    *progressed = true;
    if (kind == StepKind::kRead || kind == StepKind::kWrite) {
      CFX_RETURN_IF_ERROR(run_transfers(i));
      continue;
    }
    CFX_RETURN_IF_ERROR(run_local(i));
    complete(i);
  }
  if (!waits_.empty()) CFX_RETURN_IF_ERROR(check_waits(progressed));
  // Every lane's sends before any receive: a send is what a peer waits
  // for, a receive only this rank. Receiving first, a rank that entered a
  // call after its peer's data had arrived reduced it before sending its
  // own, and the peer sat idle through that reduction; the two ranks then
  // took turns being late (2 ranks, 256 KiB AllReduce by recursive
  // doubling: 21 and 38 us in alternate calls, 30 us a call).
  for (int lane : active_lanes_) {
    Status st = advance_sends(lane, queues_[lane], progressed);
    if (!st.ok()) return with_other_failures(st, lane_peer(lane));
  }
  for (int lane : active_lanes_) {
    Status st = advance_recvs(lane, queues_[lane], progressed);
    if (!st.ok()) return with_other_failures(st, lane_peer(lane));
  }
  return Status::Ok();
}

Status Run::with_other_failures(Status st, int failed_peer) const {
  // When one rank dies, a neighbour that noticed first may give up and exit,
  // and its link is the one that fails here: name every other dead link too,
  // so the rank that really died appears in this rank's error as well.
  if (st.code() != cfxRemoteError || !collective_) return st;
  for (size_t peer = 0; peer < ctx_.links.size(); ++peer) {
    if (ctx_.links[peer] == nullptr || static_cast<int>(peer) == failed_peer) continue;
    Status other = ctx_.links[peer]->check_peer();
    if (!other.ok()) st = Status(st.code(), st.message() + "; also " + other.message());
  }
  return st;
}

std::string Run::waiting_on() const {
  std::string s;
  for (int i : waits_) {
    const Step& step = sched_.steps[i];
    // (A wait exists only in a one-sided schedule, which never runs without peer memory.)
    const uint64_t flag = ctx_.peer_memory != nullptr ? ctx_.peer_memory->flag(step.peer) : 0;
    s += (s.empty() ? "" : "; ") + std::string("signal ") + std::to_string(step.count) + " of rank " +
         std::to_string(step.peer) +
         (flag_epoch(flag) < (ctx_.epoch & 0xffffffffull) ? " (not yet in this call)"
                                                          : " (it has signalled " + std::to_string(flag_signals(flag)) + " times)");
  }
  for (int lane : active_lanes_) {
    const PeerQueues& q = queues_[lane];
    if (q.recv_head < q.recvs.size()) {
      const StepState& st = state_[q.recvs[q.recv_head]];
      s += (s.empty() ? "" : "; ") + std::string("receive from ") + lane_name(lane) +
           (st.posted ? " (" + std::to_string(st.recv.done) + " of " + std::to_string(st.recv.bytes) + " bytes)"
                      : " (not started)");
    }
    if (q.send_head < q.sends.size()) {
      const StepState& st = state_[q.sends[q.send_head]];
      s += (s.empty() ? "" : "; ") + std::string("send to ") + lane_name(lane) +
           (st.posted ? " (" + std::to_string(st.send.done) + " of " + std::to_string(st.send.bytes) + " bytes)"
                      : " (not started)");
    }
  }
  return s;
}

// Who is behind: peers whose first message of this call this rank is ready
// for but has not received a byte of (not yet in the call, or stuck waiting
// on someone else themselves).
std::string Run::stragglers() const {
  std::string s;
  std::vector<bool> heard(ctx_.links.size(), false), named(ctx_.links.size(), false);
  for (int lane : active_lanes_) {
    const PeerQueues& q = queues_[lane];
    if (q.recvs.empty()) continue;
    const StepState& st = state_[q.recvs[0]];
    // Unposted: this rank is not ready for it yet, so it proves nothing.
    if (q.recv_head > 0 || st.recv.done > 0 || st.recv.stage > 0) heard[lane_peer(lane)] = true;
  }
  for (int lane : active_lanes_) {
    const PeerQueues& q = queues_[lane];
    const int peer = lane_peer(lane);
    if (q.recvs.empty() || heard[peer] || named[peer] || !state_[q.recvs[0]].posted) continue;
    named[peer] = true;
    s += (s.empty() ? "" : ",") + std::to_string(peer);
  }
  if (s.empty()) return "";
  return "; nothing received in this call from rank(s) " + s + " (behind, or waiting on others)";
}

Status Run::wait_for_work() {
  if (ctx_.abort != nullptr && ctx_.abort->load(std::memory_order_relaxed))
    return aborted_error("communicator aborted while waiting for: " + waiting_on());
  auto now = Clock::now();
  if (now >= ctx_.deadline) return timeout_error("timed out waiting for: " + waiting_on() + stragglers());
  if (now >= next_liveness_check_) {
    next_liveness_check_ = now + std::chrono::milliseconds(50);
    // A collective needs every rank, so any dead rank dooms it: once stalled
    // a while, check all links, so each survivor names the dead rank itself
    // rather than the neighbour that gave up first. Not at once: a rank that
    // has finished this call may exit cleanly while we still wait on another.
    // Point-to-point calls check only their peers.
    // Every failing link is reported: when one rank dies, a survivor that
    // gave up and exited may fail at the same moment, and the first in rank
    // order need not be the cause.
    if (stalled_since_ == Clock::time_point{}) stalled_since_ = now;
    Status failed;
    auto check = [&](Link* link) {
      Status st = link->check_peer();
      if (st.ok()) return;
      // A forwarded notice may already quote this one: say it once.
      if (!failed.ok() && failed.message().find(st.message()) != std::string::npos) return;
      failed = failed.ok() ? st : Status(failed.code(), failed.message() + "; also " + st.message());
    };
    if (collective_ && now - stalled_since_ >= kCheckAllLinksAfter) {
      for (size_t peer = 0; peer < ctx_.links.size(); ++peer)
        if (ctx_.links[peer] != nullptr) check(ctx_.links[peer]);
    } else {
      for (int i : waits_) {
        Link* link = ctx_.links[sched_.steps[i].peer];
        if (link != nullptr) check(link);
      }
      // Only peers we still owe or expect a message: one whose part of this
      // call is over may have finished and exited cleanly.
      for (int lane : active_lanes_) {
        const PeerQueues& q = queues_[lane];
        if (q.send_head < q.sends.size() || q.recv_head < q.recvs.size()) check(lane_link(lane));
      }
    }
    if (!failed.ok()) return failed;
  }
  int budget = remaining_ms(ctx_.deadline);
  std::vector<pollfd> fds;
  // Sockets wake us directly; shared-memory peers (if any) are polled at 1 ms.
  int cap = ctx_.shm_waiter != nullptr ? 1 : 50;
  for (int lane : active_lanes_) {
    Link* link = lane_link(lane);
    int fd = link->poll_fd();
    if (fd < 0) continue;
    cap = std::min(cap, link->max_sleep_ms());
    const PeerQueues& q = queues_[lane];
    // Bytes for a receive not yet posted cannot move us on (and heartbeats
    // would wake us for nothing); check_peer() still sees a closed socket.
    const bool recv_waiting = q.recv_head < q.recvs.size() && state_[q.recvs[q.recv_head]].posted;
    const bool send_waiting = q.send_head < q.sends.size() && state_[q.sends[q.send_head]].posted;
    fds.push_back({fd, link->poll_events(recv_waiting, send_waiting), 0});
  }
  if (!fds.empty()) {
    ::poll(fds.data(), fds.size(), budget < 0 ? cap : std::min(budget, cap));
    return Status::Ok();
  }
  if (ctx_.shm_waiter != nullptr) {
    uint32_t token = ctx_.shm_waiter->arm();
    bool progressed = false;
    Status st = pass(&progressed);
    if (!st.ok() || progressed) {
      ctx_.shm_waiter->disarm();
      return st;
    }
    ctx_.shm_waiter->sleep(token, budget < 0 ? 50 : std::min(budget, 50));
    return Status::Ok();
  }
  sched_yield();
  return Status::Ok();
}

Status Run::go() {
  const size_t n = sched_.steps.size();
  for (const OpSig& sig : ctx_.sigs)
    if (sig.coll == static_cast<uint8_t>(Coll::kSend) || sig.coll == static_cast<uint8_t>(Coll::kRecv)) collective_ = false;
  if (shape_.one_sided) {
    CFX_RETURN_IF_ERROR(start_one_sided());
  } else if (ctx_.peer_memory != nullptr && ctx_.epoch != 0) {
    // Only a call of the communicator's sequence (epoch > 0, the same on
    // every rank) is shown: a send/recv group runs outside it, and its
    // flag would read as an epoch no peer agreed on.
    ctx_.peer_memory->announce_call(ctx_.epoch, ctx_.sigs.empty() ? OpSig{} : ctx_.sigs[0]);
  }
  if (shape_.in_order) return go_in_order();
  pending_.assign(shape_.dep_counts.begin(), shape_.dep_counts.end());
  if (!shape_.link_steps.empty()) {
    state_.resize(n);
    if (queues_.size() < ctx_.links.size() * (1 + ctx_.channel_links.size()))
      queues_.resize(ctx_.links.size() * (1 + ctx_.channel_links.size()));
  }
  // Copies and one-sided steps run in schedule order: the ready list is
  // a stack, so it holds them reversed.
  ready_copies_.assign(shape_.ready_at_once.rbegin(), shape_.ready_at_once.rend());
  waits_.assign(shape_.ready_waits.begin(), shape_.ready_waits.end());
  for (int i : shape_.link_steps) {
    const Step& s = sched_.steps[i];
    if (s.peer < 0 || static_cast<size_t>(s.peer) >= ctx_.links.size() || ctx_.links[s.peer] == nullptr)
      return internal_error("schedule names rank " + std::to_string(s.peer) + " which has no link");
    state_[i] = StepState{};
    const int lane = lane_of(s);
    PeerQueues& q = queues_[lane];
    if (q.sends.empty() && q.recvs.empty()) active_lanes_.push_back(lane);
    (s.kind == StepKind::kSend ? q.sends : q.recvs).push_back(i);
  }
  return drive(n);
}

Status Run::run_now(int i) {
  const StepKind kind = sched_.steps[i].kind;
  if (kind == StepKind::kRead || kind == StepKind::kWrite) return run_transfers(i);  // completes the step
  CFX_RETURN_IF_ERROR(run_local(i));
  complete(i);
  return Status::Ok();
}

// What comes before the waits runs in order; then the waits, together, so
// whichever peer is ready first is seen first; then what follows them, in
// one pass over the ready steps (reads and writes of one peer batched),
// as the graph would run it (Shape::in_order).
Status Run::go_in_order() {
  in_order_ = true;
  const int n = static_cast<int>(sched_.steps.size());
  int i = 0;
  for (; i < n && sched_.steps[i].kind != StepKind::kWait; ++i) CFX_RETURN_IF_ERROR(run_now(i));
  for (; i < n && sched_.steps[i].kind == StepKind::kWait; ++i) waits_.push_back(i);
  // Peers are mostly a few hundred nanoseconds away: poll their flags
  // alone first, then wait as every schedule does (deadline, liveness,
  // yield, sleep).
  for (int polls = 0; polls < kQuickPolls && !waits_.empty(); ++polls) {
    bool progressed = false;
    CFX_RETURN_IF_ERROR(check_waits(&progressed));
    if (!progressed) CFX_CPU_RELAX();
  }
  if (!waits_.empty()) CFX_RETURN_IF_ERROR(drive(static_cast<size_t>(i)));
  bool transfers = false;
  for (int k = i; k < n; ++k) transfers |= sched_.steps[k].kind == StepKind::kRead || sched_.steps[k].kind == StepKind::kWrite;
  if (!transfers) {
    for (; i < n; ++i) CFX_RETURN_IF_ERROR(run_local(i));
    return Status::Ok();
  }
  for (int k = n - 1; k >= i; --k) ready_copies_.push_back(k);  // a stack: schedule order
  bool progressed = false;
  return pass(&progressed);
}

Status Run::drive(size_t target) {
  // A rank with a core of its own never yields (ExecContext::
  // yield_while_waiting): no rank of the job can be queued there, and a
  // yield hands the core to whatever else is runnable on it for that task's
  // whole slice, milliseconds, where the peer answers in microseconds. 2
  // ranks bound to a core each, 8-byte AllReduce, a busy loop on one rank's
  // core: 342-713 us a call with the yields, 0.57-0.83 without (Open MPI
  // 0.53-0.81 beside the same loop). It spins through the time the yields
  // would have taken instead.
  const bool yields = ctx_.yield_while_waiting;
  const auto spin_budget = yields ? kSpinBudget : kOwnCoreSpinBudget;
  int idle = 0;
  Clock::time_point idle_since, last_yield;
  while (done_ < target) {
    bool progressed = false;
    CFX_RETURN_IF_ERROR(pass(&progressed));
    if (progressed) {
      idle = 0;
      stalled_since_ = {};
      continue;
    }
    // Spin a bounded number of polls and at most the spin budget: a pass
    // over socket links costs system calls, so 2000 of them are
    // milliseconds. While spinning, where ranks may share cores, hand the
    // core over every kYieldEvery: the scheduler sometimes runs the rank we
    // wait for on our core (a socket wake-up pulls the woken task to the
    // waker's core), which then waited out our whole budget for every
    // message. 2 emulated hosts, 8-byte AllReduce, 14 launches: 80-83 us in
    // 5 of them before, 24-27 us in 4 with the yield, 10-13 us otherwise.
    // Shared-memory waits shorter than kYieldEvery never yield.
    // The clock is read every 8th poll, the first time after 8 polls: a
    // wait that ends within them (a peer's flag in flight) reads none.
    if (++idle < ctx_.spin_iterations) {
      bool spent = false;
      if ((idle & 7) == 0) {
        const auto now = Clock::now();
        if (idle == 8) idle_since = last_yield = now;
        spent = now - idle_since >= spin_budget;
        if (!spent && yields && now - last_yield >= kYieldEvery) {
          sched_yield();
          last_yield = now;
        }
      }
      if (!spent) {
        CFX_CPU_RELAX();
        continue;
      }
    }
    if (idle < ctx_.spin_iterations) idle = ctx_.spin_iterations;  // budget spent: on to yielding
    if (yields && idle < ctx_.spin_iterations + kYieldsBeforeSleep) {
      sched_yield();  // oversubscribed cores: let the peer we wait for run
      continue;
    }
    CFX_RETURN_IF_ERROR(wait_for_work());
  }
  return Status::Ok();
}

}  // namespace

Status execute(const algo::Schedule& schedule, const ExecContext& ctx, ExecWorkspace* workspace) {
  if (schedule.steps.empty()) return Status::Ok();
  if (workspace != nullptr) return Run(schedule, ctx, *workspace).go();
  ExecWorkspace local;
  return Run(schedule, ctx, local).go();
}

}  // namespace conflux
