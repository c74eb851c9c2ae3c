// `conflux perf moe`: times the round trip of a MoE layer (tokens in their
// order -> expert-major blocks -> combined back: the count exchange and the
// permutations included), per iteration (all ranks starting it together)
// the slowest rank's time, median and p99, with the bytes sent over links
// and the receive memory committed.
#include "perf_moe.h"

#include "core/check_data.h"
#include "moe_routing.h"

#include <conflux/conflux.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace conflux::tools {
namespace {

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  size_t at = 0;
  while (at <= s.size()) {
    const size_t end = std::min(s.find(',', at), s.size());
    if (end > at) out.push_back(s.substr(at, end - at));
    at = end + 1;
  }
  return out;
}

double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t i = std::min(v.size() - 1, static_cast<size_t>(std::lround(p * static_cast<double>(v.size() - 1))));
  return v[i];
}

// Elements of the combined tokens that differ from the contract's sum. The
// experts are the identity, so token t comes back as the sum over j, in j
// order and in float, of w[t*k+j] times its own row, rounded once; an
// element is right if it matches that sum done with fused multiply-adds or
// without (the contract allows either). With host partial sums the terms
// are grouped (and, for 16-bit types, rounded) per host: then an element is
// right within `tolerance` of the sum, relative (every term of a token's sum
// has the same sign, so the grouping's error is relative to the sum).
struct RoundTrip {
  const uint8_t* tokens;  // ntokens x hidden, in
  const uint8_t* out;     // ntokens x hidden, combined
  const float* weights;   // ntokens x top_k
  size_t ntokens, hidden, top_k;
  cfxDataType_t dtype;
};

size_t count_wrong_tokens(const RoundTrip& r, double tolerance) {
  const size_t k = r.top_k;
  size_t wrong = 0;
  for (size_t tok = 0; tok < r.ntokens; ++tok)
    for (size_t i = 0; i < r.hidden; ++i) {
      const size_t at = tok * r.hidden + i;
      const auto x = static_cast<float>(check::load(r.tokens, at, r.dtype));
      float fused = 0, plain = 0;
      for (size_t j = 0; j < k; ++j) {
        fused = std::fma(r.weights[tok * k + j], x, fused);
        const float product = r.weights[tok * k + j] * x;
        plain += product;
      }
      const double got = check::load(r.out, at, r.dtype);
      if (tolerance > 0) {
        if (std::fabs(got - fused) > tolerance * std::fabs(fused)) ++wrong;
      } else if (got != check::as_type(fused, r.dtype) && got != check::as_type(plain, r.dtype)) {
        ++wrong;
      }
    }
  return wrong;
}

// A caller's buffer for the expert rows: from the heap, or from cfxMemAlloc.
class ExpertBuffer {
 public:
  ExpertBuffer(const ExpertBuffer&) = delete;
  ExpertBuffer& operator=(const ExpertBuffer&) = delete;
  ExpertBuffer(size_t bytes, bool memalloc) : memalloc_(memalloc) {
    if (bytes == 0) return;
    if (!memalloc) {
      heap_.resize(bytes);
      at_ = heap_.data();
    } else if (cfxMemAlloc(&at_, bytes) != cfxSuccess) {
      at_ = nullptr;
    }
  }
  ~ExpertBuffer() {
    if (memalloc_ && at_ != nullptr) cfxMemFree(at_);
  }
  void* data() const { return at_; }

 private:
  bool memalloc_;
  std::vector<uint8_t> heap_;
  void* at_ = nullptr;
};

struct Case {
  size_t tokens, hidden;
  int top_k;
  std::string routing;
};

}  // namespace

