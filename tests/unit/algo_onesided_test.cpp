// The one-sided intra-host algorithms through the symbolic verifier: every
// n from 1 to 16 and a few larger, odd counts, in and out of place, tiny
// pieces; sequences of calls that share the staging halves; and, for each
// hazard one-sided access brings, a broken schedule the verifier rejects.
#include "algo/algorithms.h"
#include "sim/verify.h"

#include <gtest/gtest.h>

namespace conflux::algo {
namespace {

struct Algo {
  const char* name;
  Coll coll;
  Schedule (*build)(const CollArgs&);
};

const Algo kOneSided[] = {
    {"eager", Coll::kAllReduce, eager_allreduce},         {"direct", Coll::kAllReduce, direct_allreduce},
    {"eager", Coll::kReduceScatter, eager_reducescatter}, {"direct", Coll::kReduceScatter, direct_reducescatter},
    {"eager", Coll::kReduce, eager_reduce},               {"direct", Coll::kReduce, direct_reduce},
    {"eager", Coll::kAllGather, eager_allgather},         {"direct", Coll::kAllGather, direct_allgather},
    {"push", Coll::kAllGather, push_allgather},           {"eager", Coll::kBroadcast, eager_broadcast},
    {"direct", Coll::kBroadcast, direct_broadcast},       {"split", Coll::kBroadcast, split_broadcast},
    {"eager", Coll::kGather, eager_gather},               {"direct", Coll::kGather, direct_gather},
    {"eager", Coll::kScatter, eager_scatter},             {"direct", Coll::kScatter, direct_scatter},
    {"eager", Coll::kAlltoAll, eager_alltoall},           {"direct", Coll::kAlltoAll, direct_alltoall},
    {"flag", Coll::kBarrier, flag_barrier},
};

CollArgs args_for(Coll coll, int n, size_t count, bool in_place, int root = 0) {
  CollArgs a;
  a.coll = coll;
  a.nranks = n;
  a.count = count;
  a.elem = 4;
  a.root = root;
  a.in_place = in_place;
  a.chunk_bytes = 8;  // two elements a piece: many pieces even for small counts
  a.staging_bytes = 4096;
  return a;
}

class EveryOneSidedAlgorithm : public ::testing::TestWithParam<int> {};

TEST_P(EveryOneSidedAlgorithm, ProvedBySymbolicExecution) {
  const Algo& al = kOneSided[GetParam()];
  for (int n : {1, 2, 3, 4, 5, 6, 7, 8, 9, 11, 13, 16, 24})
    for (size_t count : al.coll == Coll::kBarrier ? std::vector<size_t>{0} : std::vector<size_t>{0, 1, 2, 7, 13})
      for (bool in_place : {false, true}) {
        CollArgs a = args_for(al.coll, n, count, in_place, (n * 5 / 7) % n);
        ASSERT_LE(eager_stage_bytes(a), a.staging_bytes);
        sim::VerifyResult v = sim::verify(a, al.build, static_cast<uint64_t>(n) * 131 + count);
        ASSERT_TRUE(v.ok) << al.name << " " << coll_name(al.coll) << " n=" << n << " count=" << count
                          << (in_place ? " in place" : "") << ": " << v.error;
      }
}

INSTANTIATE_TEST_SUITE_P(OneSided, EveryOneSidedAlgorithm,
                         ::testing::Range(0, static_cast<int>(std::size(kOneSided))),
                         [](const ::testing::TestParamInfo<int>& p) {
                           return std::string(coll_name(kOneSided[p.param].coll)) + "_" + kOneSided[p.param].name;
                         });

TEST(OneSided, SeveralSchedulingSeeds) {
  for (const Algo& al : kOneSided)
    for (int n : {3, 6})
      for (uint64_t seed = 1; seed <= 6; ++seed) {
        sim::VerifyResult v = sim::verify(args_for(al.coll, n, 7, seed % 2 == 0, n - 1), al.build, seed);
        EXPECT_TRUE(v.ok) << al.name << " " << coll_name(al.coll) << " n=" << n << " seed " << seed << ": " << v.error;
      }
}

// Consecutive calls reuse the staging halves and the ranks' buffers'
// owners return at different times: every pair of one-sided algorithms
// back to back, with the root moving, must stay race-free.
TEST(OneSided, SequencesOfCallsShareTheStagingHalvesSafely) {
  for (int n : {2, 3, 5})
    for (size_t first = 0; first < std::size(kOneSided); ++first)
      for (size_t second = 0; second < std::size(kOneSided); ++second) {
        std::vector<sim::VerifyCall> calls;
        for (int k = 0; k < 4; ++k) {
          const Algo& al = kOneSided[k % 2 == 0 ? first : second];
          const size_t count = al.coll == Coll::kBarrier ? 0 : 3 + static_cast<size_t>(k);
          calls.push_back({sim::on_every_rank(args_for(al.coll, n, count, k == 3, k % n)), al.build});
        }
        sim::VerifyResult v = sim::verify_sequence(calls, first * 31 + second);
        ASSERT_TRUE(v.ok) << "n=" << n << " " << kOneSided[first].name << " " << coll_name(kOneSided[first].coll)
                          << " then " << kOneSided[second].name << " " << coll_name(kOneSided[second].coll) << ": "
                          << v.error;
      }
}

// AlltoAllv where every rank knows the whole traffic matrix (the dynamic
// AlltoAllv's second stage): sparse pairwise and one-sided direct, with most
// pairs empty, uneven counts, in and out of place.
TEST(OneSided, AlltoAllvWithTheWholeMatrixKnown) {
  for (int n : {1, 2, 3, 5, 8})
    for (bool in_place : {false, true})
      for (int density : {1, 3}) {
        // sc[i * n + j]: what rank i sends to rank j; about density/4 of the pairs move anything.
        std::vector<size_t> sc(static_cast<size_t>(n * n)), sd(sc.size()), rc(sc.size()), rd(sc.size());
        for (int i = 0; i < n; ++i)
          for (int j = 0; j < n; ++j) {
            const int a = in_place ? std::min(i, j) * 7 + std::max(i, j) : i * 7 + j * 3;
            sc[i * n + j] = (a % 4) < density ? static_cast<size_t>(a % 5 + 1) : 0;
          }
        for (int i = 0; i < n; ++i) {
          size_t so = 0, ro = 0;
          for (int j = 0; j < n; ++j) {
            rc[i * n + j] = sc[j * n + i];
            sd[i * n + j] = so;
            rd[i * n + j] = in_place ? so : ro + 2;  // out of place: gaps between blocks
            so += sc[i * n + j];
            ro += rc[i * n + j] + 2;
          }
        }
        std::vector<CollArgs> args(n);
        for (int r = 0; r < n; ++r) {
          args[r] = args_for(Coll::kAlltoAllv, n, 0, in_place);
          args[r].rank = r;
          args[r].sendcounts = &sc[r * n];
          args[r].sdispls = &sd[r * n];
          args[r].recvcounts = &rc[r * n];
          args[r].rdispls = &rd[r * n];
          args[r].all_sendcounts = sc.data();
          args[r].all_sdispls = sd.data();
          args[r].all_rdispls = rd.data();
        }
        for (auto build : {sparse_alltoallv, direct_alltoallv}) {
          sim::VerifyResult v = sim::verify(args, build, static_cast<uint64_t>(n * 13 + density));
          ASSERT_TRUE(v.ok) << build(args[0]).algorithm << " n=" << n << " density " << density
                            << (in_place ? " in place" : "") << ": " << v.error;
        }
      }
}

// --- hazards: each broken schedule must fail for the right reason ----------

// AllGather that reads each peer's block without waiting for the peer's
// signal: the peer may not have published (or filled) it yet.
Schedule reads_before_the_owner_is_ready(const CollArgs& a) {
  Schedule s;
  const size_t b = a.count * a.elem;
  s.copy({kSendBuf, 0, b}, {kStaging, 0, b});
  for (int p = 0; p < a.nranks; ++p)
    if (p != a.rank) s.read(p, {kStaging, 0, b}, {kRecvBuf, static_cast<size_t>(p) * b, b});
  s.copy({kSendBuf, 0, b}, {kRecvBuf, static_cast<size_t>(a.rank) * b, b});
  return s;
}

TEST(OneSidedHazards, ReadingASliceBeforeItsOwnerProducedItFails) {
  sim::VerifyResult v = sim::verify(args_for(Coll::kAllGather, 3, 4, false), reads_before_the_owner_is_ready);
  ASSERT_FALSE(v.ok);
  EXPECT_TRUE(v.error.find("undefined") != std::string::npos || v.error.find("race") != std::string::npos) << v.error;
}

// Direct AllGather without the closing round: a rank returns (and its
// caller may overwrite its input) while peers still read it.
Schedule returns_while_peers_read(const CollArgs& a) {
  Schedule s;
  const size_t b = a.count * a.elem;
  s.copy({kSendBuf, 0, b}, {kRecvBuf, static_cast<size_t>(a.rank) * b, b});
  const int sig = s.signal();
  std::vector<int> ready{sig};
  for (int p = 0; p < a.nranks; ++p)
    if (p != a.rank) ready.push_back(s.wait(p, 1));
  for (int p = 0; p < a.nranks; ++p)
    if (p != a.rank) s.read(p, {kSendBuf, 0, b}, {kRecvBuf, static_cast<size_t>(p) * b, b}, ready);
  return s;
}

TEST(OneSidedHazards, OverwritingASliceAPeerStillReadsFails) {
  sim::VerifyResult v = sim::verify(args_for(Coll::kAllGather, 3, 4, false), returns_while_peers_read, 3);
  ASSERT_FALSE(v.ok);
  EXPECT_NE(v.error.find("race"), std::string::npos) << v.error;
}

// A rank writes a piece into a peer's output before the peer published its
// buffers for this call (no wait for its first signal).
Schedule writes_before_the_peer_arrives(const CollArgs& a) {
  Schedule s;
  const size_t b = a.count * a.elem;
  if (!a.in_place) s.copy({kSendBuf, 0, b}, {kRecvBuf, static_cast<size_t>(a.rank) * b, b});
  std::vector<int> work;
  for (int q = 0; q < a.nranks; ++q)
    if (q != a.rank) work.push_back(s.write(q, {kSendBuf, 0, b}, {kRecvBuf, static_cast<size_t>(a.rank) * b, b}));
  s.signal(work);
  for (int p = 0; p < a.nranks; ++p)
    if (p != a.rank) s.wait(p, 1);
  return s;
}

TEST(OneSidedHazards, WritingIntoAPeerThatHasNotArrivedFails) {
  // The previous call (the same schedule) returned on the target only once
  // its caller touched its buffers: a write not ordered after that is a race.
  CollArgs a = args_for(Coll::kAllGather, 2, 3, false);
  sim::VerifyResult v = sim::verify_sequence(
      {{sim::on_every_rank(a), writes_before_the_peer_arrives}, {sim::on_every_rank(a), writes_before_the_peer_arrives}},
      5);
  ASSERT_FALSE(v.ok);
  EXPECT_NE(v.error.find("race"), std::string::npos) << v.error;
}

// Waits for a second signal the peer never makes in this call: only the
// next call's flag would satisfy it.
Schedule waits_for_a_signal_never_made(const CollArgs& a) {
  Schedule s = flag_barrier(a);
  s.wait(1 - a.rank, 2);
  return s;
}

TEST(OneSidedHazards, AFlagReusedTooEarlyFails) {
  sim::VerifyResult v = sim::verify(args_for(Coll::kBarrier, 2, 0, false), waits_for_a_signal_never_made);
  ASSERT_FALSE(v.ok);
  EXPECT_NE(v.error.find("reused too early"), std::string::npos) << v.error;
}

// Two signals with no order between them: peers count them, so which one
// came first must not be left to chance.
Schedule unordered_signals(const CollArgs& a) {
  Schedule s;
  s.signal();
  s.signal();
  for (int p = 0; p < a.nranks; ++p)
    if (p != a.rank) s.wait(p, 2);
  return s;
}

TEST(OneSidedHazards, UnorderedSignalsFail) {
  sim::VerifyResult v = sim::verify(args_for(Coll::kBarrier, 2, 0, false), unordered_signals);
  ASSERT_FALSE(v.ok);
  EXPECT_NE(v.error.find("previous signal"), std::string::npos) << v.error;
}

// An eager Broadcast whose root does not wait for the others: two calls
// later it refills the staging half a slow peer may still read.
Schedule root_does_not_wait(const CollArgs& a) {
  Schedule s;
  const size_t b = a.count * a.elem;
  if (a.rank == a.root) {
    int c = s.copy({kSendBuf, 0, b}, {kStaging, 0, b});
    if (!a.in_place) s.copy({kSendBuf, 0, b}, {kRecvBuf, 0, b});
    s.signal({c});
    return s;
  }
  s.signal();
  int w = s.wait(a.root, 1);
  s.read(a.root, {kStaging, 0, b}, {kRecvBuf, 0, b}, {w});
  return s;
}

TEST(OneSidedHazards, ReusingAStagingHalfTooEarlyFails) {
  CollArgs a = args_for(Coll::kBroadcast, 3, 4, false);
  std::vector<sim::VerifyCall> calls(3, sim::VerifyCall{sim::on_every_rank(a), root_does_not_wait});
  bool caught = false;
  std::string error;
  for (uint64_t seed = 1; seed <= 20 && !caught; ++seed) {
    sim::VerifyResult v = sim::verify_sequence(calls, seed);
    caught = !v.ok;
    error = v.error;
  }
  ASSERT_TRUE(caught);
  EXPECT_NE(error.find("race"), std::string::npos) << error;
  // The eager Broadcast, whose root waits for every peer, passes the same sequence.
  std::vector<sim::VerifyCall> good(3, sim::VerifyCall{sim::on_every_rank(a), eager_broadcast});
  for (uint64_t seed = 1; seed <= 20; ++seed) {
    sim::VerifyResult v = sim::verify_sequence(good, seed);
    ASSERT_TRUE(v.ok) << v.error;
  }
}

TEST(OneSidedHazards, AccessToARankOnAnotherHostFails) {
  CollArgs a = args_for(Coll::kAllGather, 4, 2, false);
  a.host_of = {0, 0, 1, 1};
  sim::VerifyResult v = sim::verify(a, direct_allgather);
  ASSERT_FALSE(v.ok);
  EXPECT_NE(v.error.find("another host"), std::string::npos) << v.error;
}

TEST(OneSidedHazards, RanksThatDisagreeOnStagingFail) {
  // Rank 0 stages (eager), the others run a staging-free schedule.
  auto mixed = [](const CollArgs& a) { return a.rank == 0 ? eager_allreduce(a) : direct_allreduce(a); };
  sim::VerifyResult v = sim::verify(args_for(Coll::kAllReduce, 3, 4, false), mixed);
  ASSERT_FALSE(v.ok);
  EXPECT_NE(v.error.find("staging"), std::string::npos) << v.error;
}

// Small staging halves may lie beside the flag (the shm transport), so
// where each rank looks follows the extent its schedule states.
TEST(OneSidedHazards, RanksThatStateDifferentStagingExtentsFail) {
  auto mixed = [](const CollArgs& a) {
    Schedule s = eager_allreduce(a);
    if (a.rank == 1) s.staging_extent += a.elem;
    return s;
  };
  sim::VerifyResult v = sim::verify(args_for(Coll::kAllReduce, 3, 4, false), mixed);
  ASSERT_FALSE(v.ok);
  EXPECT_NE(v.error.find("staging extent"), std::string::npos) << v.error;
}

TEST(OneSidedHazards, StagingPastTheStatedExtentFails) {
  auto short_extent = [](const CollArgs& a) {
    Schedule s = eager_allreduce(a);
    s.staging_extent -= a.elem;
    return s;
  };
  sim::VerifyResult v = sim::verify(args_for(Coll::kAllReduce, 3, 4, false), short_extent);
  ASSERT_FALSE(v.ok);
  EXPECT_NE(v.error.find("overruns"), std::string::npos) << v.error;
}

TEST(OneSided, EagerSchedulesStateTheStagingTheyReach) {
  const std::pair<Coll, Schedule (*)(const CollArgs&)> eager[] = {
      {Coll::kAllReduce, eager_allreduce}, {Coll::kReduceScatter, eager_reducescatter},
      {Coll::kReduce, eager_reduce},       {Coll::kAllGather, eager_allgather},
      {Coll::kBroadcast, eager_broadcast}, {Coll::kGather, eager_gather},
      {Coll::kScatter, eager_scatter},     {Coll::kAlltoAll, eager_alltoall}};
  for (const auto& [coll, build] : eager)
    for (int n : {2, 3, 5})
      for (int rank = 0; rank < n; ++rank) {
        CollArgs a = args_for(coll, n, 3, false, n - 1);
        a.rank = rank;
        Schedule s = build(a);
        EXPECT_EQ(s.staging_extent, eager_stage_bytes(a)) << coll_name(coll) << " n=" << n << " rank " << rank;
        EXPECT_LE(s.staging_reach(), s.staging_extent) << coll_name(coll) << " n=" << n << " rank " << rank;
      }
}

}  // namespace
}  // namespace conflux::algo
