// Running operations: choose the schedule, bind buffers, execute, finish
// (Avg's divide), and turn failures into errors that name the call.
#include "algo/algorithms.h"
#include "algo/channels.h"
#include "algo/compose.h"
#include "core/comm.h"
#include "core/config.h"
#include "core/log.h"
#include "core/network_probe.h"
#include "core/shared_mem.h"
#include "exec/executor.h"
#include "exec/reduce.h"
#include "tune/candidates.h"
#include "tune/comm_model.h"
#include "tune/comm_tuning.h"
#include "tune/measured_table.h"

#include <chrono>
#include <ctime>
#include <cstring>
#include <optional>
#include <utility>
#include <array>
#include <algorithm>

using namespace conflux;

namespace {

// The tuner's choice (cost model over the communicator's modelled cluster,
// CONFLUX_ALGO applied); without a tuner, the fixed defaults. With
// channels > 1 the schedule is split over that many connections per peer
// when the algorithm's parts stay contiguous (algo/channels.h).
Result<algo::Schedule> build_schedule(algo::CollArgs& a, tune::Tuner* tuner, int channels) {
  algo::Builder build = nullptr;
  bool one_sided = false;
  if (tuner) {
    CFX_ASSIGN_OR_RETURN(const tune::Candidate* chosen, tuner->choose(a));
    tune::fill_hosts(&a, tuner->model());  // hierarchical algorithms read the placement
    build = chosen->build;
    one_sided = chosen->one_sided;
  } else {
    // The registry's first candidate of each collective is the pre-tuner default.
    const tune::Candidate* fallback = tune::default_candidate(a.coll);
    build = fallback != nullptr ? fallback->build : algo::point_to_point;
  }
  if (channels > 1 && !one_sided && algo::channels_can_split(a.coll, build) && a.count >= static_cast<size_t>(channels)) {
    std::optional<algo::Schedule> split = algo::split_channels(a, channels, build);
    if (!split) return internal_error("cannot split the schedule over " + std::to_string(channels) + " channels");
    return std::move(*split);
  }
  return build(a);
}

// Where the result of a reduction lands on this rank, for Avg's divide.
size_t reduced_elements(const OpDesc& op, int rank) {
  switch (op.coll) {
    case Coll::kAllReduce: return op.count;
    case Coll::kReduceScatter: return op.count;
    case Coll::kReduce: return rank == op.root ? op.count : 0;
    default: return 0;
  }
}

OpSig signature_of(const OpDesc& op, uint32_t seq) {
  OpSig sig;
  sig.seq = seq;
  sig.coll = static_cast<uint8_t>(op.coll);
  if (op.stage > 0) {  // a stage of a dynamic AlltoAllv: signed as that call
    sig.coll = static_cast<uint8_t>(Coll::kAlltoAllv);
    sig.dtype = static_cast<uint8_t>(op.dtype);
    sig.root = -1 - op.stage;
    return sig;
  }
  if (op.coll == Coll::kBarrier) return sig;
  sig.dtype = static_cast<uint8_t>(op.dtype);
  sig.op = static_cast<uint8_t>(op.op);
  sig.root = op.root;
  sig.count = op.coll == Coll::kAlltoAllv ? 0 : op.count;
  return sig;
}

// Bytes of this rank's send (or receive) buffer in op, NCCL's layout:
// how far peers' one-sided steps may reach into it.
size_t buffer_bytes(const OpDesc& op, int rank, int nranks, bool send) {
  const size_t elem = datatype_size(op.dtype), block = op.count * elem, n = static_cast<size_t>(nranks);
  const bool root = rank == op.root;
  switch (op.coll) {
    case Coll::kAllReduce: return block;
    case Coll::kBroadcast: return send ? (root ? block : 0) : block;
    case Coll::kReduce: return send ? block : (root ? block : 0);
    case Coll::kAllGather: return send ? block : block * n;
    case Coll::kReduceScatter: return send ? block * n : block;
    case Coll::kAlltoAll: return block * n;
    case Coll::kGather: return send ? block : (root ? block * n : 0);
    case Coll::kScatter: return send ? (root ? block * n : 0) : block;
    case Coll::kAlltoAllv: {
      size_t extent = 0;
      const auto& counts = send ? op.sendcounts : op.recvcounts;
      const auto& displs = send ? op.sdispls : op.rdispls;
      for (size_t p = 0; p < counts.size() && p < displs.size(); ++p) extent = std::max(extent, (displs[p] + counts[p]) * elem);
      return extent;
    }
    default: return 0;
  }
}

bool is_in_place(const OpDesc& op, int rank, int nranks) {
  size_t elem = datatype_size(op.dtype);
  auto* send = static_cast<const uint8_t*>(op.sendbuf);
  auto* recv = static_cast<const uint8_t*>(op.recvbuf);
  switch (op.coll) {
    case Coll::kAllGather: return send == recv + static_cast<size_t>(rank) * op.count * elem;
    case Coll::kReduceScatter: return recv == send + static_cast<size_t>(rank) * op.count * elem;
    case Coll::kGather: return rank == op.root && send == recv + static_cast<size_t>(rank) * op.count * elem;
    case Coll::kScatter: return rank == op.root && recv == send + static_cast<size_t>(rank) * op.count * elem;
    default: (void)nranks; return send == recv;
  }
}

}  // namespace

