// TcpLink framing over a socketpair: one link sends, the other receives.
// Small frames sent back to back reach the receiver in one read (its
// read-ahead), so these tests check that every frame still comes out whole,
// in order, with heartbeats skipped and a notice read after them reported.
#include "transport/tcp/tcp_link.h"

#include <gtest/gtest.h>
#include <sys/socket.h>

#include <algorithm>
#include <cstring>
#include <numeric>
#include <vector>

namespace conflux {
namespace {

class TcpLinkTest : public ::testing::Test {
 protected:
  void SetUp() override {
    TcpLink::set_heartbeats_enabled(false);  // only the heartbeats a test sends
    int sv[2];
    ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    sender_ = std::make_unique<TcpLink>(Socket(sv[0]), 1, 64);
    receiver_ = std::make_unique<TcpLink>(Socket(sv[1]), 0, 64);
  }
  void TearDown() override { TcpLink::set_heartbeats_enabled(true); }

  static OpSig sig(uint32_t seq, size_t count) {
    OpSig s;
    s.seq = seq;
    s.count = count;
    return s;
  }
  // Sends a whole frame (the socket buffer holds every frame these tests send
  // before any is read).
  void send(const std::vector<uint8_t>& data, uint32_t seq) { send(data.data(), data.size(), seq); }
  void send(const uint8_t* data, size_t bytes, uint32_t seq) {
    SendOp op;
    op.buf = data;
    op.bytes = bytes;
    op.sig = sig(seq, bytes);
    for (int i = 0; i < 1000 && !op.complete; ++i) {
      bool progressed = false;
      ASSERT_TRUE(sender_->progress_send(op, &progressed).ok());
    }
    ASSERT_TRUE(op.complete);
  }
  // Receives one frame of `bytes`, reducing it into `with` when given.
  Status recv(std::vector<uint8_t>* into, uint32_t seq, const std::vector<uint8_t>* with = nullptr) {
    return recv(into->data(), into->size(), seq, with);
  }
  Status recv(uint8_t* into, size_t bytes, uint32_t seq, const std::vector<uint8_t>* with = nullptr) {
    RecvOp op;
    op.dst = into;
    op.bytes = bytes;
    op.sig = sig(seq, bytes);
    if (with != nullptr) {
      op.reduce_with = with->data();
      op.reduce = [](void* dst, const void* a, const void* b, size_t n) {
        for (size_t i = 0; i < n; ++i)
          static_cast<uint8_t*>(dst)[i] =
              static_cast<uint8_t>(static_cast<const uint8_t*>(a)[i] + static_cast<const uint8_t*>(b)[i]);
      };
    }
    for (int i = 0; i < 100000 && !op.complete; ++i) {
      bool progressed = false;
      Status st = receiver_->progress_recv(op, &progressed);
      if (!st.ok()) return st;
    }
    EXPECT_TRUE(op.complete);
    EXPECT_EQ(op.done, op.bytes);
    return Status::Ok();
  }
  static std::vector<uint8_t> pattern(size_t n, uint8_t first) {
    std::vector<uint8_t> v(n);
    std::iota(v.begin(), v.end(), first);
    return v;
  }

