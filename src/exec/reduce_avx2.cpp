// AVX2 reduction kernels (F16C for fp16). Every function that touches a 256-bit
// register carries a target attribute instead of the file being built with -mavx2:
// the library must still load on CPUs without AVX2, and reduce.cpp only hands these
// kernels out after checking the CPU at runtime.
//
// Shape of every kernel: a "lane type" V describes how to load a vector of elements
// into an accumulator register, the four operations on accumulators, and how to store
// them back; one driver per entry point (binary, many, avg) runs 4 vectors per
// iteration (enough loads in flight to reach memory bandwidth), then single vectors, then
// the scalar definition from reduce_ops.h for the last few elements.
#include "exec/reduce_internal.h"

#if defined(__x86_64__) || defined(__i386__)

#include <immintrin.h>

#include "core/half.h"
#include "exec/reduce_ops.h"

#define CFX_AVX2 __attribute__((target("avx2,f16c,fma"), always_inline)) inline
#define CFX_AVX2_KERNEL __attribute__((target("avx2,f16c,fma")))

namespace conflux {
namespace {

using namespace reduce_detail;

// ---- float-valued accumulators (float, and fp16/bf16 widened to float) ---------------

struct F32Ops {
  using Reg = __m256;
  static constexpr size_t kLanes = 8;
  CFX_AVX2 static Reg sum(Reg a, Reg b) { return _mm256_add_ps(a, b); }
  CFX_AVX2 static Reg prod(Reg a, Reg b) { return _mm256_mul_ps(a, b); }
  // vmaxps returns its second operand when either is NaN: that covers "b is NaN"; the
  // blend puts a back when a is NaN. Result = isnan(a) ? a : (a > b ? a : b).
  CFX_AVX2 static Reg max(Reg a, Reg b) {
    return _mm256_blendv_ps(_mm256_max_ps(a, b), a, _mm256_cmp_ps(a, a, _CMP_UNORD_Q));
  }
  CFX_AVX2 static Reg min(Reg a, Reg b) {
    return _mm256_blendv_ps(_mm256_min_ps(a, b), a, _mm256_cmp_ps(a, a, _CMP_UNORD_Q));
  }
  CFX_AVX2 static Reg divide(Reg a, int n) { return _mm256_div_ps(a, _mm256_set1_ps(static_cast<float>(n))); }
};

struct F32 : F32Ops {
  using Tag = float;
  CFX_AVX2 static Reg load(const float* p) { return _mm256_loadu_ps(p); }
  CFX_AVX2 static void store(float* p, Reg r) { _mm256_storeu_ps(p, r); }
};

struct F16 : F32Ops {
  using Tag = Fp16;
  CFX_AVX2 static Reg load(const uint16_t* p) {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  }
  CFX_AVX2 static void store(uint16_t* p, Reg r) {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(p), _mm256_cvtps_ph(r, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  }
};

// bf16: 16 elements per step as two float registers. Widening interleaves zero words
// below the bf16 words (unpacklo/hi), which puts each value in the top half of a 32-bit
// lane at no shift cost; the lanes come out permuted ([0-3, 8-11] and [4-7, 12-15]),
// which an element-wise op does not mind, and the lane-wise pack on store undoes it.
struct BF16 {
  using Tag = Bf16;
  struct Reg {
    __m256 lo, hi;
  };
  static constexpr size_t kLanes = 16;
  CFX_AVX2 static Reg load(const uint16_t* p) {
    const __m256i x = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
    const __m256i zero = _mm256_setzero_si256();
    return {_mm256_castsi256_ps(_mm256_unpacklo_epi16(zero, x)), _mm256_castsi256_ps(_mm256_unpackhi_epi16(zero, x))};
  }
  // Same integer rounding as float_to_bf16: x + 0x7FFF + lsb, then the top 16 bits;
  // NaN instead keeps its top bits with the quiet bit set. Returns 32-bit lanes holding
  // the bf16 bits.
  CFX_AVX2 static __m256i narrow(__m256 r) {
    const __m256i x = _mm256_castps_si256(r);
    const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(x, 16), _mm256_set1_epi32(1));
    const __m256i rounded = _mm256_add_epi32(_mm256_add_epi32(x, _mm256_set1_epi32(0x7FFF)), lsb);
    const __m256i quiet_nan = _mm256_or_si256(x, _mm256_set1_epi32(0x00400000));
    const __m256i is_nan = _mm256_castps_si256(_mm256_cmp_ps(r, r, _CMP_UNORD_Q));
    return _mm256_srli_epi32(_mm256_blendv_epi8(rounded, quiet_nan, is_nan), 16);
  }
  CFX_AVX2 static void store(uint16_t* p, Reg r) {
    // Values are < 2^16, so the saturating pack is a plain narrowing; it packs within
    // 128-bit lanes, restoring the order that load() permuted.
    const __m256i packed = _mm256_packus_epi32(narrow(r.lo), narrow(r.hi));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), packed);
  }
  CFX_AVX2 static Reg sum(Reg a, Reg b) { return {F32Ops::sum(a.lo, b.lo), F32Ops::sum(a.hi, b.hi)}; }
  CFX_AVX2 static Reg prod(Reg a, Reg b) { return {F32Ops::prod(a.lo, b.lo), F32Ops::prod(a.hi, b.hi)}; }
  CFX_AVX2 static Reg max(Reg a, Reg b) { return {F32Ops::max(a.lo, b.lo), F32Ops::max(a.hi, b.hi)}; }
  CFX_AVX2 static Reg min(Reg a, Reg b) { return {F32Ops::min(a.lo, b.lo), F32Ops::min(a.hi, b.hi)}; }
  CFX_AVX2 static Reg divide(Reg a, int n) { return {F32Ops::divide(a.lo, n), F32Ops::divide(a.hi, n)}; }
};

