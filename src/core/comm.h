// The communicator: this rank's view of a group of ranks, its links to every
// peer, and the machinery that runs operations on them in issue order
// (inline for blocking calls, on a progress thread for nonblocking ones).
#pragma once

#include "bootstrap/rank_info.h"
#include "bootstrap/socket.h"
#include "bootstrap/unique_id.h"
#include "core/config.h"
#include "core/op.h"
#include "core/status.h"
#include "exec/executor.h"
#include "transport/registry.h"
#include "transport/transport.h"
#include "tune/tuner.h"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

struct cfxRequest {
  std::mutex mutex;
  std::condition_variable cv;
  bool done = false;
  conflux::Status status;
  std::vector<conflux::OpDesc> ops;  // one op, or a whole group
};

struct cfxComm {
 public:
  static conflux::Result<std::unique_ptr<cfxComm>> create(int nranks, int rank, const conflux::UniqueIdData& id);
  ~cfxComm();

  int rank() const { return rank_; }
  int nranks() const { return nranks_; }
  const std::vector<conflux::RankInfo>& peers() const { return table_; }
  const std::vector<int>& ring() const { return ring_; }
  const conflux::UniqueIdData& id() const { return id_; }
  std::string link_kind(int peer) const;
  // The tuner of this communicator once its first collective made it
  // (nullptr before, and for a single rank).
  conflux::tune::Tuner* tuner() const { return tuner_.get(); }
  // Whether one-sided schedules reach every peer (all ranks on this host,
  // with shared memory): the placed exchanges of the MoE layer run then.
  bool one_sided_to_all() const;

  // cfxCommRegister / cfxCommDeregister: buffers whose kind every rank of a
  // call knows (registered cfxMemAlloc memory, which peers map).
  conflux::Status register_buffer(void* buff, size_t size, void** handle);
  conflux::Status deregister_buffer(void* handle);

  // Runs ops (one, or a group) in order; blocking.
  conflux::Status run(std::span<const conflux::OpDesc> ops);
  conflux::Status run(const conflux::OpDesc& op) { return run(std::span<const conflux::OpDesc>(&op, 1)); }
  // Queues ops on the progress thread; the request completes when they have run.
  cfxRequest* submit(std::vector<conflux::OpDesc> ops);

  void abort();
  bool aborted() const { return abort_.load(); }
  // Calls inside the API on this communicator; cfxCommAbort frees it only
  // once every such call has returned (with cfxAborted).
  void enter_call() { in_flight_.fetch_add(1); }
  void leave_call() { in_flight_.fetch_sub(1); }
  int calls_in_flight() const { return in_flight_.load(); }
  void set_timeout_ms(int64_t ms) { timeout_ms_.store(ms); }
  int64_t timeout_ms() const { return timeout_ms_.load(); }
  cfxResult_t async_error() const { return async_error_.load(); }

  void set_last_error(const std::string& message);
  std::string last_error() const;

  // The first failure notice a peer sent over its link (Link::check_notice).
  conflux::Status check_notices();

 private:
  cfxComm() = default;
  conflux::Status init(int nranks, int rank, const conflux::UniqueIdData& id);
  // Which transport serves each peer, then the links.
  conflux::Status connect_peers(const conflux::RankInfo& mine);
  void build_ring();
  void log_init_summary() const;

  conflux::Status run_locked(std::span<const conflux::OpDesc> ops);
  // Before a collective: every link's liveness check, at most every 100 ms.
  conflux::Status check_peers_between_calls();
  std::chrono::nanoseconds next_peer_check_{};         // CLOCK_MONOTONIC_COARSE
  std::vector<std::chrono::nanoseconds> peer_gone_since_;  // by peer; 0 while alive
  conflux::Status run_collective(const conflux::OpDesc& op);
  // The tuner's schedule for op (from the cache when it was built before).
  // It stays valid until the next call of choose_schedule.
  conflux::Result<const conflux::algo::Schedule*> choose_schedule(const conflux::OpDesc& op, bool* registered_buffers);
  conflux::Status run_dynamic_alltoallv(const conflux::OpDesc& op);
  conflux::Status run_p2p_batch(const std::vector<const conflux::OpDesc*>& ops);
  // Makes this communicator's tuner (its constants agreed by every rank).
  conflux::Status make_tuner();
  // The context every execute() of this communicator shares.
  conflux::ExecContext exec_context() const;
  uint8_t* scratch(size_t bytes);
  // Whether every buffer of op on this rank lies in a registration.
  bool registered(const conflux::OpDesc& op) const;
  // Sets channel_min_bytes_ from CONFLUX_CHANNEL_MIN_BYTES, else from the
  // network probe's bandwidth over one connection and over all of them.
  void choose_channel_split(double one_flow_gbps, double all_flows_gbps);
  void worker_loop();