void cfxComm::choose_channel_split(double one_flow_gbps, double all_flows_gbps) {
  if (channel_link_ptrs_.empty() || cfg_->channel_min_bytes >= 0) return;  // none, or set at init
  // Worth it only where several flows outrun one (a per-flow cap, or a
  // core that cannot keep one flow's pace), and only for calls large
  // enough that each channel still moves whole chunks of work.
  constexpr double kGain = 1.2;
  constexpr size_t kPerChannel = size_t{256} << 10;
  if (one_flow_gbps > 0 && all_flows_gbps >= kGain * one_flow_gbps)
    channel_min_bytes_ = static_cast<size_t>(tcp_channels_) * kPerChannel;
  CFX_INFO(kTune, "network probe: 1 flow %.3f GB/s, %d flows %.3f GB/s: %s", one_flow_gbps, tcp_channels_,
           all_flows_gbps,
           channel_min_bytes_ == SIZE_MAX ? "no split over channels"
                                          : ("calls of >= " + std::to_string(channel_min_bytes_) + " bytes split").c_str());
}

void cfxComm::set_last_error(const std::string& message) {
  std::lock_guard lock(error_mutex_);
  last_error_ = message;
}

std::string cfxComm::last_error() const {
  std::lock_guard lock(error_mutex_);
  return last_error_;
}

uint8_t* cfxComm::scratch(size_t bytes) {
  if (scratch_.size() < bytes) scratch_.resize(bytes);
  return scratch_.data();
}

Status cfxComm::run(std::span<const OpDesc> ops) {
  // Keep issue order with queued nonblocking operations: if any are pending,
  // this call queues behind them. (None ever submitted: no lock to take.)
  if (async_outstanding_.load(std::memory_order_acquire) > 0) {
    std::unique_lock lock(queue_mutex_);
    if (!queue_.empty() || worker_busy_) {
      lock.unlock();
      cfxRequest* req = submit(std::vector<OpDesc>(ops.begin(), ops.end()));
      std::unique_lock rl(req->mutex);
      req->cv.wait(rl, [&] { return req->done; });
      Status st = req->status;
      rl.unlock();
      delete req;
      return st;
    }
  }
  std::lock_guard lock(exec_mutex_);
  use_registrations(ops, +1);
  Status st = run_locked(ops);
  use_registrations(ops, -1);
  return st;
}

Status cfxComm::run_locked(std::span<const OpDesc> ops) {
  if (abort_) return aborted_error("communicator was aborted");
  if (!broken_.ok()) return Status(broken_.code(), "communicator is unusable after an earlier error: " + broken_.message());
  // A peer that gave up may never make this rank wait (its sends complete
  // into buffers, libfabric queues unexpected messages without bound): look
  // for notices before every call, not only while stalled. Cheap: a flag per
  // shm or libfabric link; TCP links are read while waiting.
  Status st = check_notices();
  const bool collective = std::any_of(ops.begin(), ops.end(), [](const OpDesc& op) { return !op.is_p2p(); });
  if (st.ok() && collective) st = check_peers_between_calls();
  for (size_t i = 0; i < ops.size() && st.ok();) {
    if (ops[i].dynamic) {
      st = run_dynamic_alltoallv(ops[i]);
      ++i;
      continue;
    }
    if (!ops[i].is_p2p()) {
      st = run_collective(ops[i]);
      ++i;
      continue;
    }
    // Consecutive point-to-point operations run as one schedule, so a ring
    // of Send/Recv pairs in a group cannot deadlock.
    std::vector<const OpDesc*> batch;
    while (i < ops.size() && ops[i].is_p2p()) batch.push_back(&ops[i++]);
    st = run_p2p_batch(batch);
  }
  if (!st.ok()) {
    st.prepend("rank " + std::to_string(rank_) + ": ");
    // Failures after messages moved leave links in an unknown state. A
    // failure every rank found alike before any data moved (a dynamic
    // AlltoAllv's capacity) leaves them clean.
    const bool clean = std::exchange(failed_alike_, false);
    if (st.code() != cfxInvalidArgument && !clean) {
      broken_ = st;
      cfxResult_t none = cfxSuccess;
      async_error_.compare_exchange_strong(none, st.code());
      notify_peers(st);
      // The caller may free this call's buffers once it returns: no
      // transport may write into them afterwards.
      (void)for_each_link([](Link& link) {
        link.quiesce();
        return Status::Ok();
      });
    }
    CFX_WARN(kColl, "%s", st.message().c_str());
  }
  return st;
}

