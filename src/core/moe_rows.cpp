// Combine kernels. A weighted sum of top-k rows is the combine's only
// arithmetic and, at hidden 2048 and top-8, most of its time: GCC's -O2 does
// not vectorize these loops (the rows may alias the accumulator as far as it
// knows), so the x86 versions are written with AVX2 intrinsics. Widening
// bf16/fp16 to float is exact and one fused multiply-add per element is what
// the portable loop does, so both give the same bits.
#include "core/moe_rows.h"

#include "core/half.h"

#include <cmath>
#include <cstring>

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

template <cfxDataType_t T>
void store_portable(uint8_t* out, const float* acc, size_t hidden) {
  if (hidden == 0) return;  // acc may be null then, which memcpy does not allow
  if constexpr (T == cfxFloat32) {
    std::memcpy(out, acc, hidden * sizeof(float));
  } else {
    for (size_t i = 0; i < hidden; ++i) {
      const uint16_t b = T == cfxBfloat16 ? float_to_bf16(acc[i]) : float_to_half(acc[i]);
      std::memcpy(out + i * sizeof b, &b, sizeof b);
    }
  }
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

// float -> bf16 as float_to_bf16 does it: round to nearest even, NaN kept
// quiet, 8 at a time.
CFX_MOE_AVX2 __m128i bf16_of(__m256 v) {
  const __m256i x = _mm256_castps_si256(v);
  const __m256i nan = _mm256_cmpgt_epi32(_mm256_and_si256(x, _mm256_set1_epi32(0x7FFFFFFF)), _mm256_set1_epi32(0x7F800000));
  const __m256i odd = _mm256_and_si256(_mm256_srli_epi32(x, 16), _mm256_set1_epi32(1));
  const __m256i rounded = _mm256_srli_epi32(_mm256_add_epi32(x, _mm256_add_epi32(_mm256_set1_epi32(0x7FFF), odd)), 16);
  const __m256i quiet = _mm256_or_si256(_mm256_srli_epi32(x, 16), _mm256_set1_epi32(0x0040));
  const __m256i bits = _mm256_blendv_epi8(rounded, quiet, nan);
  return _mm_packus_epi32(_mm256_castsi256_si128(bits), _mm256_extracti128_si256(bits, 1));
}

template <cfxDataType_t T>
CFX_MOE_AVX2 void store_avx2(uint8_t* out, const float* acc, size_t hidden) {
  if constexpr (T == cfxFloat32) {
    store_portable<T>(out, acc, hidden);
  } else {
    size_t i = 0;
    for (; i + 8 <= hidden; i += 8) {
      const __m256 v = _mm256_loadu_ps(acc + i);
      const __m128i h = T == cfxBfloat16 ? bf16_of(v) : _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT);
      _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i * 2), h);
    }
    store_portable<T>(out + i * 2, acc + i, hidden - i);
  }
}

bool cpu_has_avx2_fma() {
  static const bool yes = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && cpu_has_f16c();
  return yes;
}
#endif

template <template <cfxDataType_t> class Pick, class Fn>
Fn pick(cfxDataType_t t) {
  return t == cfxFloat32 ? Pick<cfxFloat32>::fn : t == cfxBfloat16 ? Pick<cfxBfloat16>::fn : Pick<cfxFloat16>::fn;
}

template <cfxDataType_t T> struct AccPortable { static constexpr MoeAccumulateFn fn = accumulate_portable<T>; };
template <cfxDataType_t T> struct StorePortable { static constexpr MoeStoreFn fn = store_portable<T>; };
#if defined(__x86_64__)
template <cfxDataType_t T> struct AccAvx2 { static constexpr MoeAccumulateFn fn = accumulate_avx2<T>; };
template <cfxDataType_t T> struct StoreAvx2 { static constexpr MoeStoreFn fn = store_avx2<T>; };
#endif

}  // namespace

MoeAccumulateFn moe_accumulate_portable(cfxDataType_t t) { return pick<AccPortable, MoeAccumulateFn>(t); }
MoeStoreFn moe_store_portable(cfxDataType_t t) { return pick<StorePortable, MoeStoreFn>(t); }

MoeAccumulateFn moe_accumulate_for(cfxDataType_t t) {
#if defined(__x86_64__)
  if (cpu_has_avx2_fma()) return pick<AccAvx2, MoeAccumulateFn>(t);
#endif
  return moe_accumulate_portable(t);
}

MoeStoreFn moe_store_for(cfxDataType_t t) {
#if defined(__x86_64__)
  if (cpu_has_avx2_fma()) return pick<StoreAvx2, MoeStoreFn>(t);
#endif
  return moe_store_portable(t);
}

}  // namespace conflux
