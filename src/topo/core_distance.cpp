#include "topo/core_distance.h"

#include "topo/plan.h"

#include <sched.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdint>
#include <chrono>
#include <cstdio>
#include <thread>

namespace conflux::topo {
namespace {

using Clock = std::chrono::steady_clock;
constexpr auto kAnswerWithin = std::chrono::seconds(1);

double median_of(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n == 0 ? 0 : n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

// The level a window falls in: levels are nearest first, each ends at its
// largest window.
size_t level_of(const std::vector<DistanceLevel>& levels, double ns) {
  for (size_t i = 0; i < levels.size(); ++i)
    if (ns <= levels[i].max_ns) return i;
  return levels.empty() ? 0 : levels.size() - 1;
}

}  // namespace

std::vector<DistanceLevel> distance_levels(std::vector<double> window_ns) {
  std::sort(window_ns.begin(), window_ns.end());
  std::vector<DistanceLevel> levels;
  std::vector<double> current;
  auto close = [&] {
    if (current.empty()) return;
    levels.push_back({current.size(), median_of(current), current.front(), current.back()});
    current.clear();
  };
  for (double ns : window_ns) {
    if (!current.empty() && ns > kLevelStep * current.back()) close();
    current.push_back(ns);
  }
  close();
  return levels;
}

bool CoreDistanceReport::steady() const {
  const size_t total = window_ns.size();
  return std::any_of(levels.begin(), levels.end(),
                     [&](const DistanceLevel& l) { return double(l.windows) >= kSteadyShare * double(total); });
}

Result<CoreDistanceReport> measure_core_distance(const CoreDistanceProbe& probe) {
  const int cpu_a = probe.cpu_a, cpu_b = probe.cpu_b, gap_ms = probe.gap_ms;
  const double seconds = probe.seconds;
  if (cpu_a == cpu_b || cpu_a < 0 || cpu_b < 0 || cpu_a >= CPU_SETSIZE || cpu_b >= CPU_SETSIZE)
    return invalid_argument("two different CPUs, please (got " + std::to_string(cpu_a) + " and " +
                            std::to_string(cpu_b) + ")");
  const std::vector<int> allowed = current_cpu_binding();
  for (int cpu : {cpu_a, cpu_b})
    if (std::find(allowed.begin(), allowed.end(), cpu) == allowed.end())
      return invalid_argument("CPU " + std::to_string(cpu) + " is not in this process's affinity set");

  // One window: a first hand-off that wakes the echo thread (untimed), then
  // kBatches batches of kPerBatch hand-offs, timed by the thread on cpu_a;
  // the window's time is its median batch (an interrupt spoils one batch,
  // not the window). The thread on cpu_b echoes every value of `ping` into
  // `pong`, and sleeps between windows as the timer does.
  constexpr int kBatches = 5, kPerBatch = 40, kPerWindow = 1 + kBatches * kPerBatch;
  alignas(64) std::atomic<int> ping{0};
  alignas(64) std::atomic<int> pong{0};
  alignas(64) std::atomic<int> window_open{0};  // the window the echo may start; -1: no more
  std::atomic<bool> pinned{true};
  bool answered = true;  // every hand-off came back within kAnswerWithin
  CoreDistanceReport r;
  r.cpu_a = cpu_a;
  r.cpu_b = cpu_b;
  r.seconds = seconds;
  std::thread echo([&] {
    if (!pin_this_thread(cpu_b)) pinned = false;
    int seen = 0;
    for (int w = 1;; ++w) {
      int open;
      while ((open = window_open.load(std::memory_order_acquire)) >= 0 && open < w)
        std::this_thread::sleep_for(std::chrono::microseconds(50));
      if (open < 0) return;
      for (int i = 0; i < kPerWindow; ++i) {
        int v;
        for (uint32_t spins = 1; (v = ping.load(std::memory_order_acquire)) == seen; ++spins)
          if (spins % 4096 == 0 && window_open.load(std::memory_order_acquire) < 0) return;  // the timer gave up
        seen = v;
        pong.store(v, std::memory_order_release);
      }
    }
  });
  std::thread timer([&] {
    if (!pin_this_thread(cpu_a)) {
      pinned = false;
      window_open.store(-1, std::memory_order_release);
      return;
    }
    int value = 0;
    // Spins for the echo, but not forever: a CPU taken offline or a
    // throttled cgroup may keep the echo from running.
    auto hand_off = [&] {
      ping.store(++value, std::memory_order_release);
      const auto sent = Clock::now();
      for (uint32_t spins = 1; pong.load(std::memory_order_acquire) != value; ++spins)
        if (spins % 4096 == 0 && Clock::now() - sent > kAnswerWithin) return false;
      return true;
    };
    const auto start = Clock::now();
    for (int w = 1; answered && std::chrono::duration<double>(Clock::now() - start).count() < seconds; ++w) {
      window_open.store(w, std::memory_order_release);
      answered = hand_off();  // the echo is awake and running from here
      std::vector<double> batches;
      for (int b = 0; answered && b < kBatches; ++b) {
        const auto t0 = Clock::now();
        for (int i = 0; answered && i < kPerBatch; ++i) answered = hand_off();
        batches.push_back(std::chrono::duration<double, std::nano>(Clock::now() - t0).count() / (2.0 * kPerBatch));
      }
      if (answered) r.window_ns.push_back(median_of(std::move(batches)));
      if (answered && gap_ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(gap_ms));
    }
    window_open.store(-1, std::memory_order_release);
  });
  timer.join();
  echo.join();
  if (!pinned) return system_error("pthread_setaffinity_np", EINVAL);
  if (!answered)
    return timeout_error("CPU " + std::to_string(cpu_b) + " did not answer a hand-off within 1 s (offline, or its "
                         "cgroup throttled?)");
  if (r.window_ns.empty()) return invalid_argument("no window measured: give it more time than " + std::to_string(seconds) + " s");
  r.levels = distance_levels(r.window_ns);
  for (size_t i = 1; i < r.window_ns.size(); ++i)
    r.changes += level_of(r.levels, r.window_ns[i]) != level_of(r.levels, r.window_ns[i - 1]) ? 1 : 0;
  return r;
}

std::string to_text(const CoreDistanceReport& r) {
  char line[256];
  std::string out;
  std::snprintf(line, sizeof line, "CPU %d <-> CPU %d: %zu windows in %.1f s, one-way cache-line hand-off:\n", r.cpu_a,
                r.cpu_b, r.window_ns.size(), r.seconds);
  out += line;
  const double total = double(r.window_ns.size());
  for (const DistanceLevel& l : r.levels) {
    std::snprintf(line, sizeof line, "  %7.0f ns (%.0f-%.0f)  %5.1f%% of windows\n", l.median_ns, l.min_ns, l.max_ns,
                  100.0 * double(l.windows) / total);
    out += line;
  }
  if (r.steady()) {
    out += "  steady: these CPUs stay at one distance\n";
    return out;
  }
  const double nearest = r.levels.front().median_ns, farthest = r.levels.back().median_ns;
  std::snprintf(line, sizeof line,
                "  [degraded] vcpus-move: %d change%s of distance, %.0f to %.0f ns (%.1fx): the host moves\n"
                "  these vCPUs between its cores.\n",
                r.changes, r.changes == 1 ? "" : "s", nearest, farthest, farthest / nearest);
  out += line;
  out += "  Ranks on them hand each other data 2-3x slower at the far distance, and a launch keeps\n"
         "  the distance it drew for seconds: benchmark launches differ by as much. Pin the vCPUs\n"
         "  on the host (libvirt <cputune><vcpupin>, or an instance type with dedicated cores),\n"
         "  hardware-thread siblings to siblings.\n";
  return out;
}

}  // namespace conflux::topo