int run_moe_perf(const MoePerfOptions& o) {
  cfxDataType_t dtype = o.dtype == "float" ? cfxFloat32 : o.dtype == "half" ? cfxFloat16 : cfxBfloat16;
  if (o.dtype != "float" && o.dtype != "half" && o.dtype != "bfloat16") {
    std::fprintf(stderr, "conflux perf moe: -d must be float, half or bfloat16\n");
    return 2;
  }
  std::vector<Case> cases;
  for (const std::string& r : split(o.routing)) {
    moe_routing check{};
    if (moe_parse_routing(r.c_str(), &check) != 0) {
      std::fprintf(stderr, "conflux perf moe: unknown routing '%s' (uniform, zipfS, half)\n", r.c_str());
      return 2;
    }
    for (const std::string& h : split(o.hidden))
      for (const std::string& k : split(o.topk))
        for (const std::string& t : split(o.tokens))
          cases.push_back({std::strtoull(t.c_str(), nullptr, 10), std::strtoull(h.c_str(), nullptr, 10), std::atoi(k.c_str()), r});
  }
  for (const Case& c : cases)
    if (c.hidden == 0 || c.top_k < 1 || c.top_k > o.experts) {
      std::fprintf(stderr, "conflux perf moe: bad hidden or top-k\n");
      return 2;
    }
  cfxComm_t comm = nullptr;
  if (cfxCommInitFromEnv(&comm) != cfxSuccess) {
    std::fprintf(stderr, "conflux perf moe: %s\n", cfxGetLastError(nullptr));
    return 1;
  }
  int rank = 0, n = 1;
  cfxCommUserRank(comm, &rank);
  cfxCommCount(comm, &n);
  if (rank == 0) {
    std::printf("# conflux perf moe: %d ranks, %d experts, %s, %d iterations (+%d warm-up), slowest rank per iteration%s\n",
                n, o.experts, o.dtype.c_str(), o.iters, o.warmup,
                o.empty_ranks > 0 ? (", the last " + std::to_string(o.empty_ranks) + " rank(s) without tokens").c_str() : "");
    std::printf("# %8s %7s %5s %10s %11s %11s %13s %11s %12s %7s\n", "tokens", "hidden", "topk", "routing",
                "median(us)", "p99(us)", "wire(MiB/it)", "commit/recv", "net(MiB/it)", "#wrong");
  }
  const size_t elem = cfxTypeSize(dtype);
  std::vector<int> placement(static_cast<size_t>(o.experts));
  for (int e = 0; e < o.experts; ++e) placement[e] = static_cast<int>(static_cast<int64_t>(e) * n / o.experts);
  // Host partial sums round differently from the j-order sum: each partial
  // once more in the datatype (16-bit: half an ulp, 2^-8 or 2^-11 relative),
  // then the token's sum; twice that is the bound the check allows.
  const double tolerance = o.host_partial_sums == 0 ? 0
                           : dtype == cfxBfloat16    ? std::ldexp(1.0, -6)
                           : dtype == cfxFloat16     ? std::ldexp(1.0, -9)
                                                     : std::ldexp(1.0, -20);
  int status = 0;
  for (const Case& c : cases) {
    cfxMoeConfig_t cfg{};
    cfg.size = sizeof cfg;
    cfg.num_experts = o.experts;
    cfg.top_k = c.top_k;
    cfg.hidden = c.hidden;
    cfg.datatype = dtype;
    cfg.max_tokens_per_rank = c.tokens;
    cfg.expert_to_rank = placement.data();
    cfg.host_partial_sums = o.host_partial_sums;
    cfxMoe_t moe = nullptr;
    if (cfxMoeCreate(&moe, &cfg, comm) != cfxSuccess) {
      std::fprintf(stderr, "conflux perf moe: rank %d: %s\n", rank, cfxGetLastError(comm));
      status = 1;
      break;
    }
    moe_routing routing{};
    moe_parse_routing(c.routing.c_str(), &routing);
    const size_t nt = rank >= n - o.empty_ranks ? 0 : c.tokens, k = static_cast<size_t>(c.top_k);
    std::vector<uint8_t> tokens(std::max<size_t>(nt, 1) * c.hidden * elem), out(tokens.size());
    for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = static_cast<uint8_t>(i * 131 + static_cast<size_t>(rank));
    if (dtype != cfxFloat32)
      for (size_t i = 1; i < tokens.size(); i += 2) tokens[i] = static_cast<uint8_t>(0x3c + (i & 1));  // finite 16-bit values
    else
      for (size_t i = 3; i < tokens.size(); i += 4) tokens[i] = 0x3f;
    // The worst case: every rank's every pair on this rank's experts.
    const size_t capacity_rows = o.expert_buffers == "owned" ? 0 : static_cast<size_t>(n) * c.tokens * k;
    ExpertBuffer expert_rows(capacity_rows * c.hidden * elem, o.expert_buffers == "memalloc");
    if (capacity_rows > 0 && expert_rows.data() == nullptr) {
      std::fprintf(stderr, "conflux perf moe: rank %d: cannot allocate %zu expert rows\n", rank, capacity_rows);
      status = 1;
      cfxMoeDestroy(moe);
      break;
    }
    std::vector<int32_t> idx(std::max<size_t>(nt * k, 1));
    std::vector<size_t> tokens_per_expert(static_cast<size_t>(o.experts));
    std::vector<float> w(idx.size());
    std::vector<double> cdf(static_cast<size_t>(o.experts));
    std::vector<double> times;
    size_t wire = 0, received = 0, committed = 0, network = 0, wrong = 0;
    bool failed = false;
    for (int it = 0; it < o.warmup + o.iters && !failed; ++it) {
      moe_popularity(&routing, o.experts, it, cdf.data());
      for (size_t t = 0; t < nt; ++t)
        moe_route(&routing, cdf.data(), o.experts, c.top_k, o.seed, rank, it, t, &idx[t * k], &w[t * k]);
      cfxMoeHandle_t h = nullptr;
      // Every rank starts the round trip together, as the MPI and gloo
      // drivers do: the slowest rank's time is then the round trip itself,
      // not that plus how far the ranks drifted apart in the last one.
      cfxBarrier(comm);
      const auto t0 = std::chrono::steady_clock::now();
      // The experts are the identity: the time is the layer's communication and permutations.
      failed = cfxMoeDispatch(moe, tokens.data(), nt, idx.data(), w.data(), expert_rows.data(), capacity_rows,
                              capacity_rows > 0 ? tokens_per_expert.data() : nullptr, &h) != cfxSuccess;
      void* rows = expert_rows.data();
      size_t nrows = 0;
      if (!failed && capacity_rows == 0) failed = cfxMoeExpertTokens(h, &rows, &nrows) != cfxSuccess;
      if (!failed) failed = cfxMoeCombine(moe, h, rows, out.data()) != cfxSuccess;
      const double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
      if (failed) {
        std::fprintf(stderr, "conflux perf moe: rank %d: %s\n", rank, cfxGetLastError(comm));
        break;
      }
      if (it + 1 == o.warmup + o.iters)  // the last round trip, checked outside the timed part
        wrong = count_wrong_tokens({tokens.data(), out.data(), w.data(), nt, c.hidden, k, dtype}, tolerance);
      if (it >= o.warmup) {
        times.push_back(us);
        size_t wb = 0, rb = 0, cb = 0;
        cfxMoeStats(h, &wb, &rb, &cb);
        size_t nb = 0;
        cfxMoeNetworkBytes(h, &nb);
        network += nb;
        wire += wb;
        received += rb;
        committed += cb;
      }
      cfxMoeHandleFree(h);
    }
    cfxMoeDestroy(moe);
    if (failed) {
      status = 1;
      break;
    }
    // The slowest rank's time per iteration; the bytes of all ranks.
    std::vector<double> slowest(times.size());
    cfxAllReduce(times.data(), slowest.data(), times.size(), cfxFloat64, cfxMax, comm);
    double totals[5] = {static_cast<double>(wire), static_cast<double>(received), static_cast<double>(committed),
                        static_cast<double>(network), static_cast<double>(wrong)},
           sums[5];
    cfxAllReduce(totals, sums, 5, cfxFloat64, cfxSum, comm);
    if (rank == 0)
      std::printf("  %8zu %7zu %5d %10s %11.1f %11.1f %13.3f %11.3f %12.3f %7.0f\n", c.tokens, c.hidden, c.top_k,
                  c.routing.c_str(), percentile(slowest, 0.5), percentile(slowest, 0.99), sums[0] / o.iters / (1 << 20),
                  sums[1] > 0 ? sums[2] / sums[1] : 1.0, sums[3] / o.iters / (1 << 20), sums[4]);
    std::fflush(stdout);
    if (sums[4] > 0) {
      if (rank == 0)
        std::fprintf(stderr, "conflux perf moe: %.0f combined elements differ from the weighted sum of their tokens\n",
                     sums[4]);
      status = 1;
      break;
    }
  }
  cfxCommDestroy(comm);
  return status;
}

}  // namespace conflux::tools
