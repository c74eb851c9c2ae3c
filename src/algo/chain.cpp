// Pipelined chain Broadcast and Reduce along the ring order. A chain moves
// every byte over each link once, and chunking overlaps the hops, so a long
// message costs about one transfer plus (n-1) chunk latencies.
#include "algo/algorithms.h"

namespace conflux::algo {

Schedule chain_broadcast(const CollArgs& a) {
  Schedule s;
  s.algorithm = "chain";
  const size_t bytes = a.count * a.elem;
  const int n = a.nranks;
  const bool is_root = a.rank == a.root;
  if (is_root && !a.in_place && bytes > 0) s.copy({kSendBuf, 0, bytes}, {kRecvBuf, 0, bytes});
  if (n == 1 || bytes == 0) return s;
  const int p = a.ring_pos(a.rank);
  const int v = (p - a.ring_pos(a.root) + n) % n;  // hops from the root
  const int next = a.ring_rank(p + 1);
  const int prev = a.ring_rank(p - 1);
  const size_t nchunks = chunk_count(bytes, a.elem, a.chunk_bytes);
  Slice whole{is_root ? kSendBuf : kRecvBuf, 0, bytes};
  if (is_root && a.in_place) whole.buf = kRecvBuf;
  for (size_t c = 0; c < nchunks; ++c) {
    Slice piece = chunk_of(whole, a.elem, nchunks, c);
    int got = is_root ? -1 : s.recv(prev, piece);
    if (v < n - 1) s.send(next, piece, {got});
  }
  return s;
}

Schedule chain_reduce(const CollArgs& a) {
  Schedule s;
  s.algorithm = "chain";
  const size_t bytes = a.count * a.elem;
  const int n = a.nranks;
  const bool is_root = a.rank == a.root;
  if (n == 1) {
    if (!a.in_place && bytes > 0) s.copy({kSendBuf, 0, bytes}, {kRecvBuf, 0, bytes});
    return s;
  }
  if (bytes == 0) return s;
  const int p = a.ring_pos(a.rank);
  const int v = (a.ring_pos(a.root) - p + n) % n;  // hops to the root, data flows forward
  const int next = a.ring_rank(p + 1);
  const int prev = a.ring_rank(p - 1);
  const size_t nchunks = chunk_count(bytes, a.elem, a.chunk_bytes);
  Slice input{kSendBuf, 0, bytes};
  // The farthest rank only sends; middle ranks fold in their input and pass
  // the partial on from scratch; the root folds the last one into recvbuf.
  Slice partial = is_root ? Slice{kRecvBuf, 0, bytes} : Slice{kScratch, 0, bytes};
  if (!is_root && v < n - 1) s.scratch_bytes = bytes;
  for (size_t c = 0; c < nchunks; ++c) {
    Slice in = chunk_of(input, a.elem, nchunks, c);
    if (v == n - 1) {
      s.send(next, in);
      continue;
    }
    Slice acc = chunk_of(partial, a.elem, nchunks, c);
    int got = s.recv_reduce(prev, acc, in);
    if (!is_root) s.send(next, acc, {got});
  }
  return s;
}

}  // namespace conflux::algo
