// Two-level AllReduce for ranks spread over hosts: (1) ring reduce-scatter
// among the L ranks of a host, so local slot l holds part l summed over its
// host; (2) ring AllReduce of part l among the H ranks holding slot l, one
// per host; (3) ring all-gather of the parts within each host. Only
// (2) crosses hosts, with 1/L of the data per rank. Phases are separated by
// fences (the Broadcast's phases follow their data instead, chunk by
// chunk); each phase's messages are emitted in the same order on every
// rank, so FIFO links never cross.
#include "algo/algorithms.h"
#include "algo/compose.h"

#include <algorithm>
#include <map>

namespace conflux::algo {
namespace {

struct Layout {
  std::vector<int> local;  // ranks of our host, ascending
  std::vector<int> slot;   // ranks with our local slot, one per host, by host order
  int l = 0, h = 0;        // our local slot, our host's index
  bool uniform = true;
};

Layout layout_of(const CollArgs& a) {
  Layout L;
  std::map<int, std::vector<int>> hosts;  // host id -> ranks ascending
  for (int r = 0; r < a.nranks; ++r) hosts[a.host_of.empty() ? r : a.host_of[r]].push_back(r);
  const int me = a.host_of.empty() ? a.rank : a.host_of[a.rank];
  size_t per = hosts.begin()->second.size();
  int hi = 0;
  for (auto& [id, ranks] : hosts) {
    if (ranks.size() != per) L.uniform = false;
    if (id == me) L.h = hi;
    ++hi;
  }
  if (!L.uniform) return L;
  L.local = hosts[me];
  L.l = static_cast<int>(std::find(L.local.begin(), L.local.end(), a.rank) - L.local.begin());
  for (auto& [id, ranks] : hosts) L.slot.push_back(ranks[L.l]);
  return L;
}

// rank_at[h][l]: the rank in local slot l of host h (hosts in id order).
std::vector<std::vector<int>> ranks_by_host(const CollArgs& a) {
  std::map<int, std::vector<int>> hosts;
  for (int r = 0; r < a.nranks; ++r) hosts[a.host_of.empty() ? r : a.host_of[r]].push_back(r);
  std::vector<std::vector<int>> rank_at;
  for (auto& [id, ranks] : hosts) rank_at.push_back(ranks);
  return rank_at;
}

// The byte `off` of a slot-major layout (local rank j's group holds the
// blocks of slot j on hosts 0..h-1, one block each), in the rank-ordered
// buffer of all n blocks.
size_t slot_major_to_rank_order(const std::vector<std::vector<int>>& rank_at, size_t block, size_t off) {
  const size_t group = block * rank_at.size();
  const size_t j = off / group, h = (off % group) / block;
  return static_cast<size_t>(rank_at[h][j]) * block + off % block;
}

// Appends a sub-communicator's schedule: its rank i is peers[i], each of
// its slices goes through `where` (its buffer and offset -> ours), and its
// first steps (those without a dependency inside it) wait for the steps
// `after_of` names for them, mapped.
template <typename Where, typename AfterOf>
std::vector<int> append_mapped_after(Schedule& s, const Schedule& inner, const std::vector<int>& peers, Where where,
                                     AfterOf after_of) {
  const int base = static_cast<int>(s.steps.size());
  std::vector<int> added;
  for (const Step& st : inner.steps) {
    Step x = st;
    if (x.peer >= 0) x.peer = peers[x.peer];
    for (Slice* sl : {&x.src, &x.dst, &x.with})
      if (sl->bytes > 0) *sl = where(*sl);
    std::vector<int> deps;
    for (uint32_t k = 0; k < st.dep_count; ++k) deps.push_back(base + static_cast<int>(inner.deps[st.dep_begin + k]));
    if (deps.empty()) deps = after_of(x);
    added.push_back(add_after(s, x, deps));
  }
  s.scratch_bytes = std::max(s.scratch_bytes, inner.scratch_bytes);
  return added;
}

// append_mapped_after whose first steps all wait for the step `after`.
template <typename Where>
std::vector<int> append_mapped(Schedule& s, const Schedule& inner, const std::vector<int>& peers, Where where,
                               int after) {
  return append_mapped_after(s, inner, peers, where, [after](const Step&) { return std::vector<int>{after}; });
}

// A sub-communicator's slice working in place on one part: with `to_recv`,
// both of its buffers are our recvbuf shifted by `offset`.
Slice remap(Slice sl, size_t offset, bool to_recv) {
  if (sl.buf != kScratch) {
    if (to_recv) sl.buf = kRecvBuf;
    sl.offset += offset;
  }
  return sl;
}

// append_mapped for a sub-communicator working in place on one part.
std::vector<int> append_remapped(Schedule& s, const Schedule& inner, const std::vector<int>& peers, size_t offset,
                                 bool to_recv, int after) {
  return append_mapped(s, inner, peers, [&](Slice sl) { return remap(sl, offset, to_recv); }, after);
}

// What a point-to-point or local step reads and writes of this rank's
// buffers; false for the one-sided kinds (their slices may name a peer's).
bool accesses(const Step& st, std::vector<Slice>* reads, std::vector<Slice>* writes) {
  switch (st.kind) {
    case StepKind::kSend: reads->push_back(st.src); return true;
    case StepKind::kRecv: writes->push_back(st.dst); return true;
    case StepKind::kRecvReduce: reads->push_back(st.with), writes->push_back(st.dst); return true;
    case StepKind::kCopy: reads->push_back(st.src), writes->push_back(st.dst); return true;
    default: return false;
  }
}

// The steps of one phase, indexed by the bytes of this rank's buffers they
// read and write, so that each step of a later phase finds the ones it must
// follow to see and keep their data: those that write what it reads or
// writes, or read what it writes. A later phase that depends on these alone
// moves each piece on as soon as it is here, instead of after a fence on
// the whole earlier phase. The index makes that a lookup: a phase has a
// step per chunk (64 MiB in 4 KiB chunks: 16384), and comparing every pair
// took 11 s to build one Broadcast.
class DataDeps {
 public:
  DataDeps(const Schedule& s, const std::vector<int>& steps) : all_(steps) {
    std::map<uint16_t, std::vector<std::pair<Slice, Access>>> raw;
    for (int id : steps) {
      std::vector<Slice> reads, writes;
      if (!accesses(s.steps[static_cast<size_t>(id)], &reads, &writes)) {
        opaque_.push_back(id);
        continue;
      }
      for (const Slice& r : reads) raw[r.buf].push_back({r, {id, false}});
      for (const Slice& w : writes) raw[w.buf].push_back({w, {id, true}});
    }
    for (auto& [buf, list] : raw) {
      // Elementary pieces between every access's ends; each piece lists
      // the accesses that cover it.
      Buffer& b = bufs_[buf];
      for (const auto& [sl, acc] : list)
        if (sl.bytes > 0) b.bounds.insert(b.bounds.end(), {sl.offset, sl.offset + sl.bytes});
      std::sort(b.bounds.begin(), b.bounds.end());
      b.bounds.erase(std::unique(b.bounds.begin(), b.bounds.end()), b.bounds.end());
      b.covering.resize(b.bounds.empty() ? 0 : b.bounds.size() - 1);
      for (const auto& [sl, acc] : list)
        if (sl.bytes > 0)
          for (size_t k = b.first_piece(sl.offset); k < b.covering.size() && b.bounds[k] < sl.offset + sl.bytes; ++k)
            b.covering[k].push_back(acc);
    }
  }

