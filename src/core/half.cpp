// Bulk fp16/bf16 conversions. The F16C variants are compiled with a target attribute,
// not with -mf16c for the whole file, so the library still loads and runs on CPUs
// without F16C; they are chosen once, at runtime.
#include "core/half.h"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#include <immintrin.h>
#define CFX_HALF_X86 1
#define CFX_F16C_TARGET __attribute__((target("avx,f16c")))
#endif

namespace conflux {

bool cpu_has_f16c() {
#if CFX_HALF_X86
  // F16C is CPUID.1:ECX bit 29; its YMM forms need the OS to save AVX state, which
  // __builtin_cpu_supports("avx") checks (clang 14 does not know the "f16c" name).
  static const bool has = [] {
    unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
    if (!__get_cpuid(1, &eax, &ebx, &ecx, &edx)) return false;
    return (ecx & (1u << 29)) != 0 && __builtin_cpu_supports("avx");
  }();
  return has;
#else
  return false;
#endif
}

void half_to_float_n_portable(const uint16_t* src, float* dst, size_t n) {
  for (size_t i = 0; i < n; ++i) dst[i] = half_to_float(src[i]);
}

void float_to_half_n_portable(const float* src, uint16_t* dst, size_t n) {
  for (size_t i = 0; i < n; ++i) dst[i] = float_to_half(src[i]);
}

#if CFX_HALF_X86
namespace {

CFX_F16C_TARGET void half_to_float_n_f16c(const uint16_t* src, float* dst, size_t n) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i));
    _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(h));
  }
  for (; i < n; ++i) dst[i] = half_to_float(src[i]);
}

CFX_F16C_TARGET void float_to_half_n_f16c(const float* src, uint16_t* dst, size_t n) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128i h = _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i), h);
  }
  for (; i < n; ++i) dst[i] = float_to_half(src[i]);
}

}  // namespace
#endif

void half_to_float_n(const uint16_t* src, float* dst, size_t n) {
#if CFX_HALF_X86
  if (cpu_has_f16c()) return half_to_float_n_f16c(src, dst, n);
#endif
  half_to_float_n_portable(src, dst, n);
}

void float_to_half_n(const float* src, uint16_t* dst, size_t n) {
#if CFX_HALF_X86
  if (cpu_has_f16c()) return float_to_half_n_f16c(src, dst, n);
#endif
  float_to_half_n_portable(src, dst, n);
}

// bf16 needs no special instructions, only integer shifts and adds. Widening is left to
// the compiler; narrowing is written with AVX2, since GCC's -O2 leaves the rounding loop
// (with its NaN branch) scalar.
void bf16_to_float_n(const uint16_t* src, float* dst, size_t n) {
  for (size_t i = 0; i < n; ++i) dst[i] = bf16_to_float(src[i]);
}

#if CFX_HALF_X86
namespace {

// float_to_bf16 for 8 floats: round to nearest even, NaN kept quiet.
__attribute__((target("avx2"))) void float_to_bf16_n_avx2(const float* src, uint16_t* dst, size_t n) {
  const __m256i abs_mask = _mm256_set1_epi32(0x7FFFFFFF), inf = _mm256_set1_epi32(0x7F800000);
  const __m256i half_ulp = _mm256_set1_epi32(0x7FFF), one = _mm256_set1_epi32(1), quiet = _mm256_set1_epi32(0x0040);
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256i x = _mm256_castps_si256(_mm256_loadu_ps(src + i));
    const __m256i nan = _mm256_cmpgt_epi32(_mm256_and_si256(x, abs_mask), inf);
    const __m256i top = _mm256_srli_epi32(x, 16);
    const __m256i rounded = _mm256_srli_epi32(_mm256_add_epi32(x, _mm256_add_epi32(half_ulp, _mm256_and_si256(top, one))), 16);
    const __m256i bits = _mm256_blendv_epi8(rounded, _mm256_or_si256(top, quiet), nan);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i),
                     _mm_packus_epi32(_mm256_castsi256_si128(bits), _mm256_extracti128_si256(bits, 1)));
  }
  for (; i < n; ++i) dst[i] = float_to_bf16(src[i]);
}

}  // namespace
#endif

void float_to_bf16_n(const float* src, uint16_t* dst, size_t n) {
#if CFX_HALF_X86
  static const bool avx2 = __builtin_cpu_supports("avx2");
  if (avx2) return float_to_bf16_n_avx2(src, dst, n);
#endif
  for (size_t i = 0; i < n; ++i) dst[i] = float_to_bf16(src[i]);
}

}  // namespace conflux
