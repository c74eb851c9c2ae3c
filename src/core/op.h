// An operation as the API received it, validated, before an algorithm is
// chosen. Nonblocking calls keep a copy (AlltoAllv's arrays included).
#pragma once

#include "core/coll.h"

#include <vector>

namespace conflux {

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
  std::vector<size_t> all_sendcounts, all_sdispls;

  bool is_p2p() const { return coll == Coll::kSend || coll == Coll::kRecv; }
};

}  // namespace conflux
