#include "tune/calibrate_call.h"

#include "algo/exchange.h"
#include "bootstrap/socket.h"
#include "core/config.h"
#include "exec/executor.h"
#include "topo/plan.h"
#include "transport/shm/shm_link.h"
#include "transport/shm/shm_segment.h"
#include "transport/shm/shm_waiter.h"
#include "tune/median.h"

#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <thread>
#include <vector>

namespace conflux::tune {
namespace {

using Clock = std::chrono::steady_clock;

constexpr size_t kBytes = 8;
constexpr int kPipelined = 16;  // exchanges in one execute(): its set-up shared
constexpr int kWarmUp = 200;
constexpr int kPasses = 8;
constexpr int kStallMs = 1000;

// One rank's times per pass: an exchange of the pipelined run, and a run
// of one exchange.
struct Timings {
  std::vector<double> pipelined_us, single_us;
};

// Rank `rank`'s side, on cpus[rank] with segment seg[rank]: the warm-up,
// then per pass one pipelined execute() and one single exchange, both
// timed. False where an exchange fails (the other side stalled, or `abort`
// was raised by it).
bool run_rank(int rank, const std::array<int, 2>& cpus, const std::array<ShmSegment, 2>& seg,
              std::atomic<bool>& abort, Timings* times) {
  const int peer = 1 - rank;
  if (const int cpu = cpus[static_cast<size_t>(rank)]; cpu >= 0) (void)topo::pin_this_thread(cpu);
  const ShmSegment& mine = seg[static_cast<size_t>(rank)];
  const ShmSegment& theirs = seg[static_cast<size_t>(peer)];
  // Its own process is the "peer process" the link watches: alive throughout.
  ShmLink link(mine, theirs, rank, peer, static_cast<int>(getpid()), -1);
  ShmWaiter waiter(mine.doorbell());
  std::array<Link*, 2> links{};
  links[static_cast<size_t>(peer)] = &link;
  std::array<uint8_t, kBytes> out{}, in{};
  ExecContext ctx;
  ctx.links = links;
  ctx.buffers = {out.data(), in.data(), nullptr};
  ctx.sigs = {OpSig{}};
  ctx.abort = &abort;
  ctx.shm_waiter = &waiter;
  ctx.spin_iterations = config().spin_iterations;
  ctx.yield_while_waiting = false;  // a rank with a core of its own
  ctx.rank = rank;
  ExecWorkspace workspace;
  const algo::Schedule single = algo::exchange_schedule(peer, kBytes, 1, 1);
  const algo::Schedule pipelined = algo::exchange_schedule(peer, kBytes, kPipelined, 1);
  auto timed = [&](const algo::Schedule& s, double* us) {
    ctx.deadline = deadline_after_ms(kStallMs);
    const auto t0 = Clock::now();
    const bool ok = execute(s, ctx, &workspace).ok();
    if (us != nullptr) *us = std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
    if (!ok) abort.store(true);
    return ok;
  };
  for (int i = 0; i < kWarmUp; ++i)
    if (!timed(single, nullptr)) return false;
  for (int pass = 0; pass < kPasses; ++pass) {
    double p = 0, s = 0;
    if (!timed(pipelined, &p) || !timed(single, &s)) return false;
    times->pipelined_us.push_back(p / kPipelined);
    times->single_us.push_back(s);
  }
  return true;
}

}  // namespace

std::optional<double> measure_shm_call_us(int cpu0, int cpu1) {
  const Config& cfg = config();
  const ShmSegment::Layout layout{2, cfg.shm_slots, cfg.shm_slot_bytes, 1, 0};
  std::array<ShmSegment, 2> seg;
  for (int r = 0; r < 2; ++r) {
    auto made = ShmSegment::create_private(r, layout);
    if (!made.ok()) return std::nullopt;
    seg[static_cast<size_t>(r)] = std::move(made).value();
  }
  std::atomic<bool> abort{false};
  const std::array<int, 2> cpus{cpu0, cpu1};
  std::array<Timings, 2> timings;
  std::array<bool, 2> ok{};
  // Threads of their own, pinned: the caller's binding stays as it is.
  std::thread first([&] { ok[0] = run_rank(0, cpus, seg, abort, &timings[0]); });
  std::thread second([&] { ok[1] = run_rank(1, cpus, seg, abort, &timings[1]); });
  first.join();
  second.join();
  if (!ok[0] || !ok[1]) return std::nullopt;
  return std::max(0.0, median_of(timings[0].single_us) - median_of(timings[0].pipelined_us));
}

}  // namespace conflux::tune
