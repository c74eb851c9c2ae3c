// CONFLUX_ALGO grammar, the tuner's choice and its errors, calibration cache,
// the model of a real rank table.
#include "core/config.h"
#include "topo/plan.h"
#include "tune/algo_filter.h"
#include "tune/calibrate.h"
#include "tune/calibrate_call.h"
#include "tune/comm_tuning.h"
#include "tune/comm_model.h"
#include "tune/measured_table.h"
#include "tune/tuner.h"

#include <gtest/gtest.h>

#include <sched.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <thread>
#include <vector>

namespace conflux::tune {
namespace {

TEST(TuneFilterTest, Sizes) {
  EXPECT_EQ(*parse_size("64K"), 65536u);
  EXPECT_EQ(*parse_size("1m"), 1u << 20);
  EXPECT_EQ(*parse_size("2G"), size_t(2) << 30);
  EXPECT_EQ(*parse_size("inf"), SIZE_MAX);
  EXPECT_EQ(*parse_size("100"), 100u);
  EXPECT_FALSE(parse_size("12Q").ok());
  EXPECT_EQ(size_string(65536), "64K");
  EXPECT_EQ(size_string(100), "100");
}

TEST(TuneFilterTest, NcclGrammar) {
  auto f = AlgoFilter::parse("ring,tree");
  ASSERT_TRUE(f.ok());
  const AlgoRule* r = f->rule_for(Coll::kAllReduce, 10);
  ASSERT_NE(r, nullptr);
  EXPECT_TRUE(AlgoFilter::allows(r, "ring"));
  EXPECT_TRUE(AlgoFilter::allows(r, "tree"));
  EXPECT_FALSE(AlgoFilter::allows(r, "chain"));

  auto ex = AlgoFilter::parse("^tree");
  ASSERT_TRUE(ex.ok());
  r = ex->rule_for(Coll::kBroadcast, 1);
  EXPECT_FALSE(AlgoFilter::allows(r, "tree"));
  EXPECT_TRUE(AlgoFilter::allows(r, "ring"));

  auto sec = AlgoFilter::parse("allreduce:tree,ring;broadcast:ring");
  ASSERT_TRUE(sec.ok());
  EXPECT_TRUE(AlgoFilter::allows(sec->rule_for(Coll::kAllReduce, 5), "tree"));
  EXPECT_FALSE(AlgoFilter::allows(sec->rule_for(Coll::kBroadcast, 5), "tree"));
  EXPECT_EQ(sec->rule_for(Coll::kAllGather, 5), nullptr);  // no rule: everything allowed
  EXPECT_TRUE(AlgoFilter::allows(nullptr, "anything"));
}

TEST(TuneFilterTest, UccRanges) {
  auto f = AlgoFilter::parse("allreduce:0-64K:@tree#allreduce:64K-inf:ring#ring");
  ASSERT_TRUE(f.ok()) << f.status().message();
  EXPECT_TRUE(AlgoFilter::allows(f->rule_for(Coll::kAllReduce, 100), "tree"));
  EXPECT_FALSE(AlgoFilter::allows(f->rule_for(Coll::kAllReduce, 100), "ring"));
  EXPECT_TRUE(AlgoFilter::allows(f->rule_for(Coll::kAllReduce, 65536), "ring"));
  EXPECT_FALSE(AlgoFilter::allows(f->rule_for(Coll::kAllReduce, 65536), "tree"));
  // The generic entry covers the other collectives.
  EXPECT_FALSE(AlgoFilter::allows(f->rule_for(Coll::kAllGather, 1), "bruck"));
}

TEST(TuneFilterTest, BadSpecs) {
  EXPECT_FALSE(AlgoFilter::parse("allreduce:1-2-3:ring:x").ok());
  EXPECT_FALSE(AlgoFilter::parse("nosuchcoll:ring").ok());
  EXPECT_FALSE(AlgoFilter::parse("allreduce:64K-0:ring").ok());
  EXPECT_FALSE(AlgoFilter::parse("allreduce:").ok());
}

sim::ClusterModel model(int hosts, int rph) {
  sim::ClusterModel m;
  m.nranks = hosts * rph;
  m.ranks_per_host = rph;
  m.link[0] = {1, 10};
  m.link[2] = {10, 1};
  return m;
}

algo::CollArgs args(Coll c, size_t bytes) {
  algo::CollArgs a;
  a.coll = c;
  a.elem = 4;
  a.count = bytes / 4;
  return a;
}

TEST(TunerTest, ChoosesAnAlgorithmAndSaysWhy) {
  auto d = decide(args(Coll::kAllReduce, 1 << 20), model(2, 4), AlgoFilter{});
  ASSERT_TRUE(d.ok()) << d.status().message();
  ASSERT_NE(d->chosen, nullptr);
  EXPECT_FALSE(d->reason.empty());
  EXPECT_EQ(d->predictions.size(), candidates_for(Coll::kAllReduce).size());
}

TEST(TunerTest, ForcedUnknownAlgorithmIsAnError) {
  auto f = AlgoFilter::parse("allreduce:warp");
  ASSERT_TRUE(f.ok());
  auto d = decide(args(Coll::kAllReduce, 64), model(1, 4), *f);
  ASSERT_FALSE(d.ok());
  EXPECT_NE(d.status().message().find("unknown algorithm \"warp\""), std::string::npos) << d.status().message();
}

TEST(TunerTest, ForcedAlgorithmThatCannotServeSaysSo) {
  // Broadcast has no ring candidate: forcing ring for it leaves nothing.
  auto f = AlgoFilter::parse("broadcast:ring");
  ASSERT_TRUE(f.ok());
  auto d = decide(args(Coll::kBroadcast, 64), model(1, 4), *f);
  ASSERT_FALSE(d.ok());
  EXPECT_NE(d.status().message().find("leaves no usable algorithm for broadcast"), std::string::npos)
      << d.status().message();
}

TEST(TunerTest, ExclusionIsHonoured) {
  std::string first = candidates_for(Coll::kAllReduce).front()->name;
  auto f = AlgoFilter::parse("^" + first);
  ASSERT_TRUE(f.ok());
  auto d = decide(args(Coll::kAllReduce, 1 << 20), model(2, 2), *f);
  if (candidates_for(Coll::kAllReduce).size() == 1) {
    EXPECT_FALSE(d.ok());
  } else {
    ASSERT_TRUE(d.ok());
    EXPECT_NE(d->chosen->name, first);
  }
}

// Between hosts on a wire-bound network ring takes every call the model
// puts within kNetworkRingTieMargin of its best; on one host, or on a
// network nearly as fast as memory, the model's best stands.
TEST(TunerTest, BetweenHostsRingWinsWithinTheTieMarginWhereTheWireLimits) {
  int ties = 0;
  for (Coll c : {Coll::kAllReduce, Coll::kReduceScatter, Coll::kAllGather})
    for (size_t bytes : {size_t(4) << 10, size_t(1) << 20, size_t(16) << 20})
      for (auto [hosts, rph, net_gbps] : {std::tuple{4, 1, 1.0}, std::tuple{8, 1, 1.0}, std::tuple{1, 4, 1.0},
                                          std::tuple{4, 2, 1.0}, std::tuple{4, 1, 5.0}, std::tuple{8, 1, 5.0}}) {
        sim::ClusterModel m = model(hosts, rph);
        m.link[2].gbps = net_gbps;  // shm: 10 GB/s; 1 GB/s is wire-bound, 5 is not
        auto d = decide(args(c, bytes), m, AlgoFilter{});
        ASSERT_TRUE(d.ok()) << d.status().message();
        const Prediction* fastest = nullptr;
        const Prediction* ring = nullptr;
        for (const Prediction& p : d->predictions) {
          if (!p.why_not.empty()) continue;
          if (!fastest || p.sim.time_us < fastest->sim.time_us) fastest = &p;
          if (p.algo == "ring") ring = &p;
        }
        ASSERT_NE(fastest, nullptr);
        const bool tie = hosts > 1 && net_gbps * kWireBoundCopyRatio <= m.link[0].gbps && ring != nullptr &&
                         ring != fastest &&
                         ring->sim.time_us <= fastest->sim.time_us * (1 + kNetworkRingTieMargin);
        const std::string where = std::string(coll_name(c)) + " " + std::to_string(bytes) + " B on " +
                                  std::to_string(hosts) + "x" + std::to_string(rph) + " at " +
                                  std::to_string(net_gbps) + " GB/s: " + d->reason;
        if (tie) {
          ++ties;
          EXPECT_EQ(d->chosen->name, "ring") << where;
          EXPECT_NE(d->reason.find("within 15% of " + fastest->algo), std::string::npos) << where;
        } else {
          EXPECT_EQ(d->chosen->name, fastest->algo) << where;
        }
      }
  EXPECT_GT(ties, 0) << "no case exercised the tie rule";
}

// Every rank decides alone, so a decision may not depend on what is this
// rank's own: a Gather is in place at its root only, and ranks that priced
// the same call in and out of place chose different algorithms. The sweep
// finds calls whose in-place price alone would flip the model's choice.
TEST(TunerTest, EveryRankChoosesAlikeInPlaceOrNot) {
  sim::ClusterModel m = model(1, 4);
  m.cores_per_host = 2;
  m.one_sided = true;
  m.staging_bytes = 64 << 10;
  m.copy_gbps = 15.5;
  m.flag_us = 0.85;
  m.cma_us = 0.49;
  m.cma_gbps = 9.7;
  m.switch_us = 1.47;
  int flips = 0;
  for (Coll c : {Coll::kGather, Coll::kScatter, Coll::kAllGather, Coll::kBroadcast, Coll::kAllReduce})
    for (size_t bytes = 64; bytes <= (size_t(1) << 20); bytes = bytes * 3 / 2 / 4 * 4) {
      algo::CollArgs root = args(c, bytes), other = root;
      root.in_place = true;
      other.rank = 1;
      Tuner at_root(m, AlgoFilter{}), elsewhere(m, AlgoFilter{});
      auto a = at_root.choose(root);
      auto b = elsewhere.choose(other);
      ASSERT_TRUE(a.ok() && b.ok());
      EXPECT_EQ((*a)->name, (*b)->name) << coll_name(c) << " " << bytes << " bytes";
      auto in_place = decide(root, m, AlgoFilter{});
      auto out_of_place = decide(other, m, AlgoFilter{});
      if (in_place.ok() && out_of_place.ok() && in_place->chosen != out_of_place->chosen) ++flips;
    }
  EXPECT_GT(flips, 0) << "no call in the sweep is priced differently in place";
}

TEST(TunerTest, MemoisesPerSize) {
  Tuner t(model(2, 2), AlgoFilter{});
  auto a = t.choose(args(Coll::kAllGather, 4096));
  auto b = t.choose(args(Coll::kAllGather, 4096));
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(*a, *b);
}

// A measured choice wins over the model where it can serve the call; the
// user's CONFLUX_ALGO rule wins over both; an unusable one falls back.
TEST(TunerTest, MeasuredTablePrecedence) {
  const auto a = args(Coll::kAllReduce, 1 << 20);
  auto modelled = decide(a, model(1, 4), AlgoFilter{});
  ASSERT_TRUE(modelled.ok());
  std::string other;
  for (const Prediction& p : modelled->predictions)
    if (p.why_not.empty() && p.algo != modelled->chosen->name) other = p.algo;
  ASSERT_FALSE(other.empty());

  auto table = AlgoFilter::parse("allreduce:0-64K:" + modelled->chosen->name + "#allreduce:64K-inf:" + other);
  ASSERT_TRUE(table.ok());
  DecideOptions opt;
  opt.measured = &*table;
  opt.measured_source = "table t";
  auto d = decide(a, model(1, 4), AlgoFilter{}, opt);
  ASSERT_TRUE(d.ok()) << d.status().message();
  EXPECT_EQ(d->chosen->name, other);
  EXPECT_NE(d->reason.find("measured fastest on this host (table t)"), std::string::npos) << d->reason;
  EXPECT_NE(d->reason.find("the model predicted " + modelled->chosen->name), std::string::npos) << d->reason;

  auto user = AlgoFilter::parse("allreduce:" + modelled->chosen->name);
  ASSERT_TRUE(user.ok());
  d = decide(a, model(1, 4), *user, opt);
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->chosen->name, modelled->chosen->name);