  // The configuration this communicator was made with (read once; a later
  // reload_config, as tests do, applies to communicators made after it).
  const conflux::Config* cfg_ = &conflux::config();
  int rank_ = 0;
  int nranks_ = 1;
  conflux::UniqueIdData id_;
  std::vector<conflux::RankInfo> table_;
  std::vector<int> ring_;
  // The transports in preference order, and every link: links_.by_channel[0]
  // by peer (null for self); channels 1.. (CONFLUX_TCP_CHANNELS > 1 with
  // network peers), a TCP connection or a shared-memory ring pair, null for
  // peers reached otherwise (libfabric).
  std::vector<std::unique_ptr<conflux::Transport>> transports_;
  conflux::LinkTable links_;
  std::vector<conflux::Link*> link_ptrs_;
  // Where check_notices() looks (Link::notice_check): words that turn
  // nonzero with a notice, and links to ask.
  std::vector<std::pair<const std::atomic<uint32_t>*, conflux::Link*>> notice_words_;
  std::vector<conflux::Link*> notice_links_;
  int tcp_channels_ = 1;
  std::vector<std::vector<conflux::Link*>> channel_link_ptrs_;
  conflux::ShmWaiter* waiter_ = nullptr;          // where waits on shared memory sleep; null without shm peers
  conflux::PeerMemory* peer_memory_ = nullptr;    // one-sided access to same-host peers; null without them
  bool reads_peer_buffers_ = false;               // this rank's one-sided access reaches peers' ordinary buffers
  // Calls fn on every connection to a peer, main links first, and stops at
  // the first error: a peer may be waiting on, or write to, any of them.
  template <class Fn>
  conflux::Status for_each_link(Fn&& fn) {
    for (auto& row : links_.by_channel)
      for (auto& link : row)
        if (link != nullptr) CFX_RETURN_IF_ERROR(fn(*link));
    return conflux::Status::Ok();
  }
  // Collective calls of at least this many bytes split over the channels.
  size_t channel_min_bytes_ = SIZE_MAX;
  std::vector<uint8_t> scratch_;
  conflux::ExecWorkspace exec_ws_;  // execute()'s vectors, reused call after call
  conflux::ExecContext call_ctx_;   // a collective's context, reused (buffers and signatures keep their capacity)
  conflux::ExecContext exec_context_base_;  // what every call's context starts from (set once links exist)
  // Built schedules by what they depend on: a call like an earlier one
  // (the common case: training repeats the same calls) skips the tuner and
  // the builder.
  struct ScheduleKey {
    uint64_t count = 0, elem = 0, chunk = 0, generation = 0;
    int32_t root = 0, channels = 1;
    uint8_t coll = 0;
    bool in_place = false, registered = false, tuned = false;
    bool operator==(const ScheduleKey&) const = default;
  };
  struct ScheduleKeyHash {
    size_t operator()(const ScheduleKey& k) const;
  };
  std::unordered_map<ScheduleKey, std::shared_ptr<const conflux::algo::Schedule>, ScheduleKeyHash> schedules_;
  // The schedule of the last call, and its key (a loop repeats one call:
  // no lookup then); an AlltoAllv's, which is not cached, lives here too.
  ScheduleKey last_key_;
  std::shared_ptr<const conflux::algo::Schedule> last_schedule_;
  conflux::Result<const conflux::algo::Schedule*> schedule_for(const conflux::OpDesc& op, conflux::tune::Tuner* tuner,
                                                               const ScheduleKey& key);
  // The last collective's arguments, for which last_schedule_ was chosen
  // and call_ctx_ bound (with the tuner's generation, + 1 when it chose, and
  // the registrations' generation then).
  struct LastCall {
    bool valid = false;
    conflux::Coll coll = conflux::Coll::kAllReduce;
    size_t count = 0;
    cfxDataType_t dtype = cfxFloat32;
    cfxRedOp_t redop = cfxSum;
    int root = 0;
    const void* sendbuf = nullptr;
    const void* recvbuf = nullptr;
    uint64_t tuner_generation = 0, registrations = 0;
    bool registered = false;
    bool repeats(const conflux::OpDesc& op, uint64_t tuner_now, uint64_t registrations_now) const;
  };
  LastCall last_call_;
  std::unique_ptr<conflux::tune::Tuner> tuner_;
  bool agreeing_ = false;  // running the tuner's own agreement call (no tuner for it)

  struct Registration {
    uintptr_t base = 0;
    size_t size = 0;
    int users = 0;  // operations queued or running on it
  };
  mutable std::mutex registrations_mutex_;
  std::vector<std::unique_ptr<Registration>> registrations_;
  std::atomic<size_t> registered_count_{0};  // calls skip the lock while there are none
  std::atomic<uint64_t> registrations_generation_{0};  // changes with every registration and deregistration
  // Counts op's registrations as used (delta +1) or no longer (-1).
  void use_registrations(std::span<const conflux::OpDesc> ops, int delta);

  uint32_t coll_seq_ = 0;
  uint64_t epoch_ = 0;  // collective schedules run so far (one-sided flags are tagged with it)
  std::vector<uint32_t> p2p_send_seq_, p2p_recv_seq_;

  std::atomic<bool> abort_{false};
  std::atomic<int> in_flight_{0};
  std::atomic<int64_t> timeout_ms_{0};
  std::atomic<cfxResult_t> async_error_{cfxSuccess};
  conflux::Status broken_;  // first fatal error; later calls fail with it
  bool failed_alike_ = false;  // the failing call failed on every rank alike, before data moved
  int spin_iterations_ = 0;  // polls before a waiting rank yields (none when oversubscribed)
  bool yield_while_waiting_ = true;  // false when every rank has a core of its own (CoreSharing::own_core)
  void notify_peers(const conflux::Status& st);  // Link::send_notice on every link

  std::mutex exec_mutex_;  // one operation runs at a time
  mutable std::mutex error_mutex_;
  std::string last_error_;

  std::atomic<int> async_outstanding_{0};  // submitted operations not yet finished
  std::mutex queue_mutex_;
  std::condition_variable queue_cv_;
  std::deque<cfxRequest*> queue_;
  bool worker_busy_ = false;
  bool stopping_ = false;
  std::thread worker_;
};
