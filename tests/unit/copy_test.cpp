// copy_bytes and move_bytes against memcpy/memmove: every size class around
// the vector path's threshold and its 64-byte blocks, at every distance
// between the buffers near the ones it takes over from memcpy (1-63 bytes
// past the source modulo 4 KiB) and some it leaves to memcpy.
#include "core/copy.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <numeric>
#include <vector>

namespace conflux {
namespace {

constexpr size_t kSizes[] = {0, 1, 63, 64, 65, 1023, 1024, 1025, 4096 + 17, 70001};

std::vector<uint8_t> pattern(size_t n, uint8_t first) {
  std::vector<uint8_t> v(n);
  std::iota(v.begin(), v.end(), first);
  return v;
}

TEST(CopyBytes, CopiesEveryByteAtEveryDistanceAndLeavesTheRestAlone) {
  const size_t most = 70001;
  // One arena so that the destination can sit at any distance from the
  // source modulo 4 KiB, including the short ones.
  std::vector<uint8_t> arena(2 * most + 5 * size_t{4096});
  const auto src = pattern(most, 7);
  for (size_t bytes : kSizes) {
    for (int gap : {-65, -64, -16, -1, 0, 1, 8, 16, 31, 32, 48, 63, 64, 65, 4095}) {
      uint8_t* s = arena.data() + 4096;
      // Past the source by a whole number of pages, then by the gap.
      const size_t gap_bytes = static_cast<size_t>((gap % 4096 + 4096) % 4096);
      uint8_t* d = s + (most + 4095) / 4096 * 4096 + 4096 + gap_bytes;
      ASSERT_EQ(page_distance(d, s), gap_bytes);
      std::memcpy(s, src.data(), bytes);
      std::fill(d - 64, d + bytes + 64, uint8_t{0xEE});
      copy_bytes(d, s, bytes);
      ASSERT_EQ(std::memcmp(d, src.data(), bytes), 0) << bytes << " bytes at distance " << gap;
      for (int k = 1; k <= 64; ++k) {
        ASSERT_EQ(d[-k], 0xEE) << "wrote before the destination: " << bytes << " bytes at distance " << gap;
        ASSERT_EQ(d[bytes + static_cast<size_t>(k) - 1], 0xEE)
            << "wrote past the destination: " << bytes << " bytes at distance " << gap;
      }
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
