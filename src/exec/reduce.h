// Element-wise reduction kernels used by the executor (recv-reduce steps) and by the
// shared-memory collectives. Semantics shared by every kernel:
//  - Integers: Sum and Prod wrap modulo 2^bits (computed in unsigned arithmetic).
//  - fp16/bf16: widened to float, computed in float, rounded once to nearest even.
//  - Max/Min on floating types propagate NaN: if a is NaN the result is a, else if b is
//    NaN the result is b (unlike fmax/fmin, which drop NaN). Equal values (including
//    +0/-0) give b for Max and Min, i.e. Max = (a > b ? a : b), Min = (a < b ? a : b),
//    after the NaN check on a.
//  - Avg reduces as Sum; finalize_avg divides once at the end.
// CONFLUX_REDUCE_ISA=generic|avx2 overrides the runtime choice of kernels (read once).
#pragma once
#include "core/coll.h"

#include <conflux/conflux.h>
#include <cstddef>
namespace conflux {
// ReduceFn (core/coll.h): dst[i] = a[i] (op) b[i]. Avg reduces as Sum; the divide happens once at
// the end (finalize_avg).
ReduceFn reduce_fn(cfxDataType_t type, cfxRedOp_t op);   // nullptr for an invalid type/op
// Reduces `nsrc` inputs (nsrc >= 1) into dst in one pass: dst[i] = srcs[0][i] op srcs[1][i] op ...
// (left to right; used by shared-memory collectives that read all peers' slices at once). dst may
// be any of the sources at the same address: every block is read from all sources before it is
// written. For fp16/bf16 the accumulation happens in float and rounds once at the end.
void reduce_many(void* dst, const void* const* srcs, int nsrc, size_t count, cfxDataType_t type, cfxRedOp_t op);
// Divides each element by n after an Avg reduced by Sum (integers: truncating division as NCCL;
// fp16/bf16 through float, round to nearest even).
void finalize_avg(void* buf, size_t count, cfxDataType_t type, int n);
// Name of the kernel variant chosen at runtime ("avx2", "generic") for logs and benchmarks.
const char* reduce_isa();
}