  // The indexed steps that `st` must follow, ascending; all of them where
  // `st` is one-sided.
  std::vector<int> of(const Step& st) const {
    std::vector<Slice> reads, writes;
    if (!accesses(st, &reads, &writes)) return all_;
    std::vector<int> deps = opaque_;
    auto add = [&](const Slice& sl, bool writing) {
      auto it = bufs_.find(sl.buf);
      if (sl.bytes == 0 || it == bufs_.end()) return;
      const Buffer& b = it->second;
      for (size_t k = b.first_piece(sl.offset); k < b.covering.size() && b.bounds[k] < sl.offset + sl.bytes; ++k)
        for (const Access& acc : b.covering[k])
          if (acc.write || writing) deps.push_back(acc.step);
    };
    for (const Slice& r : reads) add(r, false);
    for (const Slice& w : writes) add(w, true);
    std::sort(deps.begin(), deps.end());
    deps.erase(std::unique(deps.begin(), deps.end()), deps.end());
    return deps;
  }

 private:
  struct Access {
    int step;
    bool write;
  };
  struct Buffer {
    std::vector<size_t> bounds;                 // ascending piece boundaries
    std::vector<std::vector<Access>> covering;  // [k]: accesses covering [bounds[k], bounds[k + 1])
    // The piece holding byte `offset`, or the first one after it.
    size_t first_piece(size_t offset) const {
      const auto it = std::upper_bound(bounds.begin(), bounds.end(), offset);
      return it == bounds.begin() ? 0 : static_cast<size_t>(it - bounds.begin()) - 1;
    }
  };
  std::vector<int> all_, opaque_;
  std::map<uint16_t, Buffer> bufs_;
};

}  // namespace

bool hier_supported(const CollArgs& a) {
  return a.nranks >= 1 && (a.host_of.empty() || static_cast<int>(a.host_of.size()) == a.nranks) &&
         layout_of(a).uniform;
}

// Names the schedule "hier", or "unsupported" (and returns false) when the
// hosts do not all have the same number of ranks.
static bool begin_hier(const CollArgs& a, Schedule& s) {
  s.algorithm = hier_supported(a) ? "hier" : "unsupported";
  return s.algorithm == "hier";
}

Schedule hier_allreduce(const CollArgs& a) {
  Schedule s;
  if (!begin_hier(a, s)) return s;
  const size_t bytes = a.count * a.elem;
  if (a.nranks == 1 || bytes == 0) {
    if (!a.in_place && bytes > 0) s.copy({kSendBuf, 0, bytes}, {kRecvBuf, 0, bytes});
    return s;
  }
  const Layout L = layout_of(a);
  const int nl = static_cast<int>(L.local.size()), nh = static_cast<int>(L.slot.size());
  auto part = [&](uint16_t buf, int q) {
    q = ((q % nl) + nl) % nl;
    return Slice{buf, part_begin(a.count, nl, q) * a.elem, part_size(a.count, nl, q) * a.elem};
  };
  const int right = L.local[(L.l + 1) % nl], left = L.local[(L.l - 1 + nl) % nl];
  // (1) Reduce-scatter in the host: step t sends part l-1-t, reduces l-2-t.
  std::vector<int> phase;
  if (nl == 1) {
    if (!a.in_place) phase.push_back(s.copy({kSendBuf, 0, bytes}, {kRecvBuf, 0, bytes}));
  } else {
    std::vector<int> made(nl, -1);  // step that last reduced part q
    for (int t = 0; t <= nl - 2; ++t) {
      int qs = ((L.l - 1 - t) % nl + nl) % nl, qr = ((L.l - 2 - t) % nl + nl) % nl;
      Slice src = part(t == 0 ? kSendBuf : kRecvBuf, qs);
      if (src.bytes > 0) phase.push_back(s.send(right, src, {made[qs]}));
      Slice dst = part(kRecvBuf, qr);
      if (dst.bytes > 0) phase.push_back(made[qr] = s.recv_reduce(left, dst, part(kSendBuf, qr)));
    }
  }
  int f = fence(s, phase);
  // (2) AllReduce of our part across hosts: the ring schedule, in place on
  // that part, its peers mapped from host index to rank.
  Slice mine = part(kRecvBuf, L.l);
  if (nh > 1 && mine.bytes > 0) {
    CollArgs sub;
    sub.coll = Coll::kAllReduce;
    sub.nranks = nh;
    sub.rank = L.h;
    sub.count = mine.bytes / a.elem;
    sub.elem = a.elem;
    sub.in_place = true;
    sub.chunk_bytes = a.chunk_bytes;
    phase = append_remapped(s, ring_allreduce(sub), L.slot, mine.offset, true, f);
    f = fence(s, phase);
  }
  // (3) All-gather in the host: step t sends part l-t, receives l-1-t.
  if (nl > 1) {
    std::vector<int> got(nl, f);
    for (int t = 0; t <= nl - 2; ++t) {
      int qs = ((L.l - t) % nl + nl) % nl, qr = ((L.l - 1 - t) % nl + nl) % nl;
      Slice src = part(kRecvBuf, qs);
      if (src.bytes > 0) s.send(right, src, {got[qs], f});
      Slice dst = part(kRecvBuf, qr);
      if (dst.bytes > 0) got[qr] = s.recv(left, dst, {f});
    }
  }
  return s;
}

// Two-level AllReduce whose host-local phases are one-sided: (1) local
// rank l reduces part l straight from its host's ranks' inputs, (2) ring
// AllReduce of part l across hosts among the ranks of slot l (as hier),
// (3) it writes part l into every local peer's output. Each byte crosses
// the host's memory once per phase instead of through slot rings.
Schedule hier_direct_allreduce(const CollArgs& a) {
  Schedule s;
  s.algorithm = hier_supported(a) ? "hier_direct" : "unsupported";
  if (s.algorithm != "hier_direct") return s;
  const size_t bytes = a.count * a.elem;
  if (a.nranks == 1 || bytes == 0) {
    if (!a.in_place && bytes > 0) s.copy({kSendBuf, 0, bytes}, {kRecvBuf, 0, bytes});
    return s;
  }
  const Layout L = layout_of(a);
  const int nl = static_cast<int>(L.local.size()), nh = static_cast<int>(L.slot.size());
  const Slice mine{kSendBuf, part_begin(a.count, nl, L.l) * a.elem, part_size(a.count, nl, L.l) * a.elem};
  const Slice out{kRecvBuf, mine.offset, mine.bytes};
  const size_t piece = std::max(a.elem, std::min(kOneSidedPieceBytes, a.chunk_bytes) / a.elem * a.elem);
  auto pieces_of = [&](const Slice& sl) {
    std::vector<Slice> ps;
    const size_t k = chunk_count(sl.bytes, a.elem, piece);
    for (size_t c = 0; c < k; ++c) ps.push_back(chunk_of(sl, a.elem, k, c));
    return ps;
  };
  // (1) Arrive, then reduce our part from every local rank's input.
  std::vector<int> ready;
  if (nl > 1) {
    ready.push_back(s.signal());
    for (int p : L.local)
      if (p != a.rank) ready.push_back(s.wait(p, 1));
  }
  std::vector<int> phase;
  for (const Slice& pc : pieces_of(mine)) {
    if (pc.bytes == 0) continue;
    std::vector<Source> src{{-1, pc}};
    for (int p : L.local)
      if (p != a.rank) src.push_back({p, pc});
    phase.push_back(s.reduce_from(src, {kRecvBuf, pc.offset, pc.bytes}, ready));
  }
  int f = fence(s, phase);
  if (f < 0) f = fence(s, ready);
  // (2) Across hosts, in place on our part.
  if (nh > 1 && out.bytes > 0) {
    CollArgs sub;
    sub.coll = Coll::kAllReduce;
    sub.nranks = nh;
    sub.rank = L.h;
    sub.count = out.bytes / a.elem;
    sub.elem = a.elem;
    sub.in_place = true;
    sub.chunk_bytes = a.chunk_bytes;
    phase = append_remapped(s, ring_allreduce(sub), L.slot, out.offset, true, f);
    f = fence(s, phase);
  }
  // (3) Our part into every local peer's output; done when they all are.
  if (nl > 1) {
    std::vector<int> work{f};
    for (const Slice& pc : pieces_of(out))
      for (int k = 1; k < nl; ++k) {
        const int q = L.local[(L.l + k) % nl];
        if (pc.bytes > 0) work.push_back(s.write(q, pc, pc, {f}));
      }
    s.signal(work);
    for (int p : L.local)
      if (p != a.rank) s.wait(p, 2);
  }
  return s;
}

}  // namespace conflux::algo

