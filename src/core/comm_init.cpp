// Communicator set-up: rendezvous, then the transports (each publishes its
// part of this rank's address before the exchange, then connects to the
// peers it serves), then a barrier over the new links.
#include "bootstrap/bootstrap.h"
#include "bootstrap/interfaces.h"
#include "core/comm.h"
#include "core/config.h"
#include "core/log.h"
#include "exec/executor.h"
#include "topo/load_system.h"
#include "topo/plan.h"

#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <thread>

using namespace conflux;

namespace {

// A host's name for logs and grouping: the hostname, made unique by a few
// digits of the host hash (containers may share a hostname).
std::string host_label(const RankInfo& r) {
  char tag[8];
  std::snprintf(tag, sizeof tag, "%04x", static_cast<unsigned>(r.host_hash & 0xffff));
  return std::string(r.hostname) + "~" + tag;
}

// This rank's NUMA node and nearest NIC from the topology model (hwloc
// discovery fused with CONFLUX_TOPO_FILE, cached per process). A topology
// file the user named but that cannot be used is an error; a discovery that
// fails on its own only costs the placement hints. Returns the nearest
// NIC's kernel interface name ("" when unknown).
Result<std::string> locate_in_topology(int rank, RankInfo* mine) {
  Result<topo::System> sys = topo::load_system();
  if (!sys.ok()) {
    if (!config().topo_file.empty()) return Status(sys.status()).prepend("topology: ");
    CFX_WARN(kTopo, "topology discovery failed (%s); ranks are placed without NUMA/NIC hints",
             sys.status().message().c_str());
    return std::string();
  }
  topo::Placement place = topo::place_this_process(sys.value(), rank);
  mine->numa_node = place.numa;
  std::snprintf(mine->topo_nic, sizeof mine->topo_nic, "%s", place.nic.name.c_str());
  return place.nic.ifname.empty() ? place.nic.name : place.nic.ifname;
}

}  // namespace

Result<std::unique_ptr<cfxComm>> cfxComm::create(int nranks, int rank, const UniqueIdData& id) {
  std::unique_ptr<cfxComm> comm(new cfxComm());
  Status st = comm->init(nranks, rank, id);
  if (!st.ok()) return st.prepend("rank " + std::to_string(rank) + ": init: ");
  return comm;
}

