// The fixed cost of a collective call inside one host, for the calibration
// (calibrate.cpp): what the executor's set-up and completion of a call add
// to its messages.
#pragma once

#include <optional>

namespace conflux::tune {

// Two threads, each a rank with a core of its own (cpu0, cpu1; -1: not
// pinned), exchange 8 bytes over real shared-memory links (a segment each,
// ShmLinks, the executor): one exchange per execute() against 16 pipelined
// in one. The difference per call is what a call costs beyond its
// messages, as the network probe's call cost between hosts. Median of 8
// passes after a warm-up (at least 0); nullopt where it cannot be measured
// (no /dev/shm, a stalled exchange).
std::optional<double> measure_shm_call_us(int cpu0, int cpu1);

}  // namespace conflux::tune
