// Direct (single-copy) one-sided algorithms: ranks read and write each
// other's user buffers, so each byte is copied once. Phase 1: every rank
// signals that its buffers are published and its input ready, and waits for
// the peers it will touch. Then the copies. Phase 2: a rank signals when it
// no longer touches any peer's buffers, and waits for every peer that
// touches its own before it returns (its caller may then reuse them).
#include "algo/onesided.h"

namespace conflux::algo {

using onesided::from_every_rank;
using onesided::join;
using onesided::moved;
using onesided::pieces;
using onesided::wait_for;

namespace {

Schedule named(const char* name) {
  Schedule s;
  s.algorithm = name;
  return s;
}

// Nothing to move, or one rank: at most a local copy.
bool trivial(Schedule& s, const CollArgs& a, size_t bytes, Slice from, Slice to) {
  if (bytes > 0 && a.nranks > 1) return false;
  if (a.nranks == 1 && bytes > 0 && !a.in_place) s.copy(from, to);
  return true;
}

// Signals phase 1 and waits for every peer's phase 1.
std::vector<int> arrive(Schedule& s, const CollArgs& a) {
  int sig = s.signal();
  return join(wait_for(s, a, 1), {sig});
}

// Signals phase 2 after `work` and after the arrival (so the two signals
// stay in order where this rank has no work), and waits for every peer's
// phase 2.
void depart(Schedule& s, const CollArgs& a, const std::vector<int>& ready, const std::vector<int>& work) {
  s.signal(join(ready, work));
  wait_for(s, a, 2);
}

}  // namespace

Schedule direct_allreduce(const CollArgs& a) {
  Schedule s = named("direct");
  const size_t bytes = a.count * a.elem;
  if (trivial(s, a, bytes, {kSendBuf, 0, bytes}, {kRecvBuf, 0, bytes})) return s;
  const std::vector<int> ready = arrive(s, a);
  // In place is safe: only this rank reads any rank's input at this part,
  // and it has read a piece before it writes it anywhere.
  std::vector<int> work;
  const Slice mine = onesided::part(a, kSendBuf, a.rank);
  for (const Slice& piece : pieces(a, mine)) {
    if (piece.bytes == 0) continue;
    const Slice out = moved(piece, mine, kRecvBuf, mine.offset);
    const int red = s.reduce_from(from_every_rank(a, piece), out, ready);
    work.push_back(red);
    for (int p = 0; p < a.nranks; ++p)
      if (p != a.rank) work.push_back(s.write(p, out, out, {red}));
  }
  depart(s, a, ready, work);
  return s;
}

Schedule direct_reducescatter(const CollArgs& a) {
  Schedule s = named("direct");
  const size_t block = a.count * a.elem;
  const size_t mine = static_cast<size_t>(a.rank) * block;
  if (trivial(s, a, block, {kSendBuf, mine, block}, {kRecvBuf, 0, block})) return s;
  const std::vector<int> ready = arrive(s, a);
  std::vector<int> work;
  const Slice in{kSendBuf, mine, block};
  for (const Slice& piece : pieces(a, in))
    work.push_back(s.reduce_from(from_every_rank(a, piece), moved(piece, in, kRecvBuf, 0), ready));
  depart(s, a, ready, work);
  return s;
}

Schedule direct_reduce(const CollArgs& a) {
  Schedule s = named("direct");
  const size_t bytes = a.count * a.elem;
  if (trivial(s, a, bytes, {kSendBuf, 0, bytes}, {kRecvBuf, 0, bytes})) return s;
  const std::vector<int> ready = arrive(s, a);
  std::vector<int> work;
  const Slice mine = onesided::part(a, kSendBuf, a.rank);
  const std::vector<Slice> ps = pieces(a, mine);
  if (a.rank == a.root) {
    for (const Slice& piece : ps)
      if (piece.bytes > 0)
        work.push_back(s.reduce_from(from_every_rank(a, piece), moved(piece, mine, kRecvBuf, mine.offset), ready));
  } else {
    // A non-root's output buffer is not its own to use: reduce into two
    // alternating scratch pieces and write each into the root's output.
    const size_t piece_cap = onesided::piece_bytes(a);
    s.scratch_bytes = 2 * piece_cap;
    std::vector<int> wrote(2, -1);
    for (size_t c = 0; c < ps.size(); ++c) {
      if (ps[c].bytes == 0) continue;
      const Slice tmp{kScratch, (c % 2) * piece_cap, ps[c].bytes};
      const int red = s.reduce_from(from_every_rank(a, ps[c]), tmp, join(ready, {wrote[c % 2]}));
      wrote[c % 2] = s.write(a.root, tmp, moved(ps[c], mine, kRecvBuf, mine.offset), {red});
      work.push_back(red);
      work.push_back(wrote[c % 2]);
    }
  }
  depart(s, a, ready, work);
  return s;
}

Schedule direct_allgather(const CollArgs& a) {
  Schedule s = named("direct");
  const size_t block = a.count * a.elem;
  const size_t mine = static_cast<size_t>(a.rank) * block;
  if (trivial(s, a, block, {kSendBuf, 0, block}, {kRecvBuf, mine, block})) return s;
  if (!a.in_place) s.copy({kSendBuf, 0, block}, {kRecvBuf, mine, block});
  const std::vector<int> ready = arrive(s, a);
  std::vector<int> work;
  const Slice in{kSendBuf, 0, block};
  for (int k = 1; k < a.nranks; ++k) {
    const int p = (a.rank + k) % a.nranks;  // peers in a rotated order: not everyone reads rank 0 first
    for (const Slice& piece : pieces(a, in))
      work.push_back(s.read(p, piece, moved(piece, in, kRecvBuf, static_cast<size_t>(p) * block), ready));
  }
  depart(s, a, ready, work);
  return s;
}

Schedule push_allgather(const CollArgs& a) {
  Schedule s = named("push");
  const size_t block = a.count * a.elem;
  const size_t mine = static_cast<size_t>(a.rank) * block;
  if (trivial(s, a, block, {kSendBuf, 0, block}, {kRecvBuf, mine, block})) return s;
  if (!a.in_place) s.copy({kSendBuf, 0, block}, {kRecvBuf, mine, block});
  const std::vector<int> ready = arrive(s, a);
  std::vector<int> work;
  const Slice in{kSendBuf, 0, block};
  for (const Slice& piece : pieces(a, in))
    for (int k = 1; k < a.nranks; ++k) {
      const int q = (a.rank + k) % a.nranks;
      work.push_back(s.write(q, piece, moved(piece, in, kRecvBuf, mine), ready));
    }
  depart(s, a, ready, work);
  return s;
}

Schedule direct_broadcast(const CollArgs& a) {
  Schedule s = named("direct");
  const size_t bytes = a.count * a.elem;
  if (trivial(s, a, bytes, {kSendBuf, 0, bytes}, {kRecvBuf, 0, bytes})) return s;
  // The root would idle while the others copy: it writes a tail of every
  // peer's output itself. A kernel copy costs about two memcpys per byte
  // (the copy and pinning the peer's pages), so a tail of 1/(2n) balances
  // the cores when the root also copies its own input.
  const size_t n = static_cast<size_t>(a.nranks);
  const size_t pushed = bytes / a.elem / (2 * n) * a.elem, pulled = bytes - pushed;
  const bool root = a.rank == a.root;
  if (root && !a.in_place) s.copy({kSendBuf, 0, bytes}, {kRecvBuf, 0, bytes});
  const std::vector<int> ready = arrive(s, a);
  std::vector<int> work;
  if (!root) {
    const Slice head{kSendBuf, 0, pulled};
    for (const Slice& piece : pieces(a, head))
      if (piece.bytes > 0) work.push_back(s.read(a.root, piece, moved(piece, head, kRecvBuf, 0), ready));
  } else if (pushed > 0) {
    const Slice tail{kSendBuf, pulled, pushed};
    for (const Slice& piece : pieces(a, tail))
      for (int k = 1; k < a.nranks; ++k) {
        const int q = (a.rank + k) % a.nranks;
        work.push_back(s.write(q, piece, moved(piece, tail, kRecvBuf, pulled), ready));
      }
  }
  depart(s, a, ready, work);
  return s;
}

Schedule split_broadcast(const CollArgs& a) {
  Schedule s = named("split");
  const size_t bytes = a.count * a.elem;
  if (trivial(s, a, bytes, {kSendBuf, 0, bytes}, {kRecvBuf, 0, bytes})) return s;
  const bool root = a.rank == a.root;
  const std::vector<int> ready = arrive(s, a);
  std::vector<int> work;
  // Our part of the root's input: the root has it; the others read it
  // into their own output first. Then it goes into every other rank's
  // output, the root's too (where the root works in place that rewrites
  // its input with the same bytes).
  const Slice mine = onesided::part(a, kSendBuf, a.rank);
  for (const Slice& piece : pieces(a, mine)) {
    if (piece.bytes == 0) continue;
    const Slice out = moved(piece, mine, kRecvBuf, mine.offset);
    int have = -1;
    if (!root) have = s.read(a.root, piece, out, ready);
    else if (!a.in_place) have = s.copy(piece, out);
    const Slice from = root ? piece : out;
    if (have >= 0) work.push_back(have);
    for (int k = 1; k < a.nranks; ++k) {
      const int q = (a.rank + k) % a.nranks;
      work.push_back(s.write(q, from, out, join(ready, {have})));
    }
  }
  depart(s, a, ready, work);
  return s;
}

Schedule direct_gather(const CollArgs& a) {
  Schedule s = named("direct");
  const size_t block = a.count * a.elem;
  const size_t mine = static_cast<size_t>(a.rank) * block;
  const bool root = a.rank == a.root;
  if (trivial(s, a, block, {kSendBuf, 0, block}, {kRecvBuf, mine, block})) return s;
  // Only the root touches anyone's buffers: a non-root publishes its block
  // (its signal 1) and waits for the root's "done" (the root's signal 1).
  if (!root) {
    s.signal();
    wait_for(s, a, 1, a.root);
    return s;
  }
  if (!a.in_place) s.copy({kSendBuf, 0, block}, {kRecvBuf, mine, block});
  const std::vector<int> ready = wait_for(s, a, 1);
  std::vector<int> work;
  const Slice in{kSendBuf, 0, block};
  for (int p = 0; p < a.nranks; ++p)
    if (p != a.rank)
      for (const Slice& piece : pieces(a, in))
        work.push_back(s.read(p, piece, moved(piece, in, kRecvBuf, static_cast<size_t>(p) * block), ready));
  s.signal(work);
  return s;
}

Schedule direct_scatter(const CollArgs& a) {
  Schedule s = named("direct");
  const size_t block = a.count * a.elem;
  const size_t mine = static_cast<size_t>(a.rank) * block;
  const bool root = a.rank == a.root;
  if (trivial(s, a, block, {kSendBuf, mine, block}, {kRecvBuf, 0, block})) return s;
  if (root) {
    // The root publishes its input (signal 1) and waits until every peer
    // has read its block (their signal 1).
    if (!a.in_place) s.copy({kSendBuf, mine, block}, {kRecvBuf, 0, block});
    s.signal();
    wait_for(s, a, 1);
    return s;
  }
  const std::vector<int> ready = wait_for(s, a, 1, a.root);
  std::vector<int> work;
  const Slice in{kSendBuf, mine, block};
  for (const Slice& piece : pieces(a, in)) work.push_back(s.read(a.root, piece, moved(piece, in, kRecvBuf, 0), ready));
  s.signal(work);
  return s;
}

Schedule direct_alltoall(const CollArgs& a) {
  Schedule s = named("direct");
  const size_t block = a.count * a.elem;
  const size_t mine = static_cast<size_t>(a.rank) * block;
  if (trivial(s, a, block, {kSendBuf, 0, block}, {kRecvBuf, 0, block})) return s;
  const std::vector<int> ready = arrive(s, a);
  // In place, peers read this rank's blocks out of its receive buffer:
  // gather into scratch, and copy over once every peer has read.
  const uint16_t to = a.in_place ? kScratch : kRecvBuf;
  if (a.in_place) s.scratch_bytes = block * static_cast<size_t>(a.nranks);
  else s.copy({kSendBuf, mine, block}, {kRecvBuf, mine, block});
  std::vector<int> work;
  const Slice in{kSendBuf, mine, block};
  for (int k = 1; k < a.nranks; ++k) {
    const int p = (a.rank + k) % a.nranks;
    for (const Slice& piece : pieces(a, in))
      work.push_back(s.read(p, piece, moved(piece, in, to, static_cast<size_t>(p) * block), ready));
  }
  s.signal(join(ready, work));
  const std::vector<int> everyone_read = join(wait_for(s, a, 2), work);
  if (a.in_place)
    for (int p = 0; p < a.nranks; ++p)
      if (p != a.rank)
        s.copy({kScratch, static_cast<size_t>(p) * block, block}, {kRecvBuf, static_cast<size_t>(p) * block, block},
               everyone_read);
  return s;
}

Schedule flag_barrier(const CollArgs& a) {
  Schedule s = named("flag");
  if (a.nranks > 1) arrive(s, a);
  return s;
}

}  // namespace conflux::algo

