// Public reduction entry points: pick a kernel table once, then index it.
#include <cstdlib>
#include <cstring>

#include "core/config.h"
#include "core/copy.h"
#include "core/log.h"
#include "exec/reduce_internal.h"

namespace conflux {
namespace {

// Local table rather than cfxTypeSize: the kernels must not depend on the API layer.
size_t element_size(cfxDataType_t type) {
  static constexpr size_t kSizes[cfxNumTypes] = {1, 1, 4, 4, 8, 8, 2, 4, 8, 2};
  return kSizes[type];
}

bool valid(cfxDataType_t type, cfxRedOp_t op) {
  return static_cast<unsigned>(type) < cfxNumTypes && static_cast<unsigned>(op) < cfxNumOps;
}

// CPU capability first; CONFLUX_REDUCE_ISA=generic forces the portable kernels (to
// compare, or to rule the SIMD path out when chasing a wrong result), =avx2 asks for
// AVX2 and falls back with a warning when the CPU lacks it.
const ReduceKernels& choose_kernels() {
  const ReduceKernels* avx2 = avx2_reduce_kernels();
  const char* env = config().reduce_isa.c_str();
  const ReduceKernels* chosen = avx2 ? avx2 : &generic_reduce_kernels();
  if (env && *env) {
    if (std::strcmp(env, "generic") == 0) {
      chosen = &generic_reduce_kernels();
    } else if (std::strcmp(env, "avx2") == 0) {
      if (!avx2) CFX_WARN(kInit, "CONFLUX_REDUCE_ISA=avx2 but this CPU lacks AVX2/FMA/F16C; using generic kernels");
    } else {
      CFX_WARN(kInit, "CONFLUX_REDUCE_ISA=%s not understood (generic|avx2); using %s", env, chosen->name);
    }
  }
  CFX_INFO(kInit, "reduction kernels: %s", chosen->name);
  return *chosen;
}

}  // namespace

const ReduceKernels& active_reduce_kernels() {
  static const ReduceKernels& kernels = choose_kernels();
  return kernels;
}

ReduceFn reduce_fn(cfxDataType_t type, cfxRedOp_t op) {
  if (!valid(type, op)) return nullptr;
  return active_reduce_kernels().binary[type][op];
}

void reduce_many(void* dst, const void* const* srcs, int nsrc, size_t count, cfxDataType_t type, cfxRedOp_t op) {
  if (!valid(type, op) || nsrc < 1 || count == 0) return;
  if (nsrc == 1) {
    // Nothing to combine: a copy (fp16/bf16 widen-and-round would be the identity
    // except for quieting signalling NaNs, which is not worth a conversion pass).
    if (dst != srcs[0]) move_bytes(dst, srcs[0], count * element_size(type));
    return;
  }
  active_reduce_kernels().many[type][op](dst, srcs, nsrc, count);
}

void finalize_avg(void* buf, size_t count, cfxDataType_t type, int n) {
  if (static_cast<unsigned>(type) >= cfxNumTypes || n <= 1 || count == 0) return;  // n == 1: identity
  active_reduce_kernels().avg[type](buf, count, n);
}

const char* reduce_isa() { return active_reduce_kernels().name; }

}  // namespace conflux