namespace conflux::algo {

Schedule hier_broadcast(const CollArgs& a) {
  Schedule s;
  if (!begin_hier(a, s)) return s;
  const Layout L = layout_of(a);
  const int nl = static_cast<int>(L.local.size()), nh = static_cast<int>(L.slot.size());
  // The root's host index and local slot.
  CollArgs at_root = a;
  at_root.rank = a.root;
  const Layout R = layout_of(at_root);
  // (1) Chain across hosts among the ranks in the root's slot.
  std::vector<int> across;
  if (L.l == R.l) {
    CollArgs sub = a;
    sub.nranks = nh;
    sub.rank = L.h;
    sub.root = R.h;
    sub.ring.clear();
    sub.host_of.clear();
    across = append_remapped(s, chain_broadcast(sub), L.slot, 0, false, -1);
  }
  // (2) Chain inside each host from that rank, which receives the data in
  // recvbuf: each chunk goes on inside the host once it has arrived (the
  // two chains use the same chunks), and on the root's host at once.
  if (nl > 1) {
    CollArgs sub = a;
    sub.nranks = nl;
    sub.rank = L.l;
    sub.root = R.l;
    sub.in_place = true;
    sub.ring.clear();
    sub.host_of.clear();
    const DataDeps after(s, across);
    append_mapped_after(
        s, chain_broadcast(sub), L.local, [](Slice sl) { return remap(sl, 0, true); },
        [&](const Step& st) { return after.of(st); });
  }
  return s;
}

}  // namespace conflux::algo

