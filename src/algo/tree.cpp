// NCCL's double binary tree (graph/trees.cc): tree 0 is a binary tree over
// ranks 0..n-1 in which odd ranks are leaves; tree 1 is tree 0 shifted by
// one (odd n) or mirrored (even n), so a rank interior in one tree is a leaf
// in the other and each tree can carry half the data at full link speed.
// Broadcast and Reduce re-root both trees at the call's root.
#include "algo/algorithms.h"

#include <algorithm>

namespace conflux::algo {

TreeLinks btree_links(int n, int rank) {
  TreeLinks t;
  int bit = 1;
  while (bit < n && !(bit & rank)) bit <<= 1;
  if (rank == 0) {
    if (n > 1) t.child1 = bit >> 1;
    return t;
  }
  int up = (rank ^ bit) | (bit << 1);
  t.parent = up < n ? up : rank ^ bit;
  for (int low = bit >> 1; low > 0; low >>= 1) {
    if (t.child0 < 0) t.child0 = rank - low;
    if (rank + low < n) {
      t.child1 = rank + low;
      break;
    }
  }
  return t;
}

TreeLinks dtree_links(int n, int tree, int rank) {
  if (tree == 0) return btree_links(n, rank);
  // Odd n: shift by one; even n: mirror (as ncclGetDtree).
  auto to = [&](int r) { return n % 2 == 1 ? (r - 1 + n) % n : n - 1 - r; };
  auto from = [&](int r) { return r < 0 ? -1 : (n % 2 == 1 ? (r + 1) % n : n - 1 - r); };
  TreeLinks b = btree_links(n, to(rank));
  return TreeLinks{from(b.parent), from(b.child0), from(b.child1)};
}

int dtree_root(int n, int tree) { return tree == 0 || n % 2 == 1 ? (tree == 0 ? 0 : 1 % n) : n - 1; }

namespace {

struct Node {
  int parent = -1;
  std::vector<int> children;
};

Node node_of(const TreeLinks& l) {
  Node x;
  x.parent = l.parent;
  for (int c : {l.child0, l.child1})
    if (c >= 0) x.children.push_back(c);
  return x;
}

// This rank's place in tree `tree` re-rooted at `root`: the path from the
// new root up to the old one is reversed; every other edge keeps its role.
Node rerooted(int n, int tree, int root, int rank) {
  std::vector<int> path{root};
  while (true) {
    int up = dtree_links(n, tree, path.back()).parent;
    if (up < 0) break;
    path.push_back(up);
  }
  Node x = node_of(dtree_links(n, tree, rank));
  auto at = std::find(path.begin(), path.end(), rank);
  if (at == path.end()) return x;
  size_t i = static_cast<size_t>(at - path.begin());
  int new_parent = i == 0 ? -1 : path[i - 1];
  std::erase(x.children, new_parent);
  if (x.parent >= 0) x.children.push_back(x.parent);
  x.parent = new_parent;
  return x;
}

// Maps a tree over virtual ranks v = rank - root (mod n) back to ranks.
Node unshift(Node x, int n, int root) {
  auto real = [&](int v) { return v < 0 ? -1 : (v + root) % n; };
  x.parent = real(x.parent);
  for (int& c : x.children) c = real(c);
  return x;
}

// Half t of the data (tree t's share) in elements.
Slice half(const CollArgs& a, uint16_t buf, int t) {
  return Slice{buf, part_begin(a.count, 2, t) * a.elem, part_size(a.count, 2, t) * a.elem};
}

Schedule single_rank(const CollArgs& a, const char* name) {
  Schedule s;
  s.algorithm = name;
  const size_t bytes = a.count * a.elem;
  if (!a.in_place && bytes > 0) s.copy({kSendBuf, 0, bytes}, {kRecvBuf, 0, bytes});
  return s;
}

}  // namespace

Schedule tree_allreduce(const CollArgs& a) {
  if (a.nranks == 1) return single_rank(a, "tree");
  Schedule s;
  s.algorithm = "tree";
  const int n = a.nranks;
  Node nodes[2] = {node_of(dtree_links(n, 0, a.rank)), node_of(dtree_links(n, 1, a.rank))};
  size_t nchunks[2];
  for (int t = 0; t < 2; ++t) nchunks[t] = chunk_count(half(a, kRecvBuf, t).bytes, a.elem, a.chunk_bytes);
  const size_t most = std::max(nchunks[0], nchunks[1]);
  // Every rank emits messages in the same global order (round k: up chunk k
  // of both trees, then down chunk k - lag), so FIFO queues never cross and
  // chunks stay pipelined; the lag lets the reduction reach the root before
  // its broadcast competes for a link used both ways by the two trees.
  int lag = 1;
  while ((1 << lag) < n) ++lag;
  std::vector<int> sent_up[2], reduced[2];
  for (int t = 0; t < 2; ++t) sent_up[t].assign(nchunks[t], -1), reduced[t].assign(nchunks[t], -1);
  for (size_t k = 0; k < most + lag; ++k) {
    for (int t = 0; t < 2 && k < most; ++t) {
      if (k >= nchunks[t]) continue;
      Slice acc = chunk_of(half(a, kRecvBuf, t), a.elem, nchunks[t], k);
      Slice in = chunk_of(half(a, kSendBuf, t), a.elem, nchunks[t], k);
      if (acc.bytes == 0) continue;
      int last = -1;
      Slice up = in;
      for (int child : nodes[t].children) {
        last = s.recv_reduce(child, acc, last < 0 ? in : acc, {last});
        up = acc;
      }
      if (last < 0 && nodes[t].parent < 0) last = s.copy(in, acc);  // a root without children (n == 1)
      reduced[t][k] = last;
      if (nodes[t].parent >= 0) sent_up[t][k] = s.send(nodes[t].parent, up, {last});
    }
    if (k < static_cast<size_t>(lag)) continue;
    const size_t c = k - lag;
    for (int t = 0; t < 2; ++t) {
      if (c >= nchunks[t]) continue;
      Slice acc = chunk_of(half(a, kRecvBuf, t), a.elem, nchunks[t], c);
      if (acc.bytes == 0) continue;
      int got = nodes[t].parent >= 0 ? s.recv(nodes[t].parent, acc, {sent_up[t][c]}) : reduced[t][c];
      for (int child : nodes[t].children) s.send(child, acc, {got});
    }
  }
  return s;
}

Schedule tree_broadcast(const CollArgs& a) {
  Schedule s;
  s.algorithm = "tree";
  const int n = a.nranks;
  const size_t bytes = a.count * a.elem;
  const bool is_root = a.rank == a.root;
  if (is_root && !a.in_place && bytes > 0) s.copy({kSendBuf, 0, bytes}, {kRecvBuf, 0, bytes});
  if (n == 1 || bytes == 0) return s;
  const int v = (a.rank - a.root + n) % n;
  Node nodes[2] = {unshift(rerooted(n, 0, 0, v), n, a.root), unshift(rerooted(n, 1, 0, v), n, a.root)};
  // The root sends from its input, so its copy to recvbuf runs alongside.
  const uint16_t src = is_root ? (a.in_place ? kRecvBuf : kSendBuf) : kRecvBuf;
  size_t nchunks[2];
  for (int t = 0; t < 2; ++t) nchunks[t] = chunk_count(half(a, kRecvBuf, t).bytes, a.elem, a.chunk_bytes);
  for (size_t c = 0; c < std::max(nchunks[0], nchunks[1]); ++c) {
    for (int t = 0; t < 2; ++t) {
      if (c >= nchunks[t]) continue;
      Slice piece = chunk_of(half(a, src, t), a.elem, nchunks[t], c);
      if (piece.bytes == 0) continue;
      int got = nodes[t].parent >= 0 ? s.recv(nodes[t].parent, piece) : -1;
      for (int child : nodes[t].children) s.send(child, piece, {got});
    }
  }
  return s;
}

Schedule tree_reduce(const CollArgs& a) {
  if (a.nranks == 1) return single_rank(a, "tree");
  Schedule s;
  s.algorithm = "tree";
  const int n = a.nranks;
  const size_t bytes = a.count * a.elem;
  if (bytes == 0) return s;
  const bool is_root = a.rank == a.root;
  const int v = (a.rank - a.root + n) % n;
  Node nodes[2] = {unshift(rerooted(n, 0, 0, v), n, a.root), unshift(rerooted(n, 1, 0, v), n, a.root)};
  // Interior ranks other than the root accumulate in scratch: their
  // recvbuf is not part of the call.
  const uint16_t acc_buf = is_root ? kRecvBuf : kScratch;
  if (!is_root && (!nodes[0].children.empty() || !nodes[1].children.empty())) s.scratch_bytes = bytes;
  size_t nchunks[2];
  for (int t = 0; t < 2; ++t) nchunks[t] = chunk_count(half(a, kRecvBuf, t).bytes, a.elem, a.chunk_bytes);
  for (size_t c = 0; c < std::max(nchunks[0], nchunks[1]); ++c) {
    for (int t = 0; t < 2; ++t) {
      if (c >= nchunks[t]) continue;
      Slice acc = chunk_of(half(a, acc_buf, t), a.elem, nchunks[t], c);
      Slice in = chunk_of(half(a, kSendBuf, t), a.elem, nchunks[t], c);
      if (acc.bytes == 0) continue;
      int last = -1;
      Slice up = in;
      for (int child : nodes[t].children) {
        last = s.recv_reduce(child, acc, last < 0 ? in : acc, {last});
        up = acc;
      }
      if (nodes[t].parent >= 0) s.send(nodes[t].parent, up, {last});
    }
  }
  return s;
}

}  // namespace conflux::algo
