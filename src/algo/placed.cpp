// Placed exchanges: see algo/algorithms.h. The pieces are rows (MoE tokens)
// scattered over the buffers, so a schedule has one step per run of rows
// that are contiguous on both sides; the executor hands a peer's ready
// steps to the transport together (one system call for many rows).
#include "algo/algorithms.h"
#include "algo/onesided.h"

#include <utility>
#include <vector>

namespace conflux::algo {

Schedule placed_exchange(const CollArgs& a, bool writes, Schedule s) {
  s.clear();
  s.algorithm = writes ? "placed_writes" : "placed_reads";
  const int me = a.rank;
  const bool alone = a.nranks == 1;
  // The peers' buffers are published before any step touches them; each
  // peer's first step waits for that once.
  const int arrived = alone ? -1 : s.signal();
  std::vector<int> waited(static_cast<size_t>(a.nranks), -1);
  std::vector<int> work{arrived};
  auto emit = [&](const Placement& p) {
    const int peer = writes ? p.dst_rank : p.src_rank;
    const Slice from{kSendBuf, p.src_offset * a.elem, p.count * a.elem};
    const Slice to{kRecvBuf, p.dst_offset * a.elem, p.count * a.elem};
    if (peer == me) {
      work.push_back(s.copy(from, to));
      return;
    }
    int& w = waited[static_cast<size_t>(peer)];
    if (w < 0) w = s.wait(peer, 1);
    work.push_back(writes ? s.write(peer, from, to, {w}) : s.read(peer, from, to, {w}));
  };
  // This rank's pieces, runs contiguous on both sides as one step: rows
  // that follow each other in a token block and in an expert block are
  // common.
  Placement run;
  for (size_t i = 0; i < a.placement_count; ++i) {
    const Placement& p = a.placements[i];
    if ((writes ? p.src_rank : p.dst_rank) != me || p.count == 0) continue;
    if (run.count > 0 && run.src_rank == p.src_rank && run.dst_rank == p.dst_rank &&
        run.src_offset + run.count == p.src_offset && run.dst_offset + run.count == p.dst_offset) {
      run.count += p.count;
      continue;
    }
    if (run.count > 0) emit(run);
    run = p;
  }
  if (run.count > 0) emit(run);
  if (alone) return s;
  // Done touching the peers; wait until no peer touches this rank's buffers.
  s.signal(work);
  onesided::wait_for(s, a, 2);
  return s;
}

Schedule placed_writes(const CollArgs& a) { return placed_exchange(a, true, {}); }
Schedule placed_reads(const CollArgs& a) { return placed_exchange(a, false, {}); }

}  // namespace conflux::algo
