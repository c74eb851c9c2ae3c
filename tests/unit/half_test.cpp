// fp16 / bf16 conversions: exhaustive over the 16-bit side, sampled plus every rounding
// boundary on the float side, and the F16C path compared bit for bit with the portable one.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "core/half.h"

namespace conflux {
namespace {

uint32_t bits_of(float f) { return std::bit_cast<uint32_t>(f); }
float float_of(uint32_t u) { return std::bit_cast<float>(u); }

bool half_is_nan(uint16_t h) { return (h & 0x7C00u) == 0x7C00u && (h & 0x3FFu) != 0; }

// The value of a half from its fields, computed in double (exact).
double half_value(uint16_t h) {
  const int e = (h >> 10) & 0x1F;
  const int m = h & 0x3FF;
  const double sign = (h & 0x8000) ? -1.0 : 1.0;
  if (e == 31) return m ? std::numeric_limits<double>::quiet_NaN() : sign * INFINITY;
  if (e == 0) return sign * std::ldexp(m, -24);
  return sign * std::ldexp(1024 + m, e - 25);
}

// Independent float -> half: nearest of the sorted finite halves, ties to even, with
// the overflow rule of IEEE (rounding past 65504 by half an ulp or more gives inf).
uint16_t reference_float_to_half(float f) {
  static const std::vector<double> positives = [] {
    std::vector<double> v;
    for (uint32_t h = 0; h <= 0x7BFF; ++h) v.push_back(half_value(static_cast<uint16_t>(h)));
    return v;
  }();
  const uint16_t sign = std::signbit(f) ? 0x8000 : 0;
  const double a = std::fabs(static_cast<double>(f));
  if (a >= 65520.0) return sign | 0x7C00;
  const auto it = std::lower_bound(positives.begin(), positives.end(), a);
  const uint32_t hi = static_cast<uint32_t>(it - positives.begin());
  if (hi == 0 || positives[hi] == a) return static_cast<uint16_t>(sign | hi);
  const uint32_t lo = hi - 1;
  if (hi == positives.size()) return static_cast<uint16_t>(sign | lo);  // 65504 < a < 65520
  const double dlo = a - positives[lo], dhi = positives[hi] - a;
  const uint32_t pick = dlo < dhi ? lo : dhi < dlo ? hi : ((lo & 1) ? hi : lo);
  return static_cast<uint16_t>(sign | pick);
}

TEST(HalfTest, WideningIsExactForAllPatterns) {
  for (uint32_t h = 0; h < 65536; ++h) {
    const float f = half_to_float(static_cast<uint16_t>(h));
    if (half_is_nan(static_cast<uint16_t>(h))) {
      // Sign kept, payload kept in the top bits, quiet bit set (what F16C does).
      const uint32_t expected = ((h & 0x8000u) << 16) | 0x7FC00000u | ((h & 0x3FFu) << 13);
      ASSERT_EQ(bits_of(f), expected) << std::hex << h;
    } else {
      ASSERT_EQ(static_cast<double>(f), half_value(static_cast<uint16_t>(h))) << std::hex << h;
      ASSERT_EQ(std::signbit(f), (h & 0x8000u) != 0) << std::hex << h;
    }
  }
}

TEST(HalfTest, RoundTripIsIdentityForAllPatterns) {
  for (uint32_t h = 0; h < 65536; ++h) {
    const uint16_t back = float_to_half(half_to_float(static_cast<uint16_t>(h)));
    const uint16_t expected = half_is_nan(static_cast<uint16_t>(h)) ? static_cast<uint16_t>(h | 0x0200u)
                                                                     : static_cast<uint16_t>(h);
    ASSERT_EQ(back, expected) << std::hex << h;
  }
}

TEST(HalfTest, NarrowingRoundsToNearestEvenAtEveryBoundary) {
  // For every pair of neighbouring finite halves: the midpoint (a tie) and the floats
  // just either side of it, in both signs; plus the exact values.
  for (uint32_t h = 0; h < 0x7C00; ++h) {
    const double lo = half_value(static_cast<uint16_t>(h));
    const double hi = h + 1 < 0x7C00 ? half_value(static_cast<uint16_t>(h + 1)) : 65536.0;
    const float mid = static_cast<float>((lo + hi) / 2);  // exact: 12 significant bits
    ASSERT_EQ(static_cast<double>(mid), (lo + hi) / 2);
    for (float f : {static_cast<float>(lo), mid, std::nextafter(mid, 0.0f), std::nextafter(mid, INFINITY)}) {
      ASSERT_EQ(float_to_half(f), reference_float_to_half(f)) << std::hex << bits_of(f);
      ASSERT_EQ(float_to_half(-f), reference_float_to_half(-f)) << std::hex << bits_of(-f);
    }
  }
  // Ties go to the even neighbour.
  EXPECT_EQ(float_to_half(1.0f + 0x1p-11f), 0x3C00);          // between 0x3C00 and 0x3C01
  EXPECT_EQ(float_to_half(1.0f + 3 * 0x1p-11f), 0x3C02);      // between 0x3C01 and 0x3C02
  EXPECT_EQ(float_to_half(0x1p-25f), 0x0000);                 // half the smallest subnormal
  EXPECT_EQ(float_to_half(3 * 0x1p-25f), 0x0002);             // 1.5 x smallest subnormal
  EXPECT_EQ(float_to_half(std::nextafter(0x1p-25f, 1.0f)), 0x0001);
}

TEST(HalfTest, NarrowingSpecialValues) {
  EXPECT_EQ(float_to_half(65504.0f), 0x7BFF);
  EXPECT_EQ(float_to_half(65519.99f), 0x7BFF);
  EXPECT_EQ(float_to_half(65520.0f), 0x7C00);  // the tie rounds to even: infinity
  EXPECT_EQ(float_to_half(1e9f), 0x7C00);
  EXPECT_EQ(float_to_half(-1e9f), 0xFC00);
  EXPECT_EQ(float_to_half(INFINITY), 0x7C00);
  EXPECT_EQ(float_to_half(-INFINITY), 0xFC00);
  EXPECT_EQ(float_to_half(0.0f), 0x0000);
  EXPECT_EQ(float_to_half(-0.0f), 0x8000);
  EXPECT_EQ(float_to_half(std::numeric_limits<float>::denorm_min()), 0x0000);
  EXPECT_EQ(float_to_half(-std::numeric_limits<float>::denorm_min()), 0x8000);
  EXPECT_EQ(float_to_half(0x1p-14f), 0x0400);                                   // smallest normal
  EXPECT_EQ(float_to_half(std::nextafter(0x1p-14f, 0.0f)), 0x0400);             // rounds up into it
  EXPECT_EQ(float_to_half(float_of(0x7F800001u)), 0x7E00);  // signalling NaN: stays NaN, quiet
  EXPECT_EQ(float_to_half(float_of(0xFFC12345u)), 0xFE09);
}

TEST(HalfTest, NarrowingMatchesReferenceOnSampledFloats) {
  // Every 4099th float bit pattern (about a million, all exponents), against the
  // independent reference; NaNs only need to stay NaN here.
  for (uint64_t u = 0; u <= 0xFFFFFFFFull; u += 4099) {
    const float f = float_of(static_cast<uint32_t>(u));
    const uint16_t got = float_to_half(f);
    if (std::isnan(f)) {
      ASSERT_TRUE(half_is_nan(got)) << std::hex << u;
      continue;
    }
    ASSERT_EQ(got, reference_float_to_half(f)) << std::hex << u;
  }
}

TEST(HalfTest, F16cBulkMatchesPortableBitForBit) {
  if (!cpu_has_f16c()) GTEST_SKIP() << "no F16C on this CPU";
  std::vector<uint16_t> halves(65536);
  for (uint32_t h = 0; h < 65536; ++h) halves[h] = static_cast<uint16_t>(h);
  std::vector<float> hw(65536), sw(65536);
  half_to_float_n(halves.data(), hw.data(), halves.size());
  half_to_float_n_portable(halves.data(), sw.data(), halves.size());
  for (uint32_t h = 0; h < 65536; ++h) ASSERT_EQ(bits_of(hw[h]), bits_of(sw[h])) << std::hex << h;

  // Float side: sampled bit patterns (NaN payloads included) plus all tie points.
  std::vector<float> floats;
  for (uint64_t u = 0; u <= 0xFFFFFFFFull; u += 65521) floats.push_back(float_of(static_cast<uint32_t>(u)));
  for (uint32_t h = 0; h < 0x7C00; ++h) {
    const float mid = static_cast<float>((half_value(static_cast<uint16_t>(h)) +
                                          (h + 1 < 0x7C00 ? half_value(static_cast<uint16_t>(h + 1)) : 65536.0)) / 2);
    floats.push_back(mid);
    floats.push_back(-mid);
  }
  std::vector<uint16_t> hw16(floats.size()), sw16(floats.size());
  float_to_half_n(floats.data(), hw16.data(), floats.size());
  float_to_half_n_portable(floats.data(), sw16.data(), floats.size());
  for (size_t i = 0; i < floats.size(); ++i) ASSERT_EQ(hw16[i], sw16[i]) << std::hex << bits_of(floats[i]);
}

// ---- bf16 ---------------------------------------------------------------------------

TEST(Bf16Test, WideningAndRoundTripForAllPatterns) {
  for (uint32_t b = 0; b < 65536; ++b) {
    const float f = bf16_to_float(static_cast<uint16_t>(b));
    ASSERT_EQ(bits_of(f), b << 16);
    const bool nan = (b & 0x7F80u) == 0x7F80u && (b & 0x7Fu) != 0;
    ASSERT_EQ(float_to_bf16(f), nan ? (b | 0x40u) : b) << std::hex << b;
  }
}

TEST(Bf16Test, RoundsToNearestEven) {
  EXPECT_EQ(float_to_bf16(float_of(0x3F808000u)), 0x3F80);  // tie, 0x3F80 is even
  EXPECT_EQ(float_to_bf16(float_of(0x3F818000u)), 0x3F82);  // tie, 0x3F81 is odd
  EXPECT_EQ(float_to_bf16(float_of(0x3F808001u)), 0x3F81);  // just above the tie
  EXPECT_EQ(float_to_bf16(float_of(0x3F807FFFu)), 0x3F80);  // just below
  EXPECT_EQ(float_to_bf16(float_of(0xBF818000u)), 0xBF82);  // negative tie
  EXPECT_EQ(float_to_bf16(float_of(0x3F80FFFFu)), 0x3F81);
  EXPECT_EQ(float_to_bf16(float_of(0x3FFFFFFFu)), 0x4000);  // carry into the exponent
  // Subnormals round like everything else.
  EXPECT_EQ(float_to_bf16(float_of(0x00008000u)), 0x0000);
  EXPECT_EQ(float_to_bf16(float_of(0x00018000u)), 0x0002);
  EXPECT_EQ(float_to_bf16(float_of(0x00008001u)), 0x0001);
}

TEST(Bf16Test, OverflowGoesToInfinityAndNanStaysNan) {
  EXPECT_EQ(float_to_bf16(float_of(0x7F7F7FFFu)), 0x7F7F);  // below the tie: largest finite
  EXPECT_EQ(float_to_bf16(float_of(0x7F7F8000u)), 0x7F80);  // tie with odd 0x7F7F: inf
  EXPECT_EQ(float_to_bf16(std::numeric_limits<float>::max()), 0x7F80);
  EXPECT_EQ(float_to_bf16(-std::numeric_limits<float>::max()), 0xFF80);
  EXPECT_EQ(float_to_bf16(INFINITY), 0x7F80);
  EXPECT_EQ(float_to_bf16(-INFINITY), 0xFF80);
  // A NaN whose payload is only in the dropped bits must not become infinity.
  EXPECT_EQ(float_to_bf16(float_of(0x7F800001u)), 0x7FC0);
  EXPECT_EQ(float_to_bf16(float_of(0xFF80FFFFu)), 0xFFC0);
  EXPECT_EQ(float_to_bf16(float_of(0x7FFFFFFFu)), 0x7FFF);  // no carry out of a NaN
  EXPECT_EQ(float_to_bf16(float_of(0xFFC12345u)), 0xFFC1);
}

TEST(Bf16Test, MatchesNearestNeighbourOnSampledFloats) {
  for (uint64_t u = 0; u <= 0xFFFFFFFFull; u += 4099) {
    const uint32_t x = static_cast<uint32_t>(u);
    const float f = float_of(x);
    const uint16_t got = float_to_bf16(f);
    if (std::isnan(f)) {
      ASSERT_TRUE(std::isnan(bf16_to_float(got))) << std::hex << x;
      continue;
    }
    // Neighbours by truncation and one bf16 ulp up (in magnitude), compared in double.
    const uint16_t lo = static_cast<uint16_t>(x >> 16), hi = static_cast<uint16_t>(lo + 1);
    const double a = std::fabs(static_cast<double>(f));
    const double dlo = a - std::fabs(static_cast<double>(bf16_to_float(lo)));
    // Above the largest finite bf16 the upper neighbour is 2^128 (IEEE overflow rule).
    const double hi_value = (lo & 0x7FFFu) == 0x7F7Fu ? std::ldexp(1.0, 128) : std::fabs(static_cast<double>(bf16_to_float(hi)));
    const double dhi = hi_value - a;
    if (dlo == 0) {
      ASSERT_EQ(got, lo) << std::hex << x;
      continue;
    }
    const uint16_t expected = dlo < dhi ? lo : dhi < dlo ? hi : ((lo & 1) ? hi : lo);
    ASSERT_EQ(got, expected) << std::hex << x;
  }
}

TEST(Bf16Test, BulkMatchesScalar) {
  std::vector<float> floats;
  for (uint64_t u = 0; u <= 0xFFFFFFFFull; u += 65521) floats.push_back(float_of(static_cast<uint32_t>(u)));
  std::vector<uint16_t> out(floats.size());
  float_to_bf16_n(floats.data(), out.data(), floats.size());
  for (size_t i = 0; i < floats.size(); ++i) ASSERT_EQ(out[i], float_to_bf16(floats[i]));
  std::vector<float> back(out.size());
  bf16_to_float_n(out.data(), back.data(), out.size());
  for (size_t i = 0; i < out.size(); ++i) ASSERT_EQ(bits_of(back[i]), static_cast<uint32_t>(out[i]) << 16);
}

}  // namespace
}  // namespace conflux
