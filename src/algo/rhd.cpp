// Recursive halving / doubling (Rabenseifner) on any rank count. With p the
// largest power of two <= n and rem = n - p, the first 2*rem ranks pair up:
// each even one folds its data into its odd partner and sits out; the p
// remaining "virtual" ranks run log2(p) halving (reduce-scatter) and/or
// doubling (all-gather) rounds; the odd partners hand the result back.
// Each round waits for the previous one: rounds are few and unchunked, this
// is the latency-optimal choice for small and medium messages.
#include "algo/algorithms.h"
#include "algo/compose.h"

namespace conflux::algo {
namespace {

struct Fold {
  int p = 1, rem = 0;
  int vrank = -1;  // virtual rank, -1 for a rank folded away
  explicit Fold(int n, int rank) {
    while (p * 2 <= n) p *= 2;
    rem = n - p;
    if (rank < 2 * rem)
      vrank = rank % 2 == 1 ? rank / 2 : -1;
    else
      vrank = rank - rem;
  }
  int real(int v) const { return v < rem ? 2 * v + 1 : v + rem; }
  // Virtual rank v stands for ranks [first_rank(v), first_rank(v + 1)).
  int first_rank(int v) const { return v < rem ? 2 * v : v + rem; }
};

// Elements [begin, end) of a buffer, as a slice.
Slice elems(const CollArgs& a, uint16_t buf, size_t begin, size_t end) {
  return Slice{buf, begin * a.elem, (end - begin) * a.elem};
}

// The AllReduce cases that need no rounds: one rank or no data (a copy at
// most), and a rank the fold takes away (hands its input to its partner and
// waits for the result). True when `s` is already complete.
bool allreduce_without_rounds(const CollArgs& a, const Fold& f, Schedule& s) {
  const size_t bytes = a.count * a.elem;
  const Slice all_in{kSendBuf, 0, bytes}, all_out{kRecvBuf, 0, bytes};
  if (a.nranks == 1 || bytes == 0) {
    if (!a.in_place && bytes > 0) s.copy(all_in, all_out);
    return true;
  }
  if (f.vrank >= 0) return false;
  int sent = s.send(a.rank + 1, all_in);
  s.recv(a.rank + 1, all_out, {sent});
  return true;
}

}  // namespace

Schedule rhd_allreduce(const CollArgs& a) {
  Schedule s;
  s.algorithm = "rhd";
  const size_t bytes = a.count * a.elem;
  const Fold f(a.nranks, a.rank);
  if (allreduce_without_rounds(a, f, s)) return s;
  const Slice all_in{kSendBuf, 0, bytes}, all_out{kRecvBuf, 0, bytes};
  uint16_t loc = kSendBuf;  // where our partial of the current window lives
  std::vector<int> prev;
  if (a.rank < 2 * f.rem) {
    prev = {s.recv_reduce(a.rank - 1, all_out, all_in)};
    loc = kRecvBuf;
  }
  auto block_begin = [&](int v) { return part_begin(a.count, f.p, v); };
  int lo = 0, hi = f.p;  // window of blocks we are responsible for
  for (int mask = f.p / 2; mask >= 1; mask /= 2) {
    int peer = f.real(f.vrank ^ mask);
    int mid = lo + mask;
    bool upper = f.vrank & mask;
    int keep_lo = upper ? mid : lo, keep_hi = upper ? hi : mid;
    int give_lo = upper ? lo : mid, give_hi = upper ? mid : hi;
    std::vector<int> now;
    Slice give = elems(a, loc, block_begin(give_lo), block_begin(give_hi));
    if (give.bytes > 0) now.push_back(add_after(s, send_step(peer, give), prev));
    Slice keep = elems(a, kRecvBuf, block_begin(keep_lo), block_begin(keep_hi));
    if (keep.bytes > 0) {
      Step r = make_step(StepKind::kRecvReduce, peer);
      r.dst = keep;
      r.with = elems(a, loc, block_begin(keep_lo), block_begin(keep_hi));
      now.push_back(add_after(s, r, prev));
    }
    if (!now.empty()) prev = now;
    loc = kRecvBuf;
    lo = keep_lo;
    hi = keep_hi;
  }
  for (int mask = 1; mask < f.p; mask *= 2) {
    int pv = f.vrank ^ mask;
    int peer = f.real(pv);
    int mine = f.vrank & ~(mask - 1), theirs = pv & ~(mask - 1);
    std::vector<int> now;
    Slice out = elems(a, kRecvBuf, block_begin(mine), block_begin(mine + mask));
    if (out.bytes > 0) now.push_back(add_after(s, send_step(peer, out), prev));
    Slice in = elems(a, kRecvBuf, block_begin(theirs), block_begin(theirs + mask));
    if (in.bytes > 0) {
      Step r = make_step(StepKind::kRecv, peer);
      r.dst = in;
      now.push_back(add_after(s, r, prev));
    }
    if (!now.empty()) prev = now;
  }
  if (a.rank < 2 * f.rem) add_after(s, send_step(a.rank - 1, all_out), prev);
  return s;
}

// Recursive doubling: log2(p) rounds in which partners swap their whole
// partial and both reduce it, plus the same fold as above for the ranks
// beyond p. One message per round and no splitting: the fewest hops of any
// AllReduce (1 at 2 ranks, 2 at 4), for latency-bound sizes only, since every
// round moves the full vector. A round never reduces into the buffer its own
// send is still reading (recvbuf and scratch take turns), and partners
// combine in the same order (the ops commute), so every rank ends with
// bit-identical results.
Schedule rd_allreduce(const CollArgs& a) {
  Schedule s;
  s.algorithm = "rd";
  const size_t bytes = a.count * a.elem;
  const Fold f(a.nranks, a.rank);
  if (allreduce_without_rounds(a, f, s)) return s;
  const Slice all_in{kSendBuf, 0, bytes}, all_out{kRecvBuf, 0, bytes};
  uint16_t loc = kSendBuf;  // where our partial lives
  auto next_target = [&] {
    const bool loc_is_out = loc == kRecvBuf || (loc == kSendBuf && a.in_place);
    if (loc_is_out) s.scratch_bytes = bytes;
    return loc_is_out ? uint16_t{kScratch} : uint16_t{kRecvBuf};
  };
  std::vector<int> prev;
  if (a.rank < 2 * f.rem) {  // fold the partner's input into ours first
    const uint16_t dst = next_target();
    prev = {s.recv_reduce(a.rank - 1, {dst, 0, bytes}, all_in)};
    loc = dst;
  }
  for (int mask = 1; mask < f.p; mask *= 2) {
    const int peer = f.real(f.vrank ^ mask);
    const uint16_t dst = next_target();
    std::vector<int> now;
    now.push_back(add_after(s, send_step(peer, {loc, 0, bytes}), prev));
    Step r = make_step(StepKind::kRecvReduce, peer);
    r.dst = {dst, 0, bytes};
    r.with = {loc, 0, bytes};
    now.push_back(add_after(s, r, prev));
    prev = now;
    loc = dst;
  }
  if (loc != kRecvBuf) {
    Step c = make_step(StepKind::kCopy, -1);
    c.src = {loc, 0, bytes};
    c.dst = all_out;
    prev = {add_after(s, c, prev)};
  }
  if (a.rank < 2 * f.rem) add_after(s, send_step(a.rank - 1, all_out), prev);
  return s;
}

Schedule rhd_reducescatter(const CollArgs& a) {
  Schedule s;
  s.algorithm = "rhd";
  const int n = a.nranks;
  const size_t block = a.count * a.elem;
  const Slice out{kRecvBuf, 0, block};
  if (n == 1 || block == 0) {
    if (!a.in_place && block > 0) s.copy({kSendBuf, 0, block}, out);
    return s;
  }
  const Fold f(n, a.rank);
  const size_t total = static_cast<size_t>(n) * a.count;
  const Slice all_in{kSendBuf, 0, total * a.elem};
  if (f.vrank < 0) {
    int sent = s.send(a.rank + 1, all_in);
    s.recv(a.rank + 1, out, {sent});
    return s;
  }
  // Partials live in scratch (the output holds one block only), indexed
  // like the input.
  s.scratch_bytes = total * a.elem;
  uint16_t loc = kSendBuf;
  std::vector<int> prev;
  if (a.rank < 2 * f.rem) {
    prev = {s.recv_reduce(a.rank - 1, {kScratch, 0, total * a.elem}, all_in)};
    loc = kScratch;
  }
  // Virtual rank v's blocks are those of ranks [first_rank(v), first_rank(v+1)).
  auto vbegin = [&](int v) { return static_cast<size_t>(f.first_rank(v)) * a.count; };
  int lo = 0, hi = f.p;
  for (int mask = f.p / 2; mask >= 1; mask /= 2) {
    int peer = f.real(f.vrank ^ mask);
    int mid = lo + mask;
    bool upper = f.vrank & mask;
    int keep_lo = upper ? mid : lo, keep_hi = upper ? hi : mid;
    int give_lo = upper ? lo : mid, give_hi = upper ? mid : hi;
    std::vector<int> now;
    now.push_back(add_after(s, send_step(peer, elems(a, loc, vbegin(give_lo), vbegin(give_hi))), prev));
    Step r = make_step(StepKind::kRecvReduce, peer);
    r.dst = elems(a, kScratch, vbegin(keep_lo), vbegin(keep_hi));
    r.with = elems(a, loc, vbegin(keep_lo), vbegin(keep_hi));
    now.push_back(add_after(s, r, prev));
    prev = now;
    loc = kScratch;
    lo = keep_lo;
    hi = keep_hi;
  }
  Slice mine{kScratch, static_cast<size_t>(a.rank) * block, block};
  Step c = make_step(StepKind::kCopy, -1);
  c.src = mine;
  c.dst = out;
  add_after(s, c, prev);
  if (a.rank < 2 * f.rem) add_after(s, send_step(a.rank - 1, {kScratch, (a.rank - 1) * block, block}), prev);
  return s;
}

Schedule rhd_allgather(const CollArgs& a) {
  Schedule s;
  s.algorithm = "rhd";
  const int n = a.nranks;
  const size_t block = a.count * a.elem;
  const Slice own{kRecvBuf, static_cast<size_t>(a.rank) * block, block};
  std::vector<int> prev;
  if (!a.in_place && block > 0) prev.push_back(s.copy({kSendBuf, 0, block}, own));
  if (n == 1 || block == 0) return s;
  const Fold f(n, a.rank);
  auto blocks = [&](int r0, int r1) { return Slice{kRecvBuf, r0 * block, (r1 - r0) * block}; };
  if (f.vrank < 0) {  // send our block to the partner, get everything else back
    int sent = s.send(a.rank + 1, {a.in_place ? kRecvBuf : kSendBuf, a.in_place ? own.offset : 0, block});
    if (a.rank > 0) s.recv(a.rank + 1, blocks(0, a.rank), {sent});
    s.recv(a.rank + 1, blocks(a.rank + 1, n), {sent});
    return s;
  }
  if (a.rank < 2 * f.rem) prev.push_back(s.recv(a.rank - 1, blocks(a.rank - 1, a.rank)));
  for (int mask = 1; mask < f.p; mask *= 2) {
    int pv = f.vrank ^ mask;
    int peer = f.real(pv);
    int mine = f.vrank & ~(mask - 1), theirs = pv & ~(mask - 1);
    int sent = add_after(s, send_step(peer, blocks(f.first_rank(mine), f.first_rank(mine + mask))), prev);
    Step r = make_step(StepKind::kRecv, peer);
    r.dst = blocks(f.first_rank(theirs), f.first_rank(theirs + mask));
    prev = {sent, add_after(s, r, prev)};
  }
  if (a.rank < 2 * f.rem) {
    if (a.rank - 1 > 0) add_after(s, send_step(a.rank - 1, blocks(0, a.rank - 1)), prev);
    add_after(s, send_step(a.rank - 1, blocks(a.rank, n)), prev);
  }
  return s;
}

}  // namespace conflux::algo
