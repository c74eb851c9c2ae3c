// Rendezvous: every rank connects to the root (address in the unique id),
// proves the secret, and sends its RankInfo; once all have arrived the root
// sends the whole table back. The root runs in a thread of the process that
// called cfxGetUniqueId (or of rank 0 under cfxCommInitFromEnv) and exits
// when the table is out or its deadline passes.
#pragma once

#include "bootstrap/rank_info.h"
#include "bootstrap/unique_id.h"

#include <vector>

namespace conflux {

// Binds `bind_addr` (port 0 picks one), starts the root thread and returns
// the id describing it.
Result<UniqueIdData> start_bootstrap_root(const SockAddr& bind_addr, const Secret& secret,
                                          uint64_t comm_id, int64_t timeout_ms);

// Client side: returns all ranks' info, indexed by rank.
Result<std::vector<RankInfo>> bootstrap_exchange(const UniqueIdData& id, int rank, int nranks,
                                                 const RankInfo& mine, Deadline deadline);

}  // namespace conflux
