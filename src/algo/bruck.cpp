// Bruck's algorithms: ceil(log2 n) rounds for any n, the latency-optimal
// choice for small blocks.
//
// AllGather: in round k (d = 2^k) rank r sends the min(d, n-d) blocks it
// holds, those of ranks r..r+m-1, to rank r-d, and receives ranks
// r+d..r+d+m-1 from rank r+d. Blocks go straight to their final place; a
// range that wraps past rank n-1 travels as two messages, split at the same
// point on both sides.
//
// AlltoAll: rotate so slot i holds the block for rank r+i; in round k send
// every slot with bit k set to rank r+2^k (packed into one message) and
// receive the same slots from rank r-2^k; finally slot i holds the block
// from rank r-i. Slots with bit k set form runs of 2^k, so packing is
// n/2^(k+1) copies, not n/2.
#include "algo/algorithms.h"
#include "algo/compose.h"

namespace conflux::algo {

Schedule bruck_allgather(const CollArgs& a) {
  Schedule s;
  s.algorithm = "bruck";
  const int n = a.nranks;
  const size_t block = a.count * a.elem;
  const int r = a.rank;
  int own = -1;
  if (!a.in_place && block > 0) own = s.copy({kSendBuf, 0, block}, {kRecvBuf, r * block, block});
  if (n == 1 || block == 0) return s;
  // The ranks [first, first + m) (mod n) as at most two contiguous slices.
  auto ranges = [&](int first, int m) {
    first %= n;
    std::vector<Slice> out;
    int head = std::min(m, n - first);
    out.push_back({kRecvBuf, first * block, head * block});
    if (m > head) out.push_back({kRecvBuf, 0, (m - head) * block});
    return out;
  };
  std::vector<int> prev{own};
  for (int d = 1; d < n; d *= 2) {
    const int m = std::min(d, n - d);
    std::vector<int> now;
    for (const Slice& sl : ranges(r, m)) now.push_back(add_after(s, send_step((r - d + n) % n, sl), prev));
    for (const Slice& sl : ranges(r + d, m)) {
      Step rv = make_step(StepKind::kRecv, (r + d) % n);
      rv.dst = sl;
      now.push_back(add_after(s, rv, prev));
    }
    prev = now;
  }
  return s;
}

Schedule bruck_alltoall(const CollArgs& a) {
  Schedule s;
  s.algorithm = "bruck";
  const int n = a.nranks;
  const size_t block = a.count * a.elem;
  const int r = a.rank;
  if (block == 0) return s;
  if (n == 1) {
    if (!a.in_place) s.copy({kSendBuf, 0, block}, {kRecvBuf, 0, block});
    return s;
  }
  // Scratch: n slots, then a send pack and a receive pack of ceil(n/2) slots.
  const size_t slots = static_cast<size_t>(n) * block;
  const size_t pack = static_cast<size_t>((n + 1) / 2) * block;
  s.scratch_bytes = slots + 2 * pack;
  auto slot = [&](int first, int count) { return Slice{kScratch, first * block, count * block}; };
  // Rotation: slot i = input block r+i.
  std::vector<int> prev;
  prev.push_back(s.copy({kSendBuf, r * block, (n - r) * block}, slot(0, n - r)));
  if (r > 0) prev.push_back(s.copy({kSendBuf, 0, r * block}, slot(n - r, r)));
  int f = fence(s, prev);
  for (int d = 1; d < n; d *= 2) {
    // Runs of slots with bit d set: [j + d, min(j + 2d, n)) for j = 0, 2d, ...
    std::vector<std::pair<int, int>> runs;
    int total = 0;
    for (int j = 0; j + d < n; j += 2 * d) {
      int len = std::min(d, n - j - d);
      runs.push_back({j + d, len});
      total += len;
    }
    std::vector<int> packed, all;
    size_t at = 0;
    for (auto [first, len] : runs) {
      packed.push_back(s.copy(slot(first, len), {kScratch, slots + at, len * block}, {f}));
      at += len * block;
    }
    int sent = add_after(s, send_step((r + d) % n, {kScratch, slots, total * block}), packed);
    Step rv = make_step(StepKind::kRecv, (r - d + n) % n);
    rv.dst = {kScratch, slots + pack, total * block};
    packed.push_back(f);  // the unpack below overwrites slots the packs read
    int got = add_after(s, rv, packed);
    all = {sent};
    at = 0;
    for (auto [first, len] : runs) {
      all.push_back(s.copy({kScratch, slots + pack + at, len * block}, slot(first, len), {got}));
      at += len * block;
    }
    f = fence(s, all);
  }
  // Slot i holds the block from rank r-i.
  for (int i = 0; i < n; ++i) s.copy(slot(i, 1), {kRecvBuf, ((r - i + n) % n) * block, block}, {f});
  return s;
}

}  // namespace conflux::algo
