// Combine kernels. A weighted sum of top-k rows is the combine's only
// arithmetic and, at hidden 2048 and top-8, most of its time: GCC's -O2 does
// not vectorize the loop (the row may alias the accumulator as far as it
// knows), so the x86 version is written with AVX2 intrinsics. Widening
// bf16/fp16 to float is exact and one fused multiply-add per element is what
// the portable loop does, so both give the same bits. Storing the float row
// back is half.h's bulk conversion.
#include "core/moe_rows.h"

#include "core/copy.h"
#include "core/half.h"

#include <cmath>
#include <cstring>
#include <type_traits>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace conflux {
namespace {

template <cfxDataType_t T>
float widen(const uint8_t* row, size_t i) {
  if constexpr (T == cfxFloat32) {
    float x;
    std::memcpy(&x, row + i * sizeof(float), sizeof x);
    return x;
  } else {
    uint16_t b;
    std::memcpy(&b, row + i * sizeof b, sizeof b);
    return T == cfxBfloat16 ? bf16_to_float(b) : half_to_float(b);
  }
}

template <cfxDataType_t T>
void accumulate_portable(float* acc, const uint8_t* row, float w, size_t hidden) {
  for (size_t i = 0; i < hidden; ++i) acc[i] = std::fma(w, widen<T>(row, i), acc[i]);
}

#if defined(__x86_64__)
#define CFX_MOE_AVX2 __attribute__((target("avx2,fma,f16c")))

template <cfxDataType_t T>
CFX_MOE_AVX2 __m256 load8(const uint8_t* row, size_t i) {
  if constexpr (T == cfxFloat32) {
    return _mm256_loadu_ps(reinterpret_cast<const float*>(row) + i);
  } else {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(row + i * 2));
    if constexpr (T == cfxBfloat16) return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
    return _mm256_cvtph_ps(h);
  }
}

template <cfxDataType_t T>
CFX_MOE_AVX2 void accumulate_avx2(float* acc, const uint8_t* row, float w, size_t hidden) {
  const __m256 vw = _mm256_set1_ps(w);
  size_t i = 0;
  for (; i + 8 <= hidden; i += 8)
    _mm256_storeu_ps(acc + i, _mm256_fmadd_ps(vw, load8<T>(row, i), _mm256_loadu_ps(acc + i)));
  for (; i < hidden; ++i) acc[i] = std::fma(w, widen<T>(row, i), acc[i]);
}

bool cpu_has_avx2_fma() {
  static const bool yes = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && cpu_has_f16c();
  return yes;
}
#endif

// f(std::integral_constant<cfxDataType_t, T>{}) for the MoE datatype t.
template <class F>
auto by_type(cfxDataType_t t, F f) {
  using std::integral_constant;
  if (t == cfxFloat32) return f(integral_constant<cfxDataType_t, cfxFloat32>{});
  if (t == cfxBfloat16) return f(integral_constant<cfxDataType_t, cfxBfloat16>{});
  return f(integral_constant<cfxDataType_t, cfxFloat16>{});
}

void store_float32(uint8_t* out, const float* acc, size_t hidden) {
  if (hidden > 0) copy_bytes(out, acc, hidden * sizeof(float));  // acc may be null when empty
}
void store_bfloat16(uint8_t* out, const float* acc, size_t hidden) {
  float_to_bf16_n(acc, reinterpret_cast<uint16_t*>(out), hidden);
}
void store_float16(uint8_t* out, const float* acc, size_t hidden) {
  float_to_half_n(acc, reinterpret_cast<uint16_t*>(out), hidden);
}

}  // namespace

MoeAccumulateFn moe_accumulate_portable(cfxDataType_t t) {
  return by_type(t, [](auto k) -> MoeAccumulateFn { return accumulate_portable<k.value>; });
}

MoeAccumulateFn moe_accumulate_for(cfxDataType_t t) {
#if defined(__x86_64__)
  if (cpu_has_avx2_fma()) return by_type(t, [](auto k) -> MoeAccumulateFn { return accumulate_avx2<k.value>; });
#endif
  return moe_accumulate_portable(t);
}

MoeStoreFn moe_store_for(cfxDataType_t t) {
  return t == cfxFloat32 ? store_float32 : t == cfxBfloat16 ? store_bfloat16 : store_float16;
}

}  // namespace conflux
