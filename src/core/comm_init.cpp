// Communicator set-up: rendezvous, then one link per peer (shared memory on
// the same host, TCP otherwise), then a barrier over the new links.
#include "algo/algorithms.h"
#include "bootstrap/auth.h"
#include "bootstrap/bootstrap.h"
#include "bootstrap/interfaces.h"
#include "core/comm.h"
#include "core/config.h"
#include "core/log.h"
#include "exec/executor.h"
#include "topo/load_system.h"
#include "topo/plan.h"
#include "transport/shm/shm_link.h"
#include "transport/tcp/tcp_link.h"
#ifdef CONFLUX_HAVE_OFI
#include "transport/ofi/ofi_setup.h"  // ofi hook
#endif

#include <thread>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <thread>

using namespace conflux;

namespace {

constexpr int64_t kPeerHandshakeMs = 5000;

struct PeerHello {
  uint64_t comm_id;
  int32_t rank;
  int32_t channel;  // which of CONFLUX_TCP_CHANNELS connections this is
};

int open_pidfd(int pid) {
#ifdef SYS_pidfd_open
  return static_cast<int>(syscall(SYS_pidfd_open, pid, 0));
#else
  return -1;
#endif
}

}  // namespace

// This rank's NUMA node and nearest NIC from the topology model (hwloc
// discovery fused with CONFLUX_TOPO_FILE, cached per process). A topology
// file the user named but that cannot be used is an error; a discovery that
// fails on its own only costs the placement hints.
// Returns the nearest NIC's kernel interface name ("" when unknown).
// A host's name for logs and grouping: the hostname, made unique by a few
// digits of the host hash (containers may share a hostname).
static std::string host_label(const RankInfo& r) {
  char tag[8];
  std::snprintf(tag, sizeof tag, "%04x", static_cast<unsigned>(r.host_hash & 0xffff));
  return std::string(r.hostname) + "~" + tag;
}