Status cfxComm::check_peers_between_calls() {
  // A rank may never wait on a dead peer: a Broadcast root, or any rank
  // whose only traffic to a dead leaf is sends that complete locally
  // (libfabric injects small messages without a completion). Its calls
  // would succeed forever. So every link is checked between collectives,
  // at most every 100 ms. A peer whose part of the last collective was
  // over may have exited cleanly while this rank still runs its own part
  // of that call: only a peer still gone kGoneGrace later, while this rank
  // goes on calling collectives it must take part in, is an error.
  // The time comes from CLOCK_MONOTONIC_COARSE, the kernel's last tick:
  // read without the clock source (kvm-clock here costs about 50 cycles a
  // read, a tenth of the smallest call), at a resolution of a few
  // milliseconds, far below the 100 ms between looks.
  constexpr auto kGoneGrace = std::chrono::seconds(2);
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
  const std::chrono::nanoseconds now = std::chrono::seconds(ts.tv_sec) + std::chrono::nanoseconds(ts.tv_nsec);
  if (now < next_peer_check_) return Status::Ok();
  next_peer_check_ = now + std::chrono::milliseconds(100);
  peer_gone_since_.resize(link_ptrs_.size());
  for (size_t p = 0; p < link_ptrs_.size(); ++p) {
    if (link_ptrs_[p] == nullptr) continue;
    Status st = link_ptrs_[p]->check_peer();
    if (st.ok()) {
      peer_gone_since_[p] = {};
      continue;
    }
    // A notice is the peer's own word: no grace.
    if (st.message().find(kNoticeRelayMarker) != std::string::npos) return st;
    if (peer_gone_since_[p] == std::chrono::nanoseconds{}) peer_gone_since_[p] = now;
    if (now - peer_gone_since_[p] >= kGoneGrace) return st;
  }
  return Status::Ok();
}

Status cfxComm::check_notices() {
  for (const auto& [word, link] : notice_words_)
    if (word->load(std::memory_order_acquire) != 0) CFX_RETURN_IF_ERROR(link->check_notice());
  for (Link* link : notice_links_) CFX_RETURN_IF_ERROR(link->check_notice());
  return Status::Ok();
}

void cfxComm::notify_peers(const Status& st) {
  // Peers may be waiting on this rank, or hold a message only this rank
  // could judge (a mismatch seen by the receiver): tell each why we stop, so
  // every rank of the call reports the cause instead of a closed connection.
  std::string why = st.message();
  // A failure that came to us as a notice is passed on as its origin's own
  // words: along a chain of N ranks the text would otherwise nest N times
  // and lose the cause (notices hold kNoticeTextBytes).
  const size_t relayed = why.rfind(kNoticeRelayMarker);
  if (relayed != std::string::npos) why = why.substr(relayed + std::strlen(kNoticeRelayMarker));
  const std::string me = "rank " + std::to_string(rank_);
  for (size_t at = why.find("this rank"); at != std::string::npos; at = why.find("this rank", at + me.size()))
    why.replace(at, 9, me);
  (void)for_each_link([&](Link& link) {
    link.send_notice(st.code(), why);
    return Status::Ok();
  });
}

ExecContext cfxComm::exec_context() const {
  ExecContext ctx;
  ctx.links = link_ptrs_;
  ctx.channel_links = channel_link_ptrs_;
  ctx.deadline = deadline_after_ms(timeout_ms_.load());
  ctx.abort = &abort_;
  ctx.shm_waiter = waiter_;
  ctx.spin_iterations = spin_iterations_;
  ctx.yield_while_waiting = yield_while_waiting_;
  ctx.rank = rank_;
  ctx.peer_memory = peer_memory_;
  return ctx;
}