struct F64 {
  using Tag = double;
  using Reg = __m256d;
  static constexpr size_t kLanes = 4;
  CFX_AVX2 static Reg load(const double* p) { return _mm256_loadu_pd(p); }
  CFX_AVX2 static void store(double* p, Reg r) { _mm256_storeu_pd(p, r); }
  CFX_AVX2 static Reg sum(Reg a, Reg b) { return _mm256_add_pd(a, b); }
  CFX_AVX2 static Reg prod(Reg a, Reg b) { return _mm256_mul_pd(a, b); }
  CFX_AVX2 static Reg max(Reg a, Reg b) {
    return _mm256_blendv_pd(_mm256_max_pd(a, b), a, _mm256_cmp_pd(a, a, _CMP_UNORD_Q));
  }
  CFX_AVX2 static Reg min(Reg a, Reg b) {
    return _mm256_blendv_pd(_mm256_min_pd(a, b), a, _mm256_cmp_pd(a, a, _CMP_UNORD_Q));
  }
  CFX_AVX2 static Reg divide(Reg a, int n) { return _mm256_div_pd(a, _mm256_set1_pd(static_cast<double>(n))); }
};

// ---- integers ------------------------------------------------------------------------

template <class T>
struct IntBase {
  using Tag = T;
  using Reg = __m256i;
  static constexpr size_t kLanes = 32 / sizeof(T);
  CFX_AVX2 static Reg load(const T* p) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)); }
  CFX_AVX2 static void store(T* p, Reg r) { _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), r); }
};

// 8-bit: no byte multiply in AVX2, so multiply the even and the odd bytes as 16-bit
// lanes; the low byte of each 16-bit product is the wrapped 8-bit product (signed or not).
CFX_AVX2 __m256i mul_epi8_wrap(__m256i a, __m256i b) {
  const __m256i even = _mm256_mullo_epi16(a, b);
  const __m256i odd = _mm256_mullo_epi16(_mm256_srli_epi16(a, 8), _mm256_srli_epi16(b, 8));
  return _mm256_or_si256(_mm256_and_si256(even, _mm256_set1_epi16(0x00FF)), _mm256_slli_epi16(odd, 8));
}

struct I8 : IntBase<int8_t> {
  CFX_AVX2 static Reg sum(Reg a, Reg b) { return _mm256_add_epi8(a, b); }
  CFX_AVX2 static Reg prod(Reg a, Reg b) { return mul_epi8_wrap(a, b); }
  CFX_AVX2 static Reg max(Reg a, Reg b) { return _mm256_max_epi8(a, b); }
  CFX_AVX2 static Reg min(Reg a, Reg b) { return _mm256_min_epi8(a, b); }
};
struct U8 : IntBase<uint8_t> {
  CFX_AVX2 static Reg sum(Reg a, Reg b) { return _mm256_add_epi8(a, b); }
  CFX_AVX2 static Reg prod(Reg a, Reg b) { return mul_epi8_wrap(a, b); }
  CFX_AVX2 static Reg max(Reg a, Reg b) { return _mm256_max_epu8(a, b); }
  CFX_AVX2 static Reg min(Reg a, Reg b) { return _mm256_min_epu8(a, b); }
};
struct I32 : IntBase<int32_t> {
  CFX_AVX2 static Reg sum(Reg a, Reg b) { return _mm256_add_epi32(a, b); }
  CFX_AVX2 static Reg prod(Reg a, Reg b) { return _mm256_mullo_epi32(a, b); }
  CFX_AVX2 static Reg max(Reg a, Reg b) { return _mm256_max_epi32(a, b); }
  CFX_AVX2 static Reg min(Reg a, Reg b) { return _mm256_min_epi32(a, b); }
};
struct U32 : IntBase<uint32_t> {
  CFX_AVX2 static Reg sum(Reg a, Reg b) { return _mm256_add_epi32(a, b); }
  CFX_AVX2 static Reg prod(Reg a, Reg b) { return _mm256_mullo_epi32(a, b); }
  CFX_AVX2 static Reg max(Reg a, Reg b) { return _mm256_max_epu32(a, b); }
  CFX_AVX2 static Reg min(Reg a, Reg b) { return _mm256_min_epu32(a, b); }
};