namespace conflux::algo {

Schedule direct_alltoallv(const CollArgs& a) {
  Schedule s;
  s.algorithm = "direct";
  const int n = a.nranks, me = a.rank;
  auto at = [&](const size_t* m, int i, int j) { return m[static_cast<size_t>(i) * n + j]; };
  size_t total = 0;
  for (int p = 0; p < n; ++p)
    for (int q = 0; q < n; ++q) total += at(a.all_sendcounts, p, q);
  if (total == 0 || n == 1) {  // nothing moves anywhere (or one rank): at most a local copy
    const Slice own{kSendBuf, at(a.all_sdispls, me, me) * a.elem, at(a.all_sendcounts, me, me) * a.elem};
    if (own.bytes > 0 && !a.in_place) s.copy(own, {kRecvBuf, at(a.all_rdispls, me, me) * a.elem, own.bytes});
    return s;
  }
  const std::vector<int> ready = arrive(s, a);
  // In place, peers read this rank's blocks out of its receive buffer:
  // gather into scratch and copy over once every peer has read.
  const uint16_t into = a.in_place ? kScratch : kRecvBuf;
  size_t extent = 0;
  for (int p = 0; p < n; ++p) extent = std::max(extent, (at(a.all_rdispls, me, p) + at(a.all_sendcounts, p, me)) * a.elem);
  if (a.in_place) s.scratch_bytes = extent;
  std::vector<int> work;
  for (int k = 0; k < n; ++k) {
    const int p = (me + k) % n;
    const size_t cnt = at(a.all_sendcounts, p, me);
    if (cnt == 0) continue;
    const Slice from{kSendBuf, at(a.all_sdispls, p, me) * a.elem, cnt * a.elem};
    const Slice to{into, at(a.all_rdispls, me, p) * a.elem, cnt * a.elem};
    if (p == me) {
      work.push_back(s.copy(from, to, ready));
      continue;
    }
    for (const Slice& piece : pieces(a, from)) work.push_back(s.read(p, piece, moved(piece, from, into, to.offset), ready));
  }
  s.signal(join(ready, work));
  const std::vector<int> everyone_read = join(wait_for(s, a, 2), work);
  if (a.in_place)
    for (int p = 0; p < n; ++p) {
      const size_t cnt = at(a.all_sendcounts, p, me);
      if (cnt > 0)
        s.copy({kScratch, at(a.all_rdispls, me, p) * a.elem, cnt * a.elem},
               {kRecvBuf, at(a.all_rdispls, me, p) * a.elem, cnt * a.elem}, everyone_read);
    }
  return s;
}

}  // namespace conflux::algo