// The tuner of this communicator, made before its first scheduled call.
// Ranks on different hosts calibrate separately, so they first average
// their constants with one small AllReduce (default algorithm, no tuner)
// and so model the same cluster and choose alike. The same call settles
// what one-sided access every rank has: each votes 1 or 0, and an average
// of 1 means all can.
Status cfxComm::make_tuner() {
  const Config& cfg = *cfg_;
  tune::Constants mine = cfg.tune ? tune::machine_constants() : tune::Constants{};
  // The network can only be measured against another host: rank 0 and
  // the first rank elsewhere exchange messages over their real link
  // (probe_link); the others contribute zero to the network fields of the
  // sum below.
  int partner = -1;
  for (int r = 1; r < nranks_ && partner < 0; ++r)
    if (table_[r].host_hash != table_[0].host_hash) partner = r;
  LinkProbe probe;
  const bool probed = partner > 0 && cfg.tune;
  if (probed) {
    ++coll_seq_;  // every rank, so sequence numbers stay aligned
    ++epoch_;
    if (rank_ == 0 || rank_ == partner) {
      OpSig sig;
      sig.seq = coll_seq_;
      sig.coll = static_cast<uint8_t>(Coll::kBarrier);
      ExecContext ctx = exec_context();
      ctx.sigs = {sig};
      ctx.epoch = epoch_;
      Status st = probe_link(ctx, rank_ == 0 ? partner : 0, tcp_channels_, &probe);
      if (!st.ok()) return st.prepend("measuring the network for the tuner: ");
    }
  }
  // The constants (averaged), rank 0's probe (summed: the others
  // contribute zero): its bandwidth over all channels, the call cost and
  // the curve; then the votes on one-sided access and the staging size
  // (with its square, so the average says whether every rank has the same).
  constexpr size_t kConsts = tune::ConstantsArray().size();
  constexpr size_t kChannels = kConsts, kCall = kConsts + 1, kCurve = kConsts + 2;
  constexpr size_t kOneSided = kCurve + kProbeCurveBytes.size(), kReads = kOneSided + 1, kStaging = kReads + 1,
                   kStagingSq = kStaging + 1, kCount = kStagingSq + 1;
  std::array<double, kCount> local{}, sum{};
  const tune::ConstantsArray own = tune::to_array(mine);
  std::copy(own.begin(), own.end(), local.begin());
  auto from_probe = [&](size_t i) {
    return probed && (i == tune::kNetLatIndex || i == tune::kNetGbpsIndex || (i >= kConsts && i < kOneSided));
  };
  if (probed) {
    local[tune::kNetLatIndex] = rank_ == 0 ? probe.lat_us : 0;
    local[tune::kNetGbpsIndex] = rank_ == 0 ? probe.gbps : 0;
    local[kChannels] = rank_ == 0 ? probe.channels_gbps : 0;
    local[kCall] = rank_ == 0 ? probe.call_us : 0;
    for (size_t k = 0; k < kProbeCurveBytes.size(); ++k) local[kCurve + k] = rank_ == 0 ? probe.curve_us[k] : 0;
  }
  // One-sided algorithms serve only communicators whose ranks all share
  // one host's memory (hierarchical ones use them for their host-local
  // phases, where every host's ranks do).
  int same_host = 0;
  for (const RankInfo& r : table_) same_host += r.host_hash == table_[rank_].host_hash;
  const bool one_sided = cfg.shm_collectives && peer_memory_ != nullptr && same_host > 1 &&
                         peer_memory_->staging_bytes() > 0;
  local[kOneSided] = one_sided ? 1 : 0;
  local[kReads] = one_sided && reads_peer_buffers_ ? 1 : 0;
  const double staging = one_sided ? static_cast<double>(peer_memory_->staging_bytes()) : 0;
  local[kStaging] = staging;
  local[kStagingSq] = staging * staging;
  OpDesc agree;
  agree.coll = Coll::kAllReduce;
  agree.sendbuf = local.data();
  agree.recvbuf = sum.data();
  agree.count = local.size();
  agree.dtype = cfxFloat64;
  agree.op = cfxSum;
  agreeing_ = true;
  Status st = run_collective(agree);
  agreeing_ = false;
  if (!st.ok()) return st.prepend("agreeing on the tuner's constants: ");
  for (size_t i = 0; i < sum.size(); ++i)
    if (!from_probe(i)) sum[i] /= nranks_;
  tune::ConstantsArray agreed_array{};
  std::copy_n(sum.begin(), agreed_array.size(), agreed_array.begin());
  tune::Constants agreed = tune::from_array(agreed_array, mine.source + ", averaged over ranks");
  if (probed) {
    agreed.call_us = sum[kCall];
    LinkProbe measured;
    std::copy_n(sum.begin() + kCurve, kProbeCurveBytes.size(), measured.curve_us.begin());
    agreed.net.curve = measured.curve();
  }
  choose_channel_split(probed ? sum[tune::kNetGbpsIndex] : 0, probed ? sum[kChannels] : 0);
  sim::ClusterModel model = tune::model_of(table_, cfg.transport == TransportChoice::kTcp, agreed);
  model.one_sided = sum[kOneSided] == 1.0;
  model.reads_peer_buffers = model.one_sided && sum[kReads] == 1.0;
  const bool same_staging = sum[kStagingSq] == sum[kStaging] * sum[kStaging];
  model.staging_bytes = model.one_sided && same_staging ? static_cast<size_t>(sum[kStaging]) : 0;
  if (model.one_sided && !same_staging)
    CFX_WARN(kTune, "CONFLUX_SHM_STAGING_SIZE differs between ranks: the eager algorithms are off");
  const std::string layout =
      tune::layout_key(nranks_, model.nhosts(), transport_name(cfg.transport), cfg.shm_collectives);
  CFX_ASSIGN_OR_RETURN(tuner_, tune::make_tuner(std::move(model), cfg.algo, layout));
  return Status::Ok();
}

