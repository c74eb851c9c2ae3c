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

  bool is_p2p() const { return coll == Coll::kSend || coll == Coll::kRecv; }
};

}  // namespace conflux