Status cfxComm::init(int nranks, int rank, const UniqueIdData& id) {
  const Config& cfg = *cfg_;
  rank_ = rank;
  nranks_ = nranks;
  id_ = id;
  timeout_ms_ = cfg.timeout_ms;
  log::set_thread_rank(rank);
  Deadline deadline = deadline_after_ms(cfg.init_timeout_ms);

  CFX_ASSIGN_OR_RETURN(NetInterface route, choose_interface(cfg.socket_ifname, &id.root));

  RankInfo mine;
  mine.rank = rank;
  mine.pid = static_cast<int32_t>(getpid());
  mine.pid_start_time = process_start_time(mine.pid);
  std::string hostname;
  mine.host_hash = local_host_hash(&hostname);
  mine.tcp_channels = cfg.tcp_channels;
  const std::vector<int> cpus = topo::current_cpu_binding();
  mine.cpu_set_hash = cpu_set_hash(cpus);
  mine.cpu_set_size = static_cast<int32_t>(cpus.size());
  std::snprintf(mine.hostname, sizeof mine.hostname, "%s", hostname.c_str());
  TransportContext tctx;
  tctx.rank = rank;
  tctx.nranks = nranks;
  tctx.id = id;
  tctx.deadline = deadline;
  CFX_ASSIGN_OR_RETURN(tctx.nearest_ifname, locate_in_topology(rank, &mine));
  tctx.data = choose_data_interfaces(cfg.socket_ifname, route, tctx.nearest_ifname, list_interfaces());
  CFX_ASSIGN_OR_RETURN(transports_, make_transports(cfg, tctx));
  for (auto& t : transports_) CFX_RETURN_IF_ERROR(t->publish(&mine).prepend(std::string(t->name()) + ": "));

  CFX_ASSIGN_OR_RETURN(table_, bootstrap_exchange(id, rank, nranks, mine, deadline));
  // Every rank must open (and expect) as many connections per peer.
  tcp_channels_ = cfg.tcp_channels;
  for (const RankInfo& r : table_) tcp_channels_ = std::clamp(r.tcp_channels, 1, tcp_channels_);
  if (tcp_channels_ != cfg.tcp_channels)
    CFX_WARN(kInit, "CONFLUX_TCP_CHANNELS differs between ranks: using %d (this rank asked for %d)", tcp_channels_,
             cfg.tcp_channels);

  // More ranks on our cores than there are cores: a rank that spins holds
  // the core the rank it waits for needs (4 ranks on 2 cores over TCP took
  // 2.2 ms for a 1 KiB AllReduce with 2000 polls, 70-120 us without); it
  // goes straight to yielding, then sleeping. Counted by CPU set, not by
  // hostname: containers or network namespaces on one machine share its
  // cores, while ranks bound to a core each (mpirun --bind-to core) do not
  // compete at all.
  const CoreSharing cs =
      core_sharing(table_, mine, static_cast<int>(std::max(1u, std::thread::hardware_concurrency())));
  spin_iterations_ = cs.oversubscribed() ? 0 : cfg.spin_iterations;
  yield_while_waiting_ = !cs.own_core;
  if (cs.oversubscribed())
    CFX_INFO(kInit, "%d ranks compete for this rank's %d core(s): waiting ranks yield almost at once", cs.sharing,
             cs.cores);
  else if (cs.own_core)
    CFX_INFO(kInit, "every rank has a core of its own: a waiting rank spins without yielding, then sleeps");

  CFX_RETURN_IF_ERROR(connect_peers(mine));
  exec_context_base_ = exec_context();
  if (cfg.channel_min_bytes >= 0 && links_.by_channel.size() > 1) {
    channel_min_bytes_ = static_cast<size_t>(cfg.channel_min_bytes);
    CFX_INFO(kInit, "calls of >= %lld bytes split over %d TCP channels (CONFLUX_CHANNEL_MIN_BYTES)",
             static_cast<long long>(cfg.channel_min_bytes), tcp_channels_);
  }
  p2p_send_seq_.assign(nranks, 0);
  p2p_recv_seq_.assign(nranks, 0);
  build_ring();

  // Everyone has opened everyone's segment once this barrier passes, so the
  // names can go: nothing is left in /dev/shm if a process dies later.
  OpDesc barrier;
  barrier.coll = Coll::kBarrier;
  std::vector<OpDesc> ops{barrier};
  int64_t saved = timeout_ms_.exchange(cfg.init_timeout_ms);
  Status st = run(ops);
  timeout_ms_ = saved;
  coll_seq_ = 0;  // the caller's first call is #1
  CFX_RETURN_IF_ERROR(st);
  for (auto& t : transports_) t->connected();
  log_init_summary();
  return Status::Ok();
}

Status cfxComm::connect_peers(const RankInfo& mine) {
  const Config& cfg = *cfg_;
  // Each peer takes the first transport, in preference order, that reaches it.
  std::vector<ConnectPlan> plans(transports_.size());
  bool any_network = false;
  for (ConnectPlan& plan : plans) {
    plan.table = table_;
    plan.mine.assign(static_cast<size_t>(nranks_), false);
    plan.channels = tcp_channels_;
  }
  for (int p = 0; p < nranks_; ++p) {
    if (p == rank_) continue;
    size_t k = 0;
    while (k < transports_.size() && !transports_[k]->reaches(mine, table_[p])) ++k;
    if (k == transports_.size()) {
      if (cfg.transport == TransportChoice::kShm)
        return invalid_usage("CONFLUX_TRANSPORT=shm but rank " + std::to_string(p) + " is on another host (" +
                             table_[p].hostname + ")");
      return invalid_usage("no transport of this rank (CONFLUX_TRANSPORT=" + std::string(transport_name(cfg.transport)) +
                           ") reaches rank " + std::to_string(p) + " on " + table_[p].hostname +
                           " (is CONFLUX_TRANSPORT the same on every rank?)");
    }
    plans[k].mine[p] = true;
    any_network = any_network || std::string(transports_[k]->name()) != "shm";
  }
  for (size_t k = 0; k < transports_.size(); ++k) {
    plans[k].any_network_peer = any_network;
    if (std::none_of(plans[k].mine.begin(), plans[k].mine.end(), [](bool b) { return b; })) continue;
    CFX_RETURN_IF_ERROR(transports_[k]->connect(plans[k], &links_).prepend(std::string(transports_[k]->name()) + ": "));
    if (waiter_ == nullptr) waiter_ = transports_[k]->waiter();
    if (peer_memory_ == nullptr && transports_[k]->peer_memory() != nullptr) {
      peer_memory_ = transports_[k]->peer_memory();
      reads_peer_buffers_ = transports_[k]->reads_peer_buffers();
    }
  }
  links_.at(0, nranks_ - 1);  // a row for every peer
  link_ptrs_.assign(static_cast<size_t>(nranks_), nullptr);
  for (int p = 0; p < nranks_; ++p) link_ptrs_[p] = links_.at(0, p).get();
  channel_link_ptrs_.clear();
  for (size_t c = 1; c < links_.by_channel.size(); ++c) {
    std::vector<Link*> row(static_cast<size_t>(nranks_), nullptr);
    for (int p = 0; p < nranks_; ++p) row[p] = links_.at(static_cast<int>(c), p).get();
    channel_link_ptrs_.push_back(std::move(row));
  }
  for (auto& row : links_.by_channel)
    for (auto& link : row) {
      if (link == nullptr) continue;
      const Link::NoticeCheck check = link->notice_check();
      if (check.word != nullptr) notice_words_.emplace_back(check.word, link.get());
      else if (check.call) notice_links_.push_back(link.get());
    }
  return Status::Ok();
}

