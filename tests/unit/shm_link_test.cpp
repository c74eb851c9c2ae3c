// The shared-memory link's slot rings, driven directly: messages longer
// than the whole ring (each side keeps its own index and re-reads the
// other's only when the ring looks full or empty), messages of every
// length around a slot's, and a receiver whose link is made after its
// peer has already published.
#include "transport/shm/shm_link.h"

#include "transport/shm/shm_segment.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <cstdint>
#include <thread>
#include <vector>

namespace conflux {
namespace {

constexpr int kSlots = 3;
constexpr size_t kSlotBytes = 128;

// Two ranks' segments in this process, rank 0 the sender and rank 1 the
// receiver of the ring under test.
class ShmLinkTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const ShmSegment::Layout layout{2, kSlots, kSlotBytes, 1, 0};
    for (int r = 0; r < 2; ++r) {
      auto made = ShmSegment::create_private(r, layout);
      ASSERT_TRUE(made.ok()) << made.status().message();
      seg_[static_cast<size_t>(r)] = std::move(made).value();
    }
  }
  ShmLink sender() const { return {seg_[0], seg_[1], 0, 1, pid_, -1}; }
  ShmLink receiver() const { return {seg_[1], seg_[0], 1, 0, pid_, -1}; }

  std::array<ShmSegment, 2> seg_;
  const int pid_ = static_cast<int>(getpid());
};

uint8_t pattern(size_t message, size_t k) { return static_cast<uint8_t>(message * 31 + k * 7 + 1); }

// Drives one operation to completion, or fails after a few seconds.
template <class Op, class Progress>
Status finish(Op& op, Progress progress) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (!op.complete) {
    bool progressed = false;
    CFX_RETURN_IF_ERROR(progress(op, &progressed));
    if (!progressed) {
      if (std::chrono::steady_clock::now() > deadline) return internal_error("no progress for 20 s");
      std::this_thread::yield();
    }
  }
  return Status::Ok();
}

// Lengths around a slot and around the whole ring, zero included.
std::vector<size_t> lengths() {
  const size_t ring = kSlots * kSlotBytes;
  return {0, 1, kSlotBytes - 1, kSlotBytes, kSlotBytes + 1, ring - 1, ring, ring + 1, 5 * ring + 17, 4096};
}

TEST_F(ShmLinkTest, MessagesLongerThanTheRingArriveWholeAndInOrder) {
  ShmLink sender = this->sender();
  ShmLink receiver = this->receiver();
  const std::vector<size_t> sizes = lengths();
  constexpr int kRounds = 20;  // enough to wrap the ring's indices many times
  Status sent = Status::Ok();
  std::thread send_side([&] {
    for (int round = 0; round < kRounds && sent.ok(); ++round)
      for (size_t m = 0; m < sizes.size() && sent.ok(); ++m) {
        std::vector<uint8_t> data(sizes[m]);
        for (size_t k = 0; k < data.size(); ++k) data[k] = pattern(round * sizes.size() + m, k);
        SendOp op;
        op.buf = data.data();
        op.bytes = data.size();
        sent = finish(op, [&](SendOp& o, bool* p) { return sender.progress_send(o, p); });
      }
  });
  size_t wrong = 0;
  Status received = Status::Ok();
  for (int round = 0; round < kRounds && received.ok(); ++round)
    for (size_t m = 0; m < sizes.size() && received.ok(); ++m) {
      std::vector<uint8_t> data(sizes[m], 0);
      RecvOp op;
      op.dst = data.data();
      op.bytes = data.size();
      received = finish(op, [&](RecvOp& o, bool* p) { return receiver.progress_recv(o, p); });
      for (size_t k = 0; k < data.size(); ++k) wrong += data[k] != pattern(round * sizes.size() + m, k);
    }
  send_side.join();
  EXPECT_TRUE(sent.ok()) << sent.message();
  EXPECT_TRUE(received.ok()) << received.message();
  EXPECT_EQ(wrong, 0u);
}

TEST_F(ShmLinkTest, ReceiverMadeAfterItsPeerPublishedReadsFromTheStart) {
  ShmLink sender = this->sender();
  // Two slots' worth, published before the receiving link exists.
  std::vector<uint8_t> data(2 * kSlotBytes);
  for (size_t k = 0; k < data.size(); ++k) data[k] = pattern(7, k);
  SendOp send;
  send.buf = data.data();
  send.bytes = data.size();
  bool progressed = false;
  ASSERT_TRUE(sender.progress_send(send, &progressed).ok());
  ASSERT_TRUE(send.complete);
  ShmLink receiver = this->receiver();
  std::vector<uint8_t> got(data.size(), 0);
  RecvOp recv;
  recv.dst = got.data();
  recv.bytes = got.size();
  ASSERT_TRUE(receiver.progress_recv(recv, &progressed).ok());
  EXPECT_TRUE(recv.complete);
  EXPECT_EQ(got, data);
}

TEST_F(ShmLinkTest, FullRingStopsTheSenderUntilTheReceiverTakesASlot) {
  ShmLink sender = this->sender();
  ShmLink receiver = this->receiver();
  std::vector<uint8_t> data((kSlots + 1) * kSlotBytes);
  for (size_t k = 0; k < data.size(); ++k) data[k] = pattern(3, k);
  SendOp send;
  send.buf = data.data();
  send.bytes = data.size();
  bool progressed = false;
  ASSERT_TRUE(sender.progress_send(send, &progressed).ok());
  EXPECT_FALSE(send.complete);  // the ring holds kSlots pieces of kSlots + 1
  EXPECT_EQ(send.done, kSlots * kSlotBytes);
  progressed = false;
  ASSERT_TRUE(sender.progress_send(send, &progressed).ok());
  EXPECT_FALSE(progressed);  // still full: nothing moved
  std::vector<uint8_t> got(data.size(), 0);
  RecvOp recv;
  recv.dst = got.data();
  recv.bytes = got.size();
  ASSERT_TRUE(receiver.progress_recv(recv, &progressed).ok());
  EXPECT_EQ(recv.done, kSlots * kSlotBytes);
  ASSERT_TRUE(sender.progress_send(send, &progressed).ok());
  EXPECT_TRUE(send.complete);
  ASSERT_TRUE(receiver.progress_recv(recv, &progressed).ok());
  EXPECT_TRUE(recv.complete);
  EXPECT_EQ(got, data);
}

}  // namespace
}  // namespace conflux
