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
// exactly. They do not depend on FTZ/DAZ; float -> half assumes the default rounding mode
// (round to nearest), which the library never changes.
//
// The *_n bulk functions use F16C when the CPU has it (checked once at runtime) and the
// portable code otherwise.
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>

namespace conflux {

// Both functions below are written without branches (every case computed, one picked by
// mask selects) so the portable kernels' loops can vectorise; the result is still exact.
// Plain ?: is not enough: GCC sinks the float arithmetic into a branch and then will not
// if-convert it back (the float op could trap), so the loop stays scalar.
namespace half_detail {
inline uint32_t select(bool condition, uint32_t if_true, uint32_t if_false) {
  const uint32_t mask = 0u - static_cast<uint32_t>(condition);
  return (if_true & mask) | (if_false & ~mask);
}
}  // namespace half_detail

// half -> float, exact.
inline float half_to_float(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t magnitude = h & 0x7FFFu;  // exponent and mantissa
  const uint32_t mantissa = h & 0x3FFu;
  // Normal: rebias the exponent 15 -> 127 (mantissa moves up with it).
  const uint32_t normal = (magnitude << 13) + ((127u - 15u) << 23);
  // Infinity, or NaN made quiet (F16C quiets signalling NaNs on widening too).
  const uint32_t inf_nan = 0x7F800000u | (mantissa << 13) | half_detail::select(mantissa != 0, 0x00400000u, 0u);
  // Zero or subnormal: value = mantissa * 2^-24, exact in float (a normal float for
  // mantissa != 0), so one exact conversion and multiply do the normalisation.
  const uint32_t subnormal = std::bit_cast<uint32_t>(static_cast<float>(static_cast<int32_t>(mantissa)) * 0x1p-24f);
  using half_detail::select;
  const uint32_t bits = select(magnitude >= 0x7C00u, inf_nan, select(magnitude >= 0x0400u, normal, subnormal));
  return std::bit_cast<float>(sign | bits);
}

// float -> half, round to nearest even. Overflow (|x| >= 65520) gives infinity.
inline uint16_t float_to_half(float f) {
  const uint32_t x = std::bit_cast<uint32_t>(f);
  const uint32_t sign = (x >> 16) & 0x8000u;
  const uint32_t ax = x & 0x7FFFFFFFu;
  // NaN: keep the top 10 payload bits, set the quiet bit.
  const uint32_t nan = 0x7E00u | ((ax & 0x7FFFFFu) >> 13);
  // Normal half (>= 2^-14): rebias the exponent, then round the 13 dropped bits to
  // nearest even. A carry out of the mantissa correctly bumps the exponent.
  const uint32_t rebiased = ax - ((127u - 15u) << 23);
  const uint32_t normal = (rebiased + 0xFFFu + ((rebiased >> 13) & 1u)) >> 13;
  // Half subnormal range (< 2^-14): adding 0.5 puts the float ulp at 2^-24, the half
  // subnormal step, so the FPU's round-to-nearest-even does the rounding; the bits above
  // 0.5 are the half encoding (0x400 when it rounds up to the smallest normal). Float
  // subnormal inputs give 0 with or without DAZ. Assumes the default rounding mode.
  const uint32_t subnormal = std::bit_cast<uint32_t>(std::bit_cast<float>(ax) + 0.5f) - 0x3F000000u;
  // 65520 = 65504 (largest half) + half an ulp: the tie rounds to the even neighbour,
  // which is 2^16, i.e. infinity. Everything at or above it (and inf itself) is inf.
  using half_detail::select;
  const uint32_t bits =
      select(ax > 0x7F800000u, nan, select(ax >= 0x477FF000u, 0x7C00u, select(ax >= 0x38800000u, normal, subnormal)));
  return static_cast<uint16_t>(sign | bits);
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
