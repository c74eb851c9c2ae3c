// `conflux vm cores`: window times grouped into distance levels, the steady
// verdict, the report's text, bad CPU pairs, and a live measurement's shape
// (never its times: those are the host's).
#include "topo/core_distance.h"

#include <gtest/gtest.h>
#include <sched.h>

#include <numeric>

namespace conflux::topo {
namespace {

TEST(CoreDistanceLevels, NoWindowsNoLevels) { EXPECT_TRUE(distance_levels({}).empty()); }

TEST(CoreDistanceLevels, OneDistanceIsOneLevelWhateverItsSpread) {
  const auto levels = distance_levels({64, 62, 70, 66, 79, 61});
  ASSERT_EQ(levels.size(), 1u);
  EXPECT_EQ(levels[0].windows, 6u);
  EXPECT_DOUBLE_EQ(levels[0].min_ns, 61);
  EXPECT_DOUBLE_EQ(levels[0].max_ns, 79);
  EXPECT_DOUBLE_EQ(levels[0].median_ns, 65);
}

TEST(CoreDistanceLevels, ThreeDistancesNearestFirstFromUnsortedWindows) {
  // Hardware threads of one core, cores sharing a cache, cores that do not
  // (this machine's 28, 64 and 267 ns).
  const auto levels = distance_levels({267, 64, 28, 262, 63, 29, 65, 270, 66});
  ASSERT_EQ(levels.size(), 3u);
  EXPECT_EQ(levels[0].windows, 2u);
  EXPECT_DOUBLE_EQ(levels[0].median_ns, 28.5);
  EXPECT_EQ(levels[1].windows, 4u);
  EXPECT_DOUBLE_EQ(levels[1].median_ns, 64.5);
  EXPECT_EQ(levels[2].windows, 3u);
  EXPECT_DOUBLE_EQ(levels[2].median_ns, 267);
}

TEST(CoreDistanceLevels, ALevelEndsOnlyWhereTheNextWindowIsOverTheStep) {
  // 100 -> 160 is exactly the step: one level; 160 -> 257 is over it.
  const auto levels = distance_levels({100, 100 * kLevelStep, 257});
  ASSERT_EQ(levels.size(), 2u);
  EXPECT_EQ(levels[0].windows, 2u);
  EXPECT_EQ(levels[1].windows, 1u);
}

CoreDistanceReport report_of(std::vector<double> windows) {
  CoreDistanceReport r;
  r.cpu_b = 1;
  r.seconds = 1;
  r.window_ns = std::move(windows);
  r.levels = distance_levels(r.window_ns);
  return r;
}

TEST(CoreDistanceReport, SteadyWhereOneLevelHoldsAlmostEveryWindow) {
  std::vector<double> w(99, 64.0);
  w.push_back(250);  // one window in a hundred elsewhere: an interrupt, not a move
  EXPECT_TRUE(report_of(w).steady());
  w.insert(w.end(), 9, 250.0);  // 10 of 109 far: the host moved them
  EXPECT_FALSE(report_of(w).steady());
}

TEST(CoreDistanceReport, TextNamesTheLevelsAndWhatToDo) {
  CoreDistanceReport moving = report_of({64, 65, 63, 267, 270, 64});
  moving.changes = 2;
  const std::string text = to_text(moving);
  EXPECT_NE(text.find("CPU 0 <-> CPU 1: 6 windows"), std::string::npos) << text;
  EXPECT_NE(text.find("[degraded] vcpus-move"), std::string::npos) << text;
  EXPECT_NE(text.find("2 changes of distance, 64 to 268 ns (4.2x)"), std::string::npos) << text;
  EXPECT_NE(text.find("vcpupin"), std::string::npos) << text;
  const std::string steady = to_text(report_of({64, 65, 63}));
  EXPECT_NE(steady.find("steady"), std::string::npos) << steady;
  EXPECT_EQ(steady.find("degraded"), std::string::npos) << steady;
}

TEST(CoreDistanceMeasure, RejectsAPairThatIsNotTwoAllowedCpus) {
  auto same = measure_core_distance({0, 0, 0.05, 0});
  ASSERT_FALSE(same.ok());
  EXPECT_NE(same.status().message().find("two different CPUs"), std::string::npos) << same.status().message();
  EXPECT_FALSE(measure_core_distance({-1, 0, 0.05, 0}).ok());
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  ASSERT_EQ(sched_getaffinity(0, sizeof allowed, &allowed), 0);
  int outside = -1;
  for (int c = 0; c < CPU_SETSIZE && outside < 0; ++c)
    if (!CPU_ISSET(c, &allowed)) outside = c;
  ASSERT_GE(outside, 0);
  auto off = measure_core_distance({outside, outside == 0 ? 1 : 0, 0.05, 0});
  ASSERT_FALSE(off.ok());
  EXPECT_NE(off.status().message().find("not in this process's affinity set"), std::string::npos)
      << off.status().message();
}

TEST(CoreDistanceMeasure, LiveWindowsAllFallInTheirLevels) {
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  ASSERT_EQ(sched_getaffinity(0, sizeof allowed, &allowed), 0);
  std::vector<int> cpus;
  for (int c = 0; c < CPU_SETSIZE && cpus.size() < 2; ++c)
    if (CPU_ISSET(c, &allowed)) cpus.push_back(c);
  if (cpus.size() < 2) GTEST_SKIP() << "one CPU: no pair to measure";
  auto r = measure_core_distance({cpus[0], cpus[1], 0.1, 1});
  ASSERT_TRUE(r.ok()) << r.status().message();
  ASSERT_FALSE(r->window_ns.empty());
  const size_t in_levels = std::accumulate(r->levels.begin(), r->levels.end(), size_t{0},
                                           [](size_t n, const DistanceLevel& l) { return n + l.windows; });
  EXPECT_EQ(in_levels, r->window_ns.size());
  for (double ns : r->window_ns) EXPECT_GT(ns, 0);
  EXPECT_LT(r->changes, static_cast<int>(r->window_ns.size()));
  if (r->levels.size() == 1) {
    EXPECT_TRUE(r->steady());
  }
  EXPECT_EQ(r->steady(), to_text(*r).find("steady:") != std::string::npos);
}

}  // namespace
}  // namespace conflux::topo
