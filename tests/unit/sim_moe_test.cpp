// The MoE traffic model behind `conflux sim --coll moe`: bytes of the flat
// and the hierarchical dispatch and combine, counted by hand for small
// routings, and their prediction running at 1024 ranks.
#include "sim/moe_traffic.h"

#include <gtest/gtest.h>

namespace conflux::sim {
namespace {

// 2 hosts x 2 ranks; expert e on rank e.
ClusterModel two_by_two() {
  ClusterModel m;
  m.nranks = 4;
  m.ranks_per_host = 2;
  return m;
}

MoeRouting routing_of(int top_k, std::vector<std::vector<int32_t>> experts) {
  MoeRouting r;
  r.top_k = top_k;
  r.row_bytes = 100;
  r.partial_bytes = 200;
  r.expert_rank = {0, 1, 2, 3};
  r.experts = std::move(experts);
  r.experts.resize(4);
  return r;
}

TEST(MoeTraffic, ATokenCrossesOncePerHostOnTheHierarchicalPath) {
  // Rank 0's one token goes to experts 2 and 3, both on host 1.
  const MoeTraffic t = moe_traffic(routing_of(2, {{2, 3}}), two_by_two());
  // Flat: a row and a one-target record to each of ranks 2 and 3.
  EXPECT_EQ(t.flat_dispatch.network_bytes, 2 * (100 + moe_record_bytes(1)));
  EXPECT_EQ(t.flat_dispatch.bytes[0 * 4 + 2], 100 + moe_record_bytes(1));
  // Hierarchical: one row to rank 2 (host 1's rank with local index 0),
  // with both targets; rank 2 keeps the row where it arrived (nothing sent
  // to itself) and forwards one copy to rank 3.
  EXPECT_EQ(t.hier_dispatch_net.network_bytes, 100u + 2 * 8);
  EXPECT_EQ(t.hier_dispatch_net.bytes[0 * 4 + 2], 100u + 2 * 8);
  EXPECT_EQ(t.hier_dispatch_host.network_bytes, 0u);
  EXPECT_EQ(t.hier_dispatch_host.bytes[2 * 4 + 3], 100u);
  EXPECT_EQ(t.hier_dispatch_host.bytes[2 * 4 + 2], 0u);
  // Combine: two rows back flat, one partial sum hierarchical.
  EXPECT_EQ(t.flat_combine.network_bytes, 200u);
  EXPECT_EQ(t.hier_combine_net.network_bytes, 200u);
  EXPECT_EQ(t.hier_combine_host.bytes[3 * 4 + 2], 100u);
}

TEST(MoeTraffic, TokensWhoseExpertsShareARankCrossOnceFlatToo) {
  // Rank 1's token to experts 0 and 0's neighbour on host 0, and to 3:
  // only the expert on host 1 crosses the network.
  const MoeTraffic t = moe_traffic(routing_of(3, {{}, {0, 1, 3}}), two_by_two());
  EXPECT_EQ(t.flat_dispatch.network_bytes, 100 + moe_record_bytes(1));
  // The proxy of rank 1 (local index 1) on host 1 is rank 3 itself.
  EXPECT_EQ(t.hier_dispatch_net.bytes[1 * 4 + 3], 100u + 8);
  EXPECT_EQ(t.hier_dispatch_host.bytes[3 * 4 + 3], 0u);  // its own expert: kept, not forwarded
  // Local experts: rank 1 keeps its own row, rank 0 gets one over shared memory.
  EXPECT_EQ(t.flat_dispatch.bytes[1 * 4 + 0], 100 + moe_record_bytes(1));
}

TEST(MoeTraffic, PredictsAThousandRanks) {
  ClusterModel m;
  m.nranks = 1024;
  m.ranks_per_host = 8;
  MoeRouting r;
  r.top_k = 8;
  r.row_bytes = 7168 * 2;
  r.partial_bytes = 7168 * 4;
  for (int e = 0; e < 1024; ++e) r.expert_rank.push_back(e);
  r.experts.resize(1024);
  for (int q = 0; q < 1024; ++q)
    for (int t = 0; t < 4; ++t)
      for (int j = 0; j < 8; ++j) r.experts[q].push_back((q * 131 + t * 17 + j) % 1024);  // one or two hosts
  const MoeTraffic t = moe_traffic(r, m);
  EXPECT_LT(t.hier_dispatch_net.network_bytes, t.flat_dispatch.network_bytes / 2);
  auto p = predict_moe(m, r, t, 2'000'000);
  ASSERT_TRUE(p.ok()) << p.status().message();
  EXPECT_GT(p->flat_dispatch_us, 0);
  EXPECT_GT(p->hier_dispatch_us, 0);
}

TEST(MoeTraffic, OneHostAlsoPricesThePlacedRows) {
  ClusterModel m;
  m.nranks = 4;
  m.ranks_per_host = 4;
  MoeRouting r = routing_of(2, {{2, 3}, {0, 1}});
  const MoeTraffic t = moe_traffic(r, m);
  // Every pair is a placed row; combine returns the two that crossed ranks
  // (rank 1's expert 1 is its own).
  EXPECT_EQ(t.placed_dispatch.size(), 4u);
  EXPECT_EQ(t.placed_combine.size(), 3u);
  auto p = predict_moe(m, r, t, 2'000'000);
  ASSERT_TRUE(p.ok()) << p.status().message();
  EXPECT_GT(p->placed_dispatch_us, 0);
  EXPECT_TRUE(moe_traffic(r, two_by_two()).placed_dispatch.empty());
}

}  // namespace
}  // namespace conflux::sim
