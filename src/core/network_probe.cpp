#include "core/network_probe.h"

#include "algo/exchange.h"

#include <algorithm>
#include <chrono>
#include <vector>

namespace conflux {

std::vector<sim::CurvePoint> LinkProbe::curve() const {
  std::vector<sim::CurvePoint> c;
  for (size_t k = 0; k < kProbeCurveBytes.size(); ++k)
    if (curve_us[k] > 0) c.push_back({double(kProbeCurveBytes[k]), curve_us[k]});
  return c;
}

// Measured the way collectives load a link: both sides send at once and
// wait for each other's message (a ring or tree step is such an exchange,
// not a ping-pong). 8-byte exchanges give alpha; 2 MiB each way at once
// give the bandwidth a direction keeps while the other is busy too (on
// hosts whose cores also run the network stack, about half the one-way
// figure). The sizes between give the curve: TCP's cost is not alpha plus
// bytes over bandwidth (on 2 emulated hosts a 2 KiB exchange, two
// segments, took 15 us against 10 for 1 KiB, and 4 and 8 KiB no more than
// 2 KiB). With several connections per peer, the same 2 MiB split over all
// of them shows whether more flows go faster (a per-flow cap).
Status probe_link(const ExecContext& base, int peer, int channels, LinkProbe* out) {
  const size_t big = kProbeCurveBytes.back();
  std::vector<uint8_t> out_buf(big), in_buf(big);
  ExecContext ctx = base;
  ctx.buffers = {out_buf.data(), in_buf.data(), nullptr};
  auto exchange = [&](size_t bytes, int reps, int flows) -> Result<double> {
    const algo::Schedule s = algo::exchange_schedule(peer, bytes, reps, flows);
    auto t0 = std::chrono::steady_clock::now();
    CFX_RETURN_IF_ERROR(execute(s, ctx));
    return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
  };
  // Warm up first: right after start-up both processes may share one core
  // until the scheduler spreads them, and every exchange then waits for the
  // other to be scheduled (measured: 77 us instead of 8 us on two emulated
  // hosts). The warm-up spins, so both ranks look busy and the scheduler
  // moves one to another core; with 200 exchanges that did not spin, one
  // launch in six still read 21 us against 8-12 (28 launches each, none
  // slow with this warm-up). The measurement then does not spin: two ranks
  // left on one core would hold it from each other.
  CFX_RETURN_IF_ERROR(exchange(8, 1000, 1).status());
  ctx.spin_iterations = 0;
  // The median of several passes over all sizes. Interleaving the sizes
  // keeps a passing disturbance from skewing one of them (alpha alone,
  // measured in one burst, read 8.3 to 12.4 us across launches); the
  // minimum swung the large sizes 2x between launches (512 KiB: 70-197
  // us), the median about 1.5x. Small sizes run several rounds per
  // execute() so its set-up is amortised; a single 8-byte exchange per
  // execute() measures that set-up (call_us). With several channels the
  // 2 MiB exchange split over all of them is timed in the same passes, so
  // the two bandwidths compared are the same statistic.
  constexpr int kPasses = 8;
  std::array<std::array<double, kPasses>, kProbeCurveBytes.size()> samples{};
  std::array<double, kPasses> single{}, split{};
  for (int pass = 0; pass < kPasses; ++pass) {
    if (channels > 1) {
      CFX_ASSIGN_OR_RETURN(split[pass], exchange(big, 1, channels));
    }
    for (size_t k = kProbeCurveBytes.size(); k-- > 0;) {  // largest first: see the single exchange below
      const size_t bytes = kProbeCurveBytes[k];
      const int rounds = static_cast<int>(std::clamp<size_t>((64 << 10) / bytes, 1, 16));
      CFX_ASSIGN_OR_RETURN(double us, exchange(bytes, rounds, 1));
      samples[k][pass] = us / rounds;
      // Last, after the 8-byte rounds, when neither side still finishes a
      // large message (that skew would be counted as set-up or as alpha).
      if (k == 0) {
        CFX_ASSIGN_OR_RETURN(single[pass], exchange(8, 1, 1));
      }
    }
  }
  auto median = [](std::array<double, kPasses> v) {
    std::sort(v.begin(), v.end());
    return (v[(kPasses - 1) / 2] + v[kPasses / 2]) / 2;
  };
  for (size_t k = 0; k < kProbeCurveBytes.size(); ++k) out->curve_us[k] = median(samples[k]);
  out->lat_us = out->curve_us.front();
  out->gbps = double(big) / 1e3 / std::max(out->curve_us.back() - out->lat_us, 1.0);
  out->call_us = std::max(0.0, median(single) - out->lat_us);
  out->channels_gbps = channels > 1 ? double(big) / 1e3 / std::max(median(split) - out->lat_us, 1.0) : 0;
  return Status::Ok();
}

}  // namespace conflux
