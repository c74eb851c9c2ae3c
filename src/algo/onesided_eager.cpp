// Eager one-sided algorithms: each rank copies its input into its staging
// area (shared memory its peers map), signals once, waits for every peer's
// signal, and reads what it needs from the peers' staging areas. One flag
// round and no system call: the fastest way to move small calls on a host.
//
// Every rank waits for a signal from every peer even where it reads nothing
// of theirs (a Broadcast root): that is what frees the staging half of the
// call before the previous one (schedule.h, kStaging). Reductions read the
// staging areas in rank order on every rank, so every rank's result is
// bit-identical.
#include "algo/onesided.h"

namespace conflux::algo {

using onesided::wait_for;

size_t eager_stage_bytes(const CollArgs& a) {
  const size_t block = a.count * a.elem, n = static_cast<size_t>(a.nranks);
  switch (a.coll) {
    case Coll::kReduceScatter:
    case Coll::kScatter:
    case Coll::kAlltoAll: return block * n;
    case Coll::kBarrier: return 0;
    default: return block;
  }
}

namespace {

// The common opening: copy `stage` bytes of the send buffer into our
// staging half (when `stage` > 0), signal, wait for every peer. Returns
// the steps after which the peers' staging areas may be read.
std::vector<int> stage_and_arrive(Schedule& s, const CollArgs& a, size_t stage, size_t from = 0) {
  int filled = stage > 0 ? s.copy({kSendBuf, from, stage}, {kStaging, 0, stage}) : -1;
  int sig = s.signal({filled});
  return onesided::join(wait_for(s, a, 1), {sig, filled});
}

// The sources of a reduction in rank order: `slice` of every peer's
// staging area, and this rank's own contribution from `own`, its send
// buffer, rather than from the staged copy: once it has signalled, its
// peers read its staging area (for a small call, its flag's cache line),
// and reading it again costs a fetch of a line a peer now holds.
std::vector<Source> staged_in_rank_order(const CollArgs& a, const Slice& slice, const Slice& own) {
  std::vector<Source> src;
  src.reserve(static_cast<size_t>(a.nranks));
  for (int p = 0; p < a.nranks; ++p) src.push_back(p == a.rank ? Source{-1, own} : Source{p, slice});
  return src;
}

// A call with nothing to move, or a single rank: at most a local copy.
bool trivial(Schedule& s, const CollArgs& a, size_t bytes, Slice from, Slice to) {
  if (bytes > 0 && a.nranks > 1) return false;
  if (a.nranks == 1 && bytes > 0 && !a.in_place) s.copy(from, to);
  return true;
}

Schedule named(const CollArgs& a) {
  Schedule s;
  s.algorithm = "eager";
  s.staging_extent = eager_stage_bytes(a);
  return s;
}

}  // namespace

Schedule eager_allreduce(const CollArgs& a) {
  Schedule s = named(a);
  const size_t bytes = a.count * a.elem;
  if (trivial(s, a, bytes, {kSendBuf, 0, bytes}, {kRecvBuf, 0, bytes})) return s;
  std::vector<int> ready = stage_and_arrive(s, a, bytes);
  s.reduce_from(staged_in_rank_order(a, {kStaging, 0, bytes}, {kSendBuf, 0, bytes}), {kRecvBuf, 0, bytes}, ready);
  return s;
}

Schedule eager_reducescatter(const CollArgs& a) {
  Schedule s = named(a);
  const size_t block = a.count * a.elem;
  const size_t mine = static_cast<size_t>(a.rank) * block;
  if (trivial(s, a, block, {kSendBuf, mine, block}, {kRecvBuf, 0, block})) return s;
  std::vector<int> ready = stage_and_arrive(s, a, block * static_cast<size_t>(a.nranks));
  s.reduce_from(staged_in_rank_order(a, {kStaging, mine, block}, {kSendBuf, mine, block}), {kRecvBuf, 0, block},
                ready);
  return s;
}

Schedule eager_reduce(const CollArgs& a) {
  Schedule s = named(a);
  const size_t bytes = a.count * a.elem;
  if (trivial(s, a, bytes, {kSendBuf, 0, bytes}, {kRecvBuf, 0, bytes})) return s;
  std::vector<int> ready = stage_and_arrive(s, a, bytes);
  if (a.rank == a.root)
    s.reduce_from(staged_in_rank_order(a, {kStaging, 0, bytes}, {kSendBuf, 0, bytes}), {kRecvBuf, 0, bytes}, ready);
  return s;
}

Schedule eager_allgather(const CollArgs& a) {
  Schedule s = named(a);
  const size_t block = a.count * a.elem;
  const size_t mine = static_cast<size_t>(a.rank) * block;
  if (trivial(s, a, block, {kSendBuf, 0, block}, {kRecvBuf, mine, block})) return s;
  if (!a.in_place) s.copy({kSendBuf, 0, block}, {kRecvBuf, mine, block});
  std::vector<int> ready = stage_and_arrive(s, a, block);
  for (int p = 0; p < a.nranks; ++p)
    if (p != a.rank) s.read(p, {kStaging, 0, block}, {kRecvBuf, static_cast<size_t>(p) * block, block}, ready);
  return s;
}

Schedule eager_broadcast(const CollArgs& a) {
  Schedule s = named(a);
  const size_t bytes = a.count * a.elem;
  if (trivial(s, a, bytes, {kSendBuf, 0, bytes}, {kRecvBuf, 0, bytes})) return s;
  const bool root = a.rank == a.root;
  if (root && !a.in_place) s.copy({kSendBuf, 0, bytes}, {kRecvBuf, 0, bytes});
  std::vector<int> ready = stage_and_arrive(s, a, root ? bytes : 0);
  if (!root) s.read(a.root, {kStaging, 0, bytes}, {kRecvBuf, 0, bytes}, ready);
  return s;
}

Schedule eager_gather(const CollArgs& a) {
  Schedule s = named(a);
  const size_t block = a.count * a.elem;
  const size_t mine = static_cast<size_t>(a.rank) * block;
  const bool root = a.rank == a.root;
  if (trivial(s, a, block, {kSendBuf, 0, block}, {kRecvBuf, mine, block})) return s;
  if (root && !a.in_place) s.copy({kSendBuf, 0, block}, {kRecvBuf, mine, block});
  std::vector<int> ready = stage_and_arrive(s, a, root ? 0 : block);
  if (root)
    for (int p = 0; p < a.nranks; ++p)
      if (p != a.rank) s.read(p, {kStaging, 0, block}, {kRecvBuf, static_cast<size_t>(p) * block, block}, ready);
  return s;
}

Schedule eager_scatter(const CollArgs& a) {
  Schedule s = named(a);
  const size_t block = a.count * a.elem;
  const size_t mine = static_cast<size_t>(a.rank) * block;
  const bool root = a.rank == a.root;
  if (trivial(s, a, block, {kSendBuf, mine, block}, {kRecvBuf, 0, block})) return s;
  if (root && !a.in_place) s.copy({kSendBuf, mine, block}, {kRecvBuf, 0, block});
  std::vector<int> ready = stage_and_arrive(s, a, root ? block * static_cast<size_t>(a.nranks) : 0);
  if (!root) s.read(a.root, {kStaging, mine, block}, {kRecvBuf, 0, block}, ready);
  return s;
}

Schedule eager_alltoall(const CollArgs& a) {
  Schedule s = named(a);
  const size_t block = a.count * a.elem;
  const size_t mine = static_cast<size_t>(a.rank) * block;
  if (trivial(s, a, block, {kSendBuf, 0, block}, {kRecvBuf, 0, block})) return s;
  std::vector<int> ready = stage_and_arrive(s, a, block * static_cast<size_t>(a.nranks));
  for (int p = 0; p < a.nranks; ++p) {
    Slice to{kRecvBuf, static_cast<size_t>(p) * block, block};
    if (p == a.rank)
      s.copy({kSendBuf, mine, block}, to, ready);  // in place, the same bytes: nothing to move
    else
      s.read(p, {kStaging, mine, block}, to, ready);
  }
  return s;
}

}  // namespace conflux::algo
