// SharedBytes, the library's own buffers that same-host peers map: they
// come from the cfxMemAlloc allocator (so a peer finds them as a shared
// region), grow with room to spare, keep their region while they shrink,
// and hand it over on a move.
#include "core/shared_bytes.h"
#include "core/shared_mem.h"

#include <gtest/gtest.h>

#include <cstring>
#include <utility>

namespace {

using conflux::shared_region_of;
using conflux::SharedBytes;

TEST(SharedBytes, StartsEmptyAndAllocatesASharedRegion) {
  SharedBytes b;
  EXPECT_TRUE(b.empty());
  EXPECT_EQ(b.data(), nullptr);
  b.resize(10000);
  ASSERT_NE(b.data(), nullptr);
  EXPECT_EQ(b.size(), 10000u);
  const conflux::SharedRegionRef ref = shared_region_of(b.data());
  EXPECT_NE(ref.id, 0u) << "the rows must be a region peers can map";
  EXPECT_GE(ref.size, 10000u);
  std::memset(b.data(), 0x5a, b.size());  // all of it is writable
}

TEST(SharedBytes, ShrinkingAndRegrowingWithinRoomKeepsTheRegion) {
  SharedBytes b;
  b.resize(1 << 20);
  uint8_t* at = b.data();
  const uint64_t id = shared_region_of(at).id;
  b.resize(1000);
  EXPECT_EQ(b.data(), at);
  b.resize((1 << 20) + (1 << 18));  // within the 1.25x it allocated
  EXPECT_EQ(b.data(), at);
  EXPECT_EQ(shared_region_of(b.data()).id, id);
  b.resize(4 << 20);  // past it: a new region
  EXPECT_NE(shared_region_of(b.data()).id, id);
  EXPECT_EQ(b.size(), size_t{4} << 20);
  EXPECT_NE(shared_region_of(at).id, id) << "the old region is freed (its address may be reused)";
}

TEST(SharedBytes, MoveHandsTheRegionOver) {
  SharedBytes a;
  a.resize(5000);
  std::memset(a.data(), 7, a.size());
  uint8_t* at = a.data();
  SharedBytes b(std::move(a));
  EXPECT_EQ(b.data(), at);
  EXPECT_EQ(b.size(), 5000u);
  EXPECT_TRUE(a.empty());  // NOLINT(bugprone-use-after-move): a moved-from buffer is empty by contract
  EXPECT_EQ(b.data()[4999], 7);
  SharedBytes c;
  c.resize(100);
  c = std::move(b);
  EXPECT_EQ(c.data(), at);
  EXPECT_NE(shared_region_of(c.data()).id, 0u);
}

}  // namespace
