// Multi-channel schedules (algo/channels.h): every splittable algorithm,
// split over 2-4 channels, is proved by the symbolic verifier (which pairs
// messages per peer and channel, as the executor does); the rest decline.
#include "algo/channels.h"
#include "algo/compose.h"
#include "sim/verify.h"

#include <gtest/gtest.h>

namespace conflux::algo {
namespace {

struct Algo {
  const char* name;
  Coll coll;
  Builder build;
  bool splits;
};

const Algo kAlgos[] = {
    {"ring", Coll::kAllReduce, ring_allreduce, true},
    {"tree", Coll::kAllReduce, tree_allreduce, true},
    {"rhd", Coll::kAllReduce, rhd_allreduce, true},
    {"rd", Coll::kAllReduce, rd_allreduce, true},
    {"ring", Coll::kAllGather, ring_allgather, true},
    {"rhd", Coll::kAllGather, rhd_allgather, false},
    {"bruck", Coll::kAllGather, bruck_allgather, false},
    {"ring", Coll::kReduceScatter, ring_reducescatter, true},
    {"rhd", Coll::kReduceScatter, rhd_reducescatter, false},
    {"chain", Coll::kBroadcast, chain_broadcast, true},
    {"tree", Coll::kBroadcast, tree_broadcast, true},
    {"chain", Coll::kReduce, chain_reduce, true},
    {"tree", Coll::kReduce, tree_reduce, true},
    {"pairwise", Coll::kAlltoAll, pairwise_alltoall, true},
    {"bruck", Coll::kAlltoAll, bruck_alltoall, false},
    {"linear", Coll::kGather, linear_gather, false},
    {"pairwise", Coll::kAlltoAllv, pairwise_alltoall, false},
};

TEST(Channels, SplitSchedulesAreProved) {
  for (const Algo& al : kAlgos) {
    EXPECT_EQ(channels_can_split(al.coll, al.build), al.splits) << al.name << " " << coll_name(al.coll);
    if (!al.splits) continue;
    for (int n = 1; n <= 9; ++n)
      for (int channels = 2; channels <= 4; ++channels)
        for (size_t count : {size_t(channels), size_t(13), size_t(37)})
          for (bool in_place : {false, true}) {
            CollArgs a;
            a.coll = al.coll;
            a.nranks = n;
            a.count = count;
            a.elem = 4;
            a.root = (n * 5 / 7) % n;
            a.in_place = in_place;
            a.chunk_bytes = 8;  // several chunks per channel part
            auto split = [&](const CollArgs& args) {
              std::optional<Schedule> s = split_channels(args, channels, al.build);
              return s ? *s : Schedule{};
            };
            std::optional<Schedule> mine = split_channels(a, channels, al.build);
            ASSERT_TRUE(mine.has_value()) << al.name << " " << coll_name(al.coll) << " n=" << n;
            EXPECT_NE(mine->algorithm.find("/" + std::to_string(channels) + "ch"), std::string::npos);
            sim::VerifyResult v = sim::verify(a, split, static_cast<uint64_t>(n * 7 + channels));
            ASSERT_TRUE(v.ok) << al.name << " " << coll_name(al.coll) << " n=" << n << " channels=" << channels
                              << " count=" << count << (in_place ? " in place" : "") << ": " << v.error;
          }
  }
}

TEST(Channels, PartsUseTheirOwnChannelAndScratch) {
  CollArgs a;
  a.coll = Coll::kBroadcast;
  a.nranks = 3;
  a.rank = 1;
  a.count = 10;
  a.elem = 4;
  a.root = 0;
  std::optional<Schedule> s = split_channels(a, 3, chain_broadcast);
  ASSERT_TRUE(s.has_value());
  // Parts of 4, 3 and 3 elements: the receive of part c lands at its offset.
  std::vector<std::pair<int, size_t>> recvs;
  for (const Step& st : s->steps)
    if (st.kind == StepKind::kRecv) recvs.emplace_back(st.channel, st.dst.offset);
  ASSERT_EQ(recvs.size(), 3u);
  EXPECT_EQ(recvs[0], std::make_pair(0, size_t{0}));
  EXPECT_EQ(recvs[1], std::make_pair(1, size_t{16}));
  EXPECT_EQ(recvs[2], std::make_pair(2, size_t{28}));
}

TEST(Channels, TooFewElementsOrUnsplittableDecline) {
  CollArgs a;
  a.coll = Coll::kAllReduce;
  a.nranks = 4;
  a.count = 2;
  a.elem = 4;
  EXPECT_FALSE(split_channels(a, 3, ring_allreduce).has_value());
  a.count = 100;
  EXPECT_FALSE(split_channels(a, 1, ring_allreduce).has_value());
  a.coll = Coll::kAllGather;
  EXPECT_FALSE(split_channels(a, 2, bruck_allgather).has_value());
}

TEST(Channels, VerifierPairsMessagesPerChannel) {
  // Rank 0 sends on channel 1, rank 1 receives on channel 0: never matched.
  auto build = [](const CollArgs& a) {
    Schedule s;
    Step st = make_step(a.rank == 0 ? StepKind::kSend : StepKind::kRecv, 1 - a.rank);
    st.src = st.dst = Slice{kScratch, 0, 4};
    st.channel = a.rank == 0 ? 1 : 0;
    s.add(st);
    s.scratch_bytes = 4;
    return s;
  };
  CollArgs a;
  a.coll = Coll::kBroadcast;
  a.nranks = 2;
  a.count = 1;
  a.elem = 4;
  sim::VerifyResult v = sim::verify(a, build);
  EXPECT_FALSE(v.ok);
  EXPECT_NE(v.error.find("deadlock"), std::string::npos) << v.error;
}

}  // namespace
}  // namespace conflux::algo