void cfxComm::build_ring() {
  // Ranks of one host stay contiguous (ordered by NUMA node, then NIC), so
  // the ring crosses each inter-host link once in each direction; hosts
  // enter on different NICs so cross-host edges spread over the rails.
  std::vector<topo::RankLocation> where(nranks_);
  for (int r = 0; r < nranks_; ++r)
    where[r] = {host_label(table_[r]), table_[r].numa_node,
                table_[r].topo_nic[0] != '\0' ? table_[r].topo_nic : table_[r].nic};
  ring_ = topo::order_ring(where);
}

std::string cfxComm::link_kind(int peer) const {
  if (peer == rank_) return "self";
  return link_ptrs_[peer] ? link_ptrs_[peer]->kind() : "none";
}

void cfxComm::log_init_summary() const {
  if (!log::enabled(log::Level::kInfo, log::kInit)) return;
  if (rank_ == 0) {
    CFX_INFO(kInit, "conflux %d.%d.%d: communicator %016llx with %d ranks", CFX_MAJOR, CFX_MINOR, CFX_PATCH,
             static_cast<unsigned long long>(id_.comm_id), nranks_);
    for (int r = 0; r < nranks_; ++r)
      CFX_INFO(kInit, "rank %d: host %s pid %d numa %d nic %s (nearest by topology: %s)", r, table_[r].hostname,
               table_[r].pid, table_[r].numa_node, table_[r].nic, table_[r].topo_nic[0] ? table_[r].topo_nic : "none");
    std::string ring;
    for (int r : ring_) ring += (ring.empty() ? "" : " -> ") + std::to_string(r);
    CFX_INFO(kInit, "ring order: %s", ring.c_str());
  }
  std::string links;
  for (int p = 0; p < nranks_; ++p)
    if (p != rank_) links += (links.empty() ? "" : ", ") + std::to_string(p) + ":" + link_kind(p);
  CFX_INFO(kInit, "transport per peer: %s", links.empty() ? "(none)" : links.c_str());
  if (peer_memory_ != nullptr)
    CFX_INFO(kInit, "one-sided access to same-host peers: staging %zu bytes, %s", peer_memory_->staging_bytes(),
             reads_peer_buffers_ ? "process_vm_readv works" : "process_vm_readv refused (mapped buffers only)");
  if (!channel_link_ptrs_.empty()) CFX_INFO(kInit, "%d TCP connections per TCP peer (CONFLUX_TCP_CHANNELS)", tcp_channels_);
}

cfxComm::~cfxComm() {
  {
    std::lock_guard lock(queue_mutex_);
    stopping_ = true;
  }
  queue_cv_.notify_all();
  if (worker_.joinable()) worker_.join();
  // Let every completed send reach its peer before the connections close
  // (Link::begin_close says why), all links at once under one deadline. A
  // peer that takes none of it for that long is treated as silent, like the
  // heartbeat check does. An aborted or failed communicator abandons its
  // data and closes at once.
  if (abort_.load() || !broken_.ok()) return;
  (void)for_each_link([](conflux::Link& l) {
    l.begin_close();
    return conflux::Status::Ok();
  });
  const int64_t linger_ms = cfg_->heartbeat_timeout_ms > 0 ? cfg_->heartbeat_timeout_ms : 10000;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(linger_ms);
  (void)for_each_link([&](conflux::Link& l) {
    l.finish_close(deadline);
    return conflux::Status::Ok();
  });
}
