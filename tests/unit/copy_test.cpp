// copy_bytes and move_bytes against memcpy/memmove: every size class around
// the vector path's threshold and its 64-byte blocks, at every distance
// between the buffers near the ones it takes over from memcpy (1-63 bytes
// past the source modulo 4 KiB) and some it leaves to memcpy.
#include "core/copy.h"
#include "support/distance_arena.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace conflux {
namespace {

constexpr size_t kSizes[] = {0, 1, 63, 64, 65, 1023, 1024, 1025, 4096 + 17, 70001};

using test::pattern;

TEST(CopyBytes, CopiesEveryByteAtEveryDistanceAndLeavesTheRestAlone) {
  const size_t most = 70001;
  // The destination at any distance from the source modulo 4 KiB,
  // including the short ones.
  test::DistanceArena arena(most);
  const auto src = pattern(most, 7);
  for (size_t bytes : kSizes) {
    for (int gap : {-65, -64, -16, -1, 0, 1, 8, 16, 31, 32, 48, 63, 64, 65, 4095}) {
      uint8_t* s = arena.first();
      uint8_t* d = arena.second(gap);
      ASSERT_EQ(page_distance(d, s), static_cast<size_t>((gap % 4096 + 4096) % 4096));
      std::memcpy(s, src.data(), bytes);
      std::fill(d - 64, d + bytes + 64, test::kGuard);
      copy_bytes(d, s, bytes);
      const std::string what = std::to_string(bytes) + " bytes at distance " + std::to_string(gap);
      ASSERT_EQ(std::memcmp(d, src.data(), bytes), 0) << what;
      ASSERT_NO_FATAL_FAILURE(test::expect_guards(d, bytes, what));
    }
  }
}

TEST(CopyBytes, MoveBytesHandlesOverlapBothWaysLikeMemmove) {
  for (size_t bytes : kSizes) {
    for (int shift : {-40, -16, -1, 1, 16, 40, 5000}) {
      auto expect = pattern(bytes + 10000, 3), got = expect;
      const size_t from = 5000, to = static_cast<size_t>(static_cast<std::ptrdiff_t>(from) + shift);
      std::memmove(expect.data() + to, expect.data() + from, bytes);
      move_bytes(got.data() + to, got.data() + from, bytes);
      ASSERT_EQ(got, expect) << bytes << " bytes moved by " << shift;
    }
  }
}

}  // namespace
}  // namespace conflux
