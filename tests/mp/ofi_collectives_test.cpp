// The libfabric transport (CONFLUX_TRANSPORT=ofi) under the correctness
// matrix, over the "tcp;ofi_rxm" and "shm" providers for 2..4 ranks on this
// host, plus zero-byte messages, many nonblocking calls in flight, the error
// for an unknown provider and a peer that dies. Tiny chunks and pieces
// (CONFLUX_OFI_PIECE_SIZE) force multi-piece messages and window wrap-around,
// a low CONFLUX_OFI_INLINE lets small messages take the inline path as well;
// the intra-host shm fast path is off so every byte goes through libfabric.
#include "core/config.h"
#include "support/mismatch_bodies.h"
#include "support/mp_harness.h"
#include "support/reference.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace conflux::test {
namespace {

#ifdef CONFLUX_HAVE_OFI

struct OfiParam {
  const char* provider;
  int nranks;
  bool register_memory;  // CONFLUX_OFI_MR=always
};

std::map<std::string, std::string> ofi_env(const char* provider) {
  return {{"CONFLUX_TRANSPORT", "ofi"}, {"CONFLUX_OFI_PROVIDER", provider}, {"FI_TCP_IFACE", "lo"},
          {"CONFLUX_SHM_COLL", "0"},    {"CONFLUX_TIMEOUT", "60"}};
}

// A subset of collectives_test's matrix (fewer types and ops to keep the
// runtime small): the transport moves bytes, the kernels are tested there.
constexpr cfxDataType_t kReduceTypes[] = {cfxInt8, cfxFloat32, cfxBfloat16};
constexpr cfxRedOp_t kOps[] = {cfxSum, cfxMax};
constexpr cfxDataType_t kMoveTypes[] = {cfxInt8, cfxFloat64};

std::string run_matrix(cfxComm_t comm, int rank, int n) {
  return run_small_matrix(comm, rank, n, kReduceTypes, kOps, kMoveTypes);
}

class OfiMatrix : public ::testing::TestWithParam<OfiParam> {};

TEST_P(OfiMatrix, MatchesReference) {
  const OfiParam p = GetParam();
  RunOptions opts;
  opts.env = ofi_env(p.provider);
  opts.env["CONFLUX_CHUNK_SIZE"] = "256";
  opts.env["CONFLUX_OFI_PIECE_SIZE"] = "64";  // 256-byte chunks in 4 pieces: the window wraps
  opts.env["CONFLUX_OFI_INLINE"] = "100";     // smaller messages (tails, tiny counts) go inline
  if (p.register_memory) opts.env["CONFLUX_OFI_MR"] = "always";
  opts.timeout_s = 120;
  auto results = run_ranks(p.nranks, run_matrix, opts);
  EXPECT_EQ(summarize(results), "");
}

std::string name_of(const ::testing::TestParamInfo<OfiParam>& info) {
  std::string prov = std::strcmp(info.param.provider, "shm") == 0 ? "shm" : "tcp_rxm";
  return prov + "_" + std::to_string(info.param.nranks) + "ranks" + (info.param.register_memory ? "_mr" : "");
}

INSTANTIATE_TEST_SUITE_P(Ofi, OfiMatrix,
                         ::testing::Values(OfiParam{"tcp;ofi_rxm", 2, false}, OfiParam{"tcp;ofi_rxm", 3, false},
                                           OfiParam{"tcp;ofi_rxm", 4, false}, OfiParam{"shm", 2, false},
                                           OfiParam{"shm", 3, false}, OfiParam{"shm", 4, false}),
                         name_of);

// Many operations queued back to back on the progress thread, zero-byte ones
// among them: per-link sequence numbers keep their messages apart.
std::string many_in_flight(cfxComm_t comm, int rank, int n) {
  constexpr int kInFlight = 64;
  std::vector<std::vector<float>> in(kInFlight), out(kInFlight);
  std::vector<cfxRequest_t> reqs(kInFlight);
  for (int i = 0; i < kInFlight; ++i) {
    size_t count = (i % 8 == 0) ? 0 : static_cast<size_t>(1 + (i * 977) % 40000);
    if (i % 16 == 5) count = (1u << 20) + 3;  // several pieces of the default size
    in[i].assign(count, static_cast<float>(rank + i));
    out[i].assign(count, -1.f);
    cfxResult_t r = (i % 3 == 2) ? cfxIbroadcast(in[i].data(), out[i].data(), count, cfxFloat32, i % n, comm, &reqs[i])
                                 : cfxIallReduce(in[i].data(), out[i].data(), count, cfxFloat32, cfxSum, comm, &reqs[i]);
    if (r != cfxSuccess) return "post " + std::to_string(i) + ": " + cfxGetLastError(comm);
  }
  std::string errors;
  for (int i = 0; i < kInFlight; ++i) {
    if (cfxWait(reqs[i]) != cfxSuccess) errors += "op " + std::to_string(i) + ": " + cfxGetLastError(comm) + "\n";
    cfxRequestFree(reqs[i]);
    float want = (i % 3 == 2) ? static_cast<float>(i % n + i) : static_cast<float>(n * (n - 1) / 2 + n * i);
    for (size_t k = 0; k < out[i].size() && errors.size() < 2000; ++k)
      if (out[i][k] != want) {
        errors += "op " + std::to_string(i) + " element " + std::to_string(k) + ": " + std::to_string(out[i][k]) +
                  " != " + std::to_string(want) + "\n";
        break;
      }
  }
  return errors;
}

TEST(OfiTransport, ManyOperationsInFlight) {
  for (const char* prov : {"tcp;ofi_rxm", "shm"}) {
    for (bool mr : {false, true}) {
      RunOptions opts;
      opts.env = ofi_env(prov);
      if (mr) opts.env["CONFLUX_OFI_MR"] = "always";  // exercise the registration cache
      opts.timeout_s = 60;
      EXPECT_EQ(summarize(run_ranks(3, many_in_flight, opts)), "") << prov << (mr ? " with registration" : "");
    }
  }
}

TEST(OfiTransport, MismatchedCallsAreReportedOnEveryRank) {
  for (const char* prov : {"tcp;ofi_rxm", "shm"}) {
    RunOptions opts;
    opts.env = ofi_env(prov);
    opts.env["CONFLUX_TIMEOUT"] = "20";
    opts.timeout_s = 60;
    EXPECT_EQ(summarize(run_ranks(3, mismatch_on_every_rank, opts)), "") << prov;
    EXPECT_EQ(summarize(run_ranks(2, p2p_mismatch_reaches_the_sender, opts)), "") << prov;
  }
}

TEST(OfiTransport, StaleShmRegionOfAReusedPidIsNoObstacle) {
  // A rank killed before closing leaves the shm provider's region in
  // /dev/shm; the provider's default name is the pid's, so a later rank
  // that gets the same pid (they wrap at 32768) failed fi_enable with EBUSY
  // and its peers waited out the init timeout. Each rank here leaves such
  // a region for its own pid first.
  RunOptions opts;
  opts.env = ofi_env("shm");
  opts.init_comm = false;
  opts.timeout_s = 60;
  auto body = [](cfxComm_t, int rank, int n) -> std::string {
    const std::string stale = "/dev/shm/" + std::to_string(getpid()) + ":0:0";
    FILE* f = std::fopen(stale.c_str(), "w");
    if (f == nullptr) return "cannot create " + stale;
    std::fclose(f);
    cfxComm_t comm = nullptr;
    cfxResult_t r = cfxCommInitRank(&comm, n, current_unique_id(), rank);
    std::string err = r == cfxSuccess ? "" : std::string("init: ") + cfxGetLastError(nullptr);
    if (r == cfxSuccess) {
      float a = 1.0f, b = 0.0f;
      if (cfxAllReduce(&a, &b, 1, cfxFloat32, cfxSum, comm) != cfxSuccess) err = cfxGetLastError(comm);
      else if (b != static_cast<float>(n)) err = "wrong sum";
      cfxCommDestroy(comm);
    }
    std::remove(stale.c_str());
    return err;
  };
  EXPECT_EQ(summarize(run_ranks(2, body, opts)), "");
}

TEST(OfiTransport, UnknownProviderListsWhatIsOffered) {
  RunOptions opts;
  opts.env = ofi_env("no_such_provider");
  opts.init_comm = false;
  auto results = run_ranks(2, [](cfxComm_t, int rank, int n) -> std::string {
    cfxComm_t comm = nullptr;
    cfxResult_t r = cfxCommInitRank(&comm, n, current_unique_id(), rank);
    if (r == cfxSuccess) return "init succeeded with an unknown provider";
    std::string msg = cfxGetLastError(nullptr);
    if (msg.find("no_such_provider") == std::string::npos || msg.find("tcp;ofi_rxm") == std::string::npos)
      return "error does not name the request and the offers: " + msg;
    return "";
  }, opts);
  EXPECT_EQ(summarize(results), "");
}

TEST(OfiTransport, DeadPeerIsReported) {
  for (const char* prov : {"tcp;ofi_rxm", "shm"}) {
    RunOptions opts;
    opts.env = ofi_env(prov);
    opts.timeout_s = 60;
    auto results = run_ranks(2, [](cfxComm_t comm, int rank, int) -> std::string {
      if (rank == 1) _exit(0);  // dies without a word
      std::vector<float> buf(1 << 16, 1.f);
      auto t0 = std::chrono::steady_clock::now();
      cfxResult_t r = cfxAllReduce(buf.data(), buf.data(), buf.size(), cfxFloat32, cfxSum, comm);
      double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      if (r == cfxSuccess) return "allreduce with a dead peer succeeded";
      std::string msg = cfxGetLastError(comm);
      if (msg.find("rank 1") == std::string::npos) return "error does not name rank 1: " + msg;
      if (s > 20) return "took " + std::to_string(s) + " s to notice: " + msg;
      return "";
    }, opts);
    EXPECT_EQ(summarize(results), "") << prov;
  }
}

#else  // built without libfabric

TEST(OfiTransport, NotBuiltIsAClearError) {
  RunOptions opts;
  opts.env = {{"CONFLUX_TRANSPORT", "ofi"}};
  opts.init_comm = false;
  auto results = run_ranks(2, [](cfxComm_t, int rank, int n) -> std::string {
    cfxComm_t comm = nullptr;
    if (cfxCommInitRank(&comm, n, current_unique_id(), rank) == cfxSuccess) return "init succeeded";
    std::string msg = cfxGetLastError(nullptr);
    return msg.find("without libfabric") == std::string::npos ? "unclear error: " + msg : "";
  }, opts);
  EXPECT_EQ(summarize(results), "");
}

#endif

}  // namespace
}  // namespace conflux::test
