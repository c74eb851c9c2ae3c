// Algorithms where every rank talks to its peers directly: pairwise
// AlltoAll(v), Gather/Scatter through the root, a dissemination barrier and
// single point-to-point transfers.
#include "algo/algorithms.h"

namespace conflux::algo {

Schedule pairwise_alltoall(const CollArgs& a) {
  Schedule s;
  s.algorithm = "pairwise";
  const int n = a.nranks;
  const bool v = a.coll == Coll::kAlltoAllv;
  auto send_slice = [&](int peer, uint16_t buf) {
    size_t cnt = v ? a.sendcounts[peer] : a.count;
    size_t off = v ? a.sdispls[peer] : static_cast<size_t>(peer) * a.count;
    return Slice{buf, off * a.elem, cnt * a.elem};
  };
  auto recv_slice = [&](int peer) {
    size_t cnt = v ? a.recvcounts[peer] : a.count;
    size_t off = v ? a.rdispls[peer] : static_cast<size_t>(peer) * a.count;
    return Slice{kRecvBuf, off * a.elem, cnt * a.elem};
  };
  // In place, receives would overwrite blocks not yet sent: send from a
  // snapshot of the input instead.
  uint16_t src_buf = kSendBuf;
  int snapshot = -1;
  if (a.in_place) {
    size_t total = 0;
    for (int r = 0; r < n; ++r) {
      Slice sl = send_slice(r, kSendBuf);
      total = std::max(total, sl.offset + sl.bytes);
    }
    if (total > 0) {
      s.scratch_bytes = total;
      snapshot = s.copy({kSendBuf, 0, total}, {kScratch, 0, total});
    }
    src_buf = kScratch;
  }
  Slice own_src = send_slice(a.rank, src_buf);
  if (!a.in_place && own_src.bytes > 0) s.copy(own_src, recv_slice(a.rank), {snapshot});
  if (a.in_place && own_src.bytes > 0 && (v ? a.sdispls[a.rank] != a.rdispls[a.rank] : false))
    s.copy(own_src, recv_slice(a.rank), {snapshot});
  // Step k pairs us with rank+k (send) and rank-k (recv), spreading load so
  // no rank is every peer's first target.
  for (int k = 1; k < n; ++k) {
    int to = (a.rank + k) % n, from = (a.rank - k + n) % n;
    s.send(to, send_slice(to, src_buf), {snapshot});
    s.recv(from, recv_slice(from), {snapshot});
  }
  return s;
}

Schedule linear_gather(const CollArgs& a) {
  Schedule s;
  s.algorithm = "linear";
  const size_t block = a.count * a.elem;
  if (a.rank != a.root) {
    if (block > 0) s.send(a.root, {kSendBuf, 0, block});
    return s;
  }
  Slice own{kRecvBuf, static_cast<size_t>(a.rank) * block, block};
  if (!a.in_place && block > 0) s.copy({kSendBuf, 0, block}, own);
  if (block == 0) return s;
  for (int k = 1; k < a.nranks; ++k) {
    int from = (a.rank + k) % a.nranks;
    s.recv(from, {kRecvBuf, static_cast<size_t>(from) * block, block});
  }
  return s;
}

Schedule linear_scatter(const CollArgs& a) {
  Schedule s;
  s.algorithm = "linear";
  const size_t block = a.count * a.elem;
  if (a.rank != a.root) {
    if (block > 0) s.recv(a.root, {kRecvBuf, 0, block});
    return s;
  }
  Slice own{kSendBuf, static_cast<size_t>(a.rank) * block, block};
  if (!a.in_place && block > 0) s.copy(own, {kRecvBuf, 0, block});
  if (block == 0) return s;
  for (int k = 1; k < a.nranks; ++k) {
    int to = (a.rank + k) % a.nranks;
    s.send(to, {kSendBuf, static_cast<size_t>(to) * block, block});
  }
  return s;
}

Schedule dissemination_barrier(const CollArgs& a) {
  Schedule s;
  s.algorithm = "dissemination";
  // Round k: tell rank+2^k we arrived, hear from rank-2^k. After ceil(log2 n)
  // rounds everyone has (transitively) heard from everyone -- provided each
  // round starts only after *every* earlier round's message arrived, so the
  // receives are chained too, not just the last one before each send.
  int prev = -1;
  for (int d = 1; d < a.nranks; d <<= 1) {
    s.send((a.rank + d) % a.nranks, {kScratch, 0, 0}, {prev});
    prev = s.recv((a.rank - d + a.nranks) % a.nranks, {kScratch, 0, 0}, {prev});
  }
  return s;
}

Schedule point_to_point(const CollArgs& a) {
  Schedule s;
  s.algorithm = "p2p";
  const size_t bytes = a.count * a.elem;
  if (a.coll == Coll::kSend)
    s.send(a.peer, {kSendBuf, 0, bytes});
  else
    s.recv(a.peer, {kRecvBuf, 0, bytes});
  return s;
}

}  // namespace conflux::algo

namespace conflux::algo {

Schedule sparse_alltoallv(const CollArgs& a) {
  Schedule s;
  s.algorithm = "sparse";
  const int n = a.nranks, me = a.rank;
  auto at = [&](const size_t* m, int i, int j) { return m[static_cast<size_t>(i) * n + j]; };
  auto send_slice = [&](int to, uint16_t buf) {
    return Slice{buf, at(a.all_sdispls, me, to) * a.elem, at(a.all_sendcounts, me, to) * a.elem};
  };
  auto recv_slice = [&](int from) {
    return Slice{kRecvBuf, at(a.all_rdispls, me, from) * a.elem, at(a.all_sendcounts, from, me) * a.elem};
  };
  // In place, receives would overwrite blocks not yet sent: send from a
  // snapshot of the input instead.
  uint16_t src_buf = kSendBuf;
  int snapshot = -1;
  if (a.in_place) {
    size_t total = 0;
    for (int r = 0; r < n; ++r) total = std::max(total, send_slice(r, kSendBuf).offset + send_slice(r, kSendBuf).bytes);
    if (total > 0) {
      s.scratch_bytes = total;
      snapshot = s.copy({kSendBuf, 0, total}, {kScratch, 0, total});
    }
    src_buf = kScratch;
  }
  const Slice own = send_slice(me, src_buf), own_dst = recv_slice(me);
  if (own.bytes > 0 && (!a.in_place || own.offset != own_dst.offset)) s.copy(own, own_dst, {snapshot});
  for (int k = 1; k < n; ++k) {
    const int to = (me + k) % n, from = (me - k + n) % n;
    if (at(a.all_sendcounts, me, to) > 0) s.send(to, send_slice(to, src_buf), {snapshot});
    if (at(a.all_sendcounts, from, me) > 0) s.recv(from, recv_slice(from), {snapshot});
  }
  return s;
}

}  // namespace conflux::algo
