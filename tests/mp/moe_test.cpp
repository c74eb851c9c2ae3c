// MoE dispatch and combine against a reference every rank computes alone
// (every rank's tokens and routing are functions of its rank): expert
// blocks bit-exact, combine equal to the float sum in j order, the backward
// helpers, the capacity policy, and the bad inputs (each failing on every
// rank with the culprit named).
#include "core/config.h"
#include "core/half.h"
#include "support/mp_harness.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <string>
#include <unistd.h>
#include <vector>

namespace conflux::test {
namespace {

enum class Routing { kUniform, kHotExpert, kSkewed };

struct MoeSetup {
  int nranks = 2;
  int experts = 8;
  int top_k = 2;
  size_t hidden = 5;
  cfxDataType_t dtype = cfxFloat32;
  Routing routing = Routing::kUniform;
  double capacity_factor = 0;
  size_t alignment = 0;
};

size_t tokens_of(int rank, int round) { return rank == 1 ? (round % 2 == 0 ? 0 : 3) : static_cast<size_t>(7 + rank * 3 + round); }

// The j-th expert of token t on `rank`: distinct per token.
int expert_of(const MoeSetup& s, int rank, size_t t, int j, int round) {
  int first = 0;
  const uint32_t h = static_cast<uint32_t>(rank * 7919 + static_cast<int>(t) * 104729 + round * 31);
  switch (s.routing) {
    case Routing::kUniform: first = static_cast<int>(h % static_cast<uint32_t>(s.experts)); break;
    case Routing::kHotExpert: first = (h % 2 == 0) ? 3 % s.experts : static_cast<int>(h % static_cast<uint32_t>(s.experts)); break;
    case Routing::kSkewed: first = static_cast<int>((h % 97) * (h % 97) % static_cast<uint32_t>(s.experts * s.experts)) / s.experts; break;
  }
  return (first + j * 3) % s.experts;  // 3 is coprime to the expert counts used
}

float weight_of(int rank, size_t t, int j) { return 0.25f + 0.125f * static_cast<float>((rank + static_cast<int>(t) + j) % 5); }

float token_value(int rank, size_t t, size_t i) { return static_cast<float>(rank * 100 + static_cast<int>(t)) + 0.5f * static_cast<float>(i); }

// What expert e computes from a row (the test's "expert MLP").
float expert_fn(int e, float x) { return x * static_cast<float>(e + 1) * 0.5f + static_cast<float>(e); }

size_t elem_size(cfxDataType_t t) { return cfxTypeSize(t); }

float get(const std::vector<uint8_t>& buf, size_t i, cfxDataType_t t) {
  if (t == cfxFloat32) {
    float f;
    std::memcpy(&f, buf.data() + i * 4, 4);
    return f;
  }
  uint16_t b;
  std::memcpy(&b, buf.data() + i * 2, 2);
  return t == cfxBfloat16 ? bf16_to_float(b) : half_to_float(b);
}

void put(std::vector<uint8_t>& buf, size_t i, float v, cfxDataType_t t) {
  if (t == cfxFloat32) {
    std::memcpy(buf.data() + i * 4, &v, 4);
    return;
  }
  const uint16_t b = t == cfxBfloat16 ? float_to_bf16(v) : float_to_half(v);
  std::memcpy(buf.data() + i * 2, &b, 2);
}

std::vector<uint8_t> tokens_for(const MoeSetup& s, int rank, int round) {
  const size_t nt = tokens_of(rank, round);
  std::vector<uint8_t> buf(nt * s.hidden * elem_size(s.dtype));
  for (size_t t = 0; t < nt; ++t)
    for (size_t i = 0; i < s.hidden; ++i) put(buf, t * s.hidden + i, token_value(rank, t, i), s.dtype);
  return buf;
}

int rank_of_expert(const MoeSetup& s, int e) { return e / (s.experts / s.nranks); }

std::string run_round(cfxComm_t comm, cfxMoe_t moe, const MoeSetup& s, int rank, int round) {
  const int n = s.nranks, k = s.top_k, E = s.experts;
  const size_t H = s.hidden, es = elem_size(s.dtype);
  const size_t nt = tokens_of(rank, round);
  std::vector<uint8_t> tokens = tokens_for(s, rank, round);
  std::vector<int32_t> idx(nt * k);
  std::vector<float> w(nt * k);
  for (size_t t = 0; t < nt; ++t)
    for (int j = 0; j < k; ++j) {
      idx[t * k + j] = expert_of(s, rank, t, j, round);
      w[t * k + j] = weight_of(rank, t, j);
    }
  // Reference: rows per local expert in (source rank, token) order, with
  // the capacity policy applied in that order.
  std::vector<int> local;
  for (int e = 0; e < E; ++e)
    if (rank_of_expert(s, e) == rank) local.push_back(e);
  size_t pairs = 0;
  std::vector<size_t> per_expert(E, 0);
  for (int src = 0; src < n; ++src)
    for (size_t t = 0; t < tokens_of(src, round); ++t)
      for (int j = 0; j < k; ++j) ++per_expert[expert_of(s, src, t, j, round)], ++pairs;
  const size_t cap = s.capacity_factor > 0 ? static_cast<size_t>(std::ceil(s.capacity_factor * pairs / E)) : SIZE_MAX;
  // kept(e, src, t): whether that pair made it into expert e's block.
  auto kept_index = [&](int e, int src_q, size_t t_q) -> long {
    size_t pos = 0;
    for (int src = 0; src < n; ++src)
      for (size_t t = 0; t < tokens_of(src, round); ++t)
        for (int j = 0; j < k; ++j)
          if (expert_of(s, src, t, j, round) == e) {
            if (src == src_q && t == t_q) return pos < cap ? static_cast<long>(pos) : -1;
            ++pos;
          }
    return -1;
  };
  auto align = [&](size_t r) { return s.alignment > 1 ? (r + s.alignment - 1) / s.alignment * s.alignment : r; };
  size_t rows = 0;
  for (int e : local) rows += align(std::min(per_expert[e], cap));
  std::vector<uint8_t> expert_tokens(std::max<size_t>(rows, 1) * H * es, 0xEE);
  std::vector<size_t> tpe(local.size() + 1, 999);
  cfxMoeHandle_t h = nullptr;
  if (cfxMoeDispatch(moe, tokens.data(), nt, idx.data(), w.data(), expert_tokens.data(), rows, tpe.data(), &h) != cfxSuccess)
    return std::string("dispatch: ") + cfxGetLastError(comm);
  std::vector<size_t> offsets(local.size());
  cfxMoeBlockOffsets(h, offsets.data());
  size_t expected_drop = 0;
  size_t block = 0;
  for (size_t li = 0; li < local.size(); ++li) {
    const int e = local[li];
    if (tpe[li] != std::min(per_expert[e], cap)) return "tokens_per_expert[" + std::to_string(li) + "] = " + std::to_string(tpe[li]);
    if (offsets[li] != block) return "block offset of expert " + std::to_string(e);
    expected_drop += per_expert[e] - tpe[li];
    size_t pos = 0;
    for (int src = 0; src < n; ++src)
      for (size_t t = 0; t < tokens_of(src, round); ++t)
        for (int j = 0; j < k; ++j) {
          if (expert_of(s, src, t, j, round) != e) continue;
          if (pos < tpe[li]) {
            for (size_t i = 0; i < H; ++i) {
              std::vector<uint8_t> one(es);
              put(one, 0, token_value(src, t, i), s.dtype);
              if (std::memcmp(expert_tokens.data() + ((block + pos) * H + i) * es, one.data(), es) != 0)
                return "expert " + std::to_string(e) + " row " + std::to_string(pos) + " holds the wrong token";
            }
          }
          ++pos;
        }
    block += align(tpe[li]);
  }
  size_t dropped = 0;
  cfxMoeDropped(h, &dropped);
  if (dropped != expected_drop) return "dropped " + std::to_string(dropped) + ", expected " + std::to_string(expected_drop);
  // The experts compute; combine brings the weighted sum back.
  std::vector<uint8_t> expert_out(expert_tokens.size());
  for (size_t li = 0, b = 0; li < local.size(); b += align(tpe[li]), ++li)
    for (size_t r = 0; r < tpe[li]; ++r)
      for (size_t i = 0; i < H; ++i)
        put(expert_out, (b + r) * H + i, expert_fn(local[li], get(expert_tokens, (b + r) * H + i, s.dtype)), s.dtype);
  std::vector<uint8_t> out(std::max<size_t>(nt, 1) * H * es), rows_back(std::max<size_t>(nt * k, 1) * H * es),
      unweighted(out.size());
  if (cfxMoeCombine(moe, h, expert_out.data(), out.data()) != cfxSuccess) return std::string("combine: ") + cfxGetLastError(comm);
  if (cfxMoeGatherRows(moe, h, expert_out.data(), rows_back.data()) != cfxSuccess) return std::string("gather rows: ") + cfxGetLastError(comm);
  if (cfxMoeCombineWeighted(moe, h, expert_out.data(), nullptr, unweighted.data()) != cfxSuccess)
    return std::string("combine weighted: ") + cfxGetLastError(comm);
  for (size_t t = 0; t < nt; ++t)
    for (size_t i = 0; i < H; ++i) {
      float acc = 0, acc1 = 0;
      for (int j = 0; j < k; ++j) {
        const int e = idx[t * k + j];
        const bool kept = kept_index(e, rank, t) >= 0;
        std::vector<uint8_t> in(es), y(es);
        put(in, 0, token_value(rank, t, i), s.dtype);
        put(y, 0, expert_fn(e, get(in, 0, s.dtype)), s.dtype);
        const float row = kept ? get(y, 0, s.dtype) : 0.0f;
        acc = std::fma(w[t * k + j], row, acc);
        acc1 = std::fma(1.0f, row, acc1);
        if (get(rows_back, (t * k + j) * H + i, s.dtype) != row) return "gathered row of token " + std::to_string(t);
      }
      std::vector<uint8_t> want(es), want1(es);
      put(want, 0, acc, s.dtype);
      put(want1, 0, acc1, s.dtype);
      if (std::memcmp(out.data() + (t * H + i) * es, want.data(), es) != 0)
        return "combine of token " + std::to_string(t) + " element " + std::to_string(i) + ": " +
               std::to_string(get(out, t * H + i, s.dtype)) + " against " + std::to_string(acc);
      if (std::memcmp(unweighted.data() + (t * H + i) * es, want1.data(), es) != 0) return "unweighted combine of token " + std::to_string(t);
    }
  // Replay with new rows, scaled by the weights (combine's backward).
  std::vector<uint8_t> grads = tokens;
  for (size_t v = 0; v < nt * H; ++v) put(grads, v, get(tokens, v, s.dtype) * 2.0f, s.dtype);
  std::vector<uint8_t> replayed(expert_tokens.size(), 0);
  if (cfxMoeDispatchReplay(moe, h, grads.data(), replayed.data(), 1) != cfxSuccess)
    return std::string("replay: ") + cfxGetLastError(comm);
  for (size_t li = 0, b = 0; li < local.size(); b += align(tpe[li]), ++li) {
    size_t pos = 0;
    for (int src = 0; src < n; ++src)
      for (size_t t = 0; t < tokens_of(src, round); ++t)
        for (int j = 0; j < k; ++j) {
          if (expert_of(s, src, t, j, round) != local[li]) continue;
          if (pos < tpe[li]) {
            std::vector<uint8_t> g(es), want(es);
            put(g, 0, token_value(src, t, 0) * 2.0f, s.dtype);
            put(want, 0, weight_of(src, t, j) * get(g, 0, s.dtype), s.dtype);
            if (std::memcmp(replayed.data() + (b + pos) * H * es, want.data(), es) != 0)
              return "replayed row " + std::to_string(pos) + " of expert " + std::to_string(local[li]);
          }
          ++pos;
        }
  }
  cfxMoeHandleFree(h);
  return "";
}

cfxMoeConfig_t config_of(const MoeSetup& s) {
  cfxMoeConfig_t c{};
  c.size = sizeof c;
  c.num_experts = s.experts;
  c.top_k = s.top_k;
  c.hidden = s.hidden;
  c.datatype = s.dtype;
  c.max_tokens_per_rank = 64;
  c.capacity_factor = s.capacity_factor;
  c.expert_alignment = s.alignment;
  return c;
}

class MoeLayer : public ::testing::TestWithParam<MoeSetup> {};

// Four rounds of dispatch, combine and their variants against the reference.
void expect_rounds_match(const MoeSetup& s, RunOptions opts) {
  auto body = [s](cfxComm_t comm, int rank, int) -> std::string {
    cfxMoeConfig_t c = config_of(s);
    cfxMoe_t moe = nullptr;
    if (cfxMoeCreate(&moe, &c, comm) != cfxSuccess) return std::string("create: ") + cfxGetLastError(comm);
    std::string err;
    for (int round = 0; round < 4 && err.empty(); ++round) err = run_round(comm, moe, s, rank, round);
    cfxMoeDestroy(moe);
    return err;
  };
  EXPECT_EQ(summarize(run_ranks(s.nranks, body, opts)), "");
}

// On one host rows are placed one-sided by default.
TEST_P(MoeLayer, MatchesTheReference) {
  RunOptions opts;
  opts.env = {{"CONFLUX_TIMEOUT", "60"}, {"CONFLUX_CHUNK_SIZE", "256"}};
  expect_rounds_match(GetParam(), opts);
}

// The message path, which multi-host communicators take, on the same layouts.
TEST_P(MoeLayer, MatchesTheReferenceByMessages) {
  RunOptions opts;
  opts.env = {{"CONFLUX_TIMEOUT", "60"}, {"CONFLUX_CHUNK_SIZE", "256"}, {"CONFLUX_MOE_PLACED", "0"}};
  expect_rounds_match(GetParam(), opts);
}

std::string setup_name(const ::testing::TestParamInfo<MoeSetup>& info) {
  const MoeSetup& s = info.param;
  const char* routing[] = {"uniform", "hot", "skewed"};
  return std::to_string(s.nranks) + "ranks_" + std::to_string(s.experts) + "x" + std::to_string(s.top_k) + "_" +
         (s.dtype == cfxFloat32 ? "f32" : s.dtype == cfxBfloat16 ? "bf16" : "f16") + "_" + routing[static_cast<int>(s.routing)] +
         (s.capacity_factor > 0 ? "_capped" : "") + (s.alignment > 1 ? "_aligned" : "");
}

INSTANTIATE_TEST_SUITE_P(
    Layouts, MoeLayer,
    ::testing::Values(MoeSetup{1, 4, 2, 5, cfxFloat32}, MoeSetup{2, 8, 2, 5, cfxFloat32}, MoeSetup{2, 8, 1, 3, cfxBfloat16},
                      MoeSetup{3, 6, 3, 4, cfxBfloat16, Routing::kSkewed}, MoeSetup{4, 8, 4, 7, cfxFloat32, Routing::kHotExpert},
                      MoeSetup{4, 8, 2, 5, cfxBfloat16, Routing::kUniform, 0, 4},
                      MoeSetup{4, 8, 2, 5, cfxFloat16, Routing::kHotExpert, 1.0},
                      MoeSetup{5, 10, 2, 3, cfxFloat32, Routing::kSkewed, 0.5}),
    setup_name);

TEST(MoeLayer, TcpTransportToo) {
  RunOptions opts;
  opts.env = {{"CONFLUX_TRANSPORT", "tcp"}, {"CONFLUX_TIMEOUT", "60"}};
  MoeSetup s{3, 6, 2, 4, cfxBfloat16, Routing::kHotExpert};
  auto body = [s](cfxComm_t comm, int rank, int) -> std::string {
    cfxMoeConfig_t c = config_of(s);
    cfxMoe_t moe = nullptr;
    if (cfxMoeCreate(&moe, &c, comm) != cfxSuccess) return std::string("create: ") + cfxGetLastError(comm);
    std::string err;
    for (int round = 0; round < 3 && err.empty(); ++round) err = run_round(comm, moe, s, rank, round);
    cfxMoeDestroy(moe);
    return err;
  };
  EXPECT_EQ(summarize(run_ranks(s.nranks, body, opts)), "");
}

// The layer's own expert rows are reserved once for the most a rank can
// receive: dispatches whose sizes grow from call to call (a hot expert
// gathering more tokens) find them where the first one left them, on the
// placed path and on the message path. A buffer that moved would be faulted
// in again, page by page, by its owner and by every peer writing into it.
TEST(MoeLayer, ExpertRowsStayInPlaceAsDispatchesGrow) {
  for (const char* placed : {"1", "0"}) {
    RunOptions opts;
    opts.env = {{"CONFLUX_TIMEOUT", "60"}, {"CONFLUX_MOE_PLACED", placed}};
    const MoeSetup s{3, 6, 2, 16, cfxBfloat16};
    auto body = [s](cfxComm_t comm, int rank, int) -> std::string {
      cfxMoeConfig_t c = config_of(s);
      cfxMoe_t moe = nullptr;
      if (cfxMoeCreate(&moe, &c, comm) != cfxSuccess) return std::string("create: ") + cfxGetLastError(comm);
      std::string err;
      void* first = nullptr;
      size_t last_rows = 0;
      for (size_t nt : {size_t{1}, size_t{8}, size_t{40}, size_t{64}}) {
        // Every token to experts 0 and 1, both on rank 0: its rows grow
        // from 3 to 384 (3 ranks x 64 tokens x 2), the most it can get.
        const size_t k = static_cast<size_t>(s.top_k);
        std::vector<uint8_t> tokens(nt * s.hidden * 2, static_cast<uint8_t>(rank + 1));
        std::vector<int32_t> idx(nt * k);
        std::vector<float> w(nt * k, 0.5f);
        for (size_t p = 0; p < idx.size(); ++p) idx[p] = static_cast<int32_t>(p % k);
        cfxMoeHandle_t h = nullptr;
        if (cfxMoeDispatch(moe, tokens.data(), nt, idx.data(), w.data(), nullptr, 0, nullptr, &h) != cfxSuccess) {
          err = std::string("dispatch: ") + cfxGetLastError(comm);
          break;
        }
        void* rows = nullptr;
        size_t nrows = 0;
        cfxMoeExpertTokens(h, &rows, &nrows);
        cfxMoeHandleFree(h);
        if (rank != 0 || !err.empty()) continue;  // every rank dispatches every round
        if (nrows != 3 * nt * k) err = std::to_string(nt) + " tokens each: " + std::to_string(nrows) + " rows on rank 0";
        else if (first == nullptr) first = rows;
        else if (rows != first)
          err = "the expert rows moved when they grew from " + std::to_string(last_rows) + " to " +
                std::to_string(nrows) + " rows";
        last_rows = nrows;
      }
      cfxMoeDestroy(moe);
      return err;
    };
    EXPECT_EQ(summarize(run_ranks(s.nranks, body, opts)), "") << "CONFLUX_MOE_PLACED=" << placed;
  }
}

// Ranks split into emulated hosts (CONFLUX_HOSTID: rank / per_host), so
// that dispatch goes through one proxy per host.
struct HostsSetup {
  MoeSetup moe;
  int per_host;
};

cfxComm_t init_on_host(int rank, int n, int per_host) {
  setenv("CONFLUX_HOSTID", ("moehost" + std::to_string(rank / per_host)).c_str(), 1);
  conflux::reload_config();
  cfxComm_t comm = nullptr;
  return cfxCommInitRank(&comm, n, current_unique_id(), rank) == cfxSuccess ? comm : nullptr;
}

class MoeAcrossHosts : public ::testing::TestWithParam<HostsSetup> {};

TEST_P(MoeAcrossHosts, MatchesTheReference) {
  const HostsSetup hs = GetParam();
  RunOptions opts;
  opts.init_comm = false;
  opts.env = {{"CONFLUX_TIMEOUT", "60"}, {"CONFLUX_CHUNK_SIZE", "256"}};
  auto body = [hs](cfxComm_t, int rank, int n) -> std::string {
    cfxComm_t comm = init_on_host(rank, n, hs.per_host);
    if (comm == nullptr) return "init failed";
    cfxMoeConfig_t c = config_of(hs.moe);
    cfxMoe_t moe = nullptr;
    std::string err;
    if (cfxMoeCreate(&moe, &c, comm) != cfxSuccess) err = std::string("create: ") + cfxGetLastError(comm);
    for (int round = 0; round < 4 && err.empty(); ++round) err = run_round(comm, moe, hs.moe, rank, round);
    cfxMoeDestroy(moe);
    cfxCommDestroy(comm);
    return err;
  };
  EXPECT_EQ(summarize(run_ranks(hs.moe.nranks, body, opts)), "");
}

std::string hosts_name(const ::testing::TestParamInfo<HostsSetup>& info) {
  return setup_name({info.param.moe, info.index}) + "_" + std::to_string(info.param.per_host) + "perhost";
}

INSTANTIATE_TEST_SUITE_P(
    Layouts, MoeAcrossHosts,
    ::testing::Values(HostsSetup{MoeSetup{4, 8, 4, 5, cfxFloat32}, 2},
                      HostsSetup{MoeSetup{5, 10, 3, 3, cfxBfloat16, Routing::kSkewed}, 2},  // hosts of 2, 2 and 1
                      HostsSetup{MoeSetup{6, 12, 4, 4, cfxFloat32, Routing::kHotExpert, 1.0}, 3},
                      HostsSetup{MoeSetup{6, 6, 2, 7, cfxBfloat16, Routing::kUniform, 0, 4}, 2}),
    hosts_name);

// The same routing through a proxy per host and flat: the same expert
// blocks, and fewer bytes over the network, counted by the library.
TEST(MoeAcrossHosts, ProxiesSendFewerBytesOverTheNetwork) {
  RunOptions opts;
  opts.init_comm = false;
  opts.env = {{"CONFLUX_TIMEOUT", "60"}};
  const MoeSetup s{4, 16, 6, 64, cfxBfloat16};
  auto body = [s](cfxComm_t, int rank, int n) -> std::string {
    cfxComm_t comm = init_on_host(rank, n, 2);
    if (comm == nullptr) return "init failed";
    const size_t nt = tokens_of(rank, 1), k = static_cast<size_t>(s.top_k), row = s.hidden * 2;
    std::vector<uint8_t> tokens = tokens_for(s, rank, 1);
    std::vector<int32_t> idx(nt * k);
    std::vector<float> w(nt * k, 1.0f);
    for (size_t t = 0; t < nt; ++t)
      for (size_t j = 0; j < k; ++j) idx[t * k + j] = expert_of(s, rank, t, static_cast<int>(j), 1);
    size_t net[2] = {0, 0};
    std::vector<uint8_t> blocks[2];
    for (int hier = 0; hier < 2; ++hier) {
      setenv("CONFLUX_MOE_HIER", hier ? "1" : "0", 1);
      conflux::reload_config();
      cfxMoeConfig_t c = config_of(s);
      cfxMoe_t moe = nullptr;
      if (cfxMoeCreate(&moe, &c, comm) != cfxSuccess) return std::string("create: ") + cfxGetLastError(comm);
      std::vector<size_t> tpe(4);
      cfxMoeHandle_t h = nullptr;
      if (cfxMoeDispatch(moe, tokens.data(), nt, idx.data(), w.data(), nullptr, 0, tpe.data(), &h) != cfxSuccess)
        return std::string("dispatch: ") + cfxGetLastError(comm);
      void* rows = nullptr;
      size_t nrows = 0;
      cfxMoeExpertTokens(h, &rows, &nrows);
      blocks[hier].assign(static_cast<uint8_t*>(rows), static_cast<uint8_t*>(rows) + nrows * row);
      cfxMoeNetworkBytes(h, &net[hier]);
      cfxMoeHandleFree(h);
      cfxMoeDestroy(moe);
    }
    cfxCommDestroy(comm);
    if (blocks[0] != blocks[1]) return "the two routes filled different expert blocks";
    if (nt > 0 && !(net[1] < net[0]))
      return "through proxies " + std::to_string(net[1]) + " bytes over the network, flat " + std::to_string(net[0]);
    return "";
  };
  EXPECT_EQ(summarize(run_ranks(s.nranks, body, opts)), "");
}

// Combine with host partial sums (1: float partials, 2: in the datatype)
// against the j-order sum of the same handle (cfxMoeCombineWeighted with
// the handle's weights returns every row): equal within the rounding the
// grouping allows, with fewer bytes over the network.
struct PartialSetup {
  MoeSetup moe;
  int per_host;
  int mode;
};

class MoeHostPartialSums : public ::testing::TestWithParam<PartialSetup> {};

TEST_P(MoeHostPartialSums, AgreeWithTheJOrderSumAndSendFewerBytes) {
  const PartialSetup ps = GetParam();
  RunOptions opts;
  opts.init_comm = false;
  opts.env = {{"CONFLUX_TIMEOUT", "60"}, {"CONFLUX_CHUNK_SIZE", "256"}};
  auto body = [ps](cfxComm_t, int rank, int n) -> std::string {
    const MoeSetup& s = ps.moe;
    cfxComm_t comm = init_on_host(rank, n, ps.per_host);
    if (comm == nullptr) return "init failed";
    cfxMoeConfig_t c = config_of(s);
    c.host_partial_sums = ps.mode;
    cfxMoe_t moe = nullptr;
    if (cfxMoeCreate(&moe, &c, comm) != cfxSuccess) return std::string("create: ") + cfxGetLastError(comm);
    std::string err;
    const size_t es = elem_size(s.dtype), H = s.hidden, k = static_cast<size_t>(s.top_k);
    for (int round = 0; round < 3 && err.empty(); ++round) {
      const size_t nt = tokens_of(rank, round);
      std::vector<uint8_t> tokens = tokens_for(s, rank, round);
      std::vector<int32_t> idx(std::max<size_t>(nt * k, 1));
      std::vector<float> w(idx.size());
      for (size_t t = 0; t < nt; ++t)
        for (size_t j = 0; j < k; ++j) {
          idx[t * k + j] = expert_of(s, rank, t, static_cast<int>(j), round);
          w[t * k + j] = weight_of(rank, t, static_cast<int>(j));
        }
      cfxMoeHandle_t h = nullptr;
      if (cfxMoeDispatch(moe, tokens.data(), nt, idx.data(), w.data(), nullptr, 0, nullptr, &h) != cfxSuccess)
        return std::string("dispatch: ") + cfxGetLastError(comm);
      void* rows = nullptr;
      size_t nrows = 0;
      cfxMoeExpertTokens(h, &rows, &nrows);
      std::vector<int> local(static_cast<size_t>(s.experts));
      int nlocal = 0;
      cfxMoeLocalExperts(moe, local.data(), &nlocal);
      std::vector<size_t> offsets(static_cast<size_t>(nlocal) + 1, nrows);
      if (nlocal > 0) cfxMoeBlockOffsets(h, offsets.data());
      std::vector<uint8_t> in(static_cast<uint8_t*>(rows), static_cast<uint8_t*>(rows) + nrows * H * es), out(in.size());
      for (int li = 0; li < nlocal; ++li)
        for (size_t r = offsets[li]; r < offsets[li + 1]; ++r)
          for (size_t i = 0; i < H; ++i) put(out, r * H + i, expert_fn(local[li], get(in, r * H + i, s.dtype)), s.dtype);
      std::vector<uint8_t> partial(std::max<size_t>(nt, 1) * H * es), exact(partial.size());
      size_t net0 = 0, net1 = 0, net2 = 0;
      cfxMoeNetworkBytes(h, &net0);
      if (cfxMoeCombine(moe, h, out.data(), partial.data()) != cfxSuccess) return std::string("combine: ") + cfxGetLastError(comm);
      cfxMoeNetworkBytes(h, &net1);
      if (cfxMoeCombineWeighted(moe, h, out.data(), w.data(), exact.data()) != cfxSuccess)
        return std::string("combine weighted: ") + cfxGetLastError(comm);
      cfxMoeNetworkBytes(h, &net2);
      cfxMoeHandleFree(h);
      // bf16 or fp16: a last-bit difference after the final rounding, plus one
      // rounding per host for partials in the datatype; float: float rounding.
      const double tol = s.dtype == cfxFloat32 ? 1e-5 : ps.mode == 1 ? 1.0 / 128 : 1.0 / 32;
      for (size_t v = 0; v < nt * H; ++v) {
        const double a = get(partial, v, s.dtype), b = get(exact, v, s.dtype);
        if (std::fabs(a - b) > tol * std::fabs(b) + 1e-6)
          return "round " + std::to_string(round) + " token " + std::to_string(v / H) + " element " +
                 std::to_string(v % H) + ": " + std::to_string(a) + " against the j-order " + std::to_string(b);
      }
      // All ranks together (a proxy sends the partials of several sources'
      // tokens, so one rank alone may send more).
      uint64_t mine[2] = {net1 - net0, net2 - net1}, all[2];
      if (cfxAllReduce(mine, all, 2, cfxUint64, cfxSum, comm) != cfxSuccess) return "allreduce failed";
      if (!(all[0] < all[1]))
        return "partial sums sent " + std::to_string(all[0]) + " bytes over the network, the rows " +
               std::to_string(all[1]);
    }
    cfxMoeDestroy(moe);
    cfxCommDestroy(comm);
    return err;
  };
  EXPECT_EQ(summarize(run_ranks(ps.moe.nranks, body, opts)), "");
}

std::string partial_name(const ::testing::TestParamInfo<PartialSetup>& info) {
  return setup_name({info.param.moe, info.index}) + "_" + std::to_string(info.param.per_host) + "perhost_mode" +
         std::to_string(info.param.mode);
}

INSTANTIATE_TEST_SUITE_P(
    Layouts, MoeHostPartialSums,
    ::testing::Values(PartialSetup{MoeSetup{4, 16, 6, 5, cfxBfloat16}, 2, 1},
                      PartialSetup{MoeSetup{4, 16, 6, 5, cfxBfloat16}, 2, 2},
                      PartialSetup{MoeSetup{6, 12, 5, 3, cfxFloat32, Routing::kHotExpert, 1.0}, 3, 2},
                      PartialSetup{MoeSetup{5, 20, 8, 4, cfxFloat16, Routing::kSkewed}, 2, 1},
                      PartialSetup{MoeSetup{3, 6, 4, 4, cfxBfloat16}, 1, 2}),
    partial_name);

TEST(MoeBadInput, ConfigsThatDifferAreNamedAtCreate) {
  auto body = [](cfxComm_t comm, int rank, int) -> std::string {
    MoeSetup s{3, 6, rank == 2 ? 3 : 2, 4};
    cfxMoeConfig_t c = config_of(s);
    cfxMoe_t moe = nullptr;
    const cfxResult_t r = cfxMoeCreate(&moe, &c, comm);
    const std::string err = cfxGetLastError(comm);
    if (r != cfxInvalidUsage || err.find("rank 2's top_k differs") == std::string::npos)
      return "expected a mismatch naming rank 2's top_k, got " + std::string(cfxGetErrorString(r)) + ": " + err;
    return moe == nullptr ? "" : "a moe was made";
  };
  EXPECT_EQ(summarize(run_ranks(3, body, {})), "");
}

TEST(MoeBadInput, RanksThatDisagreeOnTheRowExchangeAreNamedAtCreate) {
  // Rank 1 asks for the message path, the others place rows one-sided:
  // they would wait on each other's different steps.
  RunOptions opts;
  opts.init_comm = false;
  auto body = [](cfxComm_t, int rank, int n) -> std::string {
    setenv("CONFLUX_MOE_PLACED", rank == 1 ? "0" : "1", 1);
    conflux::reload_config();
    cfxComm_t comm = nullptr;
    if (cfxCommInitRank(&comm, n, current_unique_id(), rank) != cfxSuccess) return "init failed";
    cfxMoeConfig_t c = config_of(MoeSetup{3, 6, 2, 4});
    cfxMoe_t moe = nullptr;
    const cfxResult_t r = cfxMoeCreate(&moe, &c, comm);
    const std::string err = cfxGetLastError(comm);
    cfxCommDestroy(comm);
    if (r != cfxInvalidUsage || err.find("rank 1's row exchange") == std::string::npos)
      return "expected a mismatch naming rank 1's row exchange, got " + std::string(cfxGetErrorString(r)) + ": " + err;
    return moe == nullptr ? "" : "a moe was made";
  };
  EXPECT_EQ(summarize(run_ranks(3, body, opts)), "");
}

TEST(MoeBadInput, BadConfigsAreRefused) {
  auto body = [](cfxComm_t comm, int, int) -> std::string {
    cfxMoe_t moe = nullptr;
    cfxMoeConfig_t c = config_of(MoeSetup{2, 8, 2, 4});
    c.top_k = 9;
    if (cfxMoeCreate(&moe, &c, comm) != cfxInvalidArgument) return "top_k > num_experts accepted";
    c = config_of(MoeSetup{2, 7, 2, 4});
    if (cfxMoeCreate(&moe, &c, comm) != cfxInvalidArgument) return "7 experts blocked over 2 ranks accepted";
    c = config_of(MoeSetup{2, 8, 2, 4});
    c.datatype = cfxInt32;
    if (cfxMoeCreate(&moe, &c, comm) != cfxInvalidArgument) return "an int32 MoE accepted";
    c = config_of(MoeSetup{2, 8, 2, 4});
    const int bad_map[8] = {0, 1, 0, 1, 0, 1, 0, 5};
    c.expert_to_rank = bad_map;
    if (cfxMoeCreate(&moe, &c, comm) != cfxInvalidArgument) return "an expert on rank 5 accepted";
    c = config_of(MoeSetup{2, 8, 2, 4});
    c.size = 8;
    if (cfxMoeCreate(&moe, &c, comm) != cfxInvalidArgument) return "a truncated config accepted";
    return "";
  };
  EXPECT_EQ(summarize(run_ranks(2, body, {})), "");
}

// One rank routes a token to an expert that does not exist, or dispatches
// more tokens than configured, or an expert block overflows: every rank
// fails alike, naming the culprit, and the layer stays usable.
TEST(MoeBadInput, DispatchErrorsFailOnEveryRankNamingTheCulprit) {
  RunOptions opts;
  opts.env = {{"CONFLUX_TIMEOUT", "30"}};
  auto body = [](cfxComm_t comm, int rank, int n) -> std::string {
    MoeSetup s{n, 8, 2, 4};
    cfxMoeConfig_t c = config_of(s);
    c.max_tokens_per_rank = 10;
    cfxMoe_t moe = nullptr;
    if (cfxMoeCreate(&moe, &c, comm) != cfxSuccess) return cfxGetLastError(comm);
    std::vector<float> tokens(20 * 4, 1.0f), w(40, 0.5f), out(64 * 4);
    std::vector<int32_t> idx(40);
    for (size_t i = 0; i < idx.size(); ++i) idx[i] = static_cast<int32_t>(i % 8);
    std::vector<size_t> tpe(8);
    cfxMoeHandle_t h = nullptr;
    auto expect = [&](size_t nt, size_t cap, const std::string& needle) -> std::string {
      const cfxResult_t r = cfxMoeDispatch(moe, tokens.data(), nt, idx.data(), w.data(), out.data(), cap, tpe.data(), &h);
      const std::string err = cfxGetLastError(comm);
      if (r == cfxSuccess || err.find(needle) == std::string::npos) return "expected an error with \"" + needle + "\", got: " + err;
      return "";
    };
    if (rank == 1) idx[5] = 8;
    std::string e = expect(4, 64, "rank 1's token 2 routes to expert 8");
    if (!e.empty()) return e;
    idx[5] = 5;
    if (!(e = expect(rank == 0 ? 12 : 4, 64, "rank 0 dispatches 12 tokens")).empty()) return e;
    if (!(e = expect(4, rank == 1 ? 1 : 64, "rank 1's experts receive")).empty()) return e;
    // Still usable: every rank with no tokens at all.
    if (cfxMoeDispatch(moe, tokens.data(), 0, idx.data(), w.data(), out.data(), 64, tpe.data(), &h) != cfxSuccess)
      return std::string("an empty dispatch failed: ") + cfxGetLastError(comm);
    for (int li = 0; li < 8 / n; ++li)
      if (tpe[li] != 0) return "an empty dispatch delivered rows";
    cfxMoeHandleFree(h);
    cfxMoeDestroy(moe);
    return "";
  };
  EXPECT_EQ(summarize(run_ranks(2, body, opts)), "");
}

TEST(MoeBadInput, EveryTokenToOneExpert) {
  auto body = [](cfxComm_t comm, int rank, int n) -> std::string {
    MoeSetup s{n, 4, 1, 3};
    cfxMoeConfig_t c = config_of(s);
    cfxMoe_t moe = nullptr;
    if (cfxMoeCreate(&moe, &c, comm) != cfxSuccess) return cfxGetLastError(comm);
    const size_t nt = 20;
    std::vector<float> tokens(nt * 3), w(nt, 1.0f), out(n * nt * 3), back(nt * 3);
    for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = static_cast<float>(rank * 1000 + static_cast<int>(i));
    std::vector<int32_t> idx(nt, 2);  // expert 2 lives on rank 1
    std::vector<size_t> tpe(4);
    cfxMoeHandle_t h = nullptr;
    if (cfxMoeDispatch(moe, tokens.data(), nt, idx.data(), w.data(), out.data(), n * nt, tpe.data(), &h) != cfxSuccess)
      return cfxGetLastError(comm);
    if (rank == 1 && tpe[0] != static_cast<size_t>(n) * nt) return "expert 2 did not get every token";
    if (cfxMoeCombine(moe, h, out.data(), back.data()) != cfxSuccess) return cfxGetLastError(comm);
    for (size_t i = 0; i < back.size(); ++i)
      if (back[i] != tokens[i]) return "the identity expert did not return the tokens";
    cfxMoeHandleFree(h);
    cfxMoeDestroy(moe);
    return "";
  };
  EXPECT_EQ(summarize(run_ranks(2, body, {})), "");
}

TEST(MoeBadInput, ARankThatDiesMidDispatchIsNamedBySurvivors) {
  RunOptions opts;
  opts.env = {{"CONFLUX_TIMEOUT", "20"}};
  auto body = [](cfxComm_t comm, int rank, int n) -> std::string {
    MoeSetup s{n, 6, 2, 4};
    cfxMoeConfig_t c = config_of(s);
    cfxMoe_t moe = nullptr;
    if (cfxMoeCreate(&moe, &c, comm) != cfxSuccess) return cfxGetLastError(comm);
    if (rank == 2) _exit(0);
    std::vector<float> tokens(8 * 4, 1.0f), w(16, 0.5f), out(64 * 4);
    std::vector<int32_t> idx(16);
    for (size_t i = 0; i < idx.size(); ++i) idx[i] = static_cast<int32_t>(i % 6);
    std::vector<size_t> tpe(6);
    cfxMoeHandle_t h = nullptr;
    const cfxResult_t r = cfxMoeDispatch(moe, tokens.data(), 8, idx.data(), w.data(), out.data(), 64, tpe.data(), &h);
    const std::string err = cfxGetLastError(comm);
    if (r == cfxSuccess || err.find("rank 2") == std::string::npos) return "expected rank 2 to be named: " + err;
    return "";
  };
  auto results = run_ranks(3, body, opts);
  ASSERT_EQ(results.size(), 3u);
  EXPECT_EQ(results[0].message, "");
  EXPECT_EQ(results[1].message, "");
}

}  // namespace
}  // namespace conflux::test
