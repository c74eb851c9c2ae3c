// The combine's row kernels: the vector versions give the portable loops'
// bits (and the store half.h's scalar conversions) for every datatype, every
// tail length and the awkward values (NaN, infinities, subnormals, values
// that round past the largest finite).
#include "core/moe_rows.h"

#include "core/half.h"

#include <gtest/gtest.h>

#include <cstring>
#include <limits>
#include <random>
#include <vector>

namespace {

using conflux::moe_accumulate_for;
using conflux::moe_accumulate_portable;
using conflux::moe_store_for;

std::vector<uint8_t> random_row(size_t n, size_t elem, std::mt19937& rng) {
  std::vector<uint8_t> row(n * elem);
  for (auto& b : row) b = static_cast<uint8_t>(rng());
  return row;
}

std::vector<float> awkward_floats(size_t n, std::mt19937& rng) {
  const float special[] = {0.0f, -0.0f, 1e-40f, -1e-41f, 3.0e38f, -3.3895e38f, 65504.0f, 65520.0f,
                           1.0f / 0.0f, -1.0f / 0.0f, std::numeric_limits<float>::quiet_NaN(), 6.0e-8f};
  std::vector<float> v(n);
  std::uniform_real_distribution<float> u(-70000.0f, 70000.0f);
  for (size_t i = 0; i < n; ++i) v[i] = i % 3 == 0 ? special[(i / 3) % std::size(special)] : u(rng);
  for (size_t i = 5; i < n; i += 17) {  // NaNs with payloads only in the low bits
    const uint32_t bits = 0x7F800001u + static_cast<uint32_t>(i);
    std::memcpy(&v[i], &bits, sizeof bits);
  }
  return v;
}

class MoeRows : public ::testing::TestWithParam<cfxDataType_t> {};

TEST_P(MoeRows, AccumulateMatchesThePortableLoopBitForBit) {
  const cfxDataType_t t = GetParam();
  const size_t elem = t == cfxFloat32 ? 4 : 2;
  std::mt19937 rng(7);
  for (size_t hidden : {0, 1, 7, 8, 9, 15, 16, 17, 2048, 2051}) {
    const std::vector<uint8_t> row = random_row(hidden, elem, rng);
    std::vector<float> a = awkward_floats(hidden, rng), b = a;
    for (float w : {0.25f, -1.5f, 3.0e-3f}) {
      moe_accumulate_for(t)(a.data(), row.data(), w, hidden);
      moe_accumulate_portable(t)(b.data(), row.data(), w, hidden);
    }
    if (hidden > 0) {  // floats compared as bits: NaN == NaN here
      ASSERT_EQ(0, std::memcmp(a.data(), b.data(), hidden * sizeof(float))) << "hidden " << hidden;
    }
  }
}

TEST_P(MoeRows, StoreMatchesTheScalarConversionsBitForBit) {
  const cfxDataType_t t = GetParam();
  const size_t elem = t == cfxFloat32 ? 4 : 2;
  std::mt19937 rng(11);
  for (size_t hidden : {0, 1, 7, 8, 9, 31, 2048, 2051}) {
    const std::vector<float> acc = awkward_floats(hidden, rng);
    std::vector<uint8_t> a(hidden * elem + 1, 0xAB), b = a;
    moe_store_for(t)(a.data(), acc.data(), hidden);
    for (size_t i = 0; i < hidden; ++i) {
      const uint16_t h = t == cfxBfloat16 ? conflux::float_to_bf16(acc[i]) : conflux::float_to_half(acc[i]);
      if (t == cfxFloat32) std::memcpy(b.data() + i * 4, &acc[i], 4);
      else std::memcpy(b.data() + i * 2, &h, 2);
    }
    ASSERT_EQ(a, b) << "hidden " << hidden;
    EXPECT_EQ(0xAB, a.back()) << "wrote past the row";
  }
}

INSTANTIATE_TEST_SUITE_P(Datatypes, MoeRows, ::testing::Values(cfxFloat32, cfxBfloat16, cfxFloat16),
                         [](const auto& param_info) {
                           return std::string(param_info.param == cfxFloat32 ? "Float32" : param_info.param == cfxBfloat16 ? "Bfloat16" : "Float16");
                         });

}  // namespace