// 64-bit: no 64-bit multiply in AVX2; build the low 64 bits of the product from 32x32
// products: lo(a)*lo(b) + ((hi(a)*lo(b) + lo(a)*hi(b)) << 32).
CFX_AVX2 __m256i mul_epi64_wrap(__m256i a, __m256i b) {
  const __m256i low = _mm256_mul_epu32(a, b);
  const __m256i cross = _mm256_add_epi64(_mm256_mul_epu32(_mm256_srli_epi64(a, 32), b),
                                         _mm256_mul_epu32(a, _mm256_srli_epi64(b, 32)));
  return _mm256_add_epi64(low, _mm256_slli_epi64(cross, 32));
}

// Signed compare only: unsigned values compare correctly after flipping the sign bit.
template <bool kUnsigned>
struct Int64 : IntBase<std::conditional_t<kUnsigned, uint64_t, int64_t>> {
  using Reg = __m256i;
  CFX_AVX2 static Reg greater(Reg a, Reg b) {
    if constexpr (kUnsigned) {
      const __m256i flip = _mm256_set1_epi64x(static_cast<long long>(0x8000000000000000ull));
      return _mm256_cmpgt_epi64(_mm256_xor_si256(a, flip), _mm256_xor_si256(b, flip));
    } else {
      return _mm256_cmpgt_epi64(a, b);
    }
  }
  CFX_AVX2 static Reg sum(Reg a, Reg b) { return _mm256_add_epi64(a, b); }
  CFX_AVX2 static Reg prod(Reg a, Reg b) { return mul_epi64_wrap(a, b); }
  CFX_AVX2 static Reg max(Reg a, Reg b) { return _mm256_blendv_epi8(b, a, greater(a, b)); }
  CFX_AVX2 static Reg min(Reg a, Reg b) { return _mm256_blendv_epi8(b, a, greater(b, a)); }
};
using I64 = Int64<false>;
using U64 = Int64<true>;

// ---- drivers ---------------------------------------------------------------------------

template <class V, cfxRedOp_t Op>
CFX_AVX2 typename V::Reg combine(typename V::Reg a, typename V::Reg b) {
  if constexpr (Op == cfxSum || Op == cfxAvg) return V::sum(a, b);
  if constexpr (Op == cfxProd) return V::prod(a, b);
  if constexpr (Op == cfxMax) return V::max(a, b);
  if constexpr (Op == cfxMin) return V::min(a, b);
}

template <class V, cfxRedOp_t Op>
CFX_AVX2_KERNEL void binary_avx2(void* dst, const void* a, const void* b, size_t n) {
  using T = typename V::Tag;
  using S = typename Elem<T>::Storage;
  constexpr size_t L = V::kLanes;
  auto* d = static_cast<S*>(dst);
  const auto* pa = static_cast<const S*>(a);
  const auto* pb = static_cast<const S*>(b);
  size_t i = 0;
  // All loads of an iteration happen before its stores, so dst == a or dst == b is safe.
  for (; i + 4 * L <= n; i += 4 * L) {
    const auto r0 = combine<V, Op>(V::load(pa + i), V::load(pb + i));
    const auto r1 = combine<V, Op>(V::load(pa + i + L), V::load(pb + i + L));
    const auto r2 = combine<V, Op>(V::load(pa + i + 2 * L), V::load(pb + i + 2 * L));
    const auto r3 = combine<V, Op>(V::load(pa + i + 3 * L), V::load(pb + i + 3 * L));
    V::store(d + i, r0);
    V::store(d + i + L, r1);
    V::store(d + i + 2 * L, r2);
    V::store(d + i + 3 * L, r3);
  }
  for (; i + L <= n; i += L) V::store(d + i, combine<V, Op>(V::load(pa + i), V::load(pb + i)));
  binary_scalar<T, Op>(d + i, pa + i, pb + i, n - i);
}