size_t cfxComm::ScheduleKeyHash::operator()(const ScheduleKey& k) const {
  size_t h = std::hash<uint64_t>()(k.count);
  auto mix = [&](uint64_t v) { h ^= std::hash<uint64_t>()(v) + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2); };
  mix(k.elem);
  mix(k.chunk);
  mix(k.generation);
  mix(static_cast<uint64_t>(static_cast<uint32_t>(k.root)) << 8 | k.coll);
  mix(static_cast<uint64_t>(k.channels) << 3 | (k.in_place ? 4u : 0u) | (k.registered ? 2u : 0u) | (k.tuned ? 1u : 0u));
  return h;
}

Result<const algo::Schedule*> cfxComm::schedule_for(const OpDesc& op, tune::Tuner* tuner, const ScheduleKey& key) {
  const bool cacheable = op.coll != Coll::kAlltoAllv;  // its counts are not in the key
  if (cacheable) {
    if (last_schedule_ != nullptr && key == last_key_) return last_schedule_.get();
    if (auto it = schedules_.find(key); it != schedules_.end()) {
      last_key_ = key;
      last_schedule_ = it->second;
      return last_schedule_.get();
    }
  }
  algo::CollArgs a;
  a.coll = op.coll;
  a.nranks = nranks_;
  a.rank = rank_;
  a.count = op.count;
  a.elem = key.elem;
  a.root = op.root;
  a.in_place = key.in_place;
  a.chunk_bytes = key.chunk;
  a.ring = ring_;
  a.registered = key.registered;
  a.channels = key.channels;
  if (tuner != nullptr) a.staging_bytes = tuner->model().staging_bytes;
  if (op.coll == Coll::kAlltoAllv) {
    a.sendcounts = op.sendcounts.data();
    a.sdispls = op.sdispls.data();
    a.recvcounts = op.recvcounts.data();
    a.rdispls = op.rdispls.data();
    if (!op.all_sendcounts.empty()) {
      a.all_sendcounts = op.all_sendcounts.data();
      a.all_sdispls = op.all_sdispls.data();
      a.all_rdispls = op.all_rdispls.data();
    }
  }
  auto built = build_schedule(a, tuner, a.channels);
  if (!built.ok()) return Status(built.status()).prepend(std::string(coll_name(op.coll)) + ": ");
  auto sched = std::make_shared<const algo::Schedule>(std::move(built).value());
  (void)sched->shape();  // derived once, here, before the schedule is shared
  if (cacheable) {
    constexpr size_t kMaxSchedules = 256;  // distinct calls a job repeats; beyond, start over
    if (schedules_.size() >= kMaxSchedules) schedules_.clear();
    schedules_.emplace(key, sched);
  }
  // An AlltoAllv's key (not cacheable) names its collective, which no
  // cacheable call's key does: the memo never hands it to another call.
  last_key_ = key;
  last_schedule_ = std::move(sched);
  return last_schedule_.get();
}

bool cfxComm::one_sided_to_all() const {
  if (nranks_ == 1) return true;
  if (peer_memory_ == nullptr) return false;
  for (int p = 0; p < nranks_; ++p)
    if (p != rank_ && !peer_memory_->reaches(p)) return false;
  return true;
}

bool cfxComm::LastCall::repeats(const OpDesc& op, uint64_t tuner_now, uint64_t registrations_now) const {
  return valid && op.schedule == nullptr && op.stage == 0 && op.coll == coll && op.count == count &&
         op.dtype == dtype && op.op == redop && op.root == root && op.sendbuf == sendbuf && op.recvbuf == recvbuf &&
         tuner_now == tuner_generation && registrations_now == registrations;
}

