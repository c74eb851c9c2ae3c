// Every algorithm x collective through the symbolic verifier: every n from
// 1 to 64 and sampled n up to 1024, odd counts, in and out of place, tiny
// chunks. A failure prints the verifier's first finding.
#include "sim/verify.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>

namespace conflux::algo {
namespace {

struct Algo {
  const char* name;
  Coll coll;
  Schedule (*build)(const CollArgs&);
};

const Algo kAlgos[] = {
    {"ring", Coll::kAllReduce, ring_allreduce},
    {"tree", Coll::kAllReduce, tree_allreduce},
    {"rhd", Coll::kAllReduce, rhd_allreduce},
    {"rd", Coll::kAllReduce, rd_allreduce},
    {"ring", Coll::kAllGather, ring_allgather},
    {"rhd", Coll::kAllGather, rhd_allgather},
    {"bruck", Coll::kAllGather, bruck_allgather},
    {"ring", Coll::kReduceScatter, ring_reducescatter},
    {"rhd", Coll::kReduceScatter, rhd_reducescatter},
    {"chain", Coll::kBroadcast, chain_broadcast},
    {"tree", Coll::kBroadcast, tree_broadcast},
    {"chain", Coll::kReduce, chain_reduce},
    {"tree", Coll::kReduce, tree_reduce},
    {"pairwise", Coll::kAlltoAll, pairwise_alltoall},
    {"bruck", Coll::kAlltoAll, bruck_alltoall},
    {"linear", Coll::kGather, linear_gather},
    {"linear", Coll::kScatter, linear_scatter},
    {"dissemination", Coll::kBarrier, dissemination_barrier},
};

// Collectives whose count is a per-rank block (buffers grow with n).
bool per_rank_block(Coll c) {
  return c == Coll::kAllGather || c == Coll::kReduceScatter || c == Coll::kAlltoAll || c == Coll::kGather ||
         c == Coll::kScatter;
}

std::vector<size_t> counts_for(Coll c, int n) {
  if (c == Coll::kBarrier) return {0};
  if (per_rank_block(c)) {
    if (n > 64) return {1};
    if (n > 16) return {0, 3};
    return {0, 1, 2, 5};
  }
  if (n > 64) return {static_cast<size_t>(n) + 1};
  if (n > 16) return {0, static_cast<size_t>(n) + 1, 13};
  return {0, 1, static_cast<size_t>(n > 1 ? n - 1 : 2), static_cast<size_t>(n) + 1, 13};
}

// Returns false after reporting the first failure.
bool check(const Algo& al, int n, size_t count, bool in_place, size_t chunk, uint64_t seed) {
  CollArgs a;
  a.coll = al.coll;
  a.nranks = n;
  a.count = count;
  a.elem = 4;
  a.root = (n * 5 / 7) % n;
  a.in_place = in_place;
  a.chunk_bytes = chunk;
  sim::VerifyResult v = sim::verify(a, al.build, seed);
  if (v.ok) return true;
  ADD_FAILURE() << al.name << " " << coll_name(al.coll) << " n=" << n << " count=" << count
                << (in_place ? " in place" : "") << " chunk=" << chunk << ": " << v.error;
  return false;
}

std::vector<int> sampled_sizes() {
  std::vector<int> ns(64);
  std::iota(ns.begin(), ns.end(), 1);
  for (int n : {100, 127, 128, 255, 256, 1000, 1024}) ns.push_back(n);
  return ns;
}

class EveryAlgorithm : public ::testing::TestWithParam<int> {};

TEST_P(EveryAlgorithm, ProvedBySymbolicExecution) {
  const Algo& al = kAlgos[GetParam()];
  // Algorithms with ~n^2 messages in all stop at 128 ranks (1024 takes
  // seconds per case), to keep the suite fast.
  const std::string name = al.name;
  const bool quadratic = name == "ring" || name == "pairwise" || (name == "bruck" && al.coll == Coll::kAlltoAll);
  for (int n : sampled_sizes()) {
    if (quadratic && n > 128) continue;
    size_t chunk = n > 64 ? 64 : 8;
    for (size_t count : counts_for(al.coll, n))
      for (bool in_place : {false, true}) {
        if (in_place && n > 64) continue;
        if (!check(al, n, count, in_place, chunk, static_cast<uint64_t>(n) * 131 + count)) return;
      }
  }
}

INSTANTIATE_TEST_SUITE_P(Algorithms, EveryAlgorithm, ::testing::Range(0, static_cast<int>(std::size(kAlgos))),
                         [](const ::testing::TestParamInfo<int>& p) {
                           return std::string(coll_name(kAlgos[p.param].coll)) + "_" + kAlgos[p.param].name;
                         });

TEST(EveryAlgorithm, SeveralSchedulingSeedsAndRingOrders) {
  for (const Algo& al : kAlgos)
    for (int n : {3, 6, 13})
      for (uint64_t seed = 1; seed <= 4; ++seed) {
        CollArgs a;
        a.coll = al.coll;
        a.nranks = n;
        a.count = 7;
        a.elem = 8;
        a.root = n - 1;
        a.chunk_bytes = 16;
        a.ring.resize(n);
        for (int p = 0; p < n; ++p) a.ring[p] = (p * 5 + 2) % n;  // a permuted ring (5 is coprime to 3, 6, 13)
        sim::VerifyResult v = sim::verify(a, al.build, seed);
        EXPECT_TRUE(v.ok) << al.name << " " << coll_name(al.coll) << " n=" << n << " seed " << seed << ": " << v.error;
      }
}

TEST(EveryAlgorithm, AlltoAllvWithUnevenCounts) {
  for (int n : {1, 2, 3, 5, 8, 17, 33})
    for (bool in_place : {false, true}) {
      // sc[i][j]: what rank i sends to rank j. In place one layout serves
      // both directions, so the counts must be symmetric and gap-free.
      std::vector<std::vector<size_t>> sc(n, std::vector<size_t>(n)), sd = sc, rc = sc, rd = sc;
      for (int i = 0; i < n; ++i)
        for (int j = 0; j < n; ++j) sc[i][j] = in_place ? (i + j) % 4 : (i * 3 + j * 7) % 5;
      for (int i = 0; i < n; ++i) {
        size_t so = 0, ro = 0;
        for (int j = 0; j < n; ++j) {
          rc[i][j] = sc[j][i];
          sd[i][j] = so;
          rd[i][j] = in_place ? so : ro + 1;  // out of place: a gap before each block
          so += sc[i][j];
          ro += rc[i][j] + 1;
        }
      }
      std::vector<CollArgs> args(n);
      for (int r = 0; r < n; ++r) {
        args[r].coll = Coll::kAlltoAllv;
        args[r].nranks = n;
        args[r].rank = r;
        args[r].elem = 2;
        args[r].in_place = in_place;
        args[r].sendcounts = sc[r].data();
        args[r].sdispls = sd[r].data();
        args[r].recvcounts = rc[r].data();
        args[r].rdispls = rd[r].data();
      }
      sim::VerifyResult v = sim::verify(args, pairwise_alltoall);
      EXPECT_TRUE(v.ok) << "alltoallv n=" << n << (in_place ? " in place" : "") << ": " << v.error;
    }
}

// Proves `build` for `coll` over {hosts, ranks per host} layouts, ranks
// placed blocked and round-robin (non-contiguous), in and out of place.
void verify_over_host_layouts(Coll coll, Schedule (*build)(const CollArgs&),
                              const std::vector<std::pair<int, int>>& layouts, std::initializer_list<size_t> counts) {
  for (auto [hosts, per] : layouts)
    for (bool round_robin : {false, true})
      for (size_t count : counts)
        for (bool in_place : {false, true}) {
          const int n = hosts * per;
          CollArgs a;
          a.coll = coll;
          a.nranks = n;
          a.count = count;
          a.elem = 4;
          a.in_place = in_place;
          a.chunk_bytes = 8;
          for (int r = 0; r < n; ++r) a.host_of.push_back(round_robin ? r % hosts : r / per);
          ASSERT_TRUE(hier_supported(a));
          sim::VerifyResult v = sim::verify(a, build);
          EXPECT_TRUE(v.ok) << coll_name(coll) << " " << hosts << "x" << per << (round_robin ? " round-robin" : "")
                            << " count=" << count << (in_place ? " in place" : "") << ": " << v.error;
        }
}

TEST(Hierarchical, AllReduceOverHostLayouts) {
  verify_over_host_layouts(Coll::kAllReduce, hier_allreduce,
                           {{1, 1}, {1, 4}, {4, 1}, {2, 2}, {2, 3}, {3, 4}, {4, 8}, {8, 8}, {16, 16}}, {0, 1, 7, 31});
}

TEST(Hierarchical, AllReduceWithOneSidedHostPhasesOverHostLayouts) {
  verify_over_host_layouts(Coll::kAllReduce, hier_direct_allreduce,
                           {{1, 1}, {1, 4}, {4, 1}, {2, 2}, {2, 3}, {3, 4}, {4, 8}}, {0, 1, 7, 31});
}

TEST(Hierarchical, BroadcastOverHostLayoutsAndRoots) {
  for (auto [hosts, per] : std::vector<std::pair<int, int>>{{1, 1}, {1, 4}, {4, 1}, {2, 3}, {3, 4}, {8, 8}})
    for (bool round_robin : {false, true})
      for (size_t count : {0, 1, 9})
        for (bool in_place : {false, true}) {
          const int n = hosts * per;
          for (int root : {0, n / 2, n - 1}) {
            CollArgs a;
            a.coll = Coll::kBroadcast;
            a.nranks = n;
            a.count = count;
            a.elem = 4;
            a.root = root;
            a.in_place = in_place;
            a.chunk_bytes = 8;
            for (int r = 0; r < n; ++r) a.host_of.push_back(round_robin ? r % hosts : r / per);
            sim::VerifyResult v = sim::verify(a, hier_broadcast);
            EXPECT_TRUE(v.ok) << hosts << "x" << per << (round_robin ? " round-robin" : "") << " root " << root
                              << " count=" << count << (in_place ? " in place" : "") << ": " << v.error;
          }
        }
}

TEST(Hierarchical, BroadcastForwardsEachChunkInsideAHostAsItArrives) {
  // 2 hosts x 2 ranks, root 0, 4 chunks. Rank 2 receives the chunks from
  // rank 0 across hosts and passes each to rank 3 once that chunk is here,
  // not after the last; rank 0 passes them to rank 1 without waiting for
  // its sends across hosts.
  CollArgs a;
  a.coll = Coll::kBroadcast;
  a.nranks = 4;
  a.count = 1024;
  a.elem = 4;
  a.chunk_bytes = 1024;
  a.host_of = {0, 0, 1, 1};
  auto steps_to = [](const Schedule& s, StepKind kind, int peer) {
    std::vector<int> ids;
    for (size_t i = 0; i < s.steps.size(); ++i)
      if (s.steps[i].kind == kind && s.steps[i].peer == peer) ids.push_back(static_cast<int>(i));
    return ids;
  };
  auto deps_of = [](const Schedule& s, int i) {
    const Step& st = s.steps[static_cast<size_t>(i)];
    return std::vector<int>(s.deps.begin() + st.dep_begin, s.deps.begin() + st.dep_begin + st.dep_count);
  };
  a.rank = 2;
  const Schedule leader = hier_broadcast(a);
  const std::vector<int> got = steps_to(leader, StepKind::kRecv, 0), passed = steps_to(leader, StepKind::kSend, 3);
  ASSERT_EQ(got.size(), 4u);
  ASSERT_EQ(passed.size(), 4u);
  for (size_t c = 0; c < 4; ++c) EXPECT_EQ(deps_of(leader, passed[c]), std::vector<int>{got[c]}) << "chunk " << c;
  a.rank = 0;
  const Schedule root = hier_broadcast(a);
  const std::vector<int> across = steps_to(root, StepKind::kSend, 2);
  ASSERT_EQ(across.size(), 4u);
  for (int i : steps_to(root, StepKind::kSend, 1))
    for (int d : deps_of(root, i))
      EXPECT_EQ(std::count(across.begin(), across.end(), d), 0) << "a send inside the root's host waits for one across";
}

TEST(Hierarchical, AllGatherOverHostLayouts) {
  verify_over_host_layouts(Coll::kAllGather, hier_allgather, {{1, 1}, {1, 4}, {4, 1}, {2, 3}, {3, 4}, {8, 8}},
                           {0, 1, 5});
}

TEST(Hierarchical, ReduceScatterOverHostLayouts) {
  verify_over_host_layouts(Coll::kReduceScatter, hier_reducescatter,
                           {{1, 1}, {1, 4}, {4, 1}, {2, 2}, {2, 3}, {3, 4}, {8, 8}}, {0, 1, 5});
}

TEST(Hierarchical, UnequalHostsAreDeclined) {
  CollArgs a;
  a.coll = Coll::kAllReduce;
  a.nranks = 5;
  a.count = 4;
  a.host_of = {0, 0, 0, 1, 1};
  EXPECT_FALSE(hier_supported(a));
  EXPECT_EQ(hier_allreduce(a).algorithm, "unsupported");
  EXPECT_TRUE(hier_allreduce(a).steps.empty());
  EXPECT_EQ(hier_broadcast(a).algorithm, "unsupported");
  EXPECT_EQ(hier_allgather(a).algorithm, "unsupported");
}

}  // namespace
}  // namespace conflux::algo
