// Reduction kernels against a straightforward scalar reference: every type x op, both
// kernel variants (generic and AVX2) in one process, awkward lengths, unaligned
// pointers, in-place use, reduce_many with 1..8 sources, and Avg finalisation.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#include "core/half.h"
#include "exec/reduce.h"
#include "exec/reduce_internal.h"

namespace conflux {
namespace {

// ---- reference ---------------------------------------------------------------------

struct Half {};  // tags for the 16-bit float formats (storage: uint16_t)
struct BFloat {};

template <class T> struct Ref {
  using Storage = T;
  using Acc = T;
  static Acc widen(Storage v) { return v; }
  static Storage narrow(Acc v) { return v; }
};
template <> struct Ref<Half> {
  using Storage = uint16_t;
  using Acc = float;
  static Acc widen(Storage v) { return half_to_float(v); }
  static Storage narrow(Acc v) { return float_to_half(v); }
};
template <> struct Ref<BFloat> {
  using Storage = uint16_t;
  using Acc = float;
  static Acc widen(Storage v) { return bf16_to_float(v); }
  static Storage narrow(Acc v) { return float_to_bf16(v); }
};

template <class A>
A ref_op(cfxRedOp_t op, A a, A b) {
  if constexpr (std::is_integral_v<A>) {
    // Wrap-around through 64-bit unsigned arithmetic, truncated back.
    using U = std::make_unsigned_t<A>;
    const uint64_t ua = static_cast<U>(a), ub = static_cast<U>(b);
    switch (op) {
      case cfxSum: case cfxAvg: return static_cast<A>(static_cast<U>(ua + ub));
      case cfxProd: return static_cast<A>(static_cast<U>(ua * ub));
      case cfxMax: return std::max(a, b);
      case cfxMin: return std::min(a, b);
      default: break;
    }
  } else {
    switch (op) {
      case cfxSum: case cfxAvg: return a + b;
      case cfxProd: return a * b;
      // Documented rule: NaN propagates (a's first); otherwise ties give b.
      case cfxMax: return std::isnan(a) ? a : std::isnan(b) ? b : (a > b ? a : b);
      case cfxMin: return std::isnan(a) ? a : std::isnan(b) ? b : (a < b ? a : b);
      default: break;
    }
  }
  return a;
}

template <class T>
bool is_nan_storage(typename Ref<T>::Storage v) {
  if constexpr (std::is_integral_v<T>) return false;
  else return std::isnan(Ref<T>::widen(v));
}

// Bit-exact, except that any NaN matches any NaN (payloads may differ with operand order).
template <class T>
bool same(typename Ref<T>::Storage got, typename Ref<T>::Storage want) {
  if (is_nan_storage<T>(want)) return is_nan_storage<T>(got);
  return std::memcmp(&got, &want, sizeof(got)) == 0;
}

// Random inputs: integers over their whole range (to exercise wrap-around), 16-bit
// floats as random bit patterns (NaN, inf, subnormals included), float/double half
// random bit patterns, half moderate values (where sums actually round).
template <class T>
std::vector<typename Ref<T>::Storage> random_values(size_t n, std::mt19937_64& rng) {
  using S = typename Ref<T>::Storage;
  std::vector<S> v(n);
  std::uniform_real_distribution<double> moderate(-100.0, 100.0);
  for (size_t i = 0; i < n; ++i) {
    const uint64_t bits = rng();
    if constexpr (std::is_floating_point_v<T>) {
      if (bits & 1) {
        v[i] = static_cast<T>(moderate(rng));
      } else {
        using U = std::conditional_t<sizeof(T) == 4, uint32_t, uint64_t>;
        v[i] = std::bit_cast<T>(static_cast<U>(bits >> 1));
      }
    } else if constexpr (std::is_same_v<T, Half> || std::is_same_v<T, BFloat>) {
      // Half the time moderate values, so Sum/Prod round instead of saturating.
      v[i] = (bits & 1) ? Ref<T>::narrow(static_cast<float>(moderate(rng))) : static_cast<S>(bits >> 8);
    } else {
      v[i] = static_cast<S>(bits);
    }
  }
  return v;
}

template <class F>
void with_type(cfxDataType_t type, F&& f) {
  switch (type) {
    case cfxInt8: return f.template operator()<int8_t>();
    case cfxUint8: return f.template operator()<uint8_t>();
    case cfxInt32: return f.template operator()<int32_t>();
    case cfxUint32: return f.template operator()<uint32_t>();
    case cfxInt64: return f.template operator()<int64_t>();
    case cfxUint64: return f.template operator()<uint64_t>();
    case cfxFloat16: return f.template operator()<Half>();
    case cfxFloat32: return f.template operator()<float>();
    case cfxFloat64: return f.template operator()<double>();
    case cfxBfloat16: return f.template operator()<BFloat>();
    default: FAIL() << "bad type";
  }
}

const size_t kLengths[] = {0, 1, 7, 8, 9, 31, 33, 1000, 4097};
const cfxRedOp_t kOps[] = {cfxSum, cfxProd, cfxMax, cfxMin, cfxAvg};

// ---- fixture: one kernel variant x one datatype ------------------------------------------

class ReduceKernelTest : public ::testing::TestWithParam<std::tuple<std::string, int>> {
 protected:
  void SetUp() override {
    const std::string isa = std::get<0>(GetParam());
    type_ = static_cast<cfxDataType_t>(std::get<1>(GetParam()));
    if (isa == "generic") {
      kernels_ = &generic_reduce_kernels();
    } else {
      kernels_ = avx2_reduce_kernels();
      if (!kernels_) GTEST_SKIP() << "CPU lacks AVX2/FMA/F16C";
    }
    ASSERT_STREQ(kernels_->name, isa.c_str());
  }
  const ReduceKernels* kernels_ = nullptr;
  cfxDataType_t type_ = cfxInt8;
};

// Where dst sits relative to the inputs.
enum class Placement { kSeparate, kDstIsA, kDstIsB };

TEST_P(ReduceKernelTest, BinaryMatchesReference) {
  with_type(type_, [&]<class T>() {
    using S = typename Ref<T>::Storage;
    std::mt19937_64 rng(1234 + type_);
    for (cfxRedOp_t op : kOps) {
      const ReduceFn fn = kernels_->binary[type_][op];
      ASSERT_NE(fn, nullptr);
      for (size_t n : kLengths) {
        // Element offsets 0..3 into over-allocated buffers put a, b and dst at different
        // misalignments relative to 32-byte vectors.
        for (size_t offset : {0, 1, 3}) {
          for (Placement place : {Placement::kSeparate, Placement::kDstIsA, Placement::kDstIsB}) {
            SCOPED_TRACE(testing::Message() << "op=" << op << " n=" << n << " offset=" << offset
                                            << " place=" << static_cast<int>(place));
            auto a = random_values<T>(n + 4, rng);
            auto b = random_values<T>(n + 4, rng);
            std::vector<S> out(n + 4, S{});
            std::vector<S> want(n);
            const S* pa = a.data() + offset;
            const S* pb = b.data() + (offset + 1) % 4;
            for (size_t i = 0; i < n; ++i)
              want[i] = Ref<T>::narrow(ref_op(op, Ref<T>::widen(pa[i]), Ref<T>::widen(pb[i])));
            S* dst = place == Placement::kDstIsA   ? a.data() + offset
                     : place == Placement::kDstIsB ? b.data() + (offset + 1) % 4
                                                   : out.data() + (offset + 2) % 4;
            fn(dst, pa, pb, n);
            for (size_t i = 0; i < n; ++i)
              ASSERT_TRUE(same<T>(dst[i], want[i])) << "element " << i << " got " << +dst[i] << " want " << +want[i];
          }
        }
      }
    }
  });
}

TEST_P(ReduceKernelTest, BinaryWritesNothingPastTheEnd) {
  with_type(type_, [&]<class T>() {
    using S = typename Ref<T>::Storage;
    std::mt19937_64 rng(99);
    for (size_t n : kLengths) {
      auto a = random_values<T>(n, rng), b = random_values<T>(n, rng);
      std::vector<S> out(n + 64);
      std::memset(out.data(), 0x5A, out.size() * sizeof(S));
      std::vector<S> sentinel(out.begin() + n, out.end());
      kernels_->binary[type_][cfxSum](out.data(), a.data(), b.data(), n);
      ASSERT_TRUE(std::equal(sentinel.begin(), sentinel.end(), out.begin() + n)) << "n=" << n;
    }
  });
}

TEST_P(ReduceKernelTest, ManyMatchesLeftToRightReference) {
  with_type(type_, [&]<class T>() {
    using S = typename Ref<T>::Storage;
    using A = typename Ref<T>::Acc;
    std::mt19937_64 rng(777 + type_);
    for (cfxRedOp_t op : kOps) {
      for (int nsrc = 2; nsrc <= 8; ++nsrc) {
        for (size_t n : kLengths) {
          // dst separate (-1), or at the same address as the first, a middle or the last source (a
          // rank's own contribution can be any of them): every block is read before it is written.
          for (int alias : {-1, 0, nsrc / 2, nsrc - 1}) {
            SCOPED_TRACE(testing::Message() << "op=" << op << " nsrc=" << nsrc << " n=" << n << " dst is source " << alias);
            std::vector<std::vector<S>> inputs;
            std::vector<const void*> srcs;
            for (int k = 0; k < nsrc; ++k) inputs.push_back(random_values<T>(n + 4, rng));
            for (int k = 0; k < nsrc; ++k) srcs.push_back(inputs[k].data() + (k % 4));  // mixed alignments
            // Reference: accumulate in the accumulation type (float for fp16/bf16) left to
            // right, round once.
            std::vector<S> want(n);
            for (size_t i = 0; i < n; ++i) {
              A acc = Ref<T>::widen(static_cast<const S*>(srcs[0])[i]);
              for (int k = 1; k < nsrc; ++k) acc = ref_op(op, acc, Ref<T>::widen(static_cast<const S*>(srcs[k])[i]));
              want[i] = Ref<T>::narrow(acc);
            }
            std::vector<S> out(n + 4);
            S* dst = alias >= 0 ? const_cast<S*>(static_cast<const S*>(srcs[alias])) : out.data() + 1;
            kernels_->many[type_][op](dst, srcs.data(), nsrc, n);
            for (size_t i = 0; i < n; ++i)
              ASSERT_TRUE(same<T>(dst[i], want[i])) << "element " << i << " got " << +dst[i] << " want " << +want[i];
          }
        }
      }
    }
  });
}

TEST_P(ReduceKernelTest, FinalizeAvgDividesOnce) {
  with_type(type_, [&]<class T>() {
    using S = typename Ref<T>::Storage;
    using A = typename Ref<T>::Acc;
    std::mt19937_64 rng(4242 + type_);
    for (int divisor : {2, 3, 7, 8, 300}) {
      for (size_t n : kLengths) {
        SCOPED_TRACE(testing::Message() << "divisor=" << divisor << " n=" << n);
        auto buf = random_values<T>(n + 1, rng);
        std::vector<S> want(n);
        for (size_t i = 0; i < n; ++i) {
          const S v = buf[i + 1];
          if constexpr (std::is_integral_v<A>) {
            // Truncating division of the wrapped sum by the rank count, as NCCL.
            if constexpr (std::is_signed_v<A>) want[i] = static_cast<S>(static_cast<int64_t>(v) / divisor);
            else want[i] = static_cast<S>(static_cast<uint64_t>(v) / static_cast<uint64_t>(divisor));
          } else {
            want[i] = Ref<T>::narrow(Ref<T>::widen(v) / static_cast<A>(divisor));
          }
        }
        kernels_->avg[type_](buf.data() + 1, n, divisor);
        for (size_t i = 0; i < n; ++i)
          ASSERT_TRUE(same<T>(buf[i + 1], want[i])) << "element " << i << " got " << +buf[i + 1] << " want " << +want[i];
      }
    }
  });
}

// The documented Max/Min rule on floating types, spelled out case by case.
TEST_P(ReduceKernelTest, MaxMinPropagateNanAndTiesGiveSecondOperand) {
  with_type(type_, [&]<class T>() {
    if constexpr (!std::is_integral_v<T>) {
      using S = typename Ref<T>::Storage;
      using A = typename Ref<T>::Acc;
      const A nan = std::numeric_limits<A>::quiet_NaN();
      // 9 lanes so both the vector body and the scalar tail see every case.
      const A as[] = {nan, 1, nan, A(-0.0), A(0.0), 2, -std::numeric_limits<A>::infinity(), 5, nan};
      const A bs[] = {1, nan, nan, A(0.0), A(-0.0), 3, 1, nan, -1};
      constexpr size_t n = 9;
      for (size_t rep = 0; rep < 4; ++rep) {  // repeat so a 32-lane int8-wide body is covered too
        std::vector<S> a, b;
        for (size_t r = 0; r <= rep; ++r)
          for (size_t i = 0; i < n; ++i) {
            a.push_back(Ref<T>::narrow(as[i]));
            b.push_back(Ref<T>::narrow(bs[i]));
          }
        for (cfxRedOp_t op : {cfxMax, cfxMin}) {
          std::vector<S> out(a.size());
          kernels_->binary[type_][op](out.data(), a.data(), b.data(), a.size());
          for (size_t i = 0; i < a.size(); ++i) {
            const A x = as[i % n], y = bs[i % n], got = Ref<T>::widen(out[i]);
            if (std::isnan(x) || std::isnan(y)) {
              EXPECT_TRUE(std::isnan(got)) << "op=" << op << " i=" << i;
            } else {
              const A want = op == cfxMax ? (x > y ? x : y) : (x < y ? x : y);
              EXPECT_EQ(got, want) << "op=" << op << " i=" << i;
              EXPECT_EQ(std::signbit(got), std::signbit(want)) << "op=" << op << " i=" << i;
            }
          }
        }
      }
    }
  });
}

std::string variant_name(const testing::TestParamInfo<std::tuple<std::string, int>>& info) {
  static const char* kNames[] = {"int8", "uint8", "int32", "uint32", "int64",
                                 "uint64", "fp16", "fp32", "fp64", "bf16"};
  return std::get<0>(info.param) + "_" + kNames[std::get<1>(info.param)];
}

INSTANTIATE_TEST_SUITE_P(AllTypes, ReduceKernelTest,
                         testing::Combine(testing::Values(std::string("generic"), std::string("avx2")),
                                          testing::Range(0, static_cast<int>(cfxNumTypes))),
                         variant_name);

// ---- public entry points -----------------------------------------------------------------

TEST(ReducePublicTest, ReduceFnCoversEveryTypeAndOpAndRejectsInvalid) {
  for (int t = 0; t < cfxNumTypes; ++t)
    for (int o = 0; o < cfxNumOps; ++o)
      EXPECT_NE(reduce_fn(static_cast<cfxDataType_t>(t), static_cast<cfxRedOp_t>(o)), nullptr);
  EXPECT_EQ(reduce_fn(cfxNumTypes, cfxSum), nullptr);
  EXPECT_EQ(reduce_fn(static_cast<cfxDataType_t>(-1), cfxSum), nullptr);
  EXPECT_EQ(reduce_fn(cfxFloat32, cfxNumOps), nullptr);
  EXPECT_EQ(reduce_fn(cfxFloat32, static_cast<cfxRedOp_t>(-1)), nullptr);
  // Avg reduces as Sum.
  EXPECT_EQ(reduce_fn(cfxFloat32, cfxAvg), reduce_fn(cfxFloat32, cfxSum));
}

TEST(ReducePublicTest, IsaNameMatchesTheActiveTable) {
  const std::string isa = reduce_isa();
  EXPECT_TRUE(isa == "avx2" || isa == "generic") << isa;
  EXPECT_EQ(isa, active_reduce_kernels().name);
  const char* env = std::getenv("CONFLUX_REDUCE_ISA");
  if (env && std::string(env) == "generic") {
    EXPECT_EQ(isa, "generic");
  } else if (!env && avx2_reduce_kernels()) {
    EXPECT_EQ(isa, "avx2");
  }
}

TEST(ReducePublicTest, ReduceManyWithOneSourceCopies) {
  std::vector<float> src = {1, 2, 3, 4, 5}, dst(5);
  const void* srcs[] = {src.data()};
  reduce_many(dst.data(), srcs, 1, src.size(), cfxFloat32, cfxSum);
  EXPECT_EQ(dst, src);
  reduce_many(src.data(), srcs, 1, src.size(), cfxFloat32, cfxSum);  // in place: no-op
  EXPECT_EQ(dst, src);
}

TEST(ReducePublicTest, ReduceManyAndAvgEndToEnd) {
  // Avg over 3 "ranks": reduce_many as Sum, then finalize_avg.
  std::vector<int32_t> r0 = {3, -7, 10}, r1 = {3, 0, 11}, r2 = {3, 0, 11};
  const void* srcs[] = {r0.data(), r1.data(), r2.data()};
  std::vector<int32_t> out(3);
  reduce_many(out.data(), srcs, 3, 3, cfxInt32, cfxAvg);
  finalize_avg(out.data(), 3, cfxInt32, 3);
  EXPECT_EQ(out, (std::vector<int32_t>{3, -2, 10}));  // -7/3 truncates toward zero

  std::vector<uint16_t> h = {float_to_half(1.0f), float_to_half(2.0f)};
  finalize_avg(h.data(), h.size(), cfxFloat16, 3);
  EXPECT_EQ(h[0], float_to_half(1.0f / 3.0f));
  EXPECT_EQ(h[1], float_to_half(2.0f / 3.0f));
}

TEST(ReducePublicTest, Fp16ManyRoundsOnceNotPerStep) {
  // 2048 + 1 + 1 in fp16: pairwise rounding loses each 1 (2049 is a tie, rounds to the
  // even 2048); accumulating in float gives 2050, which fp16 represents exactly.
  const uint16_t big = float_to_half(2048.0f), one = float_to_half(1.0f);
  for (const ReduceKernels* k : {&generic_reduce_kernels(), avx2_reduce_kernels()}) {
    if (!k) continue;
    std::vector<uint16_t> a(40, big), b(40, one), c(40, one), out(40);
    const void* srcs[] = {a.data(), b.data(), c.data()};
    k->many[cfxFloat16][cfxSum](out.data(), srcs, 3, out.size());
    for (uint16_t v : out) EXPECT_EQ(half_to_float(v), 2050.0f) << k->name;
    k->binary[cfxFloat16][cfxSum](out.data(), a.data(), b.data(), out.size());
    k->binary[cfxFloat16][cfxSum](out.data(), out.data(), c.data(), out.size());
    for (uint16_t v : out) EXPECT_EQ(half_to_float(v), 2048.0f) << k->name;
  }
}

TEST(ReducePublicTest, InvalidArgumentsAreHarmless) {
  float x = 1;
  const void* srcs[] = {&x};
  reduce_many(&x, srcs, 0, 1, cfxFloat32, cfxSum);
  reduce_many(&x, srcs, 1, 1, cfxNumTypes, cfxSum);
  finalize_avg(&x, 1, cfxFloat32, 0);
  finalize_avg(&x, 1, cfxFloat32, 1);
  EXPECT_EQ(x, 1.0f);
}

}  // namespace
}  // namespace conflux