Status cfxComm::run_collective(const OpDesc& op) {
  // A call like the last one (training and benchmarks repeat their calls)
  // runs the same schedule on the same bound buffers: neither is looked up
  // or bound again.
  const uint64_t tuner_generation = tuner_ != nullptr && !agreeing_ ? tuner_->generation() + 1 : 0;
  const uint64_t registrations = registrations_generation_.load(std::memory_order_acquire);
  const bool repeat = op.coll != Coll::kAlltoAllv && last_call_.repeats(op, tuner_generation, registrations);
  const algo::Schedule* built = op.schedule.get();
  bool registered_buffers = repeat && last_call_.registered;
  if (repeat) {
    built = last_schedule_.get();
  } else {
    last_call_.valid = false;  // call_ctx_ is bound to this call below
    if (built == nullptr) {
      CFX_ASSIGN_OR_RETURN(built, choose_schedule(op, &registered_buffers));
    }
  }
  const algo::Schedule& sched = *built;

  OpSig sig = signature_of(op, ++coll_seq_);
  sig.registered = registered_buffers ? 1 : 0;

  // The context is reused call after call: its vectors keep their capacity.
  ExecContext& ctx = call_ctx_;
  if (!repeat) {
    ctx = exec_context_base_;
    uint8_t* const bufs[] = {const_cast<uint8_t*>(static_cast<const uint8_t*>(op.sendbuf)),
                             static_cast<uint8_t*>(op.recvbuf), scratch(sched.scratch_bytes), nullptr};
    ctx.buffers.assign(std::begin(bufs), std::end(bufs));
    ctx.reduce = reduce_fn(op.dtype, op.op);
    ctx.dtype = op.dtype;
    ctx.op = op.op;
    ctx.elem_size = datatype_size(op.dtype);
    // How far peers may reach into this rank's buffers: published only by
    // one-sided schedules that do not go through the staging areas.
    const algo::Schedule::Shape& shape = sched.shape();
    if (shape.one_sided && !shape.uses_staging) {
      ctx.send_bytes = op.schedule != nullptr ? op.schedule_send_bytes : buffer_bytes(op, rank_, nranks_, true);
      ctx.recv_bytes = op.schedule != nullptr ? op.schedule_recv_bytes : buffer_bytes(op, rank_, nranks_, false);
    } else {
      ctx.send_bytes = ctx.recv_bytes = 0;
    }
    if (op.schedule == nullptr && op.stage == 0 && op.coll != Coll::kAlltoAllv) {
      last_call_ = LastCall{true, op.coll, op.count, op.dtype, op.op, op.root, op.sendbuf, op.recvbuf,
                            tuner_generation, registrations, registered_buffers};
    }
  }
  ctx.deadline = deadline_after_ms(timeout_ms_.load());
  ctx.sigs.assign(1, sig);
  ctx.epoch = ++epoch_;
  CFX_TRACE(kColl, "%s: %s, %zu steps", describe(sig).c_str(), sched.algorithm.c_str(), sched.steps.size());
  Status st = execute(sched, ctx, &exec_ws_);
  if (!st.ok()) return st.prepend(describe(sig) + " [" + sched.algorithm + "]: ");
  if (op.op == cfxAvg) {
    size_t n = reduced_elements(op, rank_);
    if (n > 0) finalize_avg(op.recvbuf, n, op.dtype, nranks_);
  }
  return Status::Ok();
}

Result<const algo::Schedule*> cfxComm::choose_schedule(const OpDesc& op, bool* registered_buffers) {
  const Config& cfg = *cfg_;
  if (tuner_ == nullptr && nranks_ > 1 && !agreeing_) CFX_RETURN_IF_ERROR(make_tuner());
  tune::Tuner* tuner = agreeing_ ? nullptr : tuner_.get();
  ScheduleKey key;
  key.coll = static_cast<uint8_t>(op.coll);
  key.count = op.count;
  key.elem = datatype_size(op.dtype);
  key.root = op.root;
  key.in_place = is_in_place(op, rank_, nranks_);
  key.chunk = cfg.chunk_bytes;
  key.registered = registered(op);
  key.tuned = tuner != nullptr;
  key.generation = tuner != nullptr ? tuner->generation() : 0;
  // Bytes the call moves per rank, as the channel threshold counts them.
  size_t call_bytes = op.count * key.elem;
  if (op.coll == Coll::kAllGather || op.coll == Coll::kReduceScatter || op.coll == Coll::kAlltoAll)
    call_bytes *= static_cast<size_t>(nranks_);
  const int channels = !channel_link_ptrs_.empty() && call_bytes >= channel_min_bytes_ ? tcp_channels_ : 1;
  key.channels = op.count >= static_cast<size_t>(channels) ? channels : 1;
  *registered_buffers = key.registered;
  return schedule_for(op, tuner, key);
}

