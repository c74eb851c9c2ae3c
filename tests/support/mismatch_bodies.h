// Rank bodies for mismatched calls, shared by the transport tests (shm and
// TCP links, the shared-segment path, libfabric). Each returns "" when the
// rank saw what it must: an invalid-usage error that names both calls
// (Link::send_notice carries it to the ranks that could not see it).
#pragma once

#include "conflux/conflux.h"

#include <string>
#include <vector>

namespace conflux::test {

inline std::string expect_mismatch_error(cfxResult_t r, cfxComm_t comm, const char* call_a, const char* call_b) {
  if (r == cfxSuccess) return "mismatched call succeeded";
  std::string msg = cfxGetLastError(comm);
  if (r != cfxInvalidUsage) return "expected invalid usage, got " + std::string(cfxGetErrorString(r)) + ": " + msg;
  if (msg.find(call_a) == std::string::npos || msg.find(call_b) == std::string::npos)
    return "error does not name both calls (" + std::string(call_a) + ", " + call_b + "): " + msg;
  return "";
}

// Rank 0 calls AllReduce while the others call Broadcast: every rank fails,
// naming both calls, whichever side detected the mismatch.
inline std::string mismatch_on_every_rank(cfxComm_t comm, int rank, int) {
  std::vector<float> a(1000, 1), b(1000);
  cfxResult_t r = rank == 0 ? cfxAllReduce(a.data(), b.data(), a.size(), cfxFloat32, cfxSum, comm)
                            : cfxBroadcast(a.data(), b.data(), a.size(), cfxFloat32, 0, comm);
  return expect_mismatch_error(r, comm, "allreduce", "broadcast");
}

// Rank 0 sends 10 floats, rank 1 expects 20: only rank 1 can see it. Rank
// 0's send may complete (the bytes left), but its next call that waits on
// rank 1 must fail with rank 1's finding rather than hang or succeed.
inline std::string p2p_mismatch_reaches_the_sender(cfxComm_t comm, int rank, int) {
  std::vector<float> buf(20, 1);
  if (rank == 0) {
    cfxResult_t r = cfxSend(buf.data(), 10, cfxFloat32, 1, comm);
    if (r != cfxSuccess) return expect_mismatch_error(r, comm, "send", "recv");
    r = cfxRecv(buf.data(), 1, cfxFloat32, 1, comm);
    return expect_mismatch_error(r, comm, "send", "recv");
  }
  if (rank == 1) return expect_mismatch_error(cfxRecv(buf.data(), 20, cfxFloat32, 0, comm), comm, "send", "recv");
  return "";
}

}  // namespace conflux::test
