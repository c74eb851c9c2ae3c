// An operation as the API received it, validated, before an algorithm is
// chosen. Nonblocking calls keep a copy (AlltoAllv's arrays included).
#pragma once

#include "core/coll.h"
#include "core/status.h"

#include <functional>
#include <memory>
#include <vector>

namespace conflux::algo {
struct Schedule;
}

namespace conflux {

// A dynamic AlltoAllv driven from inside the library (the MoE layer): each
// rank adds words of its own to the gathered counts, and `decide` sees
// every rank's words, and what this rank receives, before any data moves:
// it returns where to receive (elements), or an error every rank returns
// alike.
struct DynamicExchange {
  std::vector<uint64_t> extra;
  std::function<Result<void*>(const std::vector<uint64_t>& all_extra, size_t recv_elems)> decide;
};

struct OpDesc {
  Coll coll = Coll::kAllReduce;
  const void* sendbuf = nullptr;
  void* recvbuf = nullptr;
  size_t count = 0;
  cfxDataType_t dtype = cfxFloat32;
  cfxRedOp_t op = cfxSum;
  int root = 0;
  int peer = -1;
  std::vector<size_t> sendcounts, sdispls, recvcounts, rdispls;  // AlltoAllv

  // The dynamic AlltoAllv (cfxAlltoAllvDynamic): count is the receive
  // capacity in elements, the receive counts and displacements are outputs.
  bool dynamic = false;
  size_t* recvcounts_out = nullptr;
  size_t* rdispls_out = nullptr;
  // Its stages run as ordinary collectives signed as stages of the dynamic
  // call (1: the counts, 2: the data), so a peer in another call fails to
  // match them. Stage 2 knows every rank's counts and displacements.
  int stage = 0;
  std::vector<size_t> all_sendcounts, all_sdispls, all_rdispls;
  DynamicExchange* exchange = nullptr;  // a library-driven dynamic AlltoAllv

  // A schedule the library built for this call from what every rank knows
  // (the MoE layer's placed exchanges, algo::placed_writes/placed_reads):
  // run as it is, signed as an AlltoAllv stage, with these extents of the
  // send and receive buffers published to one-sided peers.
  std::shared_ptr<const algo::Schedule> schedule;
  size_t schedule_send_bytes = 0, schedule_recv_bytes = 0;

  bool is_p2p() const { return coll == Coll::kSend || coll == Coll::kRecv; }
};

}  // namespace conflux
