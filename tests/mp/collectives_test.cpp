// The correctness matrix: every collective x datatype x op x count x
// in-place/out-of-place, against the reference, for 1..8 ranks on shared
// memory (ordinary and cfxMemAlloc buffers) and on TCP (one connection per
// peer, and several: multi-channel). Tiny chunks and
// slots force the multi-chunk paths.
#include "core/comm.h"
#include "core/config.h"
#include "support/mp_harness.h"
#include "support/reference.h"
#include "tune/candidates.h"
#include "tune/tuner.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <vector>

namespace conflux::test {
namespace {

struct MatrixParam {
  const char* transport;
  int nranks;
  bool shared_buffers = false;  // buffers from cfxMemAlloc
  int tcp_channels = 1;         // > 1: every call split over that many connections per peer
};

constexpr cfxRedOp_t kOps[] = {cfxSum, cfxProd, cfxMax, cfxMin, cfxAvg};
constexpr cfxDataType_t kTypes[] = {cfxInt8,   cfxUint8,   cfxInt32,   cfxUint32,   cfxInt64,
                                    cfxUint64, cfxFloat16, cfxFloat32, cfxFloat64, cfxBfloat16};

std::string run_matrix(cfxComm_t comm, int rank, int n) {
  std::string errors = run_small_matrix(comm, rank, n, kTypes, kOps, kTypes);
  auto check = [&](const CollCase& c) {
    if (errors.size() > 4000) return;
    std::string e = run_and_check(comm, rank, n, c);
    if (!e.empty()) errors += e + "\n";
  };
  // Several MiB with realistic chunks: every datatype through AllReduce,
  // float32 through the others.
  setenv("CONFLUX_CHUNK_SIZE", "128K", 1);
  reload_config();
  const size_t big_bytes = 3u << 20;
  for (cfxDataType_t t : kTypes) check({Coll::kAllReduce, t, cfxSum, big_bytes / cfxTypeSize(t) + 5, 0, false});
  const size_t per_rank = big_bytes / 4 / static_cast<size_t>(n) + 3;
  for (Coll coll : {Coll::kBroadcast, Coll::kReduce, Coll::kAllGather, Coll::kReduceScatter, Coll::kAlltoAll,
                    Coll::kGather, Coll::kScatter})
    for (bool in_place : {false, true}) check({coll, cfxFloat32, cfxSum, per_rank, n - 1, in_place});
  return errors;
}

class CollectiveMatrix : public ::testing::TestWithParam<MatrixParam> {};

TEST_P(CollectiveMatrix, MatchesReference) {
  const MatrixParam p = GetParam();
  RunOptions opts;
  opts.env = {{"CONFLUX_TRANSPORT", p.transport}, {"CONFLUX_CHUNK_SIZE", "256"}, {"CONFLUX_SHM_SLOT_SIZE", "128"},
              {"CONFLUX_SHM_SLOTS", "4"}, {"CONFLUX_TIMEOUT", "60"}};
  if (p.tcp_channels > 1) {
    opts.env["CONFLUX_TCP_CHANNELS"] = std::to_string(p.tcp_channels);
    opts.env["CONFLUX_CHANNEL_MIN_BYTES"] = "0";
  }
  opts.timeout_s = 240;
  auto body = [shared = p.shared_buffers](cfxComm_t comm, int rank, int n) {
    use_shared_buffers(shared);
    return run_matrix(comm, rank, n);
  };
  auto results = run_ranks(p.nranks, body, opts);
  EXPECT_EQ(summarize(results), "");
}

std::string name_of(const ::testing::TestParamInfo<MatrixParam>& info) {
  return std::string(info.param.transport) + "_" + std::to_string(info.param.nranks) + "ranks" +
         (info.param.shared_buffers ? "_memalloc" : "") +
         (info.param.tcp_channels > 1 ? "_" + std::to_string(info.param.tcp_channels) + "channels" : "");
}

INSTANTIATE_TEST_SUITE_P(Shm, CollectiveMatrix,
                         ::testing::Values(MatrixParam{"auto", 1}, MatrixParam{"auto", 2}, MatrixParam{"auto", 3},
                                           MatrixParam{"auto", 4}, MatrixParam{"auto", 5}, MatrixParam{"auto", 8}),
                         name_of);
// cfxMemAlloc buffers: the shared-segment path maps peers' buffers (the
// small counts above the eager limit and the MiB cases take it).
INSTANTIATE_TEST_SUITE_P(ShmMemAlloc, CollectiveMatrix,
                         ::testing::Values(MatrixParam{"auto", 2, true}, MatrixParam{"auto", 3, true},
                                           MatrixParam{"auto", 4, true}),
                         name_of);
INSTANTIATE_TEST_SUITE_P(Tcp, CollectiveMatrix,
                         ::testing::Values(MatrixParam{"tcp", 2}, MatrixParam{"tcp", 3}, MatrixParam{"tcp", 4},
                                           MatrixParam{"tcp", 5}, MatrixParam{"tcp", 8}),
                         name_of);
// Multi-channel TCP: every splittable call runs over several connections
// per peer (CONFLUX_CHANNEL_MIN_BYTES=0), parts of a few tiny chunks each.
INSTANTIATE_TEST_SUITE_P(TcpChannels, CollectiveMatrix,
                         ::testing::Values(MatrixParam{"tcp", 2, false, 3}, MatrixParam{"tcp", 3, false, 2},
                                           MatrixParam{"tcp", 5, false, 4}),
                         name_of);

// Slot-sized calls (8-64 KiB) at the default slot size: when every rank's
// buffers are cfxMemAlloc memory they are read in place; when only some
// ranks' are, those ranks fill their slots late and say so. Calls of
// different paths follow each other, so both slot parities see each path.
// Reductions of over 1 MiB: read in place when all buffers are mapped,
// handed back to the point-to-point path when some are not.
struct MappedParam {
  int nranks;
  bool mixed;  // odd ranks use cfxMemAlloc buffers, even ranks the heap
};

class MappedAndMixedBuffers : public ::testing::TestWithParam<MappedParam> {};

TEST_P(MappedAndMixedBuffers, MatchesReference) {
  const MappedParam p = GetParam();
  RunOptions opts;
  opts.env = {{"CONFLUX_TIMEOUT", "60"}};
  opts.timeout_s = 120;
  auto body = [mixed = p.mixed](cfxComm_t comm, int rank, int n) {
    use_shared_buffers(!mixed || rank % 2 == 1);
    std::string errors;
    for (size_t count : {1031u, 2053u, 4099u, 7u})
      for (Coll coll : {Coll::kAllReduce, Coll::kBroadcast, Coll::kReduce, Coll::kAllGather, Coll::kReduceScatter,
                        Coll::kAlltoAll, Coll::kGather, Coll::kScatter})
        for (bool in_place : {false, true})
          for (cfxDataType_t t : {cfxFloat32, cfxBfloat16}) {
            std::string e = run_and_check(comm, rank, n, {coll, t, cfxSum, count, n - 1, in_place});
            if (!e.empty() && errors.size() < 4000) errors += e + "\n";
          }
    for (Coll coll : {Coll::kAllReduce, Coll::kReduce, Coll::kReduceScatter})
      for (bool in_place : {false, true}) {
        const size_t count = (coll == Coll::kReduceScatter ? 300007u / n : 300007u);
        std::string e = run_and_check(comm, rank, n, {coll, cfxFloat32, cfxSum, count, 0, in_place});
        if (!e.empty() && errors.size() < 4000) errors += e + "\n";
      }
    return errors;
  };
  EXPECT_EQ(summarize(run_ranks(p.nranks, body, opts)), "");
}

std::string mapped_name(const ::testing::TestParamInfo<MappedParam>& info) {
  return std::to_string(info.param.nranks) + "ranks_" + (info.param.mixed ? "mixed" : "memalloc");
}

INSTANTIATE_TEST_SUITE_P(Shm, MappedAndMixedBuffers,
                         ::testing::Values(MappedParam{2, false}, MappedParam{3, false}, MappedParam{4, false},
                                           MappedParam{2, true}, MappedParam{3, true}, MappedParam{4, true}),
                         mapped_name);


// Every one-sided candidate forced, through the same matrix: each case runs
// on the named algorithm wherever that algorithm can serve it (the default
// choice elsewhere), with tiny pieces and a small staging area so both
// sides of the eager limit run. Buffers: ordinary, cfxMemAlloc on odd ranks
// only (peers mapped on some ranks, read through the kernel on others), and
// registered cfxMemAlloc on every rank.
enum class Buffers { kHeap, kMixed, kRegistered };

struct ForcedParam {
  const char* algo;
  int nranks;
  Buffers buffers;
};

// Makes the communicator's tuner take `name` for this case when it can
// serve it; "" when it did, else why not (an error when the tuner chose another).
std::string force_where_it_serves(cfxComm_t comm, int nranks, const CollCase& c, const std::string& name,
                                  bool registered, int* forced) {
  tune::Tuner* tuner = comm->tuner();
  if (tuner == nullptr) return "no tuner";
  algo::CollArgs a;
  a.coll = c.coll;
  a.nranks = nranks;
  a.count = c.count;
  a.elem = cfxTypeSize(c.dtype);
  a.root = c.root;
  a.in_place = c.in_place;
  a.registered = registered;
  a.staging_bytes = tuner->model().staging_bytes;
  std::string spec;
  for (const tune::Candidate* cand : tune::candidates_for(c.coll))
    if (cand->name == name && cand->cannot_serve(a, tuner->model()).empty())
      spec = std::string(coll_name(c.coll)) + ":" + name;
  tuner->set_filter(tune::AlgoFilter::parse(spec).value());
  if (spec.empty()) return "";
  auto chosen = tuner->choose(a);
  if (!chosen.ok() || (*chosen)->name != name)
    return c.str() + ": forcing " + name + " did not take (" + (chosen.ok() ? (*chosen)->name : chosen.status().message()) + ")";
  ++*forced;
  return "";
}

bool has_algorithm(Coll coll, const std::string& name) {
  for (const tune::Candidate* cand : tune::candidates_for(coll))
    if (cand->name == name) return true;
  return false;
}

class ForcedCandidate : public ::testing::TestWithParam<ForcedParam> {};

TEST_P(ForcedCandidate, MatchesReference) {
  const ForcedParam p = GetParam();
  RunOptions opts;
  opts.env = {{"CONFLUX_CHUNK_SIZE", "256"}, {"CONFLUX_SHM_STAGING_SIZE", "4K"}, {"CONFLUX_TIMEOUT", "60"}};
  opts.timeout_s = 240;
  auto body = [p](cfxComm_t comm, int rank, int n) {
    const bool registered = p.buffers == Buffers::kRegistered;
    use_shared_buffers(p.buffers == Buffers::kRegistered || (p.buffers == Buffers::kMixed && rank % 2 == 1));
    use_registered_buffers(registered);
    if (cfxBarrier(comm) != cfxSuccess) return std::string(cfxGetLastError(comm));  // makes the tuner
    const std::string name = p.algo;
    std::string errors;
    int forced = 0;
    set_before_each_case([&](cfxComm_t c, int nranks, const CollCase& cc) {
      std::string e = force_where_it_serves(c, nranks, cc, name, registered, &forced);
      if (!e.empty() && errors.size() < 4000) errors += e + "\n";
    });
    auto check = [&](const CollCase& c) {
      if (errors.size() > 4000 || !has_algorithm(c.coll, name)) return;
      std::string e = run_and_check(comm, rank, n, c);
      if (!e.empty()) errors += e + "\n";
    };
    const std::vector<size_t> counts = {0, 1, 7, 13, 1031, static_cast<size_t>(n) * 5 + 3};
    for (Coll coll : {Coll::kAllReduce, Coll::kReduce, Coll::kReduceScatter})
      for (cfxDataType_t t : kTypes)
        for (cfxRedOp_t op : kOps)
          for (size_t count : counts)
            for (bool in_place : {false, true})
              check({coll, t, op, count, static_cast<int>((count + static_cast<size_t>(op)) % n), in_place});
    for (Coll coll : {Coll::kBroadcast, Coll::kAllGather, Coll::kAlltoAll, Coll::kGather, Coll::kScatter})
      for (cfxDataType_t t : {cfxInt8, cfxFloat16, cfxFloat64})
        for (size_t count : counts)
          for (bool in_place : {false, true}) check({coll, t, cfxSum, count, static_cast<int>(count % n), in_place});
    // A barrier on the named algorithm too, where it has one.
    if (has_algorithm(Coll::kBarrier, name)) {
      errors += force_where_it_serves(comm, n, {Coll::kBarrier, cfxFloat32, cfxSum, 0, 0, false}, name, false, &forced);
      for (int k = 0; k < 3; ++k)
        if (cfxBarrier(comm) != cfxSuccess) errors += std::string("barrier: ") + cfxGetLastError(comm) + "\n";
    }
    // Multi-piece sizes: 64 KiB pieces at the default chunk size.
    setenv("CONFLUX_CHUNK_SIZE", "64K", 1);
    reload_config();
    for (Coll coll : {Coll::kAllReduce, Coll::kReduce, Coll::kReduceScatter, Coll::kBroadcast, Coll::kAllGather,
                      Coll::kAlltoAll, Coll::kGather, Coll::kScatter})
      for (bool in_place : {false, true}) check({coll, cfxFloat32, cfxSum, (300007u / n) | 1u, n - 1, in_place});
    set_before_each_case(nullptr);
    if (forced == 0) errors += name + " served no case\n";
    return errors;
  };
  EXPECT_EQ(summarize(run_ranks(p.nranks, body, opts)), "");
}

std::string forced_name(const ::testing::TestParamInfo<ForcedParam>& info) {
  const char* kinds[] = {"heap", "mixed", "registered"};
  return std::string(info.param.algo) + "_" + std::to_string(info.param.nranks) + "ranks_" +
         kinds[static_cast<int>(info.param.buffers)];
}

std::vector<ForcedParam> forced_params() {
  std::vector<ForcedParam> out;
  for (const char* algo : {"eager", "direct", "push", "split", "flag"})
    for (int n : {2, 3, 4, 5, 8})
      for (Buffers b : {Buffers::kHeap, Buffers::kMixed, Buffers::kRegistered}) {
        if (n == 8 && b != Buffers::kHeap) continue;
        // Eager copies through the staging area whatever the buffers: heap only.
        if (std::string(algo) == "eager" && b != Buffers::kHeap && n != 3) continue;
        if (std::string(algo) == "flag" && b != Buffers::kHeap) continue;
        out.push_back({algo, n, b});
      }
  return out;
}

INSTANTIATE_TEST_SUITE_P(OneSided, ForcedCandidate, ::testing::ValuesIn(forced_params()), forced_name);

}  // namespace
}  // namespace conflux::test
