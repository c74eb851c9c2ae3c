// IEEE binary16 ("fp16", "half") and bfloat16 ("bf16") <-> float conversions.
//
// Both 16-bit formats travel as raw uint16_t bit patterns: the library never does
// arithmetic in 16 bits, it widens to float, computes, and rounds back once.
//
// The scalar functions below are portable and exact: half -> float and bf16 -> float are
// exact widenings; float -> half and float -> bf16 round to nearest, ties to even, and
// handle NaN, infinity, overflow and subnormals. NaN results are bit-for-bit what x86 F16C
// (vcvtph2ps / vcvtps2ph) produces: the sign and the top payload bits are kept and the
// quiet bit is set, so the portable path and the F16C path of the reduction kernels agree
// exactly. They do not depend on the FPU rounding mode or on FTZ/DAZ.
//
// The *_n bulk functions use F16C when the CPU has it (checked once at runtime) and the
// portable code otherwise.
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>

namespace conflux {

// half -> float, exact.
inline float half_to_float(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exponent = (h >> 10) & 0x1Fu;
  const uint32_t mantissa = h & 0x3FFu;
  uint32_t bits;
  if (exponent == 0x1F) {
    // Infinity, or NaN made quiet (F16C quiets signalling NaNs on widening too).
    bits = sign | 0x7F800000u | (mantissa << 13) | (mantissa != 0 ? 0x00400000u : 0u);
  } else if (exponent != 0) {
    bits = sign | ((exponent + (127 - 15)) << 23) | (mantissa << 13);  // rebias 15 -> 127
  } else {
    // Zero or subnormal: value = mantissa * 2^-24, exact in float (a normal float for
    // mantissa != 0), so one exact multiply does the normalisation.
    const float magnitude = static_cast<float>(mantissa) * 0x1p-24f;
    bits = sign | std::bit_cast<uint32_t>(magnitude);
  }
  return std::bit_cast<float>(bits);
}

// float -> half, round to nearest even. Overflow (|x| >= 65520) gives infinity.
inline uint16_t float_to_half(float f) {
  const uint32_t x = std::bit_cast<uint32_t>(f);
  const uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000u);
  const uint32_t ax = x & 0x7FFFFFFFu;
  if (ax > 0x7F800000u)  // NaN: keep the top 10 payload bits, set the quiet bit
    return static_cast<uint16_t>(sign | 0x7E00u | ((ax & 0x7FFFFFu) >> 13));
  // 65520 = 65504 (largest half) + half an ulp: the tie rounds to the even neighbour,
  // which is 2^16, i.e. infinity. Everything at or above it (and inf itself) is inf.
  if (ax >= 0x477FF000u) return static_cast<uint16_t>(sign | 0x7C00u);
  if (ax >= 0x38800000u) {
    // Normal half (>= 2^-14): rebias the exponent, then round the 13 dropped bits to
    // nearest even. A carry out of the mantissa correctly bumps the exponent.
    const uint32_t rebiased = ax - ((127u - 15u) << 23);
    const uint32_t rounded = rebiased + 0xFFFu + ((rebiased >> 13) & 1u);
    return static_cast<uint16_t>(sign | (rounded >> 13));
  }
  // Half subnormal range: result = round(|x| * 2^24) as an integer in [0, 0x400]
  // (0x400 is the smallest normal, which the encoding handles by itself).
  const uint32_t exponent = ax >> 23;
  if (exponent < 102) return sign;  // |x| < 2^-25: rounds to zero (also float subnormals)
  const uint32_t significand = (ax & 0x7FFFFFu) | 0x800000u;  // |x| = sig * 2^(e-150)
  const uint32_t shift = 126u - exponent;                     // 14..24
  uint32_t q = significand >> shift;
  const uint32_t rest = significand & ((1u << shift) - 1u);
  const uint32_t halfway = 1u << (shift - 1u);
  if (rest > halfway || (rest == halfway && (q & 1u))) ++q;
  return static_cast<uint16_t>(sign | q);
}

// bf16 -> float, exact (bf16 is the top half of a float).
inline float bf16_to_float(uint16_t b) { return std::bit_cast<float>(static_cast<uint32_t>(b) << 16); }

// float -> bf16, round to nearest even. NaN stays NaN (quiet bit set, so a payload
// living only in the dropped low bits cannot turn it into infinity); values that round
// past the largest finite bf16 become infinity, as the carry into the exponent does.
inline uint16_t float_to_bf16(float f) {
  const uint32_t x = std::bit_cast<uint32_t>(f);
  if ((x & 0x7FFFFFFFu) > 0x7F800000u) return static_cast<uint16_t>((x >> 16) | 0x0040u);
  return static_cast<uint16_t>((x + 0x7FFFu + ((x >> 16) & 1u)) >> 16);
}

// True when the CPU has F16C (x86 half conversion instructions); checked once.
bool cpu_has_f16c();

// Bulk conversions of n elements (F16C when available). src and dst must not overlap.
void half_to_float_n(const uint16_t* src, float* dst, size_t n);
void float_to_half_n(const float* src, uint16_t* dst, size_t n);
void bf16_to_float_n(const uint16_t* src, float* dst, size_t n);
void float_to_bf16_n(const float* src, uint16_t* dst, size_t n);

// The same, always with the portable scalar code (tests compare the two).
void half_to_float_n_portable(const uint16_t* src, float* dst, size_t n);
void float_to_half_n_portable(const float* src, uint16_t* dst, size_t n);

}  // namespace conflux
