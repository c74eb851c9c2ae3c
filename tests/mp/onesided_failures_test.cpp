// The one-sided intra-host algorithms' failure behaviour, for each family
// forced: mismatched calls fail on every rank with invalid_usage naming both
// calls; a rank that never arrives gives a timeout naming it; a dead peer
// gives a remote error. Registration: its errors, and a call whose buffers
// are registered on some ranks only.
#include "support/mp_harness.h"

#include <gtest/gtest.h>

#include <signal.h>
#include <unistd.h>

#include <string>
#include <vector>

namespace conflux::test {
namespace {

class OneSidedFailures : public ::testing::TestWithParam<const char*> {
 protected:
  RunOptions options() const {
    RunOptions opts;
    opts.env = {{"CONFLUX_SHM_COLL", "1"}, {"CONFLUX_TIMEOUT", "20"}, {"CONFLUX_ALGO", GetParam()}};
    opts.timeout_s = 60;
    return opts;
  }
};

TEST_P(OneSidedFailures, MismatchedCountsFailOnEveryRank) {
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
      options());
  EXPECT_EQ(summarize(results), "");
}

TEST_P(OneSidedFailures, AbsentRankTimesOut) {
  RunOptions opts = options();
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
        if (r != cfxTimeout || err.find("rank 1") == std::string::npos)
          return "expected a timeout naming rank 1, got " + std::string(cfxGetErrorString(r)) + ": " + err;
        return "";
      },
      opts);
  EXPECT_EQ(summarize(results), "");
}

TEST_P(OneSidedFailures, DeadPeerIsReported) {
  auto results = run_ranks(
      2,
      [](cfxComm_t comm, int rank, int) -> std::string {
        std::vector<float> buf(4096, 1.0f);  // small enough for every forced family
        if (rank == 1) _exit(0);  // dies without calling
        cfxResult_t r = cfxAllReduce(buf.data(), buf.data(), buf.size(), cfxFloat32, cfxSum, comm);
        std::string err = cfxGetLastError(comm);
        if (r != cfxRemoteError || err.find("rank 1") == std::string::npos)
          return "expected a remote error naming rank 1, got " + std::string(cfxGetErrorString(r)) + ": " + err;
        return "";
      },
      options());
  // Rank 1's exit is deliberate; only rank 0's verdict matters.
  ASSERT_FALSE(results.empty());
  EXPECT_EQ(results[0].message, "");
  EXPECT_EQ(results[0].exit_code, 0);
}

INSTANTIATE_TEST_SUITE_P(Forced, OneSidedFailures, ::testing::Values("allreduce:eager", "allreduce:direct"),
                         [](const ::testing::TestParamInfo<const char*>& p) {
                           return std::string(p.param).substr(std::string(p.param).find(':') + 1);
                         });

TEST(Registration, ErrorsAreClearAndLeaveNoDamage) {
  auto results = run_ranks(
      2,
      [](cfxComm_t comm, int rank, int) -> std::string {
        std::vector<float> heap(1024);
        void* handle = nullptr;
        if (cfxCommRegister(comm, heap.data(), heap.size() * 4, &handle) != cfxInvalidArgument)
          return "registering heap memory did not fail";
        if (std::string(cfxGetLastError(comm)).find("cfxMemAlloc") == std::string::npos)
          return "the error does not say what is needed: " + std::string(cfxGetLastError(comm));
        void* mem = nullptr;
        if (cfxMemAlloc(&mem, 1 << 16) != cfxSuccess) return "cfxMemAlloc failed";
        if (cfxCommRegister(comm, mem, 1 << 16, nullptr) != cfxInvalidArgument) return "a NULL handle was accepted";
        if (cfxCommRegister(comm, mem, 1 << 17, &handle) != cfxInvalidArgument) return "a range past the allocation was accepted";
        if (cfxCommRegister(comm, mem, 1 << 16, &handle) != cfxSuccess) return cfxGetLastError(comm);
        void* again = nullptr;
        if (cfxCommRegister(comm, static_cast<char*>(mem) + 4096, 4096, &again) != cfxInvalidUsage)
          return "an overlapping registration was accepted";
        float x = 1;
        if (cfxCommDeregister(comm, &x) != cfxInvalidArgument) return "deregistering a stray handle did not fail";
        // In use: a nonblocking call that cannot finish yet (rank 1 joins
        // it later) holds the registration.
        if (rank == 1) usleep(300 * 1000);
        cfxRequest_t req = nullptr;
        float* f = static_cast<float*>(mem);
        if (cfxIallReduce(f, f, 1024, cfxFloat32, cfxSum, comm, &req) != cfxSuccess) return cfxGetLastError(comm);
        cfxResult_t busy = cfxCommDeregister(comm, handle);
        const std::string busy_err = cfxGetLastError(comm);
        if (cfxWait(req) != cfxSuccess) return cfxGetLastError(comm);
        cfxRequestFree(req);
        if (rank == 0 && busy != cfxInvalidUsage) return "deregistering a buffer in use did not fail";
        if (rank == 0 && busy_err.find("in use") == std::string::npos)
          return "the error does not say it is in use: " + busy_err;
        if (busy == cfxSuccess) {
          cfxMemFree(mem);
          return "";  // rank 1: its call may have finished first
        }
        if (cfxCommDeregister(comm, handle) != cfxSuccess) return cfxGetLastError(comm);
        if (cfxCommDeregister(comm, handle) != cfxInvalidArgument) return "a handle deregistered twice was accepted";
        cfxMemFree(mem);
        return "";
      },
      RunOptions{});
  EXPECT_EQ(summarize(results), "");
}

TEST(Registration, RegisteredOnSomeRanksOnlyIsAMismatchOnEveryRank) {
  auto results = run_ranks(
      2,
      [](cfxComm_t comm, int rank, int) -> std::string {
        void* mem = nullptr;
        if (cfxMemAlloc(&mem, 1 << 16) != cfxSuccess) return "cfxMemAlloc failed";
        void* handle = nullptr;
        if (rank == 0 && cfxCommRegister(comm, mem, 1 << 16, &handle) != cfxSuccess) return cfxGetLastError(comm);
        float* f = static_cast<float*>(mem);
        cfxResult_t r = cfxAllReduce(f, f, 1024, cfxFloat32, cfxSum, comm);
        std::string err = cfxGetLastError(comm);
        if (r != cfxInvalidUsage || err.find("registered") == std::string::npos)
          return "expected a mismatch naming registered buffers, got " + std::string(cfxGetErrorString(r)) + ": " + err;
        return "";
      },
      RunOptions{{{"CONFLUX_TIMEOUT", "20"}}, 60});
  EXPECT_EQ(summarize(results), "");
}

}  // namespace
}  // namespace conflux::test
