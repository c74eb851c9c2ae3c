#include "transport/ofi/ofi_setup.h"

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

Result<std::shared_ptr<OfiFabric>> ofi_open_endpoint(RankInfo* mine, const std::string& data_ifname,
                                                     const std::string& nearest_ifname) {
  CFX_ASSIGN_OR_RETURN(std::shared_ptr<OfiFabric> fabric,
                       OfiFabric::open(config().ofi_provider, {data_ifname, mine->topo_nic, nearest_ifname}));
  const std::string& name = fabric->local_name();
  if (name.size() > sizeof mine->ofi_name)
    return internal_error("libfabric " + fabric->provider() + " endpoint name has " + std::to_string(name.size()) +
                          " bytes, RankInfo holds " + std::to_string(sizeof mine->ofi_name));
  std::memcpy(mine->ofi_name, name.data(), name.size());
  mine->ofi_name_len = static_cast<uint32_t>(name.size());
  return fabric;
}

Status ofi_connect_peers(const std::shared_ptr<OfiFabric>& fabric, const std::vector<RankInfo>& table, int rank,
                         uint64_t comm_id, std::vector<std::unique_ptr<Link>>* links, std::vector<bool>* use_shm,
                         std::vector<bool>* use_tcp) {
  const int n = static_cast<int>(table.size());
  if (n > kOfiNoticeSender)
    return invalid_usage("the ofi transport supports up to " + std::to_string(kOfiNoticeSender) + " ranks (tag layout)");
  const size_t piece = piece_bytes(*fabric);
  const size_t inline_max = inline_bytes();
  for (int p = 0; p < n; ++p) {
    if (p == rank) continue;
    if (table[p].ofi_name_len == 0)
      return invalid_usage("rank " + std::to_string(p) + " did not open a libfabric endpoint (is CONFLUX_TRANSPORT=ofi set on every rank?)");
    OfiPeer peer;
    peer.rank = p;
    CFX_ASSIGN_OR_RETURN(peer.addr, fabric->insert_peer(std::string(table[p].ofi_name, table[p].ofi_name_len), p));
    peer.same_host = table[p].host_hash == table[rank].host_hash;
    peer.pid = table[p].pid;
    peer.pid_start_time = table[p].pid_start_time;
    (*links)[p] = std::make_unique<OfiLink>(fabric, rank, peer, comm_id, piece, inline_max);
    (*use_shm)[p] = false;
    (*use_tcp)[p] = false;
  }
  CFX_INFO(kNet, "ofi links to %d peers over %s, pieces of %zu bytes, inline up to %zu", n - 1,
           fabric->provider().c_str(), piece, inline_max);
  return Status::Ok();
}

}  // namespace conflux
