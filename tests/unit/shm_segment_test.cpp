// A peer touches the pages of another rank's segment that it will use
// (ShmSegment::touch_as_sender) while other senders may already be using
// theirs: the touch must leave every byte as it was, its neighbours' rings
// included, and stay inside the mapping.
#include "transport/shm/shm_segment.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <vector>

namespace conflux {
namespace {

// The bytes from the first ring through the last notice, and the staging halves.
std::vector<uint8_t> snapshot(const ShmSegment& seg) {
  const ShmSegment::Layout& l = seg.layout();
  const auto* rings = reinterpret_cast<const uint8_t*>(&seg.ring(0));
  const auto* notices_end = reinterpret_cast<const uint8_t*>(&seg.notice(l.nranks - 1)) + sizeof(ShmNotice);
  std::vector<uint8_t> bytes(rings, notices_end);
  bytes.insert(bytes.end(), seg.staging(0), seg.staging(0) + 2 * l.staging_bytes);
  return bytes;
}

TEST(ShmSegmentTouch, TouchAsSenderChangesNoByteOfTheSegment) {
  // Slots of 4992 bytes (whole cache lines, as the configuration rounds
  // them): rings of 20288 bytes end and begin inside pages, so a page holds
  // the end of one sender's ring and the start of the next one's.
  const ShmSegment::Layout layout{3, 4, 4992, 2, 12288};
  auto made = ShmSegment::create_private(0, layout);
  ASSERT_TRUE(made.ok()) << made.status().message();
  const ShmSegment seg = std::move(made).value();
  uint8_t value = 1;
  for (int ring = 0; ring < layout.nranks * layout.channels; ++ring)
    for (uint64_t slot = 0; slot < static_cast<uint64_t>(layout.nslots); ++slot) {
      seg.slot_header(ring, slot).msg_bytes = 1000 + slot;
      uint8_t* data = seg.slot_data(ring, slot);
      for (size_t k = 0; k < layout.slot_bytes; ++k) data[k] = value += 37;
    }
  for (size_t k = 0; k < 2 * layout.staging_bytes; ++k) seg.staging(0)[k] = value += 11;
  seg.ring(layout.ring_index(2, 1)).tail.store(7);
  const std::vector<uint8_t> before = snapshot(seg);

  for (int sender = 0; sender < layout.nranks; ++sender) seg.touch_as_sender(sender);

  const std::vector<uint8_t> after = snapshot(seg);
  ASSERT_EQ(before.size(), after.size());
  EXPECT_EQ(std::memcmp(before.data(), after.data(), before.size()), 0);
  EXPECT_EQ(seg.ring(layout.ring_index(2, 1)).tail.load(), 7u);
}

}  // namespace
}  // namespace conflux
