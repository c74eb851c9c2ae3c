// Schedule::Shape: what the executor derives once from a schedule and
// reuses call after call (the inverted dependencies, what is ready at the
// start, which peers one-sided steps reach), and when a schedule may run in
// schedule order without the dependency graph's bookkeeping.
#include "algo/algorithms.h"
#include "algo/channels.h"

#include <gtest/gtest.h>

#include <algorithm>

namespace conflux::algo {
namespace {

CollArgs args(Coll coll, int n, int rank, size_t count) {
  CollArgs a;
  a.coll = coll;
  a.nranks = n;
  a.rank = rank;
  a.count = count;
  a.elem = 4;
  a.root = n / 2;
  a.staging_bytes = 1 << 20;
  return a;
}

TEST(ScheduleShape, DependentsInvertTheDependencies) {
  for (Builder build : {ring_allreduce, rhd_allreduce, eager_allreduce, direct_allreduce, tree_broadcast})
    for (int n : {2, 3, 5, 8})
      for (int rank = 0; rank < n; ++rank) {
        const Schedule s = build(args(Coll::kAllReduce, n, rank, 1031));
        const Schedule::Shape& sh = s.shape();
        ASSERT_EQ(sh.dep_counts.size(), s.steps.size());
        ASSERT_EQ(sh.dependents.size(), s.deps.size());
        for (size_t i = 0; i < s.steps.size(); ++i) {
          const Step& st = s.steps[i];
          EXPECT_EQ(sh.dep_counts[i], st.dep_count);
          for (uint32_t k = 0; k < st.dep_count; ++k) {
            const uint32_t d = s.deps[st.dep_begin + k];
            const auto first = sh.dependents.begin() + sh.dependents_begin[d];
            const auto last = sh.dependents.begin() + sh.dependents_begin[d + 1];
            EXPECT_NE(std::find(first, last, static_cast<uint32_t>(i)), last) << s.algorithm << " step " << i;
          }
          const bool ready = st.dep_count == 0;
          auto listed = [&](const std::vector<int>& v) { return std::count(v.begin(), v.end(), static_cast<int>(i)); };
          EXPECT_EQ(listed(sh.ready_at_once), ready && runs_at_once(st.kind) ? 1 : 0);
          EXPECT_EQ(listed(sh.ready_waits), ready && st.kind == StepKind::kWait ? 1 : 0);
          EXPECT_EQ(listed(sh.link_steps), !runs_at_once(st.kind) && st.kind != StepKind::kWait ? 1 : 0);
          if (is_one_sided(st.kind) && st.peer >= 0) {
            EXPECT_TRUE(std::binary_search(sh.one_sided_peers.begin(), sh.one_sided_peers.end(), st.peer));
          }
        }
        EXPECT_TRUE(std::is_sorted(sh.link_steps.begin(), sh.link_steps.end()));
        EXPECT_TRUE(std::is_sorted(sh.ready_at_once.begin(), sh.ready_at_once.end()));
      }
}

TEST(ScheduleShape, EverySmallEagerScheduleRunsInOrder) {
  const std::pair<Coll, Builder> eager[] = {
      {Coll::kAllReduce, eager_allreduce}, {Coll::kReduceScatter, eager_reducescatter},
      {Coll::kReduce, eager_reduce},       {Coll::kAllGather, eager_allgather},
      {Coll::kBroadcast, eager_broadcast}, {Coll::kGather, eager_gather},
      {Coll::kScatter, eager_scatter},     {Coll::kAlltoAll, eager_alltoall}};
  for (const auto& [coll, build] : eager)
    for (int n = 2; n <= 8; ++n)
      for (int rank = 0; rank < n; ++rank)
        for (size_t count : {1, 7, 1031}) {
          const Schedule s = build(args(coll, n, rank, count));
          EXPECT_TRUE(s.shape().in_order) << coll_name(coll) << " n=" << n << " rank " << rank;
        }
}

TEST(ScheduleShape, LinksOrASecondRoundOfWaitsNeedTheGraph) {
  EXPECT_FALSE(ring_allreduce(args(Coll::kAllReduce, 4, 1, 1031)).shape().in_order);  // links
  // Signal, wait for rank 1, read it, then wait for rank 2: the read of
  // rank 1 need not wait for rank 2.
  Schedule rounds;
  const int sig = rounds.signal();
  const int w1 = rounds.wait(1, 1, {sig});
  rounds.read(1, {kSendBuf, 0, 8}, {kRecvBuf, 0, 8}, {w1});
  rounds.wait(2, 1, {sig});
  EXPECT_FALSE(rounds.shape().in_order);
}

TEST(ScheduleShape, AStepThatNeedNotWaitMustNotFollowAWait) {
  // The signal depends on nothing: in schedule order it would wait behind
  // the wait, and a peer waiting for it would never see it.
  Schedule late_signal;
  late_signal.wait(1, 1);
  late_signal.signal();
  EXPECT_FALSE(late_signal.shape().in_order);
  // The same signal after the wait, depending on it: exactly the order
  // the graph allows.
  Schedule after;
  const int w = after.wait(1, 1);
  after.signal({w});
  EXPECT_TRUE(after.shape().in_order);
}

TEST(ScheduleShape, StepsAfterTheWaitsThatDependOnEachOtherNeedTheGraph) {
  Schedule chained;
  const int sig = chained.signal();
  const int w = chained.wait(1, 1, {sig});
  const int r = chained.read(1, {kSendBuf, 0, 8}, {kScratch, 0, 8}, {w});
  chained.copy({kScratch, 0, 8}, {kRecvBuf, 0, 8}, {r});
  EXPECT_FALSE(chained.shape().in_order);
}

TEST(ScheduleShape, AppendingAfterReadingTheShapeDerivesItAgain) {
  Schedule s;
  s.copy({kSendBuf, 0, 8}, {kRecvBuf, 0, 8});
  EXPECT_FALSE(s.shape().one_sided);
  EXPECT_EQ(s.shape().ready_at_once.size(), 1u);
  s.read(3, {kStaging, 0, 8}, {kRecvBuf, 8, 8});
  EXPECT_TRUE(s.shape().one_sided);
  EXPECT_TRUE(s.shape().uses_staging);
  EXPECT_EQ(s.shape().staging_reach, 8u);
  EXPECT_EQ(s.shape().one_sided_peers, std::vector<int>{3});
  EXPECT_EQ(s.shape().ready_at_once.size(), 2u);
}

}  // namespace
}  // namespace conflux::algo
