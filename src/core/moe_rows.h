// The combine's inner loops: acc += w * row for one token row of the MoE
// datatype, and the accumulated float row stored back in that datatype.
#pragma once

#include <conflux/conflux.h>

#include <cstddef>
#include <cstdint>

namespace conflux {

// acc[i] = fma(w, row[i], acc[i]) for i < hidden; row holds float, bf16 or fp16 bits.
using MoeAccumulateFn = void (*)(float* acc, const uint8_t* row, float w, size_t hidden);
// out[i] = acc[i] rounded to nearest even in the datatype.
using MoeStoreFn = void (*)(uint8_t* out, const float* acc, size_t hidden);

// The fastest accumulation this CPU runs (AVX2+FMA where present), with the
// portable loop's bits, and that loop itself (tests compare the two).
MoeAccumulateFn moe_accumulate_for(cfxDataType_t t);
MoeAccumulateFn moe_accumulate_portable(cfxDataType_t t);
// The store: half.h's bulk conversions (float_to_bf16_n, float_to_half_n).
MoeStoreFn moe_store_for(cfxDataType_t t);

}  // namespace conflux
