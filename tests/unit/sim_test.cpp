// The simulator against theory: ring AllReduce 2(N-1)(a + S/(N B)), tree
// latency growing like log2 N, rotation symmetry exact, large rank counts
// fast, broken schedules reported.
#include "sim/sim.h"
#include "tune/candidates.h"
#include "tune/tuner.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cmath>

namespace conflux::sim {
namespace {

// Every rank on its own host: every link is the network link.
ClusterModel flat(int n, double lat_us, double gbps) {
  ClusterModel m;
  m.nranks = n;
  m.ranks_per_host = 1;
  m.link[static_cast<int>(PathClass::kNet)] = {lat_us, gbps};
  return m;
}

// n ranks on one host, talking through shared-memory slots.
ClusterModel one_host(int n, double lat_us, double gbps) {
  ClusterModel m;
  m.nranks = n;
  m.ranks_per_host = n;
  m.link[static_cast<int>(PathClass::kShm)] = {lat_us, gbps};
  return m;
}

algo::CollArgs allreduce(size_t bytes) {
  algo::CollArgs a;
  a.coll = Coll::kAllReduce;
  a.elem = 4;
  a.count = bytes / 4;
  a.chunk_bytes = size_t(1) << 40;  // one chunk per block: the textbook ring
  return a;
}

// n ranks on one host that map each other's staging areas.
ClusterModel one_host_one_sided(int n, size_t staging_bytes, double flag_us, double copy_gbps) {
  ClusterModel m;
  m.nranks = n;
  m.ranks_per_host = n;
  m.one_sided = true;
  m.staging_bytes = staging_bytes;
  m.flag_us = flag_us;
  m.copy_gbps = copy_gbps;
  return m;
}

const tune::Candidate* find(Coll c, const std::string& name) {
  for (const tune::Candidate* k : tune::candidates_for(c))
    if (k->name == name) return k;
  return nullptr;
}

TEST(SimTest, RingAllReduceMatchesAlphaBeta) {
  for (int n : {2, 3, 4, 8, 16}) {
    for (size_t bytes : {size_t(4) * 1024, size_t(64) << 20}) {
      const double a = 5, b = 10;
      size_t s = bytes / 4 / n * 4 * n;  // divisible: equal blocks
      auto r = simulate(flat(n, a, b), allreduce(s), algo::ring_allreduce);
      ASSERT_TRUE(r.ok()) << r.status().message();
      double theory = 2.0 * (n - 1) * (a + double(s) / n / (b * 1e3));
      EXPECT_NEAR(r->time_us, theory, theory * 0.01) << "n=" << n << " bytes=" << s;
      EXPECT_EQ(r->critical_hops, 2 * (n - 1));
    }
  }
}

TEST(SimTest, PipelinedRingApproachesBandwidthBound) {
  // With many chunks the ring stays 2(N-1)/N * S / B plus a few latencies.
  const int n = 8;
  const size_t s = size_t(64) << 20;
  algo::CollArgs a = allreduce(s);
  a.chunk_bytes = 256 << 10;
  auto r = simulate(flat(n, 5, 10), a, algo::ring_allreduce);
  ASSERT_TRUE(r.ok());
  double bw_bound = 2.0 * (n - 1) / n * double(s) / 1e4;
  EXPECT_GT(r->time_us, bw_bound);
  // Plus latency per hop and half an alpha of sender overhead per chunk message.
  double chunk_msgs = double(r->messages) / n;
  EXPECT_LT(r->time_us, bw_bound * 1.05 + 2 * (n - 1) * 5 + chunk_msgs * 2.5);
}

TEST(SimTest, RotationSymmetryIsExact) {
  ClusterModel m;
  m.nranks = 32;
  m.ranks_per_host = 4;
  m.link[0] = {1, 20};
  m.link[2] = {5, 12};
  // Blocks must be equal (count a multiple of N) for the symmetry to hold.
  for (size_t bytes : {size_t(128), size_t(4) << 20}) {
    algo::CollArgs a = allreduce(bytes);
    a.chunk_bytes = 64 << 10;
    auto full = simulate(m, a, algo::ring_allreduce);
    SimOptions opt;
    opt.period = 4;
    auto sym = simulate(m, a, algo::ring_allreduce, opt);
    ASSERT_TRUE(full.ok() && sym.ok());
    EXPECT_TRUE(sym->symmetric);
    EXPECT_LT(sym->steps, full->steps);
    EXPECT_NEAR(sym->time_us, full->time_us, full->time_us * 0.02) << bytes;
  }
}

TEST(SimTest, TreeLatencyGrowsLikeLog2N) {
  const tune::Candidate* tree = find(Coll::kAllReduce, "tree");
  if (!tree) GTEST_SKIP() << "no tree AllReduce registered yet";
  const double a = 5;
  double prev = 0;
  for (int n : {16, 64, 256, 1024}) {
    auto r = simulate(flat(n, a, 10), allreduce(8), tree->build);
    ASSERT_TRUE(r.ok()) << r.status().message();
    double hops = r->time_us / a;
    // Up and down a binary tree: about 2 log2 N latencies (a constant factor either way).
    EXPECT_GT(hops, std::log2(n)) << n;
    EXPECT_LT(hops, 4 * std::log2(n) + 4) << n;
    if (prev > 0) {
      EXPECT_LT(r->time_us, prev * 2.5);  // log growth, not linear
    }
    prev = r->time_us;
  }
}

TEST(SimTest, ThousandRanksInSeconds) {
  ClusterModel m;
  m.nranks = 1024;
  m.ranks_per_host = 8;
  m.link[0] = {1, 20};
  m.link[2] = {5, 50};
  auto t0 = std::chrono::steady_clock::now();
  algo::CollArgs a = allreduce(8);
  a.chunk_bytes = 512 << 10;
  auto full = simulate(m, a, algo::ring_allreduce);
  ASSERT_TRUE(full.ok());
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_LT(secs, 20.0);
  // 8 bytes over 1024 ranks: a pure latency chain of 2(N-1) hops.
  EXPECT_GT(full->time_us, 2 * 1023 * 1.0);
  m.nranks = 8192;
  a = allreduce(8192 * 4);  // one element per block: latency-bound, and symmetric
  a.chunk_bytes = 512 << 10;
  SimOptions opt;
  opt.period = 8;
  auto big = simulate(m, a, algo::ring_allreduce, opt);
  ASSERT_TRUE(big.ok());
  EXPECT_TRUE(big->symmetric);
  EXPECT_GT(big->time_us, 2 * 8191 * 1.0);
}

TEST(SimTest, FewerCoresThanRanksQueueMessageOverheads) {
  // 4 ranks on one host, 8-byte Broadcast: the double tree has the shorter
  // critical path, the chain the fewer messages. With a core per rank the
  // tree is no slower; with one core for all four, overheads queue and the
  // chain wins, as measured on a 2-core machine running 4 ranks.
  ClusterModel m;
  m.nranks = 4;
  m.ranks_per_host = 4;
  m.link[static_cast<int>(PathClass::kShm)] = {2.0, 10.0};
  algo::CollArgs a;
  a.coll = Coll::kBroadcast;
  a.elem = 4;
  a.count = 2;
  a.root = 0;
  a.chunk_bytes = 1 << 20;
  auto time_of = [&](const char* name) {
    auto r = simulate(m, a, find(Coll::kBroadcast, name)->build);
    EXPECT_TRUE(r.ok()) << r.status().message();
    return r.ok() ? r->time_us : 0.0;
  };
  EXPECT_LE(time_of("tree"), time_of("chain"));
  const double roomy_chain = time_of("chain");
  m.cores_per_host = 1;
  EXPECT_LT(time_of("chain"), time_of("tree"));
  EXPECT_GT(time_of("chain"), roomy_chain);  // the overheads now wait for the core
}

TEST(SimTest, EmulatedHostsShareOneMachine) {
  // 8 emulated hosts on a 2-core machine: the ring's bytes all pass through
  // the machine's copy bandwidth, and its message overheads through 2 cores.
  ClusterModel m = flat(8, 10, 1.5);
  const size_t bytes = 2u << 20;
  auto ring_time = [&] { return simulate(m, allreduce(bytes), algo::ring_allreduce)->time_us; };
  const double own_machines = ring_time();
  m.machine_net_gbps = 3.0;
  const double shared_bytes = ring_time();
  // Every rank moves 2 (n-1)/n of the data: 8 x 1.75 x 2 MiB through 3 GB/s.
  EXPECT_GT(shared_bytes, 8 * 1.75 * double(bytes) / 3e3);
  EXPECT_GT(shared_bytes, 2 * own_machines);
  m.machine_cores = 2;
  EXPECT_GT(ring_time(), shared_bytes);  // overheads now queue for 2 cores as well
  // Two hosts whose links were probed with both directions busy (1.5 GB/s
  // each way), on a machine that copies 3 GB/s in all. The ring keeps both
  // directions busy: it costs what the two links cost (bar its first and
  // last message, which run alone).
  ClusterModel two = flat(2, 10, 1.5);
  const double alone = simulate(two, allreduce(bytes), algo::ring_allreduce)->time_us;
  algo::CollArgs bcast = allreduce(bytes);
  bcast.coll = Coll::kBroadcast;
  SimOptions one;
  one.calls = 1;
  const double bcast_alone = simulate(two, bcast, algo::chain_broadcast, one)->time_us;
  two.machine_net_gbps = 3.0;
  two.machine_cores = 2;
  EXPECT_NEAR(simulate(two, allreduce(bytes), algo::ring_allreduce)->time_us, alone, alone * 0.02);
  // A Broadcast sends one way only: its bytes get the whole machine, twice
  // the rate a direction kept while the other was busy.
  const double bcast_shared = simulate(two, bcast, algo::chain_broadcast, one)->time_us;
  EXPECT_NEAR(bcast_shared - 10, (bcast_alone - 10) / 2, 0.05 * bcast_alone);
}

TEST(SimTest, SharedCoreDoesNotSerialiseMessagesInFlight) {
  // 2 emulated hosts on one core: both ranks send their half of a 2-rank
  // ring at once. The receive overhead of the first message is booked a
  // wire time ahead; the second send's overhead must fit in the gap before
  // it instead of waiting for it, so the two flights overlap.
  ClusterModel m = flat(2, 10, 1);
  const size_t bytes = 1u << 20;
  const double own_cores = simulate(m, allreduce(bytes), algo::ring_allreduce)->time_us;
  m.machine_cores = 1;
  const double one_core = simulate(m, allreduce(bytes), algo::ring_allreduce)->time_us;
  EXPECT_GE(one_core, own_cores);
  EXPECT_LT(one_core, own_cores * 1.1) << "flights serialised behind booked receive overheads";
}

TEST(SimTest, SwitchCostIsPaidPerMessageWhereRanksOutnumberCores) {
  ClusterModel m = flat(4, 10, 1);
  auto ring = [&] { return simulate(m, allreduce(8), algo::ring_allreduce)->time_us; };
  m.machine_cores = 4;  // a core per rank: nobody sleeps
  const double roomy = ring();
  m.switch_us = 3;
  EXPECT_DOUBLE_EQ(ring(), roomy);
  m.machine_cores = 2;
  m.switch_us = 0;
  const double crowded = ring();
  m.switch_us = 3;
  // The ring's 2 (n-1) steps each wait for a receiver to be switched in.
  EXPECT_GE(ring(), crowded + 2 * 3 * 3 - 1e-9);
}

TEST(SimTest, ASleepingRankIsSwitchedInAtTheCostOfASwitchBetweenProcesses) {
  // Ranks are processes: where both switch costs are known, a switch takes
  // the one between processes; the one between threads only stands in
  // where that is unknown.
  ClusterModel m = flat(4, 10, 1);
  m.machine_cores = 2;
  auto ring = [&] { return simulate(m, allreduce(8), algo::ring_allreduce)->time_us; };
  m.switch_us = 2;
  const double threads_only = ring();
  m.process_switch_us = 6;
  const double with_processes = ring();
  m.switch_us = 6;
  m.process_switch_us = 0;
  EXPECT_DOUBLE_EQ(with_processes, ring());
  EXPECT_GT(with_processes, threads_only);
  m.switch_us = 100;  // the thread switch no longer counts once the process switch is known
  m.process_switch_us = 6;
  EXPECT_DOUBLE_EQ(ring(), with_processes);
}

TEST(SimTest, AnEagerCallWakesEachSleepingRankAboutOnce) {
  // 4 ranks on one host's 2 cores: every rank waits for 3 peers' flags but,
  // once woken, sees the flags already raised, so the call costs about one
  // wake-up per rank, not one per wait. The flags come at once, and half
  // the ranks are on the 2 cores then: a wake-up costs half a switch
  // (4 x 5 us on 2 cores, not 12 x 5 us).
  ClusterModel m;
  m.nranks = 4;
  m.ranks_per_host = 4;
  m.cores_per_host = 2;
  m.one_sided = true;
  m.staging_bytes = 64 << 10;
  m.flag_us = 0.3;
  m.copy_gbps = 10;
  m.switch_us = 10;
  algo::CollArgs a = allreduce(64);
  a.staging_bytes = m.staging_bytes;
  const double t = simulate(m, a, algo::eager_allreduce)->time_us;
  EXPECT_GE(t, 4 * 5.0 / 2);
  EXPECT_LT(t, 2 * 4 * 5.0 / 2) << "a switch charged per wait, not per sleep";
}

TEST(SimTest, ARankWokenForOneFlagSeesTheRestOfItsRoundAwake) {
  // Single-copy AllGathers on 4 ranks of one host's 2 cores: each rank
  // waits for 3 peers' flags, reads their blocks, then waits for 3 flags
  // again. A rank woken for the first flag of a round yields rather than
  // sleeps while it waits for the others, so a call costs it two wake-ups
  // (2 x 4 x 5 us on 2 cores: half a switch each, as above), not one for
  // every flag that comes late.
  ClusterModel m = one_host_one_sided(4, 64 << 10, 0.3, 10);
  m.cores_per_host = 2;
  algo::CollArgs a = allreduce(64);
  a.coll = Coll::kAllGather;
  a.count = 4;
  a.staging_bytes = m.staging_bytes;
  auto time_of = [&](double switch_us) {
    m.switch_us = switch_us;
    auto r = simulate(m, a, find(Coll::kAllGather, "direct")->build, SimOptions{.calls = 3});
    EXPECT_TRUE(r.ok()) << r.status().message();
    return r.ok() ? r->time_us : 0.0;
  };
  const double asleep = time_of(10) - time_of(0);
  EXPECT_GE(asleep, 2 * 4 * 5.0 / 2 - 1e-9) << "each round sleeps once";
  EXPECT_LT(asleep, 3 * 4 * 5.0 / 2) << "a switch charged per late flag, not per round";
}

TEST(SimTest, ARankFindingItsMessageWaitingNeedsNoSwitch) {
  // A loop of 64-byte chain Broadcasts on 4 ranks of one host's 2 cores:
  // the root sends call after call, and a rank busy with one call finds
  // the next call's message already there, so the stream runs without
  // sleeping (measured: 1.5-2.0 us a call, where a switch costs 3.5-5 us).
  // A lone call still wakes each of its 3 receivers (half a switch each:
  // their messages come within a round trip of hand-offs).
  ClusterModel m = one_host(4, 0.8, 30);
  m.cores_per_host = 2;
  m.switch_us = 10;
  algo::CollArgs a = allreduce(64);
  a.coll = Coll::kBroadcast;
  auto looped = simulate(m, a, algo::chain_broadcast, SimOptions{.calls = 12});
  ASSERT_TRUE(looped.ok()) << looped.status().message();
  EXPECT_LT(looped->time_us, 10.0 / 2) << "the stream sleeps every call";
  EXPECT_GE(simulate(m, a, algo::chain_broadcast, SimOptions{.calls = 1})->time_us, 3 * 5.0);
}

// Three back-to-back chain Broadcasts of 16000 bytes on 4 ranks of one
// host, 1 GB/s slots (16 us a copy), with `cores` cores for the host (0:
// one per rank) and memcpy at `copy_gbps` (0: unknown): the time per call.
double chain_loop_us(int cores, double copy_gbps) {
  ClusterModel m = one_host(4, 0.0, 1.0);
  m.cores_per_host = cores;
  m.copy_gbps = copy_gbps;
  algo::CollArgs a = allreduce(16000);
  a.coll = Coll::kBroadcast;
  auto looped = simulate(m, a, algo::chain_broadcast, SimOptions{.calls = 3});
  EXPECT_TRUE(looped.ok()) << looped.status().message();
  return looped.ok() ? looped->time_us : 0.0;
}

TEST(SimTest, AWakeUpSoonAfterARanksWorkCostsTheQueuedRanksShareOfASwitch) {
  // An eager AllReduce on one host's 2 cores: every rank waits once, for
  // flags that come at once. Of n ranks, 2 are on the cores at a time, so
  // each wake-up costs (n - 2) / n of a switch: n x 10 x (n - 2) / n us of
  // switches on the 2 cores (4 ranks: half a switch each; 6: two thirds).
  for (int n : {4, 6}) {
    ClusterModel m = one_host_one_sided(n, 64 << 10, 0.3, 10);
    m.cores_per_host = 2;
    algo::CollArgs a = allreduce(64);
    a.staging_bytes = m.staging_bytes;
    m.switch_us = 10;
    auto with = simulate(m, a, algo::eager_allreduce);
    m.switch_us = 0;
    auto without = simulate(m, a, algo::eager_allreduce);
    ASSERT_TRUE(with.ok() && without.ok());
    EXPECT_NEAR(with->time_us - without->time_us, n * 10.0 * (n - 2) / n / 2, 0.1) << n << " ranks";
  }
}

TEST(SimTest, AWakeUpAfterAHandOffRoundTripCostsAWholeSwitch) {
  // A lone chain Broadcast on 4 ranks of one host's 2 cores: each of its 3
  // receivers waits from the call's start. Half of the ranks are on the 2
  // cores at a time, so a message that comes within a round trip of
  // hand-offs (2 x (10 + 2) us) costs its receiver half a switch; one that
  // comes later finds the receiver's core taken by a rank doing work, and
  // costs a whole switch.
  auto switches_us = [](double lat_us, bool loopback_tcp = false) {
    ClusterModel m = one_host(4, lat_us, 30);
    m.cores_per_host = 2;
    m.same_host_tcp = loopback_tcp;
    m.link[static_cast<int>(PathClass::kTcpLocal)] = m.link[static_cast<int>(PathClass::kShm)];
    algo::CollArgs a = allreduce(64);
    a.coll = Coll::kBroadcast;
    m.switch_us = 10;
    const double with = simulate(m, a, algo::chain_broadcast)->time_us;
    m.switch_us = 0;
    return with - simulate(m, a, algo::chain_broadcast)->time_us;
  };
  EXPECT_NEAR(switches_us(0.8), 3 * 5.0, 1e-6);
  EXPECT_NEAR(switches_us(100), 3 * 10.0, 1e-6);
  // Over loopback TCP the kernel's socket wake-up moves the woken rank: a
  // whole switch either way.
  EXPECT_NEAR(switches_us(0.8, true), 3 * 10.0, 1e-6);
}

TEST(SimTest, BothCopiesOfASlotMessageTakeCoresInALoopOfCalls) {
  // Each of the chain's 3 messages is copied in by its sender and out by
  // its receiver, 16 us each, so on 2 cores a call needs 6 x 16 us of
  // them however far the root runs ahead (measured at 256 KiB: 32-36 us a
  // call, where the sender's copies alone priced it at 14).
  EXPECT_GE(chain_loop_us(2, 0), 6 * 16.0 / 2 - 1e-9);
  // A core per rank: the chain's stream runs at one copy per hop.
  EXPECT_LT(chain_loop_us(0, 0), 6 * 16.0 / 2);
}

TEST(SimTest, ASlotMessageBetweenRanksSharingACoreIsCopiedAtAMemcpysRate) {
  // The same loop with memcpy at 10 GB/s: of a rank's 3 peers on 2 cores,
  // about 2 ran on the other core, and a message between two ranks that
  // took turns on one core crosses no cores. Each of the 6 copies costs
  // 2/3 x 16 us + 1/3 x 1.6 us, and the loop needs 6 of them from the 2
  // cores.
  const double shared = chain_loop_us(2, 10);
  const double copy = 2.0 / 3 * 16.0 + 1.0 / 3 * 1.6;
  EXPECT_GE(shared, 6 * copy / 2 - 1e-9);
  EXPECT_LT(shared, 6 * 16.0 / 2) << "every message priced as crossing cores";
  // A core per rank: every message crosses, whatever memcpy's rate.
  EXPECT_DOUBLE_EQ(chain_loop_us(0, 10), chain_loop_us(0, 0));
}

TEST(SimTest, BackToBackChainBroadcastsOverlap) {
  // A chain forwards call k while its successor still handles call k-1: in
  // a loop a call costs about the root's sends, not the chain's 3 hops.
  ClusterModel m = flat(4, 10, 10);
  algo::CollArgs a = allreduce(64);
  a.coll = Coll::kBroadcast;
  SimOptions one, loop;
  loop.calls = 3;
  auto alone = simulate(m, a, algo::chain_broadcast, one);
  auto looped = simulate(m, a, algo::chain_broadcast, loop);
  ASSERT_TRUE(alone.ok() && looped.ok());
  EXPECT_EQ(alone->critical_hops, 3);
  EXPECT_EQ(looped->critical_hops, 3) << "hops are the first call's";
  EXPECT_DOUBLE_EQ(looped->first_call_us, alone->time_us);
  EXPECT_LT(looped->time_us, alone->time_us / 2);
  EXPECT_EQ(looped->messages, alone->messages) << "messages are per call";
  EXPECT_EQ(looped->steps, alone->steps) << "steps are per call";
}

TEST(SimTest, BackToBackCallsThatEndTogetherKeepTheirTime) {
  // The textbook ring ends on every rank at once, and an eager call's ranks
  // all wait for each other: neither overlaps with the next call. Each
  // call's waits are released by the same call's signals.
  ClusterModel m = flat(4, 5, 10);
  SimOptions loop;
  loop.calls = 4;
  auto alone = simulate(m, allreduce(4096), algo::ring_allreduce);
  auto looped = simulate(m, allreduce(4096), algo::ring_allreduce, loop);
  ASSERT_TRUE(alone.ok() && looped.ok());
  EXPECT_NEAR(looped->time_us, alone->time_us, alone->time_us * 0.01);

  ClusterModel host = one_host_one_sided(4, 64 << 10, 0.5, 10);
  algo::CollArgs e = allreduce(4096);
  e.staging_bytes = host.staging_bytes;
  auto eager_alone = simulate(host, e, algo::eager_allreduce);
  auto eager_looped = simulate(host, e, algo::eager_allreduce, loop);
  ASSERT_TRUE(eager_alone.ok() && eager_looped.ok()) << eager_looped.status().message();
  EXPECT_NEAR(eager_looped->time_us, eager_alone->time_us, eager_alone->time_us * 0.01);
}

TEST(SimTest, ALocalCopyTakesACoreWhereRanksOutnumberCores) {
  // An eager AllGather copies each rank's block into its staging area: 4
  // such copies on 2 cores take two copy times, not one.
  ClusterModel m = one_host_one_sided(4, 1 << 20, 0, 1);  // copies at 1 KB per us
  algo::CollArgs a = allreduce(16000);
  a.coll = Coll::kAllGather;
  a.count = 16000 / 4;  // a block of 16000 bytes: 16 us to copy
  a.staging_bytes = m.staging_bytes;
  const double roomy = simulate(m, a, algo::eager_allgather)->time_us;
  m.cores_per_host = 2;
  const double crowded = simulate(m, a, algo::eager_allgather)->time_us;
  // The four staging copies (4 x 16 us) and twelve reads (12 x 16 us) on 2 cores.
  EXPECT_GE(crowded, (4 + 12) * 16.0 / 2 - 1e-9);
  EXPECT_GT(crowded, roomy);
}

TEST(SimTest, ASendersSlotCopyTakesACoreWhereRanksOutnumberCores) {
  // Pairwise AlltoAll of 16000-byte blocks on 4 ranks of one host: each rank
  // sends 3 messages of 16 us and receives 3. With a core per rank, that
  // core does its own 6 copies (96 us at least); with one core for all
  // four, every copy into the slots and out of them waits for that core:
  // 24 x 16 us.
  ClusterModel m;
  m.nranks = 4;
  m.ranks_per_host = 4;
  m.link[static_cast<int>(PathClass::kShm)] = {0.0, 1.0};
  algo::CollArgs a = allreduce(16000);
  a.coll = Coll::kAlltoAll;
  a.count = 16000 / 4;
  const double roomy = simulate(m, a, algo::pairwise_alltoall)->time_us;
  m.cores_per_host = 1;
  const double crowded = simulate(m, a, algo::pairwise_alltoall)->time_us;
  EXPECT_GE(roomy, 6 * 16.0 - 1e-9);
  EXPECT_LT(roomy, 12 * 16.0);
  EXPECT_GE(crowded, 24 * 16.0 - 1e-9);
}

TEST(SimTest, ARankSendingAndReceivingOverSharedMemoryDoesBothCopiesOnItsCore) {
  // Measured through slot rings between two cores: a one-way stream runs at
  // the rate both cores copy at, a two-way exchange at half of it per
  // direction. 2 ranks, 1 MB at 1 GB/s (1000 us a copy), no latency.
  ClusterModel m = one_host(2, 0.0, 1.0);
  algo::CollArgs bcast = allreduce(1000000);
  bcast.coll = Coll::kBroadcast;
  SimOptions one;
  one.calls = 1;
  EXPECT_NEAR(simulate(m, bcast, algo::chain_broadcast, one)->time_us, 1000, 1);
  algo::CollArgs a2a = allreduce(2000000);
  a2a.coll = Coll::kAlltoAll;
  a2a.count = 2000000 / 4 / 2;  // a 1 MB block for the peer
  EXPECT_NEAR(simulate(m, a2a, algo::pairwise_alltoall, one)->time_us, 2000, 1);
  // Over the network the two directions of a NIC are separate ports.
  m.ranks_per_host = 1;
  m.link[static_cast<int>(PathClass::kNet)] = {0.0, 1.0};
  EXPECT_NEAR(simulate(m, a2a, algo::pairwise_alltoall, one)->time_us, 1000, 1);
}

TEST(SimTest, AMessageThroughSlotsTakesOnePieceLongerThanItsStream) {
  // The receiver copies a piece out of the slots only once the sender has
  // copied all of it in. 2 ranks, 1 GB/s, no latency, 100 KB pieces (100 us
  // to copy one).
  ClusterModel m = one_host(2, 0.0, 1.0);
  m.shm_piece_bytes = 100000;
  SimOptions one;
  one.calls = 1;
  algo::CollArgs bcast = allreduce(40000);
  bcast.coll = Coll::kBroadcast;
  // A message of less than a piece: copied in, then copied out.
  EXPECT_NEAR(simulate(m, bcast, algo::chain_broadcast, one)->time_us, 80, 1);
  // A longer one streams; only its last piece waits for the sender.
  bcast = allreduce(1000000);
  bcast.coll = Coll::kBroadcast;
  EXPECT_NEAR(simulate(m, bcast, algo::chain_broadcast, one)->time_us, 1100, 1);
  // A two-way exchange is bound by each rank's own two copies; its last
  // piece is copied out after it was copied in.
  algo::CollArgs a2a = allreduce(2000000);
  a2a.coll = Coll::kAlltoAll;
  a2a.count = 2000000 / 4 / 2;
  EXPECT_NEAR(simulate(m, a2a, algo::pairwise_alltoall, one)->time_us, 2100, 1);
  // Between hosts the network carries the message, not the slots.
  m.ranks_per_host = 1;
  m.link[static_cast<int>(PathClass::kNet)] = {0.0, 1.0};
  EXPECT_NEAR(simulate(m, bcast, algo::chain_broadcast, one)->time_us, 1000, 1);
}

TEST(SimTest, ARanksLocalCopyRunsOnItsCoreBetweenItsMessageCopies) {
  // An out-of-place AllGather on 2 ranks copies the rank's own block into
  // its output and exchanges a block with its peer: one core does all
  // three copies, so they add up. 1 MB blocks, 1 GB/s slots and memcpy.
  ClusterModel m = one_host(2, 0.0, 1.0);
  m.copy_gbps = 1.0;
  SimOptions one;
  one.calls = 1;
  algo::CollArgs ag = allreduce(1000000);
  ag.coll = Coll::kAllGather;
  ag.in_place = false;
  EXPECT_NEAR(simulate(m, ag, algo::ring_allgather, one)->time_us, 3000, 1);
  ag.in_place = true;  // nothing to copy locally
  EXPECT_NEAR(simulate(m, ag, algo::ring_allgather, one)->time_us, 2000, 1);
}

TEST(SimTest, ALoopbackMessageHoldsItsSendersCoreForAllOfAlpha) {
  // Over loopback TCP the sender's system call delivers the message into
  // the peer's socket: nothing is in flight, so back-to-back Broadcasts from
  // one root cost a whole alpha each; through shared memory half of alpha
  // is flight and overlaps the next call. 2 ranks, 10 us alpha, 64 B.
  ClusterModel m = one_host(2, 10.0, 1e6);
  m.link[static_cast<int>(PathClass::kTcpLocal)] = {10.0, 1e6};
  algo::CollArgs a = allreduce(64);
  a.coll = Coll::kBroadcast;
  SimOptions one, loop;
  loop.calls = 20;
  EXPECT_NEAR(simulate(m, a, algo::chain_broadcast, one)->time_us, 10, 0.1);
  EXPECT_NEAR(simulate(m, a, algo::chain_broadcast, loop)->time_us, 5, 0.1);
  m.same_host_tcp = true;
  EXPECT_NEAR(simulate(m, a, algo::chain_broadcast, one)->time_us, 10, 0.1) << "a lone message still costs alpha";
  EXPECT_NEAR(simulate(m, a, algo::chain_broadcast, loop)->time_us, 10, 0.1);
}

TEST(SimTest, ACallsFirstCopiedBytesRunAtTheCachedRate) {
  ClusterModel m;
  m.cma_us = 2;
  m.cma_gbps = 4;  // 4000 bytes a us
  EXPECT_DOUBLE_EQ(m.kernel_copy_us(8000, 8000), 2 + 2) << "without a cached rate: one rate";
  m.call_cached_bytes = 16000;
  m.cma_cached_gbps = 8;
  EXPECT_DOUBLE_EQ(m.kernel_copy_us(8000, 8000), 2 + 1) << "a call that stays in the caches";
  EXPECT_DOUBLE_EQ(m.kernel_copy_us(16000, 16000), 2 + 2);
  // A call of 48000 bytes: 16000 at 8 GB/s, 32000 at 4 (10 us in all),
  // shared by its pieces in proportion.
  EXPECT_DOUBLE_EQ(m.kernel_copy_us(48000, 48000), 2 + 10);
  EXPECT_DOUBLE_EQ(m.kernel_copy_us(12000, 48000), 2 + 2.5);
  // Local copies the same way, at their own rates and with no call cost.
  m.copy_gbps = 2;
  EXPECT_DOUBLE_EQ(m.local_copy_us(8000, 8000), 4) << "without a cached rate: one rate";
  m.copy_cached_gbps = 16;
  EXPECT_DOUBLE_EQ(m.local_copy_us(8000, 8000), 0.5);
  EXPECT_DOUBLE_EQ(m.local_copy_us(48000, 48000), 1 + 16);
  m.copy_gbps = 0;
  EXPECT_DOUBLE_EQ(m.local_copy_us(8000, 8000), 0) << "copies are free where copy_gbps is 0";

  // A 2-rank direct AllGather of heap buffers reads the peer's 2 MiB block
  // through the kernel in 128 KiB pieces: the block's first MiB runs at the
  // cached rate, whichever pieces carry it.
  ClusterModel host = one_host_one_sided(2, 64 << 10, 0.1, 1e6);
  host.reads_peer_buffers = true;
  host.cma_us = 2;
  host.cma_gbps = 4;
  algo::CollArgs a = allreduce(4 << 20);
  a.coll = Coll::kAllGather;
  a.count /= 2;
  const double one_rate = simulate(host, a, algo::direct_allgather)->time_us;
  host.call_cached_bytes = 1 << 20;
  host.cma_cached_gbps = 8;
  const double two_rates = simulate(host, a, algo::direct_allgather)->time_us;
  EXPECT_NEAR(one_rate - two_rates, double(1 << 20) / 4e3 - double(1 << 20) / 8e3, 1.0);
}

// A peer's staging area was just written by the peer's core: reading it
// moves every line across cores, at the slot stream's rate, not at the
// rate of a memcpy from this core's caches. An eager AllReduce's reduction
// of one peer's 64 KiB costs that transfer on top of the sum itself.
TEST(SimTest, APeersMappedMemoryCrossesCoresAtTheSlotStreamsRate) {
  ClusterModel m = one_host_one_sided(2, 64 << 10, 0.1, 100);
  m.link[static_cast<int>(PathClass::kShm)] = {0.1, 25};
  EXPECT_DOUBLE_EQ(m.peer_memory_us(50000), 2.0) << "the slower of the two rates";
  m.copy_gbps = 20;
  EXPECT_DOUBLE_EQ(m.peer_memory_us(50000), 2.5);
  // 4 ranks on 2 cores: of a rank's 3 peers, about 2 ran on the other core.
  ClusterModel shared = m;
  shared.ranks_per_host = shared.nranks = 4;
  shared.cores_per_host = 2;
  EXPECT_DOUBLE_EQ(shared.peer_memory_us(50000), 2.5 * 2 / 3);
  m.copy_gbps = 100;
  m.reduce_gbps = 1e9;  // the sum itself free: what is left is the transfer
  algo::CollArgs a = allreduce(64 << 10);
  a.staging_bytes = m.staging_bytes;
  const double slow_lines = simulate(m, a, algo::eager_allreduce)->time_us;
  m.link[static_cast<int>(PathClass::kShm)].gbps = 1e9;  // lines as fast as a local memcpy (100 GB/s)
  const double cached_lines = simulate(m, a, algo::eager_allreduce)->time_us;
  // The peer's staged 64 KiB cross once when this rank reads them, and this
  // rank's staged lines, which the peer read in the previous use of the
  // staging half, come back before they are written (all but the line
  // whose return overlaps the flag's).
  const double crossing = double(64 << 10) + double(64 << 10) - 64;
  EXPECT_NEAR(slow_lines - cached_lines, crossing / 25e3 - crossing / 100e3, 0.05);
}

// The lines that come back to a rank's staging copy are those its peers
// read: of a 2-rank eager ReduceScatter's two staged blocks, the peer reads
// one. A call of one cache line pays no return beyond the flag round.
TEST(SimTest, AStagingCopyTakesBackTheLinesPeersRead) {
  auto transfer_us = [](size_t block) {
    ClusterModel m = one_host_one_sided(2, 1 << 20, 0.1, 100);
    m.link[static_cast<int>(PathClass::kShm)] = {0.1, 25};
    m.reduce_gbps = 1e9;
    algo::CollArgs a = allreduce(2 * block);
    a.coll = Coll::kReduceScatter;
    a.count = block / 4;
    a.staging_bytes = m.staging_bytes;
    const double slow = simulate(m, a, algo::eager_reducescatter)->time_us;
    m.link[static_cast<int>(PathClass::kShm)].gbps = 1e9;
    return slow - simulate(m, a, algo::eager_reducescatter)->time_us;
  };
  const double per_byte = 1 / 25e3 - 1 / 100e3;
  // The peer's block read, and the one block of ours it read, back.
  EXPECT_NEAR(transfer_us(16 << 10), (double(16 << 10) + double(16 << 10) - 64) * per_byte, 1e-3);
  // A 32-byte block: its read, and nothing back (both blocks in one line).
  EXPECT_NEAR(transfer_us(32), 32 * per_byte, 1e-6);
}

TEST(SimTest, MeasuredCurveReplacesBytesOverBandwidth) {
  // A link whose 2 KiB messages cost a step more than 1 KiB ones (a second
  // TCP segment), as the network probe measures it.
  LinkParams lp(10, 2);
  lp.curve = {{8, 10}, {1024, 10.5}, {2048, 15}, {4096, 15.5}, {2u << 20, 1010}};
  EXPECT_DOUBLE_EQ(lp.wire_us(8), 0);
  EXPECT_DOUBLE_EQ(lp.wire_us(0), 0);
  EXPECT_DOUBLE_EQ(lp.wire_us(1024), 0.5);
  EXPECT_DOUBLE_EQ(lp.wire_us(1536), 2.75);  // linear between the points
  EXPECT_DOUBLE_EQ(lp.wire_us(2048), 5);
  // Past the last point: its time plus the rest at the link's bandwidth.
  EXPECT_DOUBLE_EQ(lp.wire_us(double(2u << 20) + 2000), 1000 + 1);
  // Without a curve: bytes over bandwidth.
  EXPECT_DOUBLE_EQ(LinkParams(10, 2).wire_us(4000), 2);

  // The 2-rank ring AllReduce moves two messages of half the call: 4 KiB
  // calls pay the step twice, 2 KiB calls not at all.
  ClusterModel m = flat(2, 10, 2);
  m.link[static_cast<int>(PathClass::kNet)] = lp;
  auto ring = [&](size_t bytes) { return simulate(m, allreduce(bytes), algo::ring_allreduce)->time_us; };
  EXPECT_NEAR(ring(2048), 2 * (10 + 0.5), 1e-6);
  EXPECT_NEAR(ring(4096), 2 * (10 + 5), 1e-6);
}

TEST(SimTest, CallOverheadIsPaidOncePerCall) {
  ClusterModel m = flat(4, 5, 10);
  const double without = simulate(m, allreduce(4096), algo::ring_allreduce)->time_us;
  m.call_us = 3;
  EXPECT_NEAR(simulate(m, allreduce(4096), algo::ring_allreduce)->time_us, without + 3, 1e-9);
}

TEST(SimTest, CurveTextRoundTrips) {
  std::vector<CurvePoint> c;
  ASSERT_TRUE(parse_curve("8:9.1,1024:9.4,2097152:1100", &c));
  ASSERT_EQ(c.size(), 3u);
  EXPECT_DOUBLE_EQ(c[1].bytes, 1024);
  EXPECT_DOUBLE_EQ(c[2].us, 1100);
  EXPECT_EQ(format_curve(c), "8:9.10,1024:9.40,2097152:1100.00");
  std::vector<CurvePoint> again;
  ASSERT_TRUE(parse_curve(format_curve(c), &again));
  EXPECT_EQ(again.size(), c.size());
  // Rejected, leaving the output alone: empty, unordered, malformed, negative.
  for (const char* bad : {"", "8:9,8:10", "1024:9,8:10", "8", "8:9,", "8:9x", "a:b", "-8:9", "8:-9", "8:9;16:10", "inf:9", "8:nan"})
    EXPECT_FALSE(parse_curve(bad, &c)) << bad;
  EXPECT_EQ(c.size(), 3u);
}

TEST(SimTest, UnmatchedSendIsAnError) {
  auto broken = [](const algo::CollArgs& a) {
    algo::Schedule s;
    if (a.rank == 0) s.send(1, {algo::kSendBuf, 0, 8});
    return s;
  };
  auto r = simulate(flat(2, 1, 1), allreduce(8), broken);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("sends 1 messages to rank 1"), std::string::npos) << r.status().message();
}

TEST(SimTest, DeadlockIsAnError) {
  // Both ranks receive first, and their sends depend on those receives.
  auto cyclic = [](const algo::CollArgs& a) {
    algo::Schedule s;
    int got = s.recv(1 - a.rank, {algo::kRecvBuf, 0, 8});
    s.send(1 - a.rank, {algo::kSendBuf, 0, 8}, {got});
    return s;
  };
  auto r = simulate(flat(2, 1, 1), allreduce(8), cyclic);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("deadlock"), std::string::npos);
}

}  // namespace
}  // namespace conflux::sim

