// TcpLink framing over a socketpair: one link sends, the other receives.
// Small frames sent back to back reach the receiver in one read (its
// read-ahead), so these tests check that every frame still comes out whole,
// in order, with heartbeats skipped and a notice read after them reported.
#include "transport/tcp/tcp_link.h"

#include <gtest/gtest.h>
#include <sys/socket.h>

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
  void send(const std::vector<uint8_t>& data, uint32_t seq) {
    SendOp op;
    op.buf = data.data();
    op.bytes = data.size();
    op.sig = sig(seq, data.size());
    for (int i = 0; i < 1000 && !op.complete; ++i) {
      bool progressed = false;
      ASSERT_TRUE(sender_->progress_send(op, &progressed).ok());
    }
    ASSERT_TRUE(op.complete);
  }
  // Receives one frame of `bytes`, reducing it into `with` when given.
  Status recv(std::vector<uint8_t>* into, uint32_t seq, const std::vector<uint8_t>* with = nullptr) {
    RecvOp op;
    op.dst = into->data();
    op.bytes = into->size();
    op.sig = sig(seq, into->size());
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