namespace conflux::algo {

// AllGather: (1) ring all-gather across hosts among the ranks of our local
// slot, (2) ring all-gather inside the host, where local rank j's "block"
// is the h blocks of slot j, moved as h chunks of one block each. Both
// phases are the ring schedule with its block offsets mapped to where
// those ranks' blocks live.
Schedule hier_allgather(const CollArgs& a) {
  Schedule s;
  if (!begin_hier(a, s)) return s;
  const size_t block = a.count * a.elem;
  if (a.nranks == 1 || block == 0) {
    if (!a.in_place && block > 0) s.copy({kSendBuf, 0, block}, {kRecvBuf, a.rank * block, block});
    return s;
  }
  const Layout L = layout_of(a);
  const int nl = static_cast<int>(L.local.size()), nh = static_cast<int>(L.slot.size());
  const std::vector<std::vector<int>> rank_at = ranks_by_host(a);
  // The ring's blocks live where those ranks' blocks are in our recvbuf.
  auto append = [&](const Schedule& inner, const std::vector<int>& peers, auto real_offset, int after) {
    return append_mapped(s, inner, peers, [&](Slice sl) {
      if (sl.buf == kRecvBuf) sl.offset = real_offset(sl.offset);
      return sl;
    }, after);
  };
  // (1) Across hosts: sub-rank j is host j's rank in our slot.
  CollArgs sub = a;
  sub.nranks = nh;
  sub.rank = L.h;
  sub.ring.clear();
  sub.host_of.clear();
  sub.chunk_bytes = block;  // a chunk never straddles blocks
  std::vector<int> phase = append(ring_allgather(sub), L.slot, [&](size_t off) {
    return rank_at[off / block][L.l] * block + off % block;
  }, -1);
  int f = fence(s, phase);
  // (2) Inside the host: sub-block j = blocks of slot j on hosts 0..h-1.
  if (nl > 1) {
    sub.nranks = nl;
    sub.rank = L.l;
    sub.count = a.count * nh;
    sub.in_place = true;
    append(ring_allgather(sub), L.local,
           [&](size_t off) { return slot_major_to_rank_order(rank_at, block, off); }, f);
  }
  return s;
}

}  // namespace conflux::algo