template <class V, cfxRedOp_t Op>
CFX_AVX2_KERNEL void many_avx2(void* dst, const void* const* srcs, int nsrc, size_t n) {
  using T = typename V::Tag;
  using S = typename Elem<T>::Storage;
  constexpr size_t L = V::kLanes;
  auto* d = static_cast<S*>(dst);
  const auto* s0 = static_cast<const S*>(srcs[0]);
  size_t i = 0;
  // Four accumulators live in registers across all sources: each source is read once,
  // dst is written once, fp16/bf16 round once.
  for (; i + 4 * L <= n; i += 4 * L) {
    auto r0 = V::load(s0 + i), r1 = V::load(s0 + i + L);
    auto r2 = V::load(s0 + i + 2 * L), r3 = V::load(s0 + i + 3 * L);
    for (int k = 1; k < nsrc; ++k) {
      const auto* sk = static_cast<const S*>(srcs[k]) + i;
      r0 = combine<V, Op>(r0, V::load(sk));
      r1 = combine<V, Op>(r1, V::load(sk + L));
      r2 = combine<V, Op>(r2, V::load(sk + 2 * L));
      r3 = combine<V, Op>(r3, V::load(sk + 3 * L));
    }
    V::store(d + i, r0);
    V::store(d + i + L, r1);
    V::store(d + i + 2 * L, r2);
    V::store(d + i + 3 * L, r3);
  }
  for (; i + L <= n; i += L) {
    auto r = V::load(s0 + i);
    for (int k = 1; k < nsrc; ++k) r = combine<V, Op>(r, V::load(static_cast<const S*>(srcs[k]) + i));
    V::store(d + i, r);
  }
  many_scalar<T, Op>(d, srcs, nsrc, i, n - i);
}

// Floating types only; integers keep the scalar division (no vector integer divide).
template <class V>
CFX_AVX2_KERNEL void avg_avx2(void* buf, size_t n, int divisor) {
  using T = typename V::Tag;
  using S = typename Elem<T>::Storage;
  constexpr size_t L = V::kLanes;
  auto* p = static_cast<S*>(buf);
  size_t i = 0;
  for (; i + L <= n; i += L) V::store(p + i, V::divide(V::load(p + i), divisor));
  avg_scalar<T>(p + i, n - i, divisor);
}

template <class V>
void fill(ReduceKernels& table, cfxDataType_t type) {
  auto& bin = table.binary[type];
  auto& many = table.many[type];
  bin[cfxSum] = binary_avx2<V, cfxSum>;
  bin[cfxProd] = binary_avx2<V, cfxProd>;
  bin[cfxMax] = binary_avx2<V, cfxMax>;
  bin[cfxMin] = binary_avx2<V, cfxMin>;
  bin[cfxAvg] = bin[cfxSum];
  many[cfxSum] = many_avx2<V, cfxSum>;
  many[cfxProd] = many_avx2<V, cfxProd>;
  many[cfxMax] = many_avx2<V, cfxMax>;
  many[cfxMin] = many_avx2<V, cfxMin>;
  many[cfxAvg] = many[cfxSum];
}

ReduceKernels make_avx2_table() {
  // Start from the generic table: integer Avg finalisation stays there.
  ReduceKernels table = generic_reduce_kernels();
  table.name = "avx2";
  fill<I8>(table, cfxInt8);
  fill<U8>(table, cfxUint8);
  fill<I32>(table, cfxInt32);
  fill<U32>(table, cfxUint32);
  fill<I64>(table, cfxInt64);
  fill<U64>(table, cfxUint64);
  fill<F16>(table, cfxFloat16);
  fill<F32>(table, cfxFloat32);
  fill<F64>(table, cfxFloat64);
  fill<BF16>(table, cfxBfloat16);
  table.avg[cfxFloat16] = avg_avx2<F16>;
  table.avg[cfxFloat32] = avg_avx2<F32>;
  table.avg[cfxFloat64] = avg_avx2<F64>;
  table.avg[cfxBfloat16] = avg_avx2<BF16>;
  return table;
}

bool cpu_has_avx2_fma_f16c() {
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && cpu_has_f16c();
}

}  // namespace

const ReduceKernels* avx2_reduce_kernels() {
  static const bool supported = cpu_has_avx2_fma_f16c();
  if (!supported) return nullptr;
  static const ReduceKernels table = make_avx2_table();
  return &table;
}

}  // namespace conflux

#else  // not x86

namespace conflux {
const ReduceKernels* avx2_reduce_kernels() { return nullptr; }
}  // namespace conflux

#endif