  // hier cannot serve one host: the model's choice stands.
  auto unusable = AlgoFilter::parse("allreduce:hier");
  ASSERT_TRUE(unusable.ok());
  opt.measured = &*unusable;
  d = decide(a, model(1, 4), AlgoFilter{}, opt);
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->chosen->name, modelled->chosen->name);
  EXPECT_EQ(d->reason.find("measured"), std::string::npos) << d->reason;
}

TEST(MeasuredTableTest, StoreReplaceLoad) {
  auto dir = std::filesystem::temp_directory_path() / ("cfx_table_" + std::to_string(getpid()));
  const std::string path = (dir / "sub" / "algos.txt").string();
  const std::string k2 = layout_key(2, 1, "tcp", false), k4 = layout_key(4, 2, "auto", true);
  EXPECT_NE(k2, k4);
  auto none = load_measured_table(path, k2);  // no file yet
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->rules.empty());

  ASSERT_TRUE(store_measured_table(path, k2, "allreduce:0-1K:rd#allreduce:1K-inf:ring").ok());
  ASSERT_TRUE(store_measured_table(path, k4, "broadcast:0-inf:chain").ok());
  ASSERT_TRUE(store_measured_table(path, k2, "allreduce:0-inf:tree").ok());  // replaces k2's entry
  auto t2 = load_measured_table(path, k2);
  ASSERT_TRUE(t2.ok()) << t2.status().message();
  ASSERT_NE(t2->rule_for(Coll::kAllReduce, 10), nullptr);
  EXPECT_EQ(t2->rule_for(Coll::kAllReduce, 10)->names, std::vector<std::string>{"tree"});
  auto t4 = load_measured_table(path, k4);
  ASSERT_TRUE(t4.ok());
  EXPECT_EQ(t4->rule_for(Coll::kBroadcast, 1 << 20)->names, std::vector<std::string>{"chain"});
  EXPECT_EQ(t4->rule_for(Coll::kAllReduce, 10), nullptr);
  std::ifstream in(path);
  std::string all((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(all.find("allreduce:0-1K:rd"), std::string::npos) << all;  // the replaced entry is gone

  EXPECT_FALSE(store_measured_table(path, k2, "allreduce:0-:ring").ok());  // not stored when malformed
  {
    std::ofstream bad(path, std::ios::app);
    bad << layout_key(8, 1, "shm", false) << " allreduce:0-:ring\n";
  }
  auto broken = load_measured_table(path, layout_key(8, 1, "shm", false));
  ASSERT_FALSE(broken.ok());
  EXPECT_NE(broken.status().message().find(path), std::string::npos) << broken.status().message();

  setenv("CONFLUX_TUNE_TABLE", "off", 1);
  reload_config();  // configuration is read once; tests re-read it
  EXPECT_EQ(measured_table_file(), "");
  setenv("CONFLUX_TUNE_TABLE", path.c_str(), 1);
  reload_config();  // configuration is read once; tests re-read it
  EXPECT_EQ(measured_table_file(), path);
  unsetenv("CONFLUX_TUNE_TABLE");
  reload_config();  // configuration is read once; tests re-read it
  std::filesystem::remove_all(dir);
}

// A call's fixed cost on one host runs real shared-memory links and the
// executor between two threads: it completes, leaves the caller's binding
// and /dev/shm as they were, and reads a cost a call can have.
TEST(CalibrateTest, CallCostRunsTwoRanksOverSharedMemory) {
  const std::vector<int> cores = calibration_cores();
  if (cores.size() < 2) GTEST_SKIP() << "one core: the two ranks would share it";
  // Segments this process names end in -<pid> (other tests may make theirs
  // meanwhile).
  const auto own_segments = [] {
    const std::string suffix = "-" + std::to_string(getpid());
    size_t n = 0;
    for (const auto& e : std::filesystem::directory_iterator("/dev/shm")) {
      const std::string name = e.path().filename().string();
      n += name.rfind("cfx-", 0) == 0 && name.ends_with(suffix);
    }
    return n;
  };
  const size_t files_before = own_segments();
  cpu_set_t before, after;
  ASSERT_EQ(sched_getaffinity(0, sizeof before, &before), 0);
  const std::optional<double> us = measure_shm_call_us(cores[0], cores[1]);
  ASSERT_EQ(sched_getaffinity(0, sizeof after, &after), 0);
  EXPECT_TRUE(CPU_EQUAL(&before, &after));
  ASSERT_TRUE(us.has_value()) << "the 8-byte exchanges over shm links failed";
  EXPECT_GE(*us, 0.0);
  EXPECT_LT(*us, 1000.0);
  EXPECT_EQ(own_segments(), files_before) << "the measurement's segments were left in /dev/shm";
}

TEST(CalibrateTest, TextRoundTripAndCache) {
  Constants c;
  c.shm = {0.5, 7};
  c.reduce_gbps = 3;
  c.switch_us = 2.5;
  c.process_switch_us = 6.25;
  c.copy_gbps = 11;
  c.flag_us = 0.25;
  c.cma_us = 1.75;
  c.cma_gbps = 3.5;
  c.cma_cached_gbps = 6.5;
  c.copy_cached_gbps = 90;
  c.call_us = 0.125;
  Constants back;
  ASSERT_TRUE(Constants::from_text(c.to_text(), &back));
  EXPECT_DOUBLE_EQ(back.shm.gbps, 7);
  EXPECT_DOUBLE_EQ(back.switch_us, 2.5);
  EXPECT_DOUBLE_EQ(back.process_switch_us, 6.25);
  EXPECT_DOUBLE_EQ(from_array(to_array(c), "t").process_switch_us, 6.25);
  EXPECT_DOUBLE_EQ(back.copy_gbps, 11);
  EXPECT_DOUBLE_EQ(back.flag_us, 0.25);
  EXPECT_DOUBLE_EQ(back.cma_us, 1.75);
  EXPECT_DOUBLE_EQ(back.cma_gbps, 3.5);
  EXPECT_DOUBLE_EQ(back.cma_cached_gbps, 6.5);
  EXPECT_DOUBLE_EQ(from_array(to_array(c), "t").cma_gbps, 3.5);
  EXPECT_DOUBLE_EQ(from_array(to_array(c), "t").cma_cached_gbps, 6.5);
  EXPECT_DOUBLE_EQ(back.copy_cached_gbps, 90);
  EXPECT_DOUBLE_EQ(from_array(to_array(c), "t").copy_cached_gbps, 90);
  EXPECT_DOUBLE_EQ(back.call_us, 0.125);
  EXPECT_DOUBLE_EQ(from_array(to_array(c), "t").call_us, 0.125);
  c.held = 0.25;
  c.measured_at = 1796565152;  // a whole second survives the text
  ASSERT_TRUE(Constants::from_text(c.to_text(), &back));
  EXPECT_DOUBLE_EQ(back.held, 0.25);
  EXPECT_DOUBLE_EQ(back.measured_at, 1796565152);
  EXPECT_TRUE(back.busy());
  c.net = {7, 9};
  const ConstantsArray arr = to_array(c);
  EXPECT_DOUBLE_EQ(arr[kNetLatIndex], 7);  // the network probe overwrites these slots
  EXPECT_DOUBLE_EQ(arr[kNetGbpsIndex], 9);
  EXPECT_DOUBLE_EQ(from_array(arr, "t").switch_us, 2.5);
  EXPECT_FALSE(Constants::from_text("shm_gbps 3\n", &back));
  // A cache written before the switch cost was measured: measure again.
  std::string older = c.to_text();
  older.erase(older.find("switch_us"));
  EXPECT_FALSE(Constants::from_text(older, &back));
  // Nor one without the switch between processes.
  std::string no_process = c.to_text();
  const size_t line = no_process.find("process_switch_us");
  no_process.erase(line, no_process.find('\n', line) + 1 - line);
  EXPECT_FALSE(Constants::from_text(no_process, &back));
  // Nor one without a call's cost on one host.
  std::string no_call = c.to_text();
  const size_t call_line = no_call.find("call_us");
  no_call.erase(call_line, no_call.find('\n', call_line) + 1 - call_line);
  EXPECT_FALSE(Constants::from_text(no_call, &back));

  auto dir = std::filesystem::temp_directory_path() / ("cfx_tune_" + std::to_string(getpid()));
  setenv("CONFLUX_TUNE_CACHE", dir.c_str(), 1);
  reload_config();  // configuration is read once; tests re-read it
  std::string path = cache_file();
  EXPECT_EQ(path.rfind(dir.string(), 0), 0u) << path;
  setenv("CONFLUX_TUNE_CACHE", "off", 1);
  reload_config();  // configuration is read once; tests re-read it
  EXPECT_EQ(cache_file(), "");
  unsetenv("CONFLUX_TUNE_CACHE");
  reload_config();  // configuration is read once; tests re-read it

  // Measuring pins threads of its own, never the caller: a rank left bound
  // to the calibration's core would share it with every other such rank.
  cpu_set_t before, after;
  ASSERT_EQ(sched_getaffinity(0, sizeof before, &before), 0);
  Constants m = measure_constants();
  ASSERT_EQ(sched_getaffinity(0, sizeof after, &after), 0);
  EXPECT_TRUE(CPU_EQUAL(&before, &after)) << "calibration changed the calling thread's CPU affinity";
  if (m.busy()) {  // other work held the cores (a loaded test machine): the defaults, saying so
    EXPECT_EQ(m.source.rfind("defaults (other work shared the cores", 0), 0u) << m.source;
  } else {
    EXPECT_EQ(m.source, "measured");
    EXPECT_GE(m.held, kCoresHeldEnough);
    EXPECT_GT(m.shm.gbps, 0.1);
    EXPECT_GT(m.tcp.gbps, 0.01);
    EXPECT_GT(m.tcp.lat_us, 0.0);
    EXPECT_GT(m.switch_us, 0.0);  // two threads pinned to one core
    EXPECT_LT(m.switch_us, 1000.0);
    // Two processes on one core (a cloned child), where a child can be
    // timed: never under a sanitizer.
#if !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
    EXPECT_GT(m.process_switch_us, 0.0);
    EXPECT_LT(m.process_switch_us, 1000.0);
#endif
    EXPECT_GE(m.call_us, 0.0);
    EXPECT_LT(m.call_us, 1000.0);
  }
  std::filesystem::remove_all(dir);
}

// A calibration pass for measure_constants: every constant at `gbps`, its
// threads holding `held` of their cores.
Constants pass_of(double gbps, double held) {
  Constants c;
  c.shm.gbps = c.copy_gbps = gbps;
  c.held = held;
  return c;
}

// Passes whose threads shared their cores with other work are set aside
// and measured again; each constant is the median of the clean ones.
TEST(CalibrationPassesTest, BusyPassesAreMeasuredAgain) {
  const std::vector<Constants> passes = {pass_of(0.5, 0.02), pass_of(20, 0.95), pass_of(0.4, 0.3), pass_of(12, 0.9),
                                         pass_of(16, 0.99)};
  size_t next = 0;
  const Constants c = measure_constants([&] { return passes.at(next++); });
  EXPECT_EQ(next, 5u);
  EXPECT_FALSE(c.busy());
  EXPECT_EQ(c.source, "measured");
  EXPECT_DOUBLE_EQ(c.shm.gbps, 16);  // the median of 20, 12 and 16, none of the busy passes' rates
  EXPECT_DOUBLE_EQ(c.copy_gbps, 16);
  EXPECT_DOUBLE_EQ(c.held, 0.9);  // the least of the passes used
}

// Three busy passes before two clean ones: the machine is busy now; the
// built-in defaults, marked busy, rather than constants timing other work.
TEST(CalibrationPassesTest, ABusyMachineGetsTheDefaultsMarkedBusy) {
  const std::vector<Constants> passes = {pass_of(20, 0.95), pass_of(0.5, 0.4), pass_of(0.3, 0.02),
                                         pass_of(0.2, 0.1)};
  size_t next = 0;
  const Constants c = measure_constants([&] { return passes.at(next++); });
  EXPECT_EQ(next, 4u);  // stops at the third busy pass
  EXPECT_TRUE(c.busy());
  EXPECT_DOUBLE_EQ(c.held, 0.02);
  EXPECT_DOUBLE_EQ(c.shm.gbps, Constants{}.shm.gbps);
  EXPECT_EQ(c.source.rfind("defaults (other work shared the cores", 0), 0u) << c.source;
  EXPECT_NE(c.source.find("2% of their time"), std::string::npos) << c.source;
}

// The live measurement notices other work on its cores: a thread spinning
// on each core the calibration pins to leaves its threads half the time or
// less, and the result is marked busy instead of timing the spinners.
TEST(CalibrationPassesTest, SpinnersOnTheCalibrationsCoresMakeItBusy) {
  const std::vector<int> cores = calibration_cores();
  std::atomic<bool> stop{false};
  std::vector<std::thread> spinners;
  spinners.reserve(cores.size());
  for (int core : cores)
    spinners.emplace_back([&, core] {
      (void)topo::pin_this_thread(core);
      while (!stop.load(std::memory_order_relaxed)) {
      }
    });
  const Constants c = measure_constants();
  stop = true;
  for (std::thread& t : spinners) t.join();
  EXPECT_TRUE(c.busy()) << "held " << c.held << ": " << c.source;
  EXPECT_LT(c.held, kCoresHeldEnough);
}

TEST(CommModelTest, HostsFromRankTable) {
  std::vector<RankInfo> t(6);
  uint64_t h[] = {7, 7, 7, 9, 9, 9};
  for (int i = 0; i < 6; ++i) t[i].host_hash = h[i];
  sim::ClusterModel m = model_of(t, false, Constants{});
  EXPECT_EQ(m.nhosts(), 2);
  EXPECT_EQ(m.ranks_per_host, 3);
  EXPECT_TRUE(m.host.empty());  // regular: host-major
  EXPECT_EQ(m.path(0, 2), sim::PathClass::kShm);
  EXPECT_EQ(m.path(2, 3), sim::PathClass::kNet);
  uint64_t mixed[] = {7, 9, 7, 9, 7, 9};
  for (int i = 0; i < 6; ++i) t[i].host_hash = mixed[i];
  m = model_of(t, true, Constants{});
  EXPECT_FALSE(m.host.empty());
  EXPECT_EQ(m.path(0, 2), sim::PathClass::kTcpLocal);
  EXPECT_EQ(m.path(0, 1), sim::PathClass::kNet);
}

// Ranks bound to a core each use as many cores as there are ranks; ranks
// sharing one affinity set use that set's CPUs; the fewest of any host count.
TEST(CommModelTest, CoresPerHostAddsTheRanksDistinctCpuSets) {
  std::vector<RankInfo> t(4);
  for (int i = 0; i < 4; ++i) t[i].host_hash = 7;
  for (int i = 0; i < 4; ++i) t[i].cpu_set_hash = 100 + i, t[i].cpu_set_size = 1;
  EXPECT_EQ(model_of(t, false, Constants{}).cores_per_host, 4);
  for (int i = 0; i < 4; ++i) t[i].cpu_set_hash = 100, t[i].cpu_set_size = 2;
  EXPECT_EQ(model_of(t, false, Constants{}).cores_per_host, 2);  // 4 ranks share 2 cores
  t[2].host_hash = t[3].host_hash = 9;
  t[2].cpu_set_hash = 200, t[3].cpu_set_hash = 201, t[2].cpu_set_size = t[3].cpu_set_size = 8;
  EXPECT_EQ(model_of(t, false, Constants{}).cores_per_host, 2);  // the host with fewer
  t[3].cpu_set_size = 0;
  EXPECT_EQ(model_of(t, false, Constants{}).cores_per_host, 0);  // one rank's set unknown: unknown
}

// Hosts whose ranks share a CPU set identity run on one kernel's cores
// (network namespaces, containers): the model prices them as one machine.
// Separate machines, or only some hosts sharing one, stay separate.
TEST(CommModelTest, HostsSharingOneKernelsCoresAreOneMachine) {
  Constants c;
  c.net = {10.0, 2.0};
  std::vector<RankInfo> t(4);
  for (int i = 0; i < 4; ++i) t[i].host_hash = 10 + i, t[i].cpu_set_hash = 100, t[i].cpu_set_size = 2;
  sim::ClusterModel m = model_of(t, false, c);
  EXPECT_EQ(m.nhosts(), 4);
  EXPECT_EQ(m.machine_cores, 2);
  EXPECT_DOUBLE_EQ(m.machine_net_gbps, 4.0);  // both directions of the probed per-direction rate
  EXPECT_NE(m.describe().find("one machine: 2 cores"), std::string::npos);
  // 2 hosts x 2 ranks, each rank bound to its own core of one kernel, the
  // hosts joined by rank 1 and rank 2 sharing a core.
  for (int i = 0; i < 4; ++i) t[i].host_hash = 10 + i / 2, t[i].cpu_set_hash = 200 + i, t[i].cpu_set_size = 1;
  EXPECT_EQ(model_of(t, false, c).machine_cores, 0);  // nothing shared: cores are separate
  t[2].cpu_set_hash = t[1].cpu_set_hash;
  EXPECT_EQ(model_of(t, false, c).machine_cores, 3);  // three distinct single-core sets
  // Hosts 0 and 1 share a kernel, host 2 is another machine: no single pool.
  t.resize(6);
  for (int i = 4; i < 6; ++i) t[i].host_hash = 12, t[i].cpu_set_hash = 300, t[i].cpu_set_size = 8;
  EXPECT_EQ(model_of(t, false, c).machine_cores, 0);
  EXPECT_DOUBLE_EQ(model_of(t, false, c).machine_net_gbps, 0.0);
  // One host is never a machine of hosts.
  for (auto& r : t) r.host_hash = 7, r.cpu_set_hash = 100, r.cpu_set_size = 2;
  EXPECT_EQ(model_of(t, false, c).machine_cores, 0);
}

}  // namespace
}  // namespace conflux::tune