namespace conflux::sim {
namespace {

// Every candidate the tuner marks rotation-symmetric really is: simulating
// one host gives the same time as simulating all of them.
TEST(SimTest, SymmetricCandidatesAreSymmetric) {
  ClusterModel m;
  m.nranks = 32;
  m.ranks_per_host = 4;
  m.link[0] = {1, 20};
  m.link[2] = {5, 12};
  for (int c = 0; c < static_cast<int>(Coll::kCount); ++c) {
    for (const tune::Candidate* k : tune::candidates_for(static_cast<Coll>(c))) {
      if (!k->host_rotation_symmetric) continue;
      algo::CollArgs a;
      a.coll = k->coll;
      a.elem = 4;
      a.count = 32 * 1024;
      a.chunk_bytes = 16 << 10;
      tune::fill_hosts(&a, m);
      auto full = simulate(m, a, k->build);
      SimOptions opt;
      opt.period = 4;
      auto sym = simulate(m, a, k->build, opt);
      ASSERT_TRUE(full.ok()) << k->name << " " << coll_name(k->coll) << ": " << full.status().message();
      ASSERT_TRUE(sym.ok()) << k->name << " " << coll_name(k->coll) << ": " << sym.status().message();
      EXPECT_NEAR(sym->time_us, full->time_us, full->time_us * 0.01) << k->name << " " << coll_name(k->coll);
    }
  }
}

}  // namespace
}  // namespace conflux::sim
