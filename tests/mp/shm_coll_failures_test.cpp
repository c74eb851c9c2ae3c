// The intra-host fast path's failure behaviour: mismatched calls fail on
// every rank with invalid_usage naming both calls; a rank that never
// arrives gives a timeout naming it; a dead peer gives a remote error.
#include "support/mp_harness.h"

#include <gtest/gtest.h>

#include <signal.h>
#include <unistd.h>

#include <string>
#include <vector>

namespace conflux::test {
namespace {

RunOptions shm_options() {
  RunOptions opts;
  opts.env = {{"CONFLUX_SHM_COLL", "1"}, {"CONFLUX_TIMEOUT", "20"}};
  opts.timeout_s = 60;
  return opts;
}

TEST(ShmCollFailures, MismatchedCountsFailOnEveryRank) {
  auto results = run_ranks(
      3,
      [](cfxComm_t comm, int rank, int) -> std::string {
        std::vector<float> buf(1 << 20, 1.0f);
        size_t count = rank == 2 ? 1000 : 10;  // one rank disagrees
        cfxResult_t r = cfxAllReduce(buf.data(), buf.data(), count, cfxFloat32, cfxSum, comm);
        std::string err = cfxGetLastError(comm);
        if (r != cfxInvalidUsage) return "expected invalid usage, got " + std::string(cfxGetErrorString(r)) + ": " + err;
        if (err.find("mismatched calls") == std::string::npos) return "message does not name the mismatch: " + err;
        return "";
      },
      shm_options());
  EXPECT_EQ(summarize(results), "");
}

TEST(ShmCollFailures, AbsentRankTimesOut) {
  RunOptions opts = shm_options();
  opts.env["CONFLUX_TIMEOUT"] = "1";
  auto results = run_ranks(
      2,
      [](cfxComm_t comm, int rank, int) -> std::string {
        float x = 1;
        if (rank == 1) {
          sleep(3);
          return "";
        }
        cfxResult_t r = cfxAllReduce(&x, &x, 1, cfxFloat32, cfxSum, comm);
        std::string err = cfxGetLastError(comm);
        if (r != cfxTimeout || err.find("rank(s) 1") == std::string::npos)
          return "expected a timeout naming rank 1, got " + std::string(cfxGetErrorString(r)) + ": " + err;
        return "";
      },
      opts);
  EXPECT_EQ(summarize(results), "");
}

TEST(ShmCollFailures, DeadPeerIsReported) {
  auto results = run_ranks(
      2,
      [](cfxComm_t comm, int rank, int) -> std::string {
        std::vector<float> buf(1 << 20, 1.0f);
        if (rank == 1) _exit(0);  // dies without calling
        cfxResult_t r = cfxAllReduce(buf.data(), buf.data(), buf.size(), cfxFloat32, cfxSum, comm);
        std::string err = cfxGetLastError(comm);
        if (r != cfxRemoteError || err.find("rank 1") == std::string::npos)
          return "expected a remote error naming rank 1, got " + std::string(cfxGetErrorString(r)) + ": " + err;
        return "";
      },
      shm_options());
  // Rank 1's exit is deliberate; only rank 0's verdict matters.
  ASSERT_FALSE(results.empty());
  EXPECT_EQ(results[0].message, "");
  EXPECT_EQ(results[0].exit_code, 0);
}

}  // namespace
}  // namespace conflux::test