static Result<std::string> locate_in_topology(int rank, RankInfo* mine) {
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

// The data listener: on the nearest NIC's address when it differs from the
// route to the rendezvous, then bound to the wildcard address so that the
// fallback address reaches it too.
static Result<Socket> listen_for_peers(const DataInterfaces& data, RankInfo* mine) {
  SockAddr bind_to = data.preferred.addr;
  if (data.has_fallback) {
    SockAddr any;
    any.storage.ss_family = static_cast<sa_family_t>(bind_to.family());
    any.len = bind_to.len;
    bind_to = any;
  }
  CFX_ASSIGN_OR_RETURN(Socket listener, Socket::listen_on(bind_to));
  CFX_ASSIGN_OR_RETURN(SockAddr bound, listener.local_addr());
  SockAddr advertised = data.preferred.addr;
  advertised.set_port(bound.port());
  std::memcpy(&mine->listen_addr, &advertised.storage, sizeof advertised.storage);
  mine->listen_len = advertised.len;
  std::snprintf(mine->nic, sizeof mine->nic, "%s", data.preferred.name.c_str());
  if (data.has_fallback) {
    SockAddr fallback = data.fallback.addr;
    fallback.set_port(bound.port());
    std::memcpy(&mine->fallback_addr, &fallback.storage, sizeof fallback.storage);
    mine->fallback_len = fallback.len;
  }
  return listener;
}

Result<std::unique_ptr<cfxComm>> cfxComm::create(int nranks, int rank, const UniqueIdData& id) {
  std::unique_ptr<cfxComm> comm(new cfxComm());
  Status st = comm->init(nranks, rank, id);
  if (!st.ok()) return st.prepend("rank " + std::to_string(rank) + ": init: ");
  return comm;
}

Status cfxComm::init(int nranks, int rank, const UniqueIdData& id) {
  const Config& cfg = config();
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
  CFX_ASSIGN_OR_RETURN(std::string nearest, locate_in_topology(rank, &mine));
  const DataInterfaces data = choose_data_interfaces(cfg.socket_ifname, route, nearest, list_interfaces());
  CFX_ASSIGN_OR_RETURN(Socket listener, listen_for_peers(data, &mine));
  CFX_INFO(kNet, "rank %d: TCP data on %s %s (%s)", rank, data.preferred.name.c_str(),
           SockAddr(data.preferred.addr).str().c_str(), data.why.c_str());

  // Forcing a network transport (tcp, ofi) means every peer uses it, same host or not.
  const bool shm_allowed = cfg.transport != TransportChoice::kTcp && cfg.transport != TransportChoice::kOfi && nranks > 1;
  if (shm_allowed) {
    // Rings for every channel this rank may use: multi-channel schedules
    // cross same-host peers too (hier), and channels sharing one ring would
    // run one after another.
    ShmSegment::Layout layout{nranks, cfg.shm_slots, cfg.shm_slot_bytes, cfg.tcp_channels};
    char name[48];
    std::snprintf(name, sizeof name, "/cfx-%016llx-%d-%d", static_cast<unsigned long long>(id.comm_id), rank,
                  mine.pid);
    CFX_ASSIGN_OR_RETURN(my_segment_, ShmSegment::create(name, layout));
    std::snprintf(mine.shm_name, sizeof mine.shm_name, "%s", name);
    mine.shm_bytes = layout.total_bytes();
    shm_waiter_ = std::make_unique<ShmWaiter>(my_segment_.doorbell());
  }

  // ofi hook (issue 7): the endpoint opens before the exchange, its address travels in RankInfo.
#ifdef CONFLUX_HAVE_OFI
  std::shared_ptr<OfiFabric> ofi;
  if (cfg.transport == TransportChoice::kOfi) {
    CFX_ASSIGN_OR_RETURN(ofi, ofi_open_endpoint(&mine, data.preferred.name, nearest));
  }
#else
  if (cfg.transport == TransportChoice::kOfi)
    return invalid_usage("CONFLUX_TRANSPORT=ofi: this conflux was built without libfabric (libfabric-dev not found)");
#endif
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
  int sharing = 0;
  for (const RankInfo& r : table_) sharing += r.cpu_set_hash == mine.cpu_set_hash;
  const int cores = mine.cpu_set_size > 0 ? mine.cpu_set_size : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  const bool oversubscribed = sharing > cores;
  spin_iterations_ = oversubscribed ? 0 : cfg.spin_iterations;
  if (oversubscribed)
    CFX_INFO(kInit, "%d ranks compete for this rank's %d core(s): waiting ranks yield almost at once", sharing, cores);

  links_.resize(nranks);
  peer_segments_.resize(nranks);
  std::vector<bool> use_shm(nranks, false), use_tcp(nranks, false);
  for (int p = 0; p < nranks; ++p) {
    if (p == rank) continue;
    bool same_host = table_[p].host_hash == mine.host_hash;
    if (shm_allowed && same_host && table_[p].shm_bytes > 0) {
      use_shm[p] = true;
    } else if (cfg.transport == TransportChoice::kShm) {
      return invalid_usage("CONFLUX_TRANSPORT=shm but rank " + std::to_string(p) + " is on another host (" +
                           table_[p].hostname + ")");
    } else {
      use_tcp[p] = true;
    }
  }
#ifdef CONFLUX_HAVE_OFI  // ofi hook: every peer, same host or not
  if (ofi) CFX_RETURN_IF_ERROR(ofi_connect_peers(ofi, table_, rank, id.comm_id, &links_, &use_shm, &use_tcp));
#endif
  CFX_RETURN_IF_ERROR(open_shm_peers(use_shm, std::any_of(use_tcp.begin(), use_tcp.end(), [](bool b) { return b; })));
  CFX_RETURN_IF_ERROR(connect_tcp_peers(listener, use_tcp, deadline));
  if (std::none_of(use_shm.begin(), use_shm.end(), [](bool b) { return b; })) shm_waiter_.reset();
  link_ptrs_.resize(nranks);
  for (int p = 0; p < nranks; ++p) link_ptrs_[p] = links_[p].get();
  channel_link_ptrs_.assign(channel_links_.size(), std::vector<Link*>(nranks, nullptr));
  for (size_t c = 0; c < channel_links_.size(); ++c)
    for (int p = 0; p < nranks; ++p) channel_link_ptrs_[c][p] = channel_links_[c][p].get();
  if (!channel_links_.empty() && cfg.channel_min_bytes >= 0) {
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
  coll_seq_ = 0;
  CFX_RETURN_IF_ERROR(st);
  my_segment_.unlink();
  bool single_host = std::all_of(table_.begin(), table_.end(),
                                 [&](const RankInfo& r) { return r.host_hash == mine.host_hash; });
  if (single_host && shm_allowed && cfg.shm_collectives) {
    CFX_ASSIGN_OR_RETURN(shm_coll_, ShmCollectives::create(*this));
  }
  log_init_summary();
  return Status::Ok();
}

Status cfxComm::open_shm_peers(const std::vector<bool>& shm_peer, bool any_tcp_peer) {
  // Channels matter only where TCP peers exist (a split needs channel links
  // to a TCP peer); then same-host peers get a link per channel as well.
  const int channels = any_tcp_peer ? tcp_channels_ : 1;
  for (int p = 0; p < nranks_; ++p) {
    if (!shm_peer[p]) continue;
    CFX_ASSIGN_OR_RETURN(peer_segments_[p], ShmSegment::open(table_[p].shm_name, table_[p].shm_bytes));
    for (int c = 0; c < channels; ++c)
      channel_link_slot(p, c) = std::make_unique<ShmLink>(my_segment_, peer_segments_[p], rank_, p, table_[p].pid,
                                                          open_pidfd(table_[p].pid), c);
  }
  return Status::Ok();
}

// Peer p listens on its nearest NIC and on its route to the rendezvous:
// try the NIC briefly (it may not be reachable from this host: another
// network, a firewall), then the fallback. *addr ends as the one used.
Result<Socket> cfxComm::connect_nearest_or_fallback(int p, SockAddr* addr, Deadline deadline) {
  constexpr int kNearestTryMs = 2000;
  auto s = Socket::connect_to(*addr, std::min(deadline, deadline_after_ms(kNearestTryMs)));
  if (s.ok()) {
    CFX_INFO(kNet, "rank %d -> rank %d: via %s (its nearest NIC %s)", rank_, p, addr->str().c_str(), table_[p].nic);
    return s;
  }
  SockAddr fallback;
  std::memcpy(&fallback.storage, &table_[p].fallback_addr, sizeof fallback.storage);
  fallback.len = table_[p].fallback_len;
  CFX_WARN(kNet, "rank %d's nearest-NIC address %s is unreachable from rank %d (%s); using %s", p,
           addr->str().c_str(), rank_, s.status().message().c_str(), fallback.str().c_str());
  *addr = fallback;
  return Socket::connect_to(fallback, deadline);
}

std::unique_ptr<Link>& cfxComm::channel_link_slot(int peer, int channel) {
  if (channel == 0) return links_[peer];
  if (channel_links_.size() < static_cast<size_t>(tcp_channels_ - 1))
    channel_links_.resize(static_cast<size_t>(tcp_channels_ - 1));
  auto& row = channel_links_[channel - 1];
  if (row.empty()) row.resize(static_cast<size_t>(nranks_));
  return row[peer];
}

Status cfxComm::connect_tcp_peers(const Socket& listener, const std::vector<bool>& tcp_peer, Deadline deadline) {
  const Config& cfg = config();
  // Lower ranks accept, higher ranks connect: connections only go downward,
  // so the chain of waits always ends at rank 0 and cannot cycle.
  int expected_accepts = 0;
  for (int p = 0; p < nranks_; ++p) {
    if (!tcp_peer[p]) continue;
    if (p > rank_) {
      expected_accepts += tcp_channels_;
      continue;
    }
    SockAddr addr;
    std::memcpy(&addr.storage, &table_[p].listen_addr, sizeof addr.storage);
    addr.len = table_[p].listen_len;
    auto where = [&] { return "connecting to rank " + std::to_string(p) + " at " + addr.str() + ": "; };
    for (int channel = 0; channel < tcp_channels_; ++channel) {
      // The first connection settles which of p's addresses works.
      Result<Socket> s = table_[p].fallback_len == 0 || channel > 0 ? Socket::connect_to(addr, deadline)
                                                                    : connect_nearest_or_fallback(p, &addr, deadline);
      if (!s.ok()) return Status(s.status()).prepend(where());
      CFX_RETURN_IF_ERROR(authenticate_as_client(*s, id_.secret, ConnKind::kPeer, deadline).prepend(where()));
      PeerHello hello{id_.comm_id, rank_, channel};
      CFX_RETURN_IF_ERROR(s->send_all(&hello, sizeof hello, deadline).prepend(where()));
      s->tune_for_bulk(cfg.tcp_buffer_bytes);
      channel_link_slot(p, channel) = std::make_unique<TcpLink>(std::move(s).value(), p, 256 * 1024);
    }
  }
  while (expected_accepts > 0) {
    SockAddr from;
    auto s = listener.accept_one(deadline, &from);
    if (!s.ok()) {
      std::string missing;
      for (int p = rank_ + 1; p < nranks_; ++p)
        for (int channel = 0; channel < tcp_channels_; ++channel)
          if (tcp_peer[p] && !channel_link_slot(p, channel)) {
            missing += (missing.empty() ? "" : ",") + std::to_string(p);
            break;
          }
      return timeout_error("waiting for TCP connections from ranks " + missing);
    }
    Deadline hs = std::min(deadline, deadline_after_ms(kPeerHandshakeMs));
    Status st = authenticate_as_server(*s, id_.secret, ConnKind::kPeer, hs);
    PeerHello hello{};
    if (st.ok()) st = s->recv_all(&hello, sizeof hello, hs);
    if (st.ok() && hello.comm_id != id_.comm_id) st = remote_error("connection is for another communicator");
    if (st.ok() && (hello.rank <= rank_ || hello.rank >= nranks_ || !tcp_peer[hello.rank] || hello.channel < 0 ||
                    hello.channel >= tcp_channels_ || channel_link_slot(hello.rank, hello.channel)))
      st = remote_error("unexpected rank " + std::to_string(hello.rank) + " channel " + std::to_string(hello.channel));
    if (!st.ok()) {
      CFX_WARN(kNet, "dropped connection from %s: %s", from.str().c_str(), st.message().c_str());
      continue;
    }
    s->tune_for_bulk(cfg.tcp_buffer_bytes);
    channel_link_slot(hello.rank, hello.channel) = std::make_unique<TcpLink>(std::move(s).value(), hello.rank, 256 * 1024);
    --expected_accepts;
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
  return links_[peer] ? links_[peer]->kind() : "none";
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
  if (!channel_links_.empty()) CFX_INFO(kInit, "%d TCP connections per TCP peer (CONFLUX_TCP_CHANNELS)", tcp_channels_);
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
  const int64_t linger_ms = config().heartbeat_timeout_ms > 0 ? config().heartbeat_timeout_ms : 10000;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(linger_ms);
  (void)for_each_link([&](conflux::Link& l) {
    l.finish_close(deadline);
    return conflux::Status::Ok();
  });
}
