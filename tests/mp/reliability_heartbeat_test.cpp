// Heartbeats: a TCP peer that goes silent without closing its sockets
// (SIGSTOP stands in for a hung host or a network partition) is reported
// within CONFLUX_HEARTBEAT_TIMEOUT, long before CONFLUX_TIMEOUT; a peer that
// is merely slow (computing outside any call) is not.
#include "support/mp_harness.h"

#include <gtest/gtest.h>

#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

namespace conflux::test {
namespace {

RunOptions tcp_options() {
  RunOptions o;
  o.env = {{"CONFLUX_TRANSPORT", "tcp"}, {"CONFLUX_TIMEOUT", "30"}, {"CONFLUX_HEARTBEAT_TIMEOUT", "2"}};
  o.timeout_s = 60;
  return o;
}

TEST(Heartbeat, StoppedPeerIsReportedWithinTheBound) {
  auto body = [](cfxComm_t comm, int rank, int n) -> std::string {
    // Everyone learns the pids, so a survivor can reap the stopped rank.
    int32_t me = getpid();
    std::vector<int32_t> pids(n);
    if (cfxAllGather(&me, pids.data(), 1, cfxInt32, comm) != cfxSuccess) return cfxGetLastError(comm);
    const int victim = n - 1;
    if (rank == victim) raise(SIGSTOP);
    std::vector<int32_t> a(16 * n, rank), b(16 * n);
    auto t0 = std::chrono::steady_clock::now();
    cfxResult_t r = cfxAlltoAll(a.data(), b.data(), 16, cfxInt32, comm);
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::string msg = cfxGetLastError(comm);
    // Linger so a survivor that exits first is not blamed by the other.
    std::this_thread::sleep_for(std::chrono::milliseconds(1000));
    if (rank == 0) kill(pids[victim], SIGKILL);
    if (r != cfxRemoteError) return std::string("expected cfxRemoteError, got ") + cfxGetErrorString(r) + ": " + msg;
    if (s > 4.0) return "noticed after " + std::to_string(s) + " s (bound 2 s + slack): " + msg;
    if (msg.find("rank " + std::to_string(victim)) == std::string::npos || msg.find("heartbeat") == std::string::npos)
      return "message does not name the silent rank: " + msg;
    return "";
  };
  auto results = run_ranks(3, body, tcp_options());
  ASSERT_EQ(results.size(), 3u);
  EXPECT_EQ(results[2].exit_code, -SIGKILL);
  for (int r = 0; r < 2; ++r) EXPECT_EQ(results[r].exit_code, 0) << results[r].message;
}

TEST(Heartbeat, SlowPeerOutsideCallsIsNotMistakenForSilent) {
  auto body = [](cfxComm_t comm, int rank, int) -> std::string {
    std::vector<float> a(256, 1.0f), b(256);
    if (cfxAllReduce(a.data(), b.data(), a.size(), cfxFloat32, cfxSum, comm) != cfxSuccess)
      return cfxGetLastError(comm);
    if (rank == 1) std::this_thread::sleep_for(std::chrono::milliseconds(4500));  // "computing"
    if (cfxAllReduce(a.data(), b.data(), a.size(), cfxFloat32, cfxSum, comm) != cfxSuccess)
      return std::string("a slow peer was reported: ") + cfxGetLastError(comm);
    return b[0] == 3.0f ? "" : "wrong result";
  };
  EXPECT_EQ(summarize(run_ranks(3, body, tcp_options())), "");
}

}  // namespace
}  // namespace conflux::test
