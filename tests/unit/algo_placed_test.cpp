// Placed exchanges (algo::placed_writes, algo::placed_reads) through the
// symbolic verifier: MoE-shaped routings (tokens to the blocks of their
// experts, some pairs dropped, blocks aligned) at 1 to 8 ranks, ranks
// without tokens, and the reverse direction that combine takes; and the
// broken schedules the verifier must reject.
#include "algo/algorithms.h"
#include "sim/verify.h"

#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

namespace conflux::algo {
namespace {

// Dispatch's placements for a random routing: rank s's token t goes to the
// blocks of its k experts (experts blocked over the ranks), each block
// filled in (source rank, token) order and padded to `align` rows; pairs
// past an expert's capacity are dropped (no placement).
std::vector<Placement> moe_routing(int n, int k, size_t capacity, size_t align, uint64_t seed) {
  std::mt19937_64 rng(seed);
  const int experts_per_rank = 2, E = experts_per_rank * n;
  std::vector<std::vector<std::vector<int>>> picks(static_cast<size_t>(n));
  for (int s = 0; s < n; ++s) {
    const size_t tokens = (s == n - 1 && n > 1) ? 0 : rng() % 9;  // the last rank has none
    for (size_t t = 0; t < tokens; ++t) {
      std::vector<int> e(static_cast<size_t>(k));
      for (int& x : e) x = static_cast<int>(rng() % static_cast<uint64_t>(E));  // repeats allowed
      picks[static_cast<size_t>(s)].push_back(e);
    }
  }
  std::vector<size_t> start(static_cast<size_t>(E)), filled(static_cast<size_t>(E), 0), rows(static_cast<size_t>(n), 0);
  std::vector<size_t> total(static_cast<size_t>(E), 0);
  for (const auto& rank : picks)
    for (const auto& token : rank)
      for (int e : token) ++total[static_cast<size_t>(e)];
  for (int e = 0; e < E; ++e) {
    const size_t q = static_cast<size_t>(e / experts_per_rank), kept = std::min(total[e], capacity);
    start[e] = rows[q];
    rows[q] += (kept + align - 1) / align * align;
  }
  std::vector<Placement> out;
  for (int s = 0; s < n; ++s)
    for (size_t t = 0; t < picks[s].size(); ++t)
      for (int e : picks[s][t]) {
        const size_t pos = filled[e]++;
        if (pos >= std::min(total[e], capacity)) continue;
        out.push_back({s, e / experts_per_rank, t, start[e] + pos, 1});
      }
  return out;
}

std::vector<CollArgs> placed_args(int n, const std::vector<Placement>& placements) {
  CollArgs a;
  a.coll = Coll::kAlltoAllv;
  a.nranks = n;
  a.elem = 16;
  a.placements = placements.data();
  a.placement_count = placements.size();
  return sim::on_every_rank(a);
}

std::vector<Placement> reversed(const std::vector<Placement>& in) {
  std::vector<Placement> out;
  for (size_t i = 0; i < in.size(); ++i)
    out.push_back({in[i].dst_rank, in[i].src_rank, in[i].dst_offset, i, 1});  // combine: back into slot i
  return out;
}

TEST(PlacedExchange, MoeRoutingsAreProvenAtOneToEightRanks) {
  for (int n = 1; n <= 8; ++n)
    for (int k : {1, 3})
      for (size_t capacity : {size_t{1000}, size_t{2}})
        for (size_t align : {size_t{1}, size_t{4}}) {
          const uint64_t seed = static_cast<uint64_t>(n * 100 + k * 10) + capacity + align;
          const std::vector<Placement> forward = moe_routing(n, k, capacity, align, seed);
          const std::vector<Placement> back = reversed(forward);
          for (const auto* pl : {&forward, &back})
            for (auto build : {placed_writes, placed_reads}) {
              const std::vector<CollArgs> args = placed_args(n, *pl);
              sim::VerifyResult v = sim::verify(args, build, seed);
              ASSERT_TRUE(v.ok) << build(args[0]).algorithm << " n=" << n << " k=" << k << " capacity " << capacity
                                << " align " << align << (pl == &back ? " (combine's direction)" : "") << ": "
                                << v.error;
            }
        }
}

TEST(PlacedExchange, ConsecutiveCallsOnTheSameRanksAreProven) {
  const std::vector<Placement> a = moe_routing(4, 2, 1000, 1, 7), b = reversed(a);
  const std::vector<sim::VerifyCall> calls = {{placed_args(4, a), placed_writes},
                                             {placed_args(4, b), placed_reads},
                                             {placed_args(4, a), placed_writes}};
  sim::VerifyResult v = sim::verify_sequence(calls, 3);
  EXPECT_TRUE(v.ok) << v.error;
}

TEST(PlacedExchange, RowsContiguousOnBothSidesMoveAsOneStep) {
  // Rank 0's tokens 0..9 land in rank 1's rows 5..14: one write, not ten.
  std::vector<Placement> pl;
  for (size_t t = 0; t < 10; ++t) pl.push_back({0, 1, t, 5 + t, 1});
  const std::vector<CollArgs> args = placed_args(2, pl);
  size_t writes = 0;
  for (const Step& s : placed_writes(args[0]).steps)
    if (s.kind == StepKind::kWrite) {
      ++writes;
      EXPECT_EQ(s.src.bytes, 10 * args[0].elem);
    }
  EXPECT_EQ(writes, 1u);
  EXPECT_TRUE(sim::verify(args, placed_writes).ok);
}

bool same_slice(const Slice& a, const Slice& b) { return a.buf == b.buf && a.offset == b.offset && a.bytes == b.bytes; }

// Steps, dependencies and the derived shape the executor runs from.
void expect_same_schedule(const Schedule& got, const Schedule& want, const std::string& what) {
  ASSERT_EQ(got.steps.size(), want.steps.size()) << what;
  for (size_t i = 0; i < want.steps.size(); ++i) {
    const Step &g = got.steps[i], &w = want.steps[i];
    EXPECT_TRUE(g.kind == w.kind && g.peer == w.peer && same_slice(g.src, w.src) && same_slice(g.dst, w.dst) &&
                g.count == w.count && g.dep_begin == w.dep_begin && g.dep_count == w.dep_count)
        << what << ": step " << i;
  }
  EXPECT_EQ(got.deps, want.deps) << what;
  EXPECT_EQ(got.algorithm, want.algorithm) << what;
  const Schedule::Shape &g = got.shape(), &w = want.shape();
  EXPECT_EQ(g.dependents_begin, w.dependents_begin) << what;
  EXPECT_EQ(g.dependents, w.dependents) << what;
  EXPECT_EQ(g.dep_counts, w.dep_counts) << what;
  EXPECT_EQ(g.ready_at_once, w.ready_at_once) << what;
  EXPECT_EQ(g.ready_waits, w.ready_waits) << what;
  EXPECT_EQ(g.link_steps, w.link_steps) << what;
  EXPECT_EQ(g.one_sided_peers, w.one_sided_peers) << what;
  EXPECT_EQ(g.one_sided, w.one_sided) << what;
  EXPECT_EQ(g.in_order, w.in_order) << what;
}

TEST(PlacedExchange, BuildingIntoAnEarlierSchedulesStorageGivesTheSameSchedule) {
  // The MoE layer builds each call's schedule into the previous call's:
  // larger, smaller, the other direction, another rank's. Whatever it held
  // before, the result and its shape must be those of a fresh build.
  Schedule reused = placed_writes(placed_args(6, moe_routing(6, 3, 1000, 1, 1))[2]);
  (void)reused.shape();  // a derived shape to be replaced, too
  for (int n : {2, 4, 6})
    for (uint64_t seed : {11u, 12u}) {
      const std::vector<Placement> forward = moe_routing(n, 2, seed == 11 ? 1000 : 2, 4, seed);
      const std::vector<Placement> back = reversed(forward);
      for (const auto* pl : {&forward, &back})
        for (bool writes : {true, false})
          for (const CollArgs& a : placed_args(n, *pl)) {
            const Schedule fresh = writes ? placed_writes(a) : placed_reads(a);
            reused = placed_exchange(a, writes, std::move(reused));
            expect_same_schedule(reused, fresh,
                                 "n=" + std::to_string(n) + " rank " + std::to_string(a.rank) +
                                     (writes ? " writes" : " reads") + (pl == &back ? " back" : ""));
          }
    }
  // Cleared and filled by another builder: the shape is derived anew.
  const CollArgs ring = [] {
    CollArgs a;
    a.nranks = 4;
    a.rank = 1;
    a.count = 1000;
    a.elem = 4;
    a.chunk_bytes = 256;
    return a;
  }();
  const Schedule fresh = ring_allreduce(ring);
  reused.clear();
  reused.steps = fresh.steps;  // into the storage the placed steps left
  reused.deps = fresh.deps;
  reused.algorithm = fresh.algorithm;
  expect_same_schedule(reused, fresh, "ring AllReduce after a placed exchange");
}

// The placed writes without the closing round: a rank returns (and its
// caller reads its output) while peers may still write into it.
Schedule writes_without_the_closing_round(const CollArgs& a) {
  Schedule s = placed_writes(a);
  while (!s.steps.empty() && s.steps.back().kind == StepKind::kWait) s.steps.pop_back();
  return s;
}

TEST(PlacedExchangeHazards, ReturningWhilePeersStillWriteFails) {
  const std::vector<Placement> pl = moe_routing(3, 2, 1000, 1, 11);
  ASSERT_FALSE(pl.empty());
  sim::VerifyResult v = sim::verify(placed_args(3, pl), writes_without_the_closing_round);
  EXPECT_FALSE(v.ok);
}

TEST(PlacedExchangeHazards, TwoPiecesAtOnePlaceFail) {
  // Ranks 0 and 2 both write rank 1's row 0: whichever lands last wins.
  const std::vector<Placement> pl = {{0, 1, 0, 0, 1}, {2, 1, 0, 0, 1}};
  sim::VerifyResult v = sim::verify(placed_args(3, pl), placed_writes);
  EXPECT_FALSE(v.ok);
}

}  // namespace
}  // namespace conflux::algo
