// Straggler reports: when an operation times out, the error says which ranks
// this rank has heard nothing from in that call (who is behind), not only
// what it was waiting for. One rank sleeps past CONFLUX_TIMEOUT=2 s; every
// other rank must get cfxTimeout within ~3 s naming it.
#include "support/mp_harness.h"

#include <gtest/gtest.h>

#include <unistd.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

namespace conflux::test {
namespace {

// The last rank sleeps. (With a ring, only the sleeper's neighbours hear
// nothing from it; ranks further along see a neighbour that is itself
// waiting. The tests use calls where every rank receives from the sleeper.)
int sleeper(int n) { return n - 1; }

// The list after "from rank(s) " in the message, e.g. "2" or "1,2".
std::string stragglers_in(const std::string& msg) {
  const std::string key = "from rank(s) ";
  size_t at = msg.find(key);
  if (at == std::string::npos) return "";
  size_t end = msg.find(' ', at + key.size());
  return msg.substr(at + key.size(), end == std::string::npos ? std::string::npos : end - at - key.size());
}

bool lists(const std::string& list, int rank) {
  std::string padded = "," + list + ",";
  return padded.find("," + std::to_string(rank) + ",") != std::string::npos;
}

// `call` is one collective in which every rank receives from every other,
// so every waiting rank can name the sleeper directly.
template <typename Call>
std::string straggler_body(cfxComm_t comm, int rank, int n, Call call) {
  const int kSleeper = sleeper(n);
  if (call(comm) != cfxSuccess) return std::string("warm-up failed: ") + cfxGetLastError(comm);
  if (rank == kSleeper) {
    std::this_thread::sleep_for(std::chrono::milliseconds(3500));
    (void)call(comm);  // the others have given up; any error is fine, a hang is not
    return "";
  }
  auto t0 = std::chrono::steady_clock::now();
  cfxResult_t r = call(comm);
  double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::string msg = cfxGetLastError(comm);
  // Linger: a rank that exits at once would make the others, whose
  // deadlines fall a few ms later, see its closed socket instead.
  std::this_thread::sleep_for(std::chrono::milliseconds(1000));
  if (r != cfxTimeout) return std::string("expected cfxTimeout, got ") + cfxGetErrorString(r) + ": " + msg;
  if (s > 3.0) return "timed out after " + std::to_string(s) + " s (bound 3 s): " + msg;
  if (!lists(stragglers_in(msg), kSleeper))
    return "message does not name rank " + std::to_string(kSleeper) + " as behind: " + msg;
  return "";
}

RunOptions options(const char* transport) {
  RunOptions o;
  // Direct algorithms (pairwise AlltoAll, ring AllReduce): each rank waits on
  // the sleeper itself, so each can name it. Multi-round ones name a relay.
  o.env = {{"CONFLUX_TIMEOUT", "2"}, {"CONFLUX_TRANSPORT", transport}, {"CONFLUX_SHM_COLL", "0"},
           {"CONFLUX_ALGO", "alltoall:pairwise;allreduce:ring"}};
  o.timeout_s = 60;
  return o;
}

class Straggler : public ::testing::TestWithParam<const char*> {};

TEST_P(Straggler, AlltoAllTimeoutNamesTheSleepingRank) {
  auto body = [](cfxComm_t comm, int rank, int n) -> std::string {
    std::vector<int32_t> a(64 * n, rank), b(64 * n);
    return straggler_body(comm, rank, n, [&](cfxComm_t c) {
      return cfxAlltoAll(a.data(), b.data(), 64, cfxInt32, c);
    });
  };
  EXPECT_EQ(summarize(run_ranks(4, body, options(GetParam()))), "");
}

TEST_P(Straggler, AllReduceTimeoutNamesTheSleepingRankOnTwoRanks) {
  auto body = [](cfxComm_t comm, int rank, int n) -> std::string {
    std::vector<float> a(1024, 1.0f), b(1024);
    return straggler_body(comm, rank, n, [&](cfxComm_t c) {
      return cfxAllReduce(a.data(), b.data(), a.size(), cfxFloat32, cfxSum, c);
    });
  };
  EXPECT_EQ(summarize(run_ranks(2, body, options(GetParam()))), "");
}

INSTANTIATE_TEST_SUITE_P(Transports, Straggler, ::testing::Values("tcp", "auto"));

}  // namespace
}  // namespace conflux::test
