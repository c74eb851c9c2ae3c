// Ring AllReduce (reduce-scatter then all-gather), AllGather and
// ReduceScatter. Ranks are visited in ring order (a topology-aware
// permutation); block q belongs to the rank at ring position q. Each block
// is pipelined in chunks: step s of a chunk depends only on step s-1 of the
// same chunk, so chunks flow around the ring back to back.
#include "algo/algorithms.h"

namespace conflux::algo {

int CollArgs::ring_rank(int pos) const {
  int p = ((pos % nranks) + nranks) % nranks;
  return ring.empty() ? p : ring[p];
}

int CollArgs::ring_pos(int r) const {
  if (ring.empty()) return r;
  for (int p = 0; p < nranks; ++p)
    if (ring[p] == r) return p;
  return -1;
}

namespace {

// Bytes of block q and where it sits, for a buffer holding all blocks of a
// `count`-element vector split by ring position.
Slice block_slice(const CollArgs& a, uint16_t buf, int q, size_t count) {
  int qq = ((q % a.nranks) + a.nranks) % a.nranks;
  return Slice{buf, part_begin(count, a.nranks, qq) * a.elem, part_size(count, a.nranks, qq) * a.elem};
}

// Region of rank r in a buffer of nranks equal blocks of `per_rank` elements.
Slice rank_slice(const CollArgs& a, uint16_t buf, int r, size_t per_rank) {
  return Slice{buf, static_cast<size_t>(r) * per_rank * a.elem, per_rank * a.elem};
}

}  // namespace

Schedule ring_allreduce(const CollArgs& a) {
  Schedule s;
  s.algorithm = "ring";
  const int n = a.nranks;
  const size_t bytes = a.count * a.elem;
  if (n == 1) {
    if (!a.in_place && bytes > 0) s.copy({kSendBuf, 0, bytes}, {kRecvBuf, 0, bytes});
    return s;
  }
  const int p = a.ring_pos(a.rank);
  const int right = a.ring_rank(p + 1);
  const int left = a.ring_rank(p - 1);
  auto chunks_of = [&](int q) { return chunk_count(block_slice(a, kSendBuf, q, a.count).bytes, a.elem, a.chunk_bytes); };
  auto chunk = [&](uint16_t buf, int q, size_t c) {
    return chunk_of(block_slice(a, buf, q, a.count), a.elem, chunks_of(q), c);
  };
  // rs_recv[q][c]: the step that produced our partial of block q chunk c;
  // rs_send[q][c]: the step that sent block q chunk c during reduce-scatter.
  std::vector<std::vector<int>> rs_recv(n), rs_send(n), ag_recv(n);
  for (int q = 0; q < n; ++q) {
    rs_recv[q].assign(chunks_of(q), -1);
    rs_send[q].assign(chunks_of(q), -1);
    ag_recv[q].assign(chunks_of(q), -1);
  }
  auto norm = [&](int q) { return ((q % n) + n) % n; };
  // Reduce-scatter: at step t send block p-1-t, receive-and-reduce block p-2-t.
  for (int t = 0; t <= n - 2; ++t) {
    int qs = norm(p - 1 - t), qr = norm(p - 2 - t);
    for (size_t c = 0; c < rs_send[qs].size(); ++c) {
      Slice src = chunk(t == 0 ? kSendBuf : kRecvBuf, qs, c);
      if (src.bytes == 0) continue;
      rs_send[qs][c] = s.send(right, src, {rs_recv[qs][c]});
    }
    for (size_t c = 0; c < rs_recv[qr].size(); ++c) {
      Slice dst = chunk(kRecvBuf, qr, c);
      if (dst.bytes == 0) continue;
      rs_recv[qr][c] = s.recv_reduce(left, dst, chunk(kSendBuf, qr, c));
    }
  }
  // All-gather: at step t send block p-t, receive block p-1-t. A receive
  // overwrites a block we sent during reduce-scatter: wait for that send.
  for (int t = 0; t <= n - 2; ++t) {
    int qs = norm(p - t), qr = norm(p - 1 - t);
    for (size_t c = 0; c < rs_send[qs].size(); ++c) {
      Slice src = chunk(kRecvBuf, qs, c);
      if (src.bytes == 0) continue;
      s.send(right, src, {t == 0 ? rs_recv[qs][c] : ag_recv[qs][c]});
    }
    for (size_t c = 0; c < ag_recv[qr].size(); ++c) {
      Slice dst = chunk(kRecvBuf, qr, c);
      if (dst.bytes == 0) continue;
      ag_recv[qr][c] = s.recv(left, dst, {rs_send[qr][c]});
    }
  }
  return s;
}

Schedule ring_allgather(const CollArgs& a) {
  Schedule s;
  s.algorithm = "ring";
  const int n = a.nranks;
  const size_t block = a.count * a.elem;
  const int p = a.ring_pos(a.rank);
  Slice own = rank_slice(a, kRecvBuf, a.rank, a.count);
  if (!a.in_place && block > 0) s.copy({kSendBuf, 0, block}, own);
  if (n == 1 || block == 0) return s;
  const int right = a.ring_rank(p + 1);
  const int left = a.ring_rank(p - 1);
  const size_t nchunks = chunk_count(block, a.elem, a.chunk_bytes);
  std::vector<int> prev_recv(nchunks, -1);
  for (int t = 0; t <= n - 2; ++t) {
    int rs = a.ring_rank(p - t), rr = a.ring_rank(p - 1 - t);
    std::vector<int> recvd(nchunks, -1);
    for (size_t c = 0; c < nchunks; ++c) {
      Slice src = t == 0 ? chunk_of(a.in_place ? own : Slice{kSendBuf, 0, block}, a.elem, nchunks, c)
                         : chunk_of(rank_slice(a, kRecvBuf, rs, a.count), a.elem, nchunks, c);
      s.send(right, src, {prev_recv[c]});
    }
    for (size_t c = 0; c < nchunks; ++c)
      recvd[c] = s.recv(left, chunk_of(rank_slice(a, kRecvBuf, rr, a.count), a.elem, nchunks, c));
    prev_recv = recvd;
  }
  return s;
}

Schedule ring_reducescatter(const CollArgs& a) {
  Schedule s;
  s.algorithm = "ring";
  const int n = a.nranks;
  const size_t block = a.count * a.elem;
  Slice out{kRecvBuf, 0, block};
  if (n == 1) {
    if (!a.in_place && block > 0) s.copy({kSendBuf, 0, block}, out);
    return s;
  }
  if (block == 0) return s;
  const int p = a.ring_pos(a.rank);
  const int right = a.ring_rank(p + 1);
  const int left = a.ring_rank(p - 1);
  const size_t nchunks = chunk_count(block, a.elem, a.chunk_bytes);
  // Partials of blocks still travelling live in scratch, one slot per block
  // (indexed by owner rank), never in the caller's send buffer.
  s.scratch_bytes = static_cast<size_t>(n) * block;
  std::vector<int> prev_recv(nchunks, -1);
  for (int t = 0; t <= n - 2; ++t) {
    int rs = a.ring_rank(p - 1 - t), rr = a.ring_rank(p - 2 - t);
    bool last = t == n - 2;  // the block received in the last step is ours
    std::vector<int> recvd(nchunks, -1);
    for (size_t c = 0; c < nchunks; ++c) {
      Slice src = chunk_of(rank_slice(a, t == 0 ? kSendBuf : kScratch, rs, a.count), a.elem, nchunks, c);
      s.send(right, src, {prev_recv[c]});
    }
    for (size_t c = 0; c < nchunks; ++c) {
      Slice dst = last ? chunk_of(out, a.elem, nchunks, c)
                       : chunk_of(rank_slice(a, kScratch, rr, a.count), a.elem, nchunks, c);
      recvd[c] = s.recv_reduce(left, dst, chunk_of(rank_slice(a, kSendBuf, rr, a.count), a.elem, nchunks, c));
    }
    prev_recv = recvd;
  }
  return s;
}

}  // namespace conflux::algo
