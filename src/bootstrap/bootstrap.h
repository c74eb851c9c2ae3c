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

// What a rank sends the root after authenticating (fixed layout, same build).
constexpr uint32_t kRankHelloMagic = 0x43465848;  // "CFXH"
struct RankHello {
  uint32_t magic = kRankHelloMagic;
  int32_t rank = -1;
  int32_t nranks = 0;
  uint32_t info_size = sizeof(RankInfo);
  RankInfo info;
};

// The root's checks of one hello, kept free of sockets so they can be fuzzed
// (tests/fuzz/fuzz_bootstrap_hello.cpp). The first valid hello fixes nranks.
// Returns the rank to record (and its info, checked to be safe to read), or
// the error to send back to that client.
struct RootAdmission {
  int nranks = -1;
  std::vector<bool> joined;
};
Result<int> admit_hello(const RankHello& hello, RootAdmission& state, RankInfo* info_out);

// Binds `bind_addr` (port 0 picks one), starts the root thread and returns
// the id describing it.
Result<UniqueIdData> start_bootstrap_root(const SockAddr& bind_addr, const Secret& secret,
                                          uint64_t comm_id, int64_t timeout_ms);

// Client side: returns all ranks' info, indexed by rank.
Result<std::vector<RankInfo>> bootstrap_exchange(const UniqueIdData& id, int rank, int nranks,
                                                 const RankInfo& mine, Deadline deadline);

}  // namespace conflux
