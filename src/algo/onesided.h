// Helpers shared by the one-sided builders (onesided_eager.cpp,
// onesided_direct.cpp): flag rounds, pieces, the part of a vector a rank
// reduces.
#pragma once

#include "algo/algorithms.h"

#include <vector>

namespace conflux::algo::onesided {

// This rank's next signal, after `after`; the caller counts the phases.
inline int signal_after(Schedule& s, const std::vector<int>& after) { return s.signal(after); }

// Waits for the `phase`-th signal of every peer (or only of `only`).
inline std::vector<int> wait_for(Schedule& s, const CollArgs& a, uint32_t phase, int only = -1) {
  std::vector<int> w;
  for (int p = 0; p < a.nranks; ++p)
    if (p != a.rank && (only < 0 || p == only)) w.push_back(s.wait(p, phase));
  return w;
}

// Waits for every peer's signal of `phase` but `skip`'s.
inline std::vector<int> wait_for_all_but(Schedule& s, const CollArgs& a, uint32_t phase, int skip) {
  std::vector<int> w;
  for (int p = 0; p < a.nranks; ++p)
    if (p != a.rank && p != skip) w.push_back(s.wait(p, phase));
  return w;
}

inline std::vector<int> join(std::vector<int> a, const std::vector<int>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// Bytes one-sided steps move at a time (whole elements).
inline size_t piece_bytes(const CollArgs& a) {
  const size_t piece = std::min(kOneSidedPieceBytes, a.chunk_bytes);
  return std::max(a.elem, piece / a.elem * a.elem);
}

// The pieces of `s` (at least one, even when empty).
inline std::vector<Slice> pieces(const CollArgs& a, const Slice& s) {
  const size_t n = chunk_count(s.bytes, a.elem, piece_bytes(a));
  std::vector<Slice> out;
  for (size_t c = 0; c < n; ++c) out.push_back(chunk_of(s, a.elem, n, c));
  return out;
}

// The same piece shifted to another buffer and offset.
inline Slice moved(const Slice& piece, const Slice& from, uint16_t buf, size_t offset) {
  return Slice{buf, offset + (piece.offset - from.offset), piece.bytes};
}

// Rank r's part of a vector of `count` elements, in bytes (balanced).
inline Slice part(const CollArgs& a, uint16_t buf, int r, size_t base = 0) {
  return Slice{buf, base + part_begin(a.count, a.nranks, r) * a.elem, part_size(a.count, a.nranks, r) * a.elem};
}

// The sources of a reduction of `slice` of buffer `buf` over every rank,
// this rank's own input first (so the output may alias it), then the peers
// in rank order.
inline std::vector<Source> from_every_rank(const CollArgs& a, const Slice& slice) {
  std::vector<Source> src;
  src.push_back({-1, slice});
  for (int p = 0; p < a.nranks; ++p)
    if (p != a.rank) src.push_back({p, slice});
  return src;
}

}  // namespace conflux::algo::onesided