Status cfxComm::run_p2p_batch(const std::vector<const OpDesc*>& ops) {
  algo::Schedule sched;
  sched.algorithm = "p2p";
  ExecContext ctx = exec_context();
  ctx.buffers = {nullptr, nullptr, nullptr, nullptr};
  std::vector<const OpDesc*> self_sends, self_recvs;
  for (const OpDesc* op : ops) {
    size_t bytes = op->count * datatype_size(op->dtype);
    if (op->peer == rank_) {
      (op->coll == Coll::kSend ? self_sends : self_recvs).push_back(op);
      continue;
    }
    OpSig sig;
    sig.coll = static_cast<uint8_t>(Coll::kSend);
    sig.dtype = static_cast<uint8_t>(op->dtype);
    sig.count = op->count;
    sig.root = -1;
    auto buf = static_cast<uint16_t>(ctx.buffers.size());
    algo::Step step;
    step.peer = op->peer;
    step.sig = static_cast<uint16_t>(ctx.sigs.size());
    if (op->coll == Coll::kSend) {
      sig.seq = ++p2p_send_seq_[op->peer];
      ctx.buffers.push_back(const_cast<uint8_t*>(static_cast<const uint8_t*>(op->sendbuf)));
      step.kind = algo::StepKind::kSend;
      step.src = {buf, 0, bytes};
    } else {
      sig.seq = ++p2p_recv_seq_[op->peer];
      ctx.buffers.push_back(static_cast<uint8_t*>(op->recvbuf));
      step.kind = algo::StepKind::kRecv;
      step.dst = {buf, 0, bytes};
    }
    ctx.sigs.push_back(sig);
    sched.add(step);
  }
  if (self_sends.size() != self_recvs.size())
    return invalid_usage("a send to self needs a matching receive from self in the same group (" +
                         std::to_string(self_sends.size()) + " sends, " + std::to_string(self_recvs.size()) +
                         " receives)");
  for (size_t i = 0; i < self_sends.size(); ++i) {
    const OpDesc* s = self_sends[i];
    const OpDesc* r = self_recvs[i];
    size_t sb = s->count * datatype_size(s->dtype), rb = r->count * datatype_size(r->dtype);
    if (sb != rb)
      return invalid_usage("send to self of " + std::to_string(sb) + " bytes matched with a receive of " +
                           std::to_string(rb) + " bytes");
    auto src = static_cast<uint16_t>(ctx.buffers.size());
    ctx.buffers.push_back(const_cast<uint8_t*>(static_cast<const uint8_t*>(s->sendbuf)));
    ctx.buffers.push_back(static_cast<uint8_t*>(r->recvbuf));
    sched.copy({src, 0, sb}, {static_cast<uint16_t>(src + 1), 0, sb});
  }
  if (ctx.sigs.empty()) ctx.sigs.push_back(OpSig{});
  Status st = execute(sched, ctx);
  if (!st.ok()) return st.prepend("send/recv group of " + std::to_string(ops.size()) + " operations: ");
  return Status::Ok();
}

void cfxComm::abort() { abort_.store(true); }

bool cfxComm::registered(const OpDesc& op) const {
  if (op.is_p2p() || op.coll == Coll::kBarrier || op.coll == Coll::kAlltoAllv) return false;
  if (registered_count_.load(std::memory_order_acquire) == 0) return false;
  const size_t send = buffer_bytes(op, rank_, nranks_, true), recv = buffer_bytes(op, rank_, nranks_, false);
  std::lock_guard lock(registrations_mutex_);
  auto inside = [&](const void* p, size_t bytes) {
    if (bytes == 0) return true;
    const auto at = reinterpret_cast<uintptr_t>(p);
    for (const auto& r : registrations_)
      if (at >= r->base && at + bytes <= r->base + r->size) return true;
    return false;
  };
  if (send == 0 && recv == 0) return false;
  return inside(op.sendbuf, send) && inside(op.recvbuf, recv);
}

void cfxComm::use_registrations(std::span<const OpDesc> ops, int delta) {
  if (registered_count_.load(std::memory_order_acquire) == 0) return;
  std::lock_guard lock(registrations_mutex_);
  for (const OpDesc& op : ops)
    for (const void* p : {op.sendbuf, static_cast<const void*>(op.recvbuf)}) {
      const auto at = reinterpret_cast<uintptr_t>(p);
      for (auto& r : registrations_)
        if (p != nullptr && at >= r->base && at < r->base + r->size) r->users = std::max(0, r->users + delta);
    }
}

Status cfxComm::register_buffer(void* buff, size_t size, void** handle) {
  if (handle == nullptr) return invalid_argument("cfxCommRegister: handle is NULL");
  if (buff == nullptr || size == 0) return invalid_argument("cfxCommRegister: empty buffer");
  const SharedRegionRef region = shared_region_of(buff);
  const auto at = reinterpret_cast<uintptr_t>(buff);
  if (region.id == 0 || at + size > region.base + region.size)
    return invalid_argument("cfxCommRegister: the buffer must lie in one cfxMemAlloc allocation (peers on this host map it)");
  std::lock_guard lock(registrations_mutex_);
  for (const auto& r : registrations_)
    if (at < r->base + r->size && r->base < at + size)
      return invalid_usage("cfxCommRegister: [" + std::to_string(at) + ", +" + std::to_string(size) +
                           ") overlaps a buffer already registered with this communicator");
  auto reg = std::make_unique<Registration>();
  reg->base = at;
  reg->size = size;
  *handle = reg.get();
  registrations_.push_back(std::move(reg));
  registered_count_.store(registrations_.size(), std::memory_order_release);
  registrations_generation_.fetch_add(1, std::memory_order_acq_rel);
  return Status::Ok();
}

Status cfxComm::deregister_buffer(void* handle) {
  std::lock_guard lock(registrations_mutex_);
  for (auto it = registrations_.begin(); it != registrations_.end(); ++it) {
    if (it->get() != handle) continue;
    if ((*it)->users > 0)
      return invalid_usage("cfxCommDeregister: the buffer is in use by " + std::to_string((*it)->users) +
                           " operation(s) not yet complete");
    registrations_.erase(it);
    registered_count_.store(registrations_.size(), std::memory_order_release);
    registrations_generation_.fetch_add(1, std::memory_order_acq_rel);
    return Status::Ok();
  }
  return invalid_argument("cfxCommDeregister: not a handle cfxCommRegister gave for this communicator");
}

