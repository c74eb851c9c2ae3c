// Placed exchanges: see algo/algorithms.h. The pieces are rows (MoE tokens)
// scattered over the buffers, so a schedule has one step per run of rows
// that are contiguous on both sides; the executor hands a peer's ready
// steps to the transport together (one system call for many rows).
#include "algo/algorithms.h"
#include "algo/onesided.h"

#include <algorithm>

namespace conflux::algo {

namespace {

Schedule placed(const CollArgs& a, bool writes) {
  Schedule s;
  s.algorithm = writes ? "placed_writes" : "placed_reads";
  const int me = a.rank;
  std::vector<Placement> mine;
  for (size_t i = 0; i < a.placement_count; ++i) {
    const Placement& p = a.placements[i];
    if ((writes ? p.src_rank : p.dst_rank) == me && p.count > 0) mine.push_back(p);
  }
  // Runs contiguous on both sides become one step: rows that follow each
  // other in a token block and in an expert block are common.
  std::vector<Placement> runs;
  for (const Placement& p : mine) {
    if (!runs.empty()) {
      Placement& r = runs.back();
      if (r.src_rank == p.src_rank && r.dst_rank == p.dst_rank && r.src_offset + r.count == p.src_offset &&
          r.dst_offset + r.count == p.dst_offset) {
        r.count += p.count;
        continue;
      }
    }
    runs.push_back(p);
  }
  if (a.nranks == 1) {
    for (const Placement& p : runs)
      s.copy(Slice{kSendBuf, p.src_offset * a.elem, p.count * a.elem}, Slice{kRecvBuf, p.dst_offset * a.elem, p.count * a.elem});
    return s;
  }
  const int arrived = s.signal();  // this rank's buffers are published
  std::vector<int> waited(static_cast<size_t>(a.nranks), -1);
  std::vector<int> work{arrived};
  for (const Placement& p : runs) {
    const int peer = writes ? p.dst_rank : p.src_rank;
    const Slice from{kSendBuf, p.src_offset * a.elem, p.count * a.elem};
    const Slice to{kRecvBuf, p.dst_offset * a.elem, p.count * a.elem};
    if (peer == me) {
      work.push_back(s.copy(from, to));
      continue;
    }
    int& w = waited[static_cast<size_t>(peer)];
    if (w < 0) w = s.wait(peer, 1);  // the peer's buffers are published
    work.push_back(writes ? s.write(peer, from, to, {w}) : s.read(peer, from, to, {w}));
  }
  // Done touching the peers; wait until no peer touches this rank's buffers.
  s.signal(work);
  onesided::wait_for(s, a, 2);
  return s;
}

}  // namespace

Schedule placed_writes(const CollArgs& a) { return placed(a, true); }
Schedule placed_reads(const CollArgs& a) { return placed(a, false); }

}  // namespace conflux::algo
