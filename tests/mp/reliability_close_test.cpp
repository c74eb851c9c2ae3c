// Destroying a communicator right after a send must not lose the send's
// bytes. Over TCP a completed send may still sit in the kernel's send queue;
// closing a socket with unread input (a peer's heartbeat) makes the kernel
// reset the connection and drop that queue, and the receiver then fails
// with "connection reset by peer". Seen once in the collective matrix: a
// Scatter root destroyed its communicator while rank 0 still received.
#include "support/mp_harness.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

namespace conflux::test {
namespace {

TEST(Close, DestroyAfterSendDeliversEverything) {
  // Small socket buffers: the receiver takes ~its buffer's worth while it
  // sleeps, the rest of the 512 KiB waits in the sender's send queue when its
  // send completes. The sender then lingers past a heartbeat interval
  // (500 ms), so unread heartbeat bytes are waiting when it destroys.
  RunOptions o;
  o.env = {{"CONFLUX_TRANSPORT", "tcp"}, {"CONFLUX_SOCKET_BUFSIZE", "262144"}, {"CONFLUX_TIMEOUT", "60"}};
  o.timeout_s = 90;
  constexpr size_t kCount = (512u << 10) / sizeof(uint32_t);
  auto body = [](cfxComm_t comm, int rank, int) -> std::string {
    std::vector<uint32_t> buf(kCount);
    if (rank == 1) {
      for (size_t i = 0; i < kCount; ++i) buf[i] = static_cast<uint32_t>(i * 2654435761u);
      if (cfxSend(buf.data(), kCount, cfxUint32, 0, comm) != cfxSuccess) return cfxGetLastError(comm);
      std::this_thread::sleep_for(std::chrono::milliseconds(1200));
      return "";  // the harness destroys the communicator now
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2500));  // the sender is gone by now
    if (cfxRecv(buf.data(), kCount, cfxUint32, 1, comm) != cfxSuccess)
      return std::string("receive after the sender's destroy: ") + cfxGetLastError(comm);
    for (size_t i = 0; i < kCount; ++i)
      if (buf[i] != static_cast<uint32_t>(i * 2654435761u)) return "wrong value at element " + std::to_string(i);
    return "";
  };
  EXPECT_EQ(summarize(run_ranks(2, body, o)), "");
}

}  // namespace
}  // namespace conflux::test
