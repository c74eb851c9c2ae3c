#include "transport/tcp/tcp_transport.h"

#include "bootstrap/auth.h"
#include "core/log.h"
#include "transport/tcp/tcp_link.h"

#include <cstring>

namespace conflux {

namespace {

constexpr int64_t kPeerHandshakeMs = 5000;
constexpr size_t kBounceBytes = size_t{256} * 1024;

struct PeerHello {
  uint64_t comm_id;
  int32_t rank;
  int32_t channel;  // which of CONFLUX_TCP_CHANNELS connections this is
};

}  // namespace

// The listener is on the nearest NIC's address when it differs from the
// route to the rendezvous, then bound to the wildcard address so that the
// fallback address reaches it too.
Status TcpTransport::publish(RankInfo* mine) {
  const DataInterfaces& data = ctx_.data;
  SockAddr bind_to = data.preferred.addr;
  if (data.has_fallback) {
    SockAddr any;
    any.storage.ss_family = static_cast<sa_family_t>(bind_to.family());
    any.len = bind_to.len;
    bind_to = any;
  }
  CFX_ASSIGN_OR_RETURN(listener_, Socket::listen_on(bind_to));
  CFX_ASSIGN_OR_RETURN(SockAddr bound, listener_.local_addr());
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
  CFX_INFO(kNet, "rank %d: TCP data on %s %s (%s)", ctx_.rank, data.preferred.name.c_str(),
           SockAddr(data.preferred.addr).str().c_str(), data.why.c_str());
  return Status::Ok();
}

// The peer listens on its nearest NIC and on its route to the rendezvous:
// try the NIC briefly (it may not be reachable from this host: another
// network, a firewall), then the fallback. *addr ends as the one used.
Result<Socket> TcpTransport::connect_nearest_or_fallback(const RankInfo& peer, SockAddr* addr, Deadline deadline) {
  constexpr int kNearestTryMs = 2000;
  auto s = Socket::connect_to(*addr, std::min(deadline, deadline_after_ms(kNearestTryMs)));
  if (s.ok()) {
    CFX_INFO(kNet, "rank %d -> rank %d: via %s (its nearest NIC %s)", ctx_.rank, peer.rank, addr->str().c_str(),
             peer.nic);
    return s;
  }
  SockAddr fallback;
  std::memcpy(&fallback.storage, &peer.fallback_addr, sizeof fallback.storage);
  fallback.len = peer.fallback_len;
  CFX_WARN(kNet, "rank %d's nearest-NIC address %s is unreachable from rank %d (%s); using %s", peer.rank,
           addr->str().c_str(), ctx_.rank, s.status().message().c_str(), fallback.str().c_str());
  *addr = fallback;
  return Socket::connect_to(fallback, deadline);
}

Status TcpTransport::connect(const ConnectPlan& plan, LinkTable* links) {
  const int rank = ctx_.rank, nranks = static_cast<int>(plan.table.size()), channels = plan.channels;
  const Deadline deadline = ctx_.deadline;
  // Lower ranks accept, higher ranks connect: connections only go downward,
  // so the chain of waits always ends at rank 0 and cannot cycle.
  int expected_accepts = 0;
  for (int p = 0; p < nranks; ++p) {
    if (!plan.mine[p]) continue;
    if (p > rank) {
      expected_accepts += channels;
      continue;
    }
    const RankInfo& peer = plan.table[p];
    SockAddr addr;
    std::memcpy(&addr.storage, &peer.listen_addr, sizeof addr.storage);
    addr.len = peer.listen_len;
    auto where = [&] { return "connecting to rank " + std::to_string(p) + " at " + addr.str() + ": "; };
    for (int channel = 0; channel < channels; ++channel) {
      // The first connection settles which of p's addresses works.
      Result<Socket> s = peer.fallback_len == 0 || channel > 0 ? Socket::connect_to(addr, deadline)
                                                               : connect_nearest_or_fallback(peer, &addr, deadline);
      if (!s.ok()) return Status(s.status()).prepend(where());
      CFX_RETURN_IF_ERROR(authenticate_as_client(*s, ctx_.id.secret, ConnKind::kPeer, deadline).prepend(where()));
      PeerHello hello{ctx_.id.comm_id, rank, channel};
      CFX_RETURN_IF_ERROR(s->send_all(&hello, sizeof hello, deadline).prepend(where()));
      s->tune_for_bulk(cfg_.tcp_buffer_bytes);
      links->at(channel, p) = std::make_unique<TcpLink>(std::move(s).value(), p, kBounceBytes);
    }
  }
  while (expected_accepts > 0) {
    SockAddr from;
    auto s = listener_.accept_one(deadline, &from);
    if (!s.ok()) {
      std::string missing;
      for (int p = rank + 1; p < nranks; ++p)
        for (int channel = 0; channel < channels; ++channel)
          if (plan.mine[p] && !links->at(channel, p)) {
            missing += (missing.empty() ? "" : ",") + std::to_string(p);
            break;
          }
      return timeout_error("waiting for TCP connections from ranks " + missing);
    }
    Deadline hs = std::min(deadline, deadline_after_ms(kPeerHandshakeMs));
    Status st = authenticate_as_server(*s, ctx_.id.secret, ConnKind::kPeer, hs);
    PeerHello hello{};
    if (st.ok()) st = s->recv_all(&hello, sizeof hello, hs);
    if (st.ok() && hello.comm_id != ctx_.id.comm_id) st = remote_error("connection is for another communicator");
    if (st.ok() && (hello.rank <= rank || hello.rank >= nranks || !plan.mine[hello.rank] || hello.channel < 0 ||
                    hello.channel >= channels || links->at(hello.channel, hello.rank)))
      st = remote_error("unexpected rank " + std::to_string(hello.rank) + " channel " + std::to_string(hello.channel));
    if (!st.ok()) {
      CFX_WARN(kNet, "dropped connection from %s: %s", from.str().c_str(), st.message().c_str());
      continue;
    }
    s->tune_for_bulk(cfg_.tcp_buffer_bytes);
    links->at(hello.channel, hello.rank) = std::make_unique<TcpLink>(std::move(s).value(), hello.rank, kBounceBytes);
    --expected_accepts;
  }
  listener_ = Socket();
  return Status::Ok();
}

}  // namespace conflux
