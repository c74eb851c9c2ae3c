#include "algo/channels.h"

#include "algo/compose.h"

#include <algorithm>
#include <cstdint>
#include <vector>

namespace conflux::algo {
namespace {

// Where a sub-schedule's bytes lie in the caller's buffer: one contiguous
// vector (part at `first`), or per-rank blocks each holding the part at
// `first` within the block.
struct PartLayout {
  bool blocked = false;
  size_t first = 0;        // bytes: the part's start (within each block)
  size_t sub_block = 0;    // bytes of a block in the sub-collective
  size_t block = 0;        // bytes of a block in the caller's buffer

  // The caller's offset of a sub-schedule slice; false if it spans blocks.
  bool map(const Slice& s, size_t* out) const {
    if (!blocked) {
      *out = first + s.offset;
      return true;
    }
    const size_t index = s.offset / sub_block, within = s.offset % sub_block;
    if (s.bytes > 0 && within + s.bytes > sub_block) return false;
    *out = index * block + first + within;
    return true;
  }
  // Bytes from sub-schedule offset `at` to the end of its block.
  size_t left_in_block(size_t at) const { return blocked ? sub_block - at % sub_block : SIZE_MAX; }
};

struct Layouts {
  bool send_blocked = false, recv_blocked = false;
};

std::optional<Layouts> layouts_of(Coll c) {
  switch (c) {
    case Coll::kAllReduce:
    case Coll::kBroadcast:
    case Coll::kReduce: return Layouts{false, false};
    case Coll::kAllGather: return Layouts{false, true};
    case Coll::kReduceScatter: return Layouts{true, false};
    case Coll::kAlltoAll: return Layouts{true, true};
    default: return std::nullopt;
  }
}

}  // namespace

bool channels_can_split(Coll c, Builder build) {
  const std::optional<Layouts> layouts = layouts_of(c);
  if (!layouts) return false;
  if (!layouts->send_blocked && !layouts->recv_blocked) return true;
  return build == ring_allgather || build == ring_reducescatter || build == pairwise_alltoall;
}

std::optional<Schedule> split_channels(const CollArgs& a, int channels, Builder build) {
  const std::optional<Layouts> layouts = layouts_of(a.coll);
  if (!channels_can_split(a.coll, build) || channels < 2 || channels > 255 || a.count < static_cast<size_t>(channels))
    return std::nullopt;
  Schedule out;
  for (int c = 0; c < channels; ++c) {
    CollArgs part = a;
    part.count = part_size(a.count, channels, c);
    const size_t first = part_begin(a.count, channels, c) * a.elem;
    Schedule sub = build(part);
    if (c == 0) out.algorithm = sub.algorithm + "/" + std::to_string(channels) + "ch";
    const PartLayout send{layouts->send_blocked, first, part.count * a.elem, a.count * a.elem};
    const PartLayout recv{layouts->recv_blocked, first, part.count * a.elem, a.count * a.elem};
    const size_t scratch_base = out.scratch_bytes;
    auto remap = [&](Slice* s) {
      switch (s->buf) {
        case kSendBuf: return send.map(*s, &s->offset);
        case kRecvBuf: return recv.map(*s, &s->offset);
        case kScratch: s->offset += scratch_base; return true;
        default: return false;  // a buffer only the builder knows
      }
    };
    // A local copy may span blocks (AlltoAll's in-place snapshot of the
    // whole input): it becomes one copy per block and a fence that stands
    // for it. Messages cannot be cut: the peer's schedule must match.
    std::vector<uint32_t> index_of(sub.steps.size());
    auto layout = [&](const Slice& sl) -> const PartLayout* {
      return sl.buf == kSendBuf ? &send : sl.buf == kRecvBuf ? &recv : nullptr;
    };
    for (size_t i = 0; i < sub.steps.size(); ++i) {
      Step st = sub.steps[i];
      if (is_one_sided(st.kind)) return std::nullopt;  // flags count one call's signals: not splittable
      std::vector<int> after;
      for (uint32_t k = 0; k < st.dep_count; ++k) after.push_back(static_cast<int>(index_of[sub.deps[st.dep_begin + k]]));
      if (st.kind == StepKind::kCopy) {
        std::vector<int> pieces;
        for (size_t done = 0; done < st.src.bytes || pieces.empty();) {
          Step piece = st;
          piece.src.offset += done;
          piece.dst.offset += done;
          size_t len = st.src.bytes - done;
          if (const PartLayout* l = layout(piece.src)) len = std::min(len, l->left_in_block(piece.src.offset));
          if (const PartLayout* l = layout(piece.dst)) len = std::min(len, l->left_in_block(piece.dst.offset));
          piece.src.bytes = piece.dst.bytes = len;
          if (!remap(&piece.src) || !remap(&piece.dst)) return std::nullopt;
          pieces.push_back(add_after(out, piece, after));
          done += len;
        }
        index_of[i] = static_cast<uint32_t>(pieces.size() == 1 ? pieces[0] : fence(out, pieces));
        continue;
      }
      if (st.kind == StepKind::kSend && !remap(&st.src)) return std::nullopt;
      if (st.kind != StepKind::kSend && !remap(&st.dst)) return std::nullopt;
      if (st.kind == StepKind::kRecvReduce && !remap(&st.with)) return std::nullopt;
      st.channel = static_cast<uint8_t>(c);
      index_of[i] = static_cast<uint32_t>(add_after(out, st, after));
    }
    out.scratch_bytes += sub.scratch_bytes;
  }
  return out;
}

}  // namespace conflux::algo
