// Stress: long random sequences of collectives (random collective, count,
// datatype, op, root, in-place, interleaved communicator splits), every
// result checked against the reference. Inputs are small integers, so every
// datatype (floats included) must match exactly, whatever the reduction
// order: the tolerance is zero. The CI variant runs 600 operations per
// configuration; bench/stress runs the same test with CONFLUX_STRESS_OPS
// (and CONFLUX_STRESS_SEED to replay a failure).
#include "support/mp_harness.h"
#include "support/reference.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>

namespace conflux::test {
namespace {

constexpr Coll kColls[] = {Coll::kAllReduce, Coll::kReduce,  Coll::kReduceScatter, Coll::kBroadcast,
                           Coll::kAllGather, Coll::kAlltoAll, Coll::kGather,        Coll::kScatter};

int env_int(const char* name, int fallback) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? std::atoi(v) : fallback;
}

CollCase random_case(std::mt19937_64& rng, int n) {
  CollCase c;
  c.coll = kColls[rng() % std::size(kColls)];
  c.dtype = static_cast<cfxDataType_t>(rng() % cfxNumTypes);
  c.op = static_cast<cfxRedOp_t>(rng() % cfxNumOps);
  // Mostly small (latency paths), sometimes up to 256K elements (chunked).
  const int log2 = static_cast<int>(rng() % 19);
  c.count = rng() % 8 == 0 ? 0 : (size_t{1} << log2) + rng() % 17;
  c.root = static_cast<int>(rng() % n);
  c.in_place = rng() % 2 == 0;
  return c;
}

// Every rank draws the same sequence from the same seed; a split's colour
// and key come from the rank so the sub-communicators differ in shape.
std::string stress_body(cfxComm_t comm, int rank, int n, uint64_t seed, int ops) {
  std::mt19937_64 rng(seed);
  std::string errors;
  for (int i = 0; i < ops && errors.size() < 2000; ++i) {
    if (n >= 3 && rng() % 50 == 0) {
      const int colors = 1 + static_cast<int>(rng() % 3);
      const int color = static_cast<int>((static_cast<uint64_t>(rank) * 7 + rng() % 5) % colors);
      cfxComm_t sub = nullptr;
      if (cfxCommSplit(comm, color, n - rank, &sub) != cfxSuccess)
        return "split failed at op " + std::to_string(i) + ": " + cfxGetLastError(comm);
      int srank = 0, sn = 0;
      cfxCommUserRank(sub, &srank);
      cfxCommCount(sub, &sn);
      // Same sub-sequence length everywhere; sub-ranks use their own draws.
      std::mt19937_64 sub_rng(seed ^ (static_cast<uint64_t>(color) << 32) ^ static_cast<uint64_t>(i));
      for (int k = 0; k < 5; ++k) {
        CollCase c = random_case(sub_rng, sn);
        std::string e = run_and_check(sub, srank, sn, c);
        if (!e.empty()) errors += "op " + std::to_string(i) + " sub(color " + std::to_string(color) + ") " + e + "\n";
      }
      cfxCommDestroy(sub);
      continue;
    }
    CollCase c = random_case(rng, n);
    std::string e = run_and_check(comm, rank, n, c);
    if (!e.empty()) errors += "op " + std::to_string(i) + " " + e + "\n";
  }
  return errors;
}

struct StressParam {
  const char* name;
  const char* transport;
  const char* shm_coll;
  int nranks;
};

class Stress : public ::testing::TestWithParam<StressParam> {};

TEST_P(Stress, RandomSequenceMatchesReference) {
  const StressParam p = GetParam();
  const int ops = env_int("CONFLUX_STRESS_OPS", 600);
  const uint64_t seed = static_cast<uint64_t>(env_int(
      "CONFLUX_STRESS_SEED",
      static_cast<int>(std::chrono::steady_clock::now().time_since_epoch().count() & 0x7fffffff)));
  RunOptions o;
  o.env = {{"CONFLUX_TRANSPORT", p.transport}, {"CONFLUX_SHM_COLL", p.shm_coll}, {"CONFLUX_TIMEOUT", "60"},
           {"CONFLUX_CHUNK_SIZE", "64K"}};
  o.timeout_s = env_int("CONFLUX_STRESS_TIMEOUT", 300);
  auto t0 = std::chrono::steady_clock::now();
  auto results = run_ranks(p.nranks, [&](cfxComm_t comm, int rank, int n) {
    return stress_body(comm, rank, n, seed, ops);
  }, o);
  double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("stress %s n=%d: %d ops, seed %llu, %.1f s\n", p.name, p.nranks, ops,
              static_cast<unsigned long long>(seed), s);
  EXPECT_EQ(summarize(results), "") << "replay with CONFLUX_STRESS_SEED=" << seed;
}

INSTANTIATE_TEST_SUITE_P(Configs, Stress,
                         ::testing::Values(StressParam{"shm_coll", "auto", "1", 4},
                                           StressParam{"shm_p2p", "auto", "0", 3},
                                           StressParam{"tcp", "tcp", "0", 3}),
                         [](const auto& param_info) { return std::string(param_info.param.name); });

}  // namespace
}  // namespace conflux::test
