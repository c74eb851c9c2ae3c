// The hook cfxComm::init calls when CONFLUX_TRANSPORT=ofi (or CONFLUX_NET=ofi):
// open the endpoint before the bootstrap exchange (its address travels in
// RankInfo::ofi_name), then make an OfiLink to every peer, same host or not.
#pragma once

#include "bootstrap/rank_info.h"
#include "transport/ofi/ofi_fabric.h"
#include "transport/transport.h"

#include <memory>
#include <string>
#include <vector>

namespace conflux {

// Opens the provider named by CONFLUX_OFI_PROVIDER and writes our address
// into mine. Domain preference: the interface TCP data uses (data_ifname:
// the user's CONFLUX_SOCKET_IFNAME, lo for a loopback rendezvous, else the
// nearest NIC's interface), then the nearest NIC's device (mine->topo_nic,
// e.g. an EFA device), then nearest_ifname.
Result<std::shared_ptr<OfiFabric>> ofi_open_endpoint(RankInfo* mine, const std::string& data_ifname,
                                                     const std::string& nearest_ifname);

// Replaces every peer's link by an OfiLink (and clears use_shm/use_tcp for them).
Status ofi_connect_peers(const std::shared_ptr<OfiFabric>& fabric, const std::vector<RankInfo>& table, int rank,
                         uint64_t comm_id, std::vector<std::unique_ptr<Link>>* links, std::vector<bool>* use_shm,
                         std::vector<bool>* use_tcp);

}  // namespace conflux
