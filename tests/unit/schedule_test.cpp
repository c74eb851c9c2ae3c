// Pure rank math of the schedules: partitions, chunking, and that every
// message a rank sends is received by its peer in the same order with the
// same size, for every algorithm, rank count and count.
#include "algo/algorithms.h"

#include <gtest/gtest.h>

#include <map>

namespace conflux::algo {
namespace {

TEST(Partition, CoversTheRangeInOrder) {
  for (size_t count : {0, 1, 7, 8, 1031}) {
    for (int parts = 1; parts <= 9; ++parts) {
      size_t next = 0;
      for (int i = 0; i < parts; ++i) {
        EXPECT_EQ(part_begin(count, parts, i), next);
        next += part_size(count, parts, i);
      }
      EXPECT_EQ(next, count);
    }
  }
}

TEST(Chunking, ElementAlignedAndComplete) {
  Slice s{kRecvBuf, 12, 4 * 1031};
  size_t n = chunk_count(s.bytes, 4, 256);
  EXPECT_EQ(n, (4 * 1031 + 255) / 256);
  size_t off = s.offset;
  for (size_t c = 0; c < n; ++c) {
    Slice k = chunk_of(s, 4, n, c);
    EXPECT_EQ(k.offset, off);
    EXPECT_EQ(k.bytes % 4, 0u);
    EXPECT_LE(k.bytes, 256u);
    off += k.bytes;
  }
  EXPECT_EQ(off, s.offset + s.bytes);
  EXPECT_EQ(chunk_count(0, 4, 256), 1u);
  EXPECT_EQ(chunk_count(8, 8, 3), 1u);  // a chunk is never below one element
}

// For each directed pair, the sizes of messages sent must equal, in order,
// the sizes the receiver expects.
void expect_matched(Coll coll, int n, size_t count, int root) {
  std::map<std::pair<int, int>, std::vector<size_t>> sent, expected;
  for (int r = 0; r < n; ++r) {
    CollArgs a;
    a.coll = coll;
    a.nranks = n;
    a.rank = r;
    a.count = count;
    a.elem = 4;
    a.root = root;
    a.chunk_bytes = 64;
    Schedule s;
    switch (coll) {
      case Coll::kAllReduce: s = ring_allreduce(a); break;
      case Coll::kAllGather: s = ring_allgather(a); break;
      case Coll::kReduceScatter: s = ring_reducescatter(a); break;
      case Coll::kBroadcast: s = chain_broadcast(a); break;
      case Coll::kReduce: s = chain_reduce(a); break;
      case Coll::kAlltoAll: s = pairwise_alltoall(a); break;
      case Coll::kGather: s = linear_gather(a); break;
      case Coll::kScatter: s = linear_scatter(a); break;
      default: s = dissemination_barrier(a); break;
    }
    for (size_t i = 0; i < s.steps.size(); ++i) {
      const Step& st = s.steps[i];
      for (uint32_t k = 0; k < st.dep_count; ++k) EXPECT_LT(s.deps[st.dep_begin + k], i) << "deps point backwards";
      if (st.kind == StepKind::kSend) sent[{r, st.peer}].push_back(st.src.bytes);
      if (st.kind == StepKind::kRecv || st.kind == StepKind::kRecvReduce) expected[{st.peer, r}].push_back(st.dst.bytes);
    }
  }
  EXPECT_EQ(sent, expected) << coll_name(coll) << " n=" << n << " count=" << count;
}

TEST(Schedules, EverySendHasAMatchingReceive) {
  for (Coll c : {Coll::kAllReduce, Coll::kAllGather, Coll::kReduceScatter, Coll::kBroadcast, Coll::kReduce,
                 Coll::kAlltoAll, Coll::kGather, Coll::kScatter, Coll::kBarrier})
    for (int n = 1; n <= 9; ++n)
      for (size_t count : {0, 1, 7, 64, 1031}) expect_matched(c, n, count, n / 2);
}

}  // namespace
}  // namespace conflux::algo
