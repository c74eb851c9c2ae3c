// How far apart two CPUs are, measured: the one-way time of a cache line
// handed between two threads pinned to them. On bare metal, or in a VM whose
// vCPUs the host pins, a pair of CPUs has one distance. In a VM whose vCPUs
// the host does not pin, the host moves them between its cores, and the
// same pair is found at several distances: hardware threads of one core
// (tens of ns), cores that share a cache (about 60 ns on AMD EPYC), cores
// that do not (250 ns and more). Every byte ranks hand each other costs
// 2-3x more at the far distance, and a launch keeps the distance it drew
// for seconds: one benchmark launch in several is slow for every library.
// `conflux vm cores` reports it; the grouping and the verdict are pure
// functions, tested on their own.
#pragma once

#include "core/status.h"

#include <string>
#include <vector>

namespace conflux::topo {

// Measurement windows whose hand-off times sit at one level (below).
struct DistanceLevel {
  size_t windows = 0;
  double median_ns = 0, min_ns = 0, max_ns = 0;
};

// Groups window medians (ns) into levels, nearest first: a new level starts
// where the next larger value is over kLevelStep x the one before it. The
// distances differ by 2x and more; one distance's own spread is far less.
constexpr double kLevelStep = 1.6;
std::vector<DistanceLevel> distance_levels(std::vector<double> window_ns);

struct CoreDistanceReport {
  int cpu_a = 0, cpu_b = 0;
  double seconds = 0;
  std::vector<double> window_ns;      // in time order
  std::vector<DistanceLevel> levels;  // nearest first
  int changes = 0;                    // consecutive windows at different levels
  // Steady: one level holds at least kSteadyShare of the windows.
  bool steady() const;
};
constexpr double kSteadyShare = 0.95;

// What to measure: cpu_a against cpu_b for `seconds`, in windows of 200
// hand-offs (the median of 5 batches of 40), each followed by `gap_ms` of
// sleep on both CPUs (an idle vCPU is what a host moves).
struct CoreDistanceProbe {
  int cpu_a = 0, cpu_b = 1;
  double seconds = 2;
  int gap_ms = 20;
};

// Fails where the calling process may not run on both CPUs.
Result<CoreDistanceReport> measure_core_distance(const CoreDistanceProbe& probe);

// The report as text: one line per level, the verdict and what to do.
std::string to_text(const CoreDistanceReport& r);

}  // namespace conflux::topo
