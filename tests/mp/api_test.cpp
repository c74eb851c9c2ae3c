// Communicator API behaviour across processes: split, groups, nonblocking
// operations, bad input that must be refused without harm, mismatched calls,
// a dead peer, a garbage connection to the rendezvous port.
#include "bootstrap/socket.h"
#include "bootstrap/unique_id.h"
#include "support/mismatch_bodies.h"
#include "support/mp_harness.h"

#include <gtest/gtest.h>

#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <numeric>
#include <thread>
#include <vector>

namespace conflux::test {
namespace {

std::string expect_code(cfxResult_t got, cfxResult_t want, const char* what, cfxComm_t comm) {
  if (got == want) return "";
  return std::string(what) + ": got " + cfxGetErrorString(got) + " (" + cfxGetLastError(comm) + "), expected " +
         cfxGetErrorString(want) + "\n";
}

RunOptions quick(std::map<std::string, std::string> extra = {}) {
  RunOptions o;
  o.env = {{"CONFLUX_TIMEOUT", "20"}};
  for (auto& [k, v] : extra) o.env[k] = v;
  o.timeout_s = 60;
  return o;
}

TEST(Api, BadArgumentsAreRefusedAndLeaveTheCommunicatorUsable) {
  auto body = [](cfxComm_t comm, int rank, int n) -> std::string {
    std::string e;
    std::vector<float> a(64, 1.0f), b(64 * n, 0.0f);
    e += expect_code(cfxAllReduce(nullptr, b.data(), 4, cfxFloat32, cfxSum, comm), cfxInvalidArgument, "null send", comm);
    e += expect_code(cfxAllReduce(a.data(), nullptr, 4, cfxFloat32, cfxSum, comm), cfxInvalidArgument, "null recv", comm);
    e += expect_code(cfxAllReduce(a.data(), b.data(), 4, static_cast<cfxDataType_t>(42), cfxSum, comm),
                     cfxInvalidArgument, "bad type", comm);
    e += expect_code(cfxAllReduce(a.data(), b.data(), 4, cfxFloat32, static_cast<cfxRedOp_t>(77), comm),
                     cfxInvalidArgument, "bad op", comm);
    e += expect_code(cfxBroadcast(a.data(), b.data(), 4, cfxFloat32, n, comm), cfxInvalidArgument, "root >= n", comm);
    e += expect_code(cfxReduce(a.data(), b.data(), 4, cfxFloat32, cfxSum, -1, comm), cfxInvalidArgument, "root < 0", comm);
    e += expect_code(cfxSend(a.data(), 4, cfxFloat32, n + 3, comm), cfxInvalidArgument, "peer out of range", comm);
    e += expect_code(cfxAllReduce(a.data(), a.data() + 1, 8, cfxFloat32, cfxSum, comm), cfxInvalidArgument,
                     "partially overlapping buffers", comm);
    e += expect_code(cfxAllReduce(a.data(), b.data(), 4, cfxFloat32, cfxSum, nullptr), cfxInvalidArgument, "null comm",
                     nullptr);
    e += expect_code(cfxAllReduce(a.data(), b.data(), SIZE_MAX / 2, cfxFloat32, cfxSum, comm), cfxInvalidArgument,
                     "count overflow", comm);
    if (std::string(cfxGetLastError(comm)).find("allreduce") == std::string::npos)
      e += "last error does not name the call: " + std::string(cfxGetLastError(comm)) + "\n";
    // Null buffers are fine when count is 0, and the communicator still works.
    e += expect_code(cfxAllReduce(nullptr, nullptr, 0, cfxFloat32, cfxSum, comm), cfxSuccess, "count 0", comm);
    std::vector<float> out(64);
    e += expect_code(cfxAllReduce(a.data(), out.data(), 64, cfxFloat32, cfxSum, comm), cfxSuccess, "valid call", comm);
    if (out[63] != static_cast<float>(n)) e += "valid call after errors gave a wrong result\n";
    (void)rank;
    return e;
  };
  EXPECT_EQ(summarize(run_ranks(3, body, quick())), "");
}

// A loop repeats one call, and the communicator reuses that call's schedule
// and bound buffers without choosing them again. Any other call between two
// repeats (another collective, a dynamic AlltoAllv, buffers registered or
// deregistered) must not leave the repeat running on that call's buffers.
TEST(Api, ARepeatedCallRunsOnItsOwnBuffersAfterOtherCalls) {
  auto body = [](cfxComm_t comm, int rank, int n) -> std::string {
    std::string e;
    constexpr size_t kCount = 6;
    std::vector<float> a(kCount), r(kCount), other(kCount), other_out(kCount);
    auto repeat = [&](int round) {
      for (size_t i = 0; i < kCount; ++i) a[i] = static_cast<float>(rank * 100 + round * 10 + static_cast<int>(i));
      e += expect_code(cfxAllReduce(a.data(), r.data(), kCount, cfxFloat32, cfxSum, comm), cfxSuccess, "repeat", comm);
      for (size_t i = 0; i < kCount; ++i) {
        const float want = static_cast<float>(100 * n * (n - 1) / 2 + n * (round * 10 + static_cast<int>(i)));
        if (r[i] != want) {
          e += "round " + std::to_string(round) + ": element " + std::to_string(i) + " is " + std::to_string(r[i]) +
               ", expected " + std::to_string(want) + "\n";
          break;
        }
      }
    };
    repeat(0);
    repeat(1);
    // Another AllReduce of the same count and type on other buffers.
    std::fill(other.begin(), other.end(), 1.0f);
    e += expect_code(cfxAllReduce(other.data(), other_out.data(), kCount, cfxFloat32, cfxSum, comm), cfxSuccess,
                     "other buffers", comm);
    if (other_out[0] != static_cast<float>(n)) e += "the call on other buffers gave a wrong result\n";
    repeat(2);
    // A dynamic AlltoAllv: its stages run as collectives of their own.
    std::vector<size_t> counts(n, 1), displs(n), rcounts(n), rdispls(n);
    std::iota(displs.begin(), displs.end(), size_t{0});
    std::vector<float> send(n, static_cast<float>(rank)), recv(n, -1.0f);
    e += expect_code(cfxAlltoAllvDynamic(send.data(), counts.data(), displs.data(), recv.data(), n, rcounts.data(),
                                         rdispls.data(), cfxFloat32, comm),
                     cfxSuccess, "dynamic alltoallv", comm);
    repeat(3);
    // The repeated call's own buffers registered, then deregistered.
    void* mem = nullptr;
    e += expect_code(cfxMemAlloc(&mem, 2 * kCount * sizeof(float)), cfxSuccess, "cfxMemAlloc", comm);
    if (mem == nullptr) return e;
    auto* shared = static_cast<float*>(mem);
    void* handle = nullptr;
    for (int round = 4; round < 7; ++round) {
      if (round == 5) e += expect_code(cfxCommRegister(comm, mem, 2 * kCount * sizeof(float), &handle), cfxSuccess, "register", comm);
      if (round == 6) e += expect_code(cfxCommDeregister(comm, handle), cfxSuccess, "deregister", comm);
      for (size_t i = 0; i < kCount; ++i) shared[i] = static_cast<float>(rank + round);
      e += expect_code(cfxAllReduce(shared, shared + kCount, kCount, cfxFloat32, cfxSum, comm), cfxSuccess,
                       "shared buffers", comm);
      if (shared[kCount] != static_cast<float>(n * (n - 1) / 2 + n * round))
        e += "round " + std::to_string(round) + " on shared buffers gave " + std::to_string(shared[kCount]) + "\n";
      repeat(round);
    }
    cfxMemFree(mem);
    return e;
  };
  for (int n : {2, 3}) EXPECT_EQ(summarize(run_ranks(n, body, quick())), "") << n << " ranks";
}

TEST(Api, InitRejectsBadArguments) {
  cfxComm_t comm = nullptr;
  cfxUniqueId id{};
  EXPECT_EQ(cfxCommInitRank(&comm, 0, id, 0), cfxInvalidArgument);
  EXPECT_EQ(cfxCommInitRank(&comm, 2, id, 2), cfxInvalidArgument);
  EXPECT_EQ(cfxCommInitRank(&comm, 2, id, 0), cfxInvalidArgument);  // corrupt (all-zero) id
  EXPECT_NE(std::string(cfxGetLastError(nullptr)).find("unique id"), std::string::npos) << cfxGetLastError(nullptr);
  EXPECT_EQ(comm, nullptr);
  EXPECT_EQ(cfxCommInitRank(nullptr, 1, id, 0), cfxInvalidArgument);
}

TEST(Api, SplitByColorAndKey) {
  auto body = [](cfxComm_t comm, int rank, int n) -> std::string {
    std::string e;
    int color = rank == 0 ? CFX_SPLIT_NOCOLOR : rank % 2;
    int key = n - rank;  // reverses the order within each colour
    cfxComm_t sub = nullptr;
    cfxResult_t r = cfxCommSplit(comm, color, key, &sub);
    if (r != cfxSuccess) return std::string("split failed: ") + cfxGetLastError(comm);
    if (color == CFX_SPLIT_NOCOLOR) return sub == nullptr ? "" : "NOCOLOR rank got a communicator";
    int sub_rank = -1, sub_n = -1;
    cfxCommUserRank(sub, &sub_rank);
    cfxCommCount(sub, &sub_n);
    std::vector<int> members;
    for (int q = 1; q < n; ++q)
      if (q % 2 == color) members.push_back(q);
    std::reverse(members.begin(), members.end());
    int want_rank = static_cast<int>(std::find(members.begin(), members.end(), rank) - members.begin());
    if (sub_n != static_cast<int>(members.size()) || sub_rank != want_rank)
      e += "sub rank/size " + std::to_string(sub_rank) + "/" + std::to_string(sub_n) + " expected " +
           std::to_string(want_rank) + "/" + std::to_string(members.size()) + "\n";
    int mine = rank, sum = 0;
    cfxAllReduce(&mine, &sum, 1, cfxInt32, cfxSum, sub);
    int want = std::accumulate(members.begin(), members.end(), 0);
    if (sum != want) e += "allreduce on the split communicator: " + std::to_string(sum) + " != " + std::to_string(want);
    cfxCommDestroy(sub);
    return e;
  };
  EXPECT_EQ(summarize(run_ranks(5, body, quick())), "");
}

TEST(Api, GroupedSendRecvRingDoesNotDeadlock) {
  for (const char* transport : {"auto", "tcp"}) {
    auto body = [](cfxComm_t comm, int rank, int n) -> std::string {
      const size_t count = 300000;  // larger than every ring and socket buffer
      std::vector<int32_t> out(count, rank), in(count, -1), self_in(count, -1);
      cfxGroupStart();
      cfxSend(out.data(), count, cfxInt32, (rank + 1) % n, comm);
      cfxRecv(in.data(), count, cfxInt32, (rank - 1 + n) % n, comm);
      cfxSend(out.data(), count, cfxInt32, rank, comm);  // to self: matched inside the group
      cfxRecv(self_in.data(), count, cfxInt32, rank, comm);
      cfxResult_t r = cfxGroupEnd();
      if (r != cfxSuccess) return std::string("group failed: ") + cfxGetLastError(comm);
      if (in[0] != (rank - 1 + n) % n || in[count - 1] != (rank - 1 + n) % n) return "wrong data from the left";
      if (self_in[count - 1] != rank) return "wrong data from self";
      return "";
    };
    EXPECT_EQ(summarize(run_ranks(4, body, quick({{"CONFLUX_TRANSPORT", transport}}))), "") << transport;
  }
}

TEST(Api, NonblockingOperationsCompleteInIssueOrder) {
  auto body = [](cfxComm_t comm, int rank, int n) -> std::string {
    const int kOps = 16;
    std::vector<std::vector<float>> in(kOps, std::vector<float>(1000)), out(kOps, std::vector<float>(1000));
    std::vector<cfxRequest_t> reqs(kOps);
    for (int i = 0; i < kOps; ++i) {
      std::fill(in[i].begin(), in[i].end(), static_cast<float>(i + rank));
      if (cfxIallReduce(in[i].data(), out[i].data(), 1000, cfxFloat32, cfxSum, comm, &reqs[i]) != cfxSuccess)
        return std::string("issue failed: ") + cfxGetLastError(comm);
    }
    // A blocking call issued now runs after all of them.
    float one = 1, all = 0;
    cfxAllReduce(&one, &all, 1, cfxFloat32, cfxSum, comm);
    std::string e;
    for (int i = 0; i < kOps; ++i) {
      int done = 0;
      if (cfxWait(reqs[i]) != cfxSuccess || cfxTest(reqs[i], &done) != cfxSuccess || !done) e += "request failed\n";
      float want = static_cast<float>(i * n + n * (n - 1) / 2);
      if (out[i][999] != want) e += "op " + std::to_string(i) + " wrong\n";
      cfxRequestFree(reqs[i]);
    }
    if (all != static_cast<float>(n)) e += "blocking call after nonblocking ones wrong\n";
    return e;
  };
  EXPECT_EQ(summarize(run_ranks(3, body, quick())), "");
}

TEST(Api, MismatchedCallsAreReportedOnEveryRank) {
  // shm links, TCP links, and the shared-segment collectives.
  const std::map<std::string, std::string> paths[] = {
      {{"CONFLUX_SHM_COLL", "0"}}, {{"CONFLUX_TRANSPORT", "tcp"}}, {{"CONFLUX_SHM_COLL", "1"}}};
  for (const auto& env : paths) {
    EXPECT_EQ(summarize(run_ranks(3, mismatch_on_every_rank, quick(env))), "") << env.begin()->first << "=" << env.begin()->second;
    if (env.begin()->second != "1") {
      EXPECT_EQ(summarize(run_ranks(2, p2p_mismatch_reaches_the_sender, quick(env))), "") << env.begin()->second;
    }
  }
}

TEST(Api, DeadPeerIsReportedWithinSeconds) {
  for (const char* transport : {"auto", "tcp"}) {
    auto body = [](cfxComm_t comm, int rank, int n) -> std::string {
      std::vector<float> a(1 << 16, 1), b(1 << 16);
      cfxAllReduce(a.data(), b.data(), a.size(), cfxFloat32, cfxSum, comm);
      if (rank == n - 1) raise(SIGKILL);
      auto t0 = std::chrono::steady_clock::now();
      cfxResult_t r = cfxAllReduce(a.data(), b.data(), a.size(), cfxFloat32, cfxSum, comm);
      double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      if (r == cfxSuccess) return "allreduce with a dead peer succeeded";
      if (s > 5.0) return "took " + std::to_string(s) + " s to notice";
      std::string msg = cfxGetLastError(comm);
      if (r != cfxRemoteError) return std::string("expected a remote error, got ") + cfxGetErrorString(r) + ": " + msg;
      // Later calls fail fast with the same cause.
      if (cfxBarrier(comm) == cfxSuccess) return "communicator still usable after a peer died";
      return "";
    };
    auto results = run_ranks(3, body, quick({{"CONFLUX_TRANSPORT", transport}}));
    ASSERT_EQ(results.size(), 3u);
    EXPECT_EQ(results[2].exit_code, -SIGKILL);
    for (int r = 0; r < 2; ++r) EXPECT_EQ(results[r].exit_code, 0) << transport << ": " << results[r].message;
  }
}

TEST(Api, SurvivorsOfADeadPeerMakeANewCommunicator) {
  // Rank 2 dies; ranks 0 and 1 get the error, destroy the broken
  // communicator and build a new one among themselves (rank 0 hands the new
  // unique id over shared memory, as a launcher's store would).
  struct Shared {
    std::atomic<int> ready{0};
    cfxUniqueId id;
  };
  auto* shared = static_cast<Shared*>(
      mmap(nullptr, sizeof(Shared), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0));
  ASSERT_NE(shared, MAP_FAILED);
  new (shared) Shared();
  for (const char* transport : {"auto", "tcp"}) {
    shared->ready = 0;
    auto body = [shared](cfxComm_t, int rank, int n) -> std::string {
      // Our own init: the harness would destroy the communicator again.
      cfxComm_t comm = nullptr;
      if (cfxCommInitRank(&comm, n, current_unique_id(), rank) != cfxSuccess)
        return std::string("init: ") + cfxGetLastError(nullptr);
      std::vector<float> a(4096, 1.0f), b(4096);
      if (cfxAllReduce(a.data(), b.data(), a.size(), cfxFloat32, cfxSum, comm) != cfxSuccess) return "warm-up failed";
      if (rank == 2) raise(SIGKILL);
      if (cfxAllReduce(a.data(), b.data(), a.size(), cfxFloat32, cfxSum, comm) == cfxSuccess)
        return "allreduce with a dead peer succeeded";
      if (cfxCommDestroy(comm) != cfxSuccess) return "destroying the broken communicator failed";
      if (rank == 0) {
        if (cfxGetUniqueId(&shared->id) != cfxSuccess) return "no new unique id";
        shared->ready = 1;
      }
      auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
      while (shared->ready.load() == 0 && std::chrono::steady_clock::now() < until)
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
      cfxComm_t fresh = nullptr;
      if (cfxCommInitRank(&fresh, 2, shared->id, rank) != cfxSuccess)
        return std::string("new communicator: ") + cfxGetLastError(nullptr);
      std::vector<float> x(1000, static_cast<float>(rank + 1)), y(1000);
      cfxResult_t r = cfxAllReduce(x.data(), y.data(), x.size(), cfxFloat32, cfxSum, fresh);
      std::string err = r == cfxSuccess ? "" : cfxGetLastError(fresh);
      cfxCommDestroy(fresh);
      if (r != cfxSuccess) return "allreduce on the new communicator: " + err;
      return y[0] == 3.0f && y[999] == 3.0f ? "" : "wrong result on the new communicator";
    };
    RunOptions o = quick({{"CONFLUX_TRANSPORT", transport}});
    o.init_comm = false;
    auto results = run_ranks(3, body, o);
    ASSERT_EQ(results.size(), 3u);
    EXPECT_EQ(results[2].exit_code, -SIGKILL);
    for (int r = 0; r < 2; ++r) EXPECT_EQ(results[r].exit_code, 0) << transport << ": " << results[r].message;
  }
  munmap(shared, sizeof(Shared));
}

TEST(Api, GarbageOnTheRendezvousPortDoesNotDisturbInit) {
  RunOptions o = quick();
  o.init_comm = false;
  auto body = [](cfxComm_t, int rank, int n) -> std::string {
    const cfxUniqueId& id = current_unique_id();
    if (rank == 0) {
      // A stray client: connects, writes junk, and one that stalls silently.
      auto data = decode_unique_id(id);
      if (!data.ok()) return "bad id";
      auto junk = Socket::connect_to(data->root, deadline_after_ms(5000));
      if (!junk.ok()) return "could not connect";
      const char garbage[] = "GET / HTTP/1.0\r\n\r\n";
      (void)junk->send_all(garbage, sizeof garbage, deadline_after_ms(1000));
      auto stall = Socket::connect_to(data->root, deadline_after_ms(5000));
      (void)stall;
      cfxComm_t comm = nullptr;
      if (cfxCommInitRank(&comm, n, id, rank) != cfxSuccess) return std::string("init: ") + cfxGetLastError(nullptr);
      cfxBarrier(comm);
      cfxCommDestroy(comm);
      return "";
    }
    cfxComm_t comm = nullptr;
    if (cfxCommInitRank(&comm, n, id, rank) != cfxSuccess) return std::string("init: ") + cfxGetLastError(nullptr);
    cfxResult_t r = cfxBarrier(comm);
    cfxCommDestroy(comm);
    return r == cfxSuccess ? "" : "barrier failed";
  };
  EXPECT_EQ(summarize(run_ranks(3, body, o)), "");
}

TEST(Api, AbortFromAnotherThreadUnblocksACall) {
  auto body = [](cfxComm_t comm, int rank, int) -> std::string {
    if (rank == 1) {
      sleep(3);  // never joins: rank 0's receive blocks
      return "";
    }
    std::thread aborter([comm] {
      std::this_thread::sleep_for(std::chrono::milliseconds(300));
      cfxCommAbort(comm);
    });
    std::vector<float> buf(16);
    auto t0 = std::chrono::steady_clock::now();
    cfxResult_t r = cfxRecv(buf.data(), 16, cfxFloat32, 1, comm);
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    aborter.join();
    if (r != cfxAborted) return std::string("expected cfxAborted, got ") + cfxGetErrorString(r);
    if (s > 1.5) return "abort took " + std::to_string(s) + " s";
    return "";
  };
  RunOptions o = quick();
  o.init_comm = false;
  auto wrapped = [&](cfxComm_t, int rank, int n) -> std::string {
    cfxComm_t comm = nullptr;
    if (cfxCommInitRank(&comm, n, current_unique_id(), rank) != cfxSuccess) return "init failed";
    std::string e = body(comm, rank, n);
    if (rank != 0) cfxCommDestroy(comm);  // rank 0's comm was freed by cfxCommAbort
    return e;
  };
  EXPECT_EQ(summarize(run_ranks(2, wrapped, o)), "");
}

}  // namespace
}  // namespace conflux::test
