// Buffers for copy tests that must place a destination at a chosen distance
// from its source modulo 4 KiB (the CPU's and the kernel's copies slow down
// at 1-63 bytes past), with guard bytes around the destination.
#pragma once

#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <numeric>
#include <string>
#include <vector>

namespace conflux::test {

constexpr uint8_t kGuard = 0xEE;

// n bytes counting up from `first`, so that a misplaced byte shows.
inline std::vector<uint8_t> pattern(size_t n, uint8_t first) {
  std::vector<uint8_t> v(n);
  std::iota(v.begin(), v.end(), first);
  return v;
}

// Two ranges of up to `largest` bytes, each with a line of room before and
// after it; the second lies `gap` bytes past the first modulo 4 KiB.
class DistanceArena {
 public:
  explicit DistanceArena(size_t largest) : bytes_(2 * largest + 5 * size_t{4096}), most_(largest) {}
  uint8_t* first() { return bytes_.data() + 4096; }
  // Past the first by a whole number of pages, then by the gap.
  uint8_t* second(int gap) {
    return first() + (most_ + 4095) / 4096 * 4096 + 4096 + static_cast<size_t>((gap % 4096 + 4096) % 4096);
  }

 private:
  std::vector<uint8_t> bytes_;
  size_t most_;
};

// The 64 bytes before and after d's `bytes` still hold kGuard.
inline void expect_guards(const uint8_t* d, size_t bytes, const std::string& what) {
  for (size_t k = 1; k <= 64; ++k) {
    ASSERT_EQ(d[-static_cast<std::ptrdiff_t>(k)], kGuard) << "wrote before the destination: " << what;
    ASSERT_EQ(d[bytes + k - 1], kGuard) << "wrote past the destination: " << what;
  }
}

}  // namespace conflux::test
