// The network's constants for the tuner, measured over one real link
// between two hosts at a communicator's first tuned call (both ends run
// probe_link against each other).
#pragma once

#include "core/status.h"
#include "exec/executor.h"
#include "sim/sim_model.h"

#include <array>
#include <cstddef>

namespace conflux {

// Message sizes of the probe's curve: every power of two from 1 KiB to
// 2 MiB, and 8 bytes for alpha. Dense enough that a step at one TCP segment
// (1448 bytes at MTU 1500, 8948 at 9000) lands between neighbouring points.
inline constexpr std::array<size_t, 13> kProbeCurveBytes = {
    8, 1 << 10, 2 << 10, 4 << 10, 8 << 10, 16 << 10, 32 << 10, 64 << 10, 128 << 10, 256 << 10, 512 << 10,
    1 << 20, 2 << 20};

struct LinkProbe {
  double lat_us = 0;         // one 8-byte exchange, pipelined rounds (alpha)
  double gbps = 0;           // per direction with both busy, from the 2 MiB exchange
  double channels_gbps = 0;  // the same 2 MiB split over every channel (0: one channel)
  double call_us = 0;        // what one execute() of a single exchange costs beyond alpha
  std::array<double, kProbeCurveBytes.size()> curve_us{};  // exchange time per size

  std::vector<sim::CurvePoint> curve() const;
};

// Exchanges messages with `peer` over its link (and channel links), the way
// a collective's step loads it. Both ranks must call it at once.
Status probe_link(const ExecContext& base, int peer, int channels, LinkProbe* out);

}  // namespace conflux
