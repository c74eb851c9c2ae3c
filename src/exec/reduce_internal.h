// Kernel tables behind reduce.h. Each instruction-set variant fills one table; reduce.cpp
// picks one at first use. Tests and benchmarks read the tables directly, so both
// variants run in one process whatever the CPU default or CONFLUX_REDUCE_ISA says.
#pragma once

#include "exec/reduce.h"

namespace conflux {

using ReduceManyFn = void (*)(void* dst, const void* const* srcs, int nsrc, size_t count);
using FinalizeAvgFn = void (*)(void* buf, size_t count, int n);

struct ReduceKernels {
  const char* name;                                // "generic", "avx2"
  ReduceFn binary[cfxNumTypes][cfxNumOps];         // Avg entries hold the Sum kernel
  ReduceManyFn many[cfxNumTypes][cfxNumOps];       // nsrc >= 2 (reduce_many handles 1)
  FinalizeAvgFn avg[cfxNumTypes];
};

// Portable kernels, written so the compiler vectorises them for the baseline ISA.
const ReduceKernels& generic_reduce_kernels();
// AVX2+FMA+F16C kernels; nullptr when this CPU (or this build's target) lacks them.
const ReduceKernels* avx2_reduce_kernels();
// The table that reduce.h's functions use, chosen once (CPU, then CONFLUX_REDUCE_ISA).
const ReduceKernels& active_reduce_kernels();

}  // namespace conflux