  std::unique_ptr<TcpLink> sender_, receiver_;
};

// A frame pads its payload to the source's offset within a cache line and
// rounds itself up to whole lines: whatever the sizes and offsets, every
// frame must still come out whole and in order, heartbeats between them.
TEST_F(TcpLinkTest, FramesFromEveryOffsetInALineArriveWholeAroundTheLeadThreshold) {
  std::vector<uint8_t> from(80000 + 64), to(80000 + 64);
  uint32_t seq = 0;
  for (size_t bytes : {size_t{0}, size_t{1}, size_t{63}, size_t{4095}, size_t{4096}, size_t{4097}, size_t{20000},
                       size_t{70001}}) {
    for (size_t offset : {0, 1, 8, 16, 24, 40, 63}) {
      const auto data = pattern(bytes, static_cast<uint8_t>(seq));
      std::copy(data.begin(), data.end(), from.begin() + static_cast<std::ptrdiff_t>(offset));
      send(from.data() + offset, bytes, ++seq);
      if (seq % 3 == 0) sender_->send_heartbeat();
      uint8_t* into = to.data() + (offset * 7) % 64;  // the receiver's own offset
      ASSERT_TRUE(recv(into, bytes, seq).ok()) << bytes << " bytes from offset " << offset;
      ASSERT_TRUE(std::equal(data.begin(), data.end(), into)) << bytes << " bytes from offset " << offset;
      ASSERT_TRUE(receiver_->check_peer().ok());  // skips the tail and heartbeats between frames
    }
  }
  const auto a = pattern(5000, 3), with = pattern(5000, 90);
  send(from.data() + 9, 0, ++seq);
  std::copy(a.begin(), a.end(), from.begin() + 9);
  send(from.data() + 9, a.size(), ++seq);
  std::vector<uint8_t> empty, sum(a.size());
  ASSERT_TRUE(recv(&empty, seq - 1).ok());
  ASSERT_TRUE(recv(&sum, seq, &with).ok());
  for (size_t i = 0; i < a.size(); ++i) ASSERT_EQ(sum[i], static_cast<uint8_t>(a[i] + with[i]));
}

// The wire format, read raw: a 40-byte header (magic, the lead in
// `reserved`, the payload's length, the signature), the lead, the payload,
// zeros up to a whole number of 64-byte lines.
TEST(TcpLinkWire, APayloadSitsAtItsSourcesOffsetInALineAndFramesAreWholeLines) {
  TcpLink::set_heartbeats_enabled(false);
  int sv[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
  TcpLink link(Socket(sv[0]), 1, 64);
  Socket raw(sv[1]);
  std::vector<uint8_t> from(70000 + 64);
  std::iota(from.begin(), from.end(), uint8_t{1});
  struct Case {
    size_t offset, bytes;
  };
  for (const Case c : {Case{5, 100}, Case{13, 5000}, Case{40, 70000}, Case{0, 4096}}) {
    SendOp op;
    op.buf = from.data() + c.offset;
    op.bytes = c.bytes;
    for (int i = 0; i < 1000 && !op.complete; ++i) {
      bool progressed = false;
      ASSERT_TRUE(link.progress_send(op, &progressed).ok());
    }
    ASSERT_TRUE(op.complete);
    uint8_t header[40];
    ASSERT_TRUE(raw.recv_all(header, sizeof header, deadline_after_ms(1000)).ok());
    uint32_t magic = 0, lead = 0;
    uint64_t bytes = 0;
    std::memcpy(&magic, header, 4);
    std::memcpy(&lead, header + 4, 4);
    std::memcpy(&bytes, header + 8, 8);
    EXPECT_EQ(magic, 0x43465846u);
    EXPECT_EQ(bytes, c.bytes);
    const auto source_offset = reinterpret_cast<uintptr_t>(op.buf) % 64;
    if (c.bytes >= 4096) {
      EXPECT_EQ((sizeof header + lead) % 64, source_offset) << c.bytes << " bytes";
    } else {
      EXPECT_EQ(lead, 0u) << c.bytes << " bytes";
    }
    const size_t frame = (sizeof header + lead + c.bytes + 63) / 64 * 64;
    std::vector<uint8_t> rest(frame - sizeof header);
    ASSERT_TRUE(raw.recv_all(rest.data(), rest.size(), deadline_after_ms(1000)).ok());
    EXPECT_TRUE(std::all_of(rest.begin(), rest.begin() + lead, [](uint8_t b) { return b == 0; }));
    EXPECT_TRUE(std::equal(op.buf, op.buf + c.bytes, rest.begin() + lead));
    EXPECT_TRUE(std::all_of(rest.begin() + static_cast<std::ptrdiff_t>(lead + c.bytes), rest.end(),
                            [](uint8_t b) { return b == 0; }));
  }
  TcpLink::set_heartbeats_enabled(true);
}

TEST_F(TcpLinkTest, SmallFramesSentTogetherComeOutWholeAndInOrder) {
  const auto a = pattern(8, 1), b = pattern(100, 50), c = pattern(0, 0), d = pattern(3000, 7);
  send(a, 1);
  sender_->send_heartbeat();
  send(b, 2);
  send(c, 3);
  sender_->send_heartbeat();
  send(d, 4);
  std::vector<uint8_t> ra(a.size()), rb(b.size()), rc(c.size()), rd(d.size());
  ASSERT_TRUE(recv(&ra, 1).ok());
  ASSERT_TRUE(recv(&rb, 2).ok());
  ASSERT_TRUE(recv(&rc, 3).ok());
  ASSERT_TRUE(recv(&rd, 4).ok());
  EXPECT_EQ(ra, a);
  EXPECT_EQ(rb, b);
  EXPECT_EQ(rd, d);
}

TEST_F(TcpLinkTest, ALargeFrameAfterSmallOnesAndSmallReductionsArriveIntact) {
  const auto small = pattern(40, 3), large = pattern(100000, 9), tail = pattern(20000, 11);
  const auto with = pattern(40, 100);
  send(small, 1);
  send(large, 2);
  send(small, 3);
  send(tail, 4);
  std::vector<uint8_t> r1(small.size()), r2(large.size()), r3(small.size()), r4(tail.size());
  ASSERT_TRUE(recv(&r1, 1).ok());
  ASSERT_TRUE(recv(&r2, 2).ok());
  ASSERT_TRUE(recv(&r3, 3, &with).ok());
  ASSERT_TRUE(recv(&r4, 4).ok());
  EXPECT_EQ(r1, small);
  EXPECT_EQ(r2, large);
  for (size_t i = 0; i < small.size(); ++i) EXPECT_EQ(r3[i], static_cast<uint8_t>(small[i] + with[i]));
  EXPECT_EQ(r4, tail);
}

TEST_F(TcpLinkTest, ANoticeReadAheadWithAFrameIsReportedOnceTheFrameIsTaken) {
  const auto a = pattern(16, 1);
  send(a, 1);
  sender_->send_notice(cfxRemoteError, "rank 1 gave up: out of memory");
  std::vector<uint8_t> ra(a.size());
  ASSERT_TRUE(recv(&ra, 1).ok());
  EXPECT_EQ(ra, a);
  Status st = receiver_->check_peer();
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("out of memory"), std::string::npos) << st.message();
}

TEST_F(TcpLinkTest, AFrameOfTheWrongSizeIsAMismatchNotACorruptStream) {
  send(pattern(64, 1), 1);
  std::vector<uint8_t> r(32);
  Status st = recv(&r, 1);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("rank 0"), std::string::npos) << st.message();
}

}  // namespace
}  // namespace conflux
