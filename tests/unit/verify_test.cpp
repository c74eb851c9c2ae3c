// The symbolic verifier catches what it claims to (each check has a broken
// schedule it must reject), and the library's algorithms pass it.
#include "sim/verify.h"

#include <gtest/gtest.h>

namespace conflux::sim {
namespace {

using algo::CollArgs;
using algo::kRecvBuf;
using algo::kScratch;
using algo::kSendBuf;
using algo::Schedule;

CollArgs args_for(Coll coll, int n, size_t count) {
  CollArgs a;
  a.coll = coll;
  a.nranks = n;
  a.count = count;
  a.elem = 4;
  a.chunk_bytes = 8;
  return a;
}

TEST(Verifier, AcceptsTheRingAllReduce) {
  VerifyResult v = verify(args_for(Coll::kAllReduce, 5, 11), algo::ring_allreduce);
  EXPECT_TRUE(v.ok) << v.error;
  EXPECT_GT(v.messages, 0u);
}

// The bug we shipped once: each dissemination round's send waited only for
// the previous receive, so a rank could leave before everyone arrived.
Schedule barrier_without_chain(const CollArgs& a) {
  Schedule s;
  int prev_recv = -1;
  for (int d = 1; d < a.nranks; d <<= 1) {
    s.send((a.rank + d) % a.nranks, {kScratch, 0, 0}, {prev_recv});
    prev_recv = s.recv((a.rank - d + a.nranks) % a.nranks, {kScratch, 0, 0});
  }
  return s;
}

TEST(Verifier, CatchesABarrierThatLetsARankLeaveEarly) {
  VerifyResult v = verify(args_for(Coll::kBarrier, 8, 0), barrier_without_chain);
  EXPECT_FALSE(v.ok);
  EXPECT_NE(v.error.find("barrier"), std::string::npos) << v.error;
  VerifyResult good = verify(args_for(Coll::kBarrier, 5, 0), algo::dissemination_barrier);
  EXPECT_TRUE(good.ok) << good.error;
}

// AllReduce of 2 ranks where the receive into recvbuf does not wait for the
// send that reads recvbuf: a write-after-read race.
Schedule racy_pair(const CollArgs& a) {
  Schedule s;
  size_t b = a.count * a.elem;
  int c = s.copy({kSendBuf, 0, b}, {kRecvBuf, 0, b});
  s.send(1 - a.rank, {kRecvBuf, 0, b}, {c});
  s.recv_reduce(1 - a.rank, {kRecvBuf, 0, b}, {kSendBuf, 0, b}, {c});
  return s;
}

TEST(Verifier, CatchesAReceiveOverwritingWhatAPendingSendReads) {
  VerifyResult v = verify(args_for(Coll::kAllReduce, 2, 3), racy_pair);
  EXPECT_FALSE(v.ok);
  EXPECT_NE(v.error.find("race"), std::string::npos) << v.error;
}

Schedule double_count(const CollArgs& a) {
  Schedule s;
  size_t b = a.count * a.elem;
  int c = s.copy({kSendBuf, 0, b}, {kRecvBuf, 0, b});
  int got = s.recv_reduce(1 - a.rank, {kRecvBuf, 0, b}, {kRecvBuf, 0, b}, {c});
  s.send(1 - a.rank, {kSendBuf, 0, b});
  s.recv_reduce(1 - a.rank, {kRecvBuf, 0, b}, {kRecvBuf, 0, b}, {got});
  s.send(1 - a.rank, {kSendBuf, 0, b});
  return s;
}

TEST(Verifier, CatchesAContributionCountedTwice) {
  VerifyResult v = verify(args_for(Coll::kAllReduce, 2, 3), double_count);
  EXPECT_FALSE(v.ok);
  EXPECT_NE(v.error.find("twice"), std::string::npos) << v.error;
}

Schedule size_mismatch(const CollArgs& a) {
  Schedule s;
  if (a.rank == 0) s.send(1, {kSendBuf, 0, a.elem});
  if (a.rank == 1) s.recv(0, {kRecvBuf, 0, 2 * a.elem});
  return s;
}

Schedule head_to_head(const CollArgs& a) {
  // Both ranks receive first and send only after: nobody ever sends. (Both
  // sending first and receiving after is a deadlock too: the verifier
  // assumes rendezvous sends, which no transport may be relied on to avoid.)
  Schedule s;
  size_t b = a.count * a.elem;
  int got = s.recv(1 - a.rank, {kRecvBuf, 0, b});
  s.send(1 - a.rank, {kSendBuf, 0, b}, {got});
  return s;
}

Schedule wrong_place(const CollArgs& a) {
  Schedule s;  // AllGather that puts the peer's block at our own index
  size_t b = a.count * a.elem;
  s.copy({kSendBuf, 0, b}, {kRecvBuf, (1 - a.rank) * b, b});
  s.send(1 - a.rank, {kSendBuf, 0, b});
  s.recv(1 - a.rank, {kRecvBuf, a.rank * b, b});
  return s;
}

Schedule writes_input(const CollArgs& a) {
  Schedule s;
  size_t b = a.count * a.elem;
  s.send(1 - a.rank, {kSendBuf, 0, b});
  int got = s.recv_reduce(1 - a.rank, {kSendBuf, 0, b}, {kSendBuf, 0, b});
  s.copy({kSendBuf, 0, b}, {kRecvBuf, 0, b}, {got});
  return s;
}

TEST(Verifier, CatchesMismatchDeadlockWrongPlacementAndInputWrites) {
  VerifyResult v = verify(args_for(Coll::kAllReduce, 2, 2), size_mismatch);
  EXPECT_NE(v.error.find("expects"), std::string::npos) << v.error;
  v = verify(args_for(Coll::kAllReduce, 2, 2), head_to_head);
  EXPECT_NE(v.error.find("deadlock"), std::string::npos) << v.error;
  v = verify(args_for(Coll::kAllGather, 2, 2), wrong_place);
  EXPECT_NE(v.error.find("expected"), std::string::npos) << v.error;
  v = verify(args_for(Coll::kAllReduce, 2, 2), writes_input);
  EXPECT_NE(v.error.find("send buffer"), std::string::npos) << v.error;
}

}  // namespace
}  // namespace conflux::sim