namespace conflux::algo {

// ReduceScatter, the mirror of AllGather: (1) ring reduce-scatter inside the
// host, where local rank j's "block" is the h blocks of slot j (one per
// host), reduced into a staging area T in scratch; (2) ring reduce-scatter
// across hosts among the ranks of our slot, over the h blocks in T, which
// leaves our own block, summed over every rank, in recvbuf. Only (2)
// crosses hosts: (h-1) x block per rank instead of the flat ring's (n-1).
Schedule hier_reducescatter(const CollArgs& a) {
  Schedule s;
  if (!begin_hier(a, s)) return s;
  const size_t block = a.count * a.elem;
  if (a.nranks == 1 || block == 0) {
    if (!a.in_place && block > 0) s.copy({kSendBuf, 0, block}, {kRecvBuf, 0, block});
    return s;
  }
  const Layout L = layout_of(a);
  const int nl = static_cast<int>(L.local.size()), nh = static_cast<int>(L.slot.size());
  const std::vector<std::vector<int>> rank_at = ranks_by_host(a);
  CollArgs sub = a;
  sub.ring.clear();
  sub.host_of.clear();
  sub.in_place = false;
  sub.chunk_bytes = block;  // a chunk never straddles blocks
  if (nh == 1 || nl == 1) {
    // One level only: the plain ring over the ranks in host (or slot) order.
    const std::vector<int>& peers = nh == 1 ? L.local : L.slot;
    sub.nranks = static_cast<int>(peers.size());
    sub.rank = nh == 1 ? L.l : L.h;
    sub.in_place = a.in_place;
    sub.chunk_bytes = a.chunk_bytes;
    // Sub-rank i's block is the block of rank peers[i].
    append_mapped(s, ring_reducescatter(sub), peers, [&](Slice sl) {
      if (sl.buf == kSendBuf) sl.offset = static_cast<size_t>(peers[sl.offset / block]) * block + sl.offset % block;
      return sl;
    }, -1);
    return s;
  }
  // Scratch: phase 1's partials [0, t_base), then T (our slot's h blocks,
  // host-reduced), then phase 2's partials.
  const size_t group = block * static_cast<size_t>(nh);  // local rank j's sub-block: slot j on every host
  const size_t t_base = group * static_cast<size_t>(nl);
  const size_t scratch2 = t_base + group;
  s.scratch_bytes = scratch2 + group;
  // (1) Inside the host.
  sub.nranks = nl;
  sub.rank = L.l;
  sub.count = a.count * static_cast<size_t>(nh);
  std::vector<int> phase = append_mapped(s, ring_reducescatter(sub), L.local, [&](Slice sl) {
    if (sl.buf == kSendBuf) sl.offset = slot_major_to_rank_order(rank_at, block, sl.offset);
    else if (sl.buf == kRecvBuf) sl = Slice{kScratch, t_base + sl.offset, sl.bytes};
    return sl;  // phase 1's scratch stays at [0, t_base)
  }, -1);
  const int f = fence(s, phase);
  // (2) Across hosts, on T.
  sub.nranks = nh;
  sub.rank = L.h;
  sub.count = a.count;
  append_mapped(s, ring_reducescatter(sub), L.slot, [&](Slice sl) {
    if (sl.buf == kSendBuf) sl = Slice{kScratch, t_base + sl.offset, sl.bytes};
    else if (sl.buf == kScratch) sl.offset += scratch2;
    return sl;  // recvbuf is ours
  }, f);
  return s;
}

}  // namespace conflux::algo
