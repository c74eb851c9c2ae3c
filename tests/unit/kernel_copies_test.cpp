// KernelCopies against memcpy: reads and writes through process_vm_readv/
// writev (of this process, which may always read itself) at every distance
// class between the local and remote bytes, the ones it bounces (1-31
// bytes past modulo 4 KiB, from 1 KiB) and the ones it leaves to the
// kernel, in pieces that fill the bounce, span it, and overflow a batch.
#include "transport/shm/kernel_copies.h"

#include "core/copy.h"
#include "support/distance_arena.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace conflux {
namespace {

using test::DistanceArena;
using test::expect_guards;
using test::kGuard;
using test::pattern;

uint64_t address(const uint8_t* p) { return reinterpret_cast<uint64_t>(p); }

const size_t kSizes[] = {0, 1, 1023, 1024, 4096 + 17, KernelCopies::kBounceBytes - 5,
                         KernelCopies::kBounceBytes + 4099, 3 * KernelCopies::kBounceBytes + 1};
const int kGaps[] = {-16, -1, 0, 1, 8, 16, 31, 32, 48, 63, 64, 4095};

// What the kernel copies slowly: 1-31 bytes past, from 1 KiB.
size_t expected_bounce(int gap, size_t bytes) {
  return gap >= 1 && gap <= 31 && bytes >= KernelCopies::kBounceFrom ? bytes : 0;
}

// Copies every size at every gap, reading from this process as from a
// peer (or writing to it): the source is the arena's first range, the
// destination `gap` bytes past it modulo 4 KiB.
void copy_at_every_distance(bool to_peer) {
  const size_t most = 3 * KernelCopies::kBounceBytes + 1;
  DistanceArena arena(most);
  const auto src = pattern(most, to_peer ? 9 : 3);
  KernelCopies copies;
  for (size_t bytes : kSizes) {
    for (int gap : kGaps) {
      uint8_t* from = arena.first();
      uint8_t* to = arena.second(gap);
      ASSERT_EQ(page_distance(to, from), static_cast<size_t>((gap + 4096) % 4096));
      std::memcpy(from, src.data(), bytes);
      std::fill(to - 64, to + bytes + 64, kGuard);
      const size_t bounced = copies.bounced_bytes();
      copies.begin(0, getpid(), to_peer);
      // The peer's side is the destination when writing, the source when reading.
      Status st = to_peer ? copies.add(from, address(to), bytes) : copies.add(to, address(from), bytes);
      if (st.ok()) st = copies.finish();
      ASSERT_TRUE(st.ok()) << st.message();
      const std::string what = std::to_string(bytes) + " bytes at distance " + std::to_string(gap) +
                               (to_peer ? ", written" : ", read");
      ASSERT_EQ(std::memcmp(to, src.data(), bytes), 0) << what;
      ASSERT_NO_FATAL_FAILURE(expect_guards(to, bytes, what));
      EXPECT_EQ(copies.bounced_bytes() - bounced, expected_bounce(gap, bytes)) << what;
    }
  }
}

TEST(KernelCopies, ReadsEveryByteAtEveryDistanceAndLeavesTheRestAlone) { copy_at_every_distance(false); }

TEST(KernelCopies, WritesEveryByteAtEveryDistanceAndLeavesTheRestAlone) { copy_at_every_distance(true); }

// Rows of a MoE exchange: more pieces than one call takes, bounced and
// direct ones interleaved, both directions. Source and destination rows lie
// in one allocation, whole pages apart: where two heap blocks fell, a
// quarter of their relative offsets put no row at a bounced distance.
TEST(KernelCopies, ManyPiecesOfMixedDistancesInOneTransfer) {
  constexpr size_t kRows = 2500, kRow = 1040;  // 1040: rows drift 16 bytes a row against 4 KiB
  constexpr size_t kFromBytes = (kRows * kRow + 4095) / 4096 * 4096;
  constexpr size_t kIntoBytes = kRows * (kRow + 64) + 64;
  for (bool to_peer : {false, true}) {
    std::vector<uint8_t> arena(kFromBytes + kIntoBytes, kGuard);
    const std::vector<uint8_t> rows = pattern(kRows * kRow, 5);
    uint8_t* const from = arena.data();
    std::memcpy(from, rows.data(), rows.size());
    // The destination rows in reverse order, each 0-63 bytes further on.
    uint8_t* const into = arena.data() + kFromBytes;
    KernelCopies copies;
    copies.begin(0, getpid(), to_peer);
    std::vector<uint8_t*> at(kRows);
    size_t expected = 0;
    for (size_t r = 0; r < kRows; ++r) {
      at[r] = into + (kRows - 1 - r) * (kRow + 64) + r % 64;
      uint8_t* src = from + r * kRow;
      expected += expected_bounce(static_cast<int>(page_distance(at[r], src)), kRow);
      Status st = to_peer ? copies.add(src, address(at[r]), kRow) : copies.add(at[r], address(src), kRow);
      ASSERT_TRUE(st.ok()) << st.message();
    }
    ASSERT_TRUE(copies.finish().ok());
    ASSERT_GT(expected, 0u) << "the layout puts no row at a bounced distance";
    ASSERT_LT(expected, kRows * kRow) << "the layout puts every row at a bounced distance";
    EXPECT_EQ(copies.bounced_bytes(), expected);
    for (size_t r = 0; r < kRows; ++r)
      ASSERT_EQ(std::memcmp(at[r], rows.data() + r * kRow, kRow), 0) << "row " << r << (to_peer ? " written" : " read");
    std::vector<bool> row_byte(kIntoBytes, false);
    for (size_t r = 0; r < kRows; ++r)
      std::fill_n(row_byte.begin() + (at[r] - into), kRow, true);
    for (size_t i = 0; i < kIntoBytes; ++i) {
      if (!row_byte[i]) {
        ASSERT_EQ(into[i], kGuard) << "byte " << i << " between rows" << (to_peer ? " written" : " read");
      }
    }
  }
}

TEST(KernelCopies, AnUnreachableAddressIsAnErrorNamingThePeer) {
  std::vector<uint8_t> local(4096);
  KernelCopies copies;
  copies.begin(3, getpid(), false);
  // Page 0 is never mapped.
  Status st = copies.add(local.data(), 16, local.size());
  if (st.ok()) st = copies.finish();
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("rank 3"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("process_vm_readv"), std::string::npos) << st.message();
}

}  // namespace
}  // namespace conflux
