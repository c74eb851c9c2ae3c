#include "transport/ofi/ofi_transport.h"

#include "core/config.h"
#include "core/log.h"
#include "transport/ofi/ofi_link.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>

namespace conflux {
namespace {

// Payload pieces: below max_msg_size, and small enough that a few in flight
// pipeline the provider's rendezvous and our reductions.
// CONFLUX_OFI_PIECE_SIZE overrides (tests force many pieces with tiny values).
size_t piece_bytes(const OfiFabric& fabric) {
  size_t piece = config().ofi_piece_bytes;
  if (fabric.max_msg_size() > 0) piece = std::min(piece, fabric.max_msg_size());
  return std::max<size_t>(16, piece / 16 * 16);  // whole elements of every datatype
}

// Payloads inlined in their header message; CONFLUX_OFI_INLINE lowers the
// limit (tests use it so small chunks take the multi-piece path too).
size_t inline_bytes() { return std::min(OfiLink::kInline, config().ofi_inline_bytes); }

}  // namespace

Status OfiTransport::publish(RankInfo* mine) {
  // Domain preference: the interface TCP data uses (the user's
  // CONFLUX_SOCKET_IFNAME, lo for a loopback rendezvous, else the nearest
  // NIC's interface), then the nearest NIC's device (an EFA device, say),
  // then the nearest NIC's interface.
  CFX_ASSIGN_OR_RETURN(fabric_, OfiFabric::open(cfg_.ofi_provider,
                                                {ctx_.data.preferred.name, mine->topo_nic, ctx_.nearest_ifname}));
  const std::string& name = fabric_->local_name();
  if (name.size() > sizeof mine->ofi_name)
    return internal_error("libfabric " + fabric_->provider() + " endpoint name has " + std::to_string(name.size()) +
                          " bytes, RankInfo holds " + std::to_string(sizeof mine->ofi_name));
  std::memcpy(mine->ofi_name, name.data(), name.size());
  mine->ofi_name_len = static_cast<uint32_t>(name.size());
  return Status::Ok();
}

Status OfiTransport::connect(const ConnectPlan& plan, LinkTable* links) {
  const int n = static_cast<int>(plan.table.size()), rank = ctx_.rank;
  if (n > kOfiNoticeSender)
    return invalid_usage("the ofi transport supports up to " + std::to_string(kOfiNoticeSender) + " ranks (tag layout)");
  const size_t piece = piece_bytes(*fabric_);
  const size_t inline_max = inline_bytes();
  for (int p = 0; p < n; ++p) {
    if (p == rank || !plan.mine[p]) continue;
    const RankInfo& info = plan.table[p];
    OfiPeer peer;
    peer.rank = p;
    CFX_ASSIGN_OR_RETURN(peer.addr, fabric_->insert_peer(std::string(info.ofi_name, info.ofi_name_len), p));
    peer.same_host = info.host_hash == plan.table[rank].host_hash;
    peer.pid = info.pid;
    peer.pid_start_time = info.pid_start_time;
    links->at(0, p) = std::make_unique<OfiLink>(fabric_, rank, peer, ctx_.id.comm_id, piece, inline_max);
  }
  CFX_INFO(kNet, "ofi links to %d peers over %s, pieces of %zu bytes, inline up to %zu", n - 1,
           fabric_->provider().c_str(), piece, inline_max);
  return Status::Ok();
}

}  // namespace conflux
