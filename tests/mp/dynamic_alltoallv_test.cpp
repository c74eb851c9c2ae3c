// cfxAlltoAllvDynamic: receivers learn their counts inside the call. Checked
// against the inputs for 1-8 ranks, skewed and mostly empty traffic, every
// transport, blocking and nonblocking; a receive capacity overflow fails on
// every rank naming the receiver, with nothing written past the capacity.
#include "support/mp_harness.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

namespace conflux::test {
namespace {

// What rank `from` sends rank `to` in round `round`: skewed (rank 0 gets
// the most), with about half of the pairs empty.
size_t count_of(int from, int to, int n, int round) {
  const int h = (from * 7 + to * 13 + round * 5) % 11;
  if (h < 5) return 0;
  return static_cast<size_t>((to == 0 ? 40 : 3) * (h - 4) + (from + round) % 3);
}

int32_t value_of(int from, int to, size_t i) { return from * 1000000 + to * 10000 + static_cast<int32_t>(i); }

std::string exchange(cfxComm_t comm, int rank, int n, int round, bool nonblocking) {
  std::vector<size_t> sc(n), sd(n);
  size_t total = 0;
  for (int d = 0; d < n; ++d) {
    sc[d] = count_of(rank, d, n, round);
    sd[d] = total + 1;  // a gap before each block
    total += sc[d] + 1;
  }
  std::vector<int32_t> send(total);
  for (int d = 0; d < n; ++d)
    for (size_t i = 0; i < sc[d]; ++i) send[sd[d] + i] = value_of(rank, d, i);
  size_t expect = 0;
  for (int s = 0; s < n; ++s) expect += count_of(s, rank, n, round);
  const size_t capacity = expect + 17;
  std::vector<int32_t> recv(capacity + 8, -1);
  std::vector<size_t> rc(n, 99), rd(n, 99);
  cfxResult_t r;
  if (nonblocking) {
    cfxRequest_t req = nullptr;
    r = cfxIalltoAllvDynamic(send.data(), sc.data(), sd.data(), recv.data(), capacity, rc.data(), rd.data(),
                             cfxInt32, comm, &req);
    if (r == cfxSuccess) r = cfxWait(req);
    if (req != nullptr) cfxRequestFree(req);
  } else {
    r = cfxAlltoAllvDynamic(send.data(), sc.data(), sd.data(), recv.data(), capacity, rc.data(), rd.data(), cfxInt32,
                            comm);
  }
  if (r != cfxSuccess) return std::string("round ") + std::to_string(round) + ": " + cfxGetLastError(comm);
  size_t at = 0;
  for (int s = 0; s < n; ++s) {
    if (rc[s] != count_of(s, rank, n, round))
      return "round " + std::to_string(round) + ": recvcounts[" + std::to_string(s) + "] = " + std::to_string(rc[s]);
    if (rd[s] != at) return "round " + std::to_string(round) + ": rdispls[" + std::to_string(s) + "] = " + std::to_string(rd[s]);
    for (size_t i = 0; i < rc[s]; ++i)
      if (recv[at + i] != value_of(s, rank, i))
        return "round " + std::to_string(round) + ": element " + std::to_string(i) + " from rank " + std::to_string(s);
    at += rc[s];
  }
  for (size_t i = at; i < recv.size(); ++i)
    if (recv[i] != -1) return "round " + std::to_string(round) + ": wrote past what it received";
  return "";
}

struct Param {
  const char* transport;
  int nranks;
};

class DynamicAlltoAllv : public ::testing::TestWithParam<Param> {};

TEST_P(DynamicAlltoAllv, ReceiversLearnTheirCounts) {
  RunOptions opts;
  opts.env = {{"CONFLUX_TRANSPORT", GetParam().transport}, {"CONFLUX_TIMEOUT", "60"}, {"CONFLUX_CHUNK_SIZE", "64"}};
  auto body = [](cfxComm_t comm, int rank, int n) {
    for (int round = 0; round < 6; ++round) {
      std::string e = exchange(comm, rank, n, round, round % 2 == 1);
      if (!e.empty()) return e;
    }
    return std::string();
  };
  EXPECT_EQ(summarize(run_ranks(GetParam().nranks, body, opts)), "");
}

INSTANTIATE_TEST_SUITE_P(Transports, DynamicAlltoAllv,
                         ::testing::Values(Param{"auto", 1}, Param{"auto", 2}, Param{"auto", 3}, Param{"auto", 5},
                                           Param{"auto", 8}, Param{"tcp", 2}, Param{"tcp", 4}, Param{"tcp", 7}),
                         [](const ::testing::TestParamInfo<Param>& p) {
                           return std::string(p.param.transport) + "_" + std::to_string(p.param.nranks) + "ranks";
                         });

TEST(DynamicAlltoAllv, OverflowFailsOnEveryRankNamingTheReceiver) {
  for (const char* transport : {"auto", "tcp"}) {
    RunOptions opts;
    opts.env = {{"CONFLUX_TRANSPORT", transport}, {"CONFLUX_TIMEOUT", "30"}};
    auto body = [](cfxComm_t comm, int rank, int n) -> std::string {
      std::vector<size_t> sc(n, 4), sd(n);
      for (int d = 0; d < n; ++d) sd[d] = static_cast<size_t>(d) * 4;
      sc[2] = 100;  // rank 2 gets 100 from every rank, more than its capacity of 50
      std::vector<size_t> off(n);
      size_t total = 0;
      for (int d = 0; d < n; ++d) off[d] = total, total += sc[d];
      std::vector<int32_t> send(total, 7);
      const size_t capacity = rank == 2 ? 50 : 1000;
      std::vector<int32_t> recv(capacity + 8, -1);
      std::vector<size_t> rc(n), rd(n);
      cfxResult_t r =
          cfxAlltoAllvDynamic(send.data(), sc.data(), off.data(), recv.data(), capacity, rc.data(), rd.data(), cfxInt32, comm);
      const std::string err = cfxGetLastError(comm);
      if (r != cfxInvalidUsage) return "expected invalid usage, got " + std::string(cfxGetErrorString(r)) + ": " + err;
      if (err.find("rank 2 would receive") == std::string::npos || err.find("recvcapacity is 50") == std::string::npos)
        return "the error does not name the receiver and its capacity: " + err;
      for (int32_t v : recv)
        if (v != -1) return "data was written although the call failed";
      // The communicator stays usable: the failure was found before any data moved.
      std::vector<size_t> small(n, 1), sdisp(n);
      for (int d = 0; d < n; ++d) sdisp[d] = static_cast<size_t>(d);
      std::vector<int32_t> s2(n, rank), r2(n, -1);
      if (cfxAlltoAllvDynamic(s2.data(), small.data(), sdisp.data(), r2.data(), n, rc.data(), rd.data(), cfxInt32, comm) !=
          cfxSuccess)
        return std::string("the next call failed: ") + cfxGetLastError(comm);
      for (int s = 0; s < n; ++s)
        if (r2[s] != s) return "the next call moved wrong data";
      return "";
    };
    EXPECT_EQ(summarize(run_ranks(4, body, opts)), "") << transport;
  }
}

TEST(DynamicAlltoAllv, BadArgumentsAreRefused) {
  auto body = [](cfxComm_t comm, int, int n) -> std::string {
    std::vector<size_t> sc(n, 1), sd(n, 0), rc(n), rd(n);
    std::vector<int32_t> buf(16);
    if (cfxAlltoAllvDynamic(buf.data(), nullptr, sd.data(), buf.data() + 8, 4, rc.data(), rd.data(), cfxInt32, comm) !=
        cfxInvalidArgument)
      return "NULL sendcounts accepted";
    if (cfxAlltoAllvDynamic(buf.data(), sc.data(), sd.data(), buf.data() + 8, 4, nullptr, rd.data(), cfxInt32, comm) !=
        cfxInvalidArgument)
      return "NULL recvcounts accepted";
    if (cfxAlltoAllvDynamic(buf.data(), sc.data(), sd.data(), buf.data(), 4, rc.data(), rd.data(), cfxInt32, comm) !=
        cfxInvalidArgument)
      return "overlapping buffers accepted";
    if (cfxAlltoAllvDynamic(buf.data(), sc.data(), sd.data(), buf.data() + 8, 4, rc.data(), rd.data(),
                            static_cast<cfxDataType_t>(99), comm) != cfxInvalidArgument)
      return "a bad datatype accepted";
    return "";
  };
  EXPECT_EQ(summarize(run_ranks(2, body, {})), "");
}

}  // namespace
}  // namespace conflux::test