// The dynamic AlltoAllv in one call: (1) every rank's counts, displacements
// and receive capacity are gathered by every rank (a small AllGather, on
// the intra-host path one flag round), so (2) every rank checks every
// receiver's capacity alike (an overflow fails on every rank, naming the
// receiver and its largest sender, before any data moves), and (3) the data
// moves as an AlltoAllv whose whole traffic matrix is known: only pairs with
// something to move exchange messages, and on one host receivers read the
// senders' blocks in place.
Status cfxComm::run_dynamic_alltoallv(const OpDesc& op) {
  const size_t n = static_cast<size_t>(nranks_);
  const size_t nextra = op.exchange != nullptr ? op.exchange->extra.size() : 0, row = 2 * n + 1 + nextra;
  std::vector<uint64_t> mine(row), all(row * n);
  for (size_t d = 0; d < n; ++d) {
    mine[d] = op.sendcounts[d];
    mine[n + d] = op.sdispls[d];
  }
  mine[2 * n] = op.exchange != nullptr ? SIZE_MAX : op.count;  // a library exchange sizes its own buffer
  for (size_t k = 0; k < nextra; ++k) mine[2 * n + 1 + k] = op.exchange->extra[k];
  OpDesc gather;
  gather.coll = Coll::kAllGather;
  gather.sendbuf = mine.data();
  gather.recvbuf = all.data();
  gather.count = row;
  gather.dtype = cfxUint64;
  gather.stage = 1;
  CFX_RETURN_IF_ERROR(run_collective(gather));
  OpDesc data;
  data.coll = Coll::kAlltoAllv;
  data.sendbuf = op.sendbuf;
  data.recvbuf = op.recvbuf;
  data.dtype = op.dtype;
  data.stage = 2;
  data.sendcounts = op.sendcounts;
  data.sdispls = op.sdispls;
  data.all_sendcounts.resize(n * n);
  data.all_sdispls.resize(n * n);
  for (size_t s = 0; s < n; ++s)
    for (size_t d = 0; d < n; ++d) {
      data.all_sendcounts[s * n + d] = all[s * row + d];
      data.all_sdispls[s * n + d] = all[s * row + n + d];
    }
  // Every receiver's capacity, checked on every rank the same way.
  for (size_t q = 0; q < n; ++q) {
    uint64_t total = 0, largest = 0;
    size_t from = 0;
    for (size_t s = 0; s < n; ++s) {
      const uint64_t c = data.all_sendcounts[s * n + q];
      total += c;
      if (c > largest) largest = c, from = s;
    }
    const uint64_t capacity = all[q * row + 2 * n];
    if (total > capacity) {
      failed_alike_ = true;  // every rank returns this, and nothing moved: the links stay usable
      return invalid_usage("alltoallv (dynamic): rank " + std::to_string(q) + " would receive " +
                           std::to_string(total) + " elements but its recvcapacity is " + std::to_string(capacity) +
                           " (rank " + std::to_string(from) + " sends it " + std::to_string(largest) +
                           "); nothing was received");
    }
  }
  // Every receiver packs its blocks in sender order.
  data.all_rdispls.resize(n * n);
  for (size_t d = 0; d < n; ++d) {
    size_t off = 0;
    for (size_t s = 0; s < n; ++s) {
      data.all_rdispls[d * n + s] = off;
      off += data.all_sendcounts[s * n + d];
    }
  }
  data.recvcounts.resize(n);
  data.rdispls.resize(n);
  size_t at = 0;
  for (size_t s = 0; s < n; ++s) {
    data.recvcounts[s] = data.all_sendcounts[s * n + static_cast<size_t>(rank_)];
    data.rdispls[s] = data.all_rdispls[static_cast<size_t>(rank_) * n + s];
    at += data.recvcounts[s];
  }
  if (op.exchange != nullptr) {
    std::vector<uint64_t> extras(n * nextra);
    for (size_t s = 0; s < n; ++s)
      for (size_t k = 0; k < nextra; ++k) extras[s * nextra + k] = all[s * row + 2 * n + 1 + k];
    Result<void*> where = op.exchange->decide(extras, at);
    if (!where.ok()) {
      failed_alike_ = true;  // `decide` saw the same words on every rank
      return where.status();
    }
    data.recvbuf = where.value();
  }
  CFX_RETURN_IF_ERROR(run_collective(data));
  if (op.recvcounts_out != nullptr) std::copy(data.recvcounts.begin(), data.recvcounts.end(), op.recvcounts_out);
  if (op.rdispls_out != nullptr) std::copy(data.rdispls.begin(), data.rdispls.end(), op.rdispls_out);
  return Status::Ok();
}
