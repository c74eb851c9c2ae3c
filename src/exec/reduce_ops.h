// Scalar definition of every (type, op) pair: the generic kernels are built from it, and
// the SIMD kernels use it for their tails, so both paths share one definition of the
// semantics documented in reduce.h.
#pragma once

#include <conflux/conflux.h>

#include <cstdint>
#include <type_traits>

#include "core/half.h"

namespace conflux::reduce_detail {

// Tags for the two 16-bit float formats; their storage is a raw uint16_t.
struct Fp16 {};
struct Bf16 {};

// Storage: the element type in memory. Acc: the type arithmetic happens in.
template <class T>
struct Elem {
  using Storage = T;
  using Acc = T;
  static Acc widen(Storage v) { return v; }
  static Storage narrow(Acc v) { return v; }
};
template <>
struct Elem<Fp16> {
  using Storage = uint16_t;
  using Acc = float;
  static Acc widen(Storage v) { return half_to_float(v); }
  static Storage narrow(Acc v) { return float_to_half(v); }
};
template <>
struct Elem<Bf16> {
  using Storage = uint16_t;
  using Acc = float;
  static Acc widen(Storage v) { return bf16_to_float(v); }
  static Storage narrow(Acc v) { return float_to_bf16(v); }
};

// a (op) b on the accumulation type. Avg is Sum here (the divide comes later).
template <cfxRedOp_t Op, class A>
inline A apply(A a, A b) {
  if constexpr (std::is_integral_v<A>) {
    // Unsigned arithmetic so signed overflow wraps instead of being undefined; 8-bit
    // values are widened to uint32_t first, because uint8_t * uint8_t promotes to int.
    using U = std::make_unsigned_t<A>;
    using Wide = std::conditional_t<(sizeof(U) < sizeof(uint32_t)), uint32_t, U>;
    const Wide ua = static_cast<U>(a), ub = static_cast<U>(b);
    if constexpr (Op == cfxSum || Op == cfxAvg) return static_cast<A>(static_cast<U>(ua + ub));
    if constexpr (Op == cfxProd) return static_cast<A>(static_cast<U>(ua * ub));
    if constexpr (Op == cfxMax) return a > b ? a : b;
    if constexpr (Op == cfxMin) return a < b ? a : b;
  } else {
    if constexpr (Op == cfxSum || Op == cfxAvg) return a + b;
    if constexpr (Op == cfxProd) return a * b;
    // NaN propagates (a first, then b through the failed comparison); this is what
    // vmaxps/vminps followed by a blend on isnan(a) compute, so SIMD and scalar agree.
    if constexpr (Op == cfxMax) return a != a ? a : (a > b ? a : b);
    if constexpr (Op == cfxMin) return a != a ? a : (a < b ? a : b);
  }
}

// Scalar loops, used as the tails of the blocked and SIMD kernels.
template <class T, cfxRedOp_t Op>
inline void binary_scalar(typename Elem<T>::Storage* dst, const typename Elem<T>::Storage* a,
                          const typename Elem<T>::Storage* b, size_t n) {
  for (size_t i = 0; i < n; ++i) dst[i] = Elem<T>::narrow(apply<Op>(Elem<T>::widen(a[i]), Elem<T>::widen(b[i])));
}

template <class T, cfxRedOp_t Op>
inline void many_scalar(typename Elem<T>::Storage* dst, const void* const* srcs, int nsrc, size_t offset,
                        size_t n) {
  using S = typename Elem<T>::Storage;
  for (size_t i = offset; i < offset + n; ++i) {
    auto acc = Elem<T>::widen(static_cast<const S*>(srcs[0])[i]);
    for (int k = 1; k < nsrc; ++k) acc = apply<Op>(acc, Elem<T>::widen(static_cast<const S*>(srcs[k])[i]));
    dst[i] = Elem<T>::narrow(acc);
  }
}

template <class T>
inline void avg_scalar(typename Elem<T>::Storage* buf, size_t n, int divisor) {
  using A = typename Elem<T>::Acc;
  // Integers: C++ division truncates toward zero, as NCCL's SumPostDiv does.
  // fp16/bf16: divide in float, round once. float/double: a true division, not a
  // multiply by 1/n, so the result is the correctly rounded quotient.
  // The divisor is widened (never narrowed: 300 ranks must not become an int8 44).
  using D = std::conditional_t<std::is_integral_v<A>,
                               std::conditional_t<std::is_signed_v<A>, int64_t, uint64_t>, A>;
  const D d = static_cast<D>(divisor);
  for (size_t i = 0; i < n; ++i)
    buf[i] = Elem<T>::narrow(static_cast<A>(static_cast<D>(Elem<T>::widen(buf[i])) / d));
}

// Calls f.template operator()<T>() with the C++ tag for a runtime datatype (for
// building the kernel tables).
template <class F>
inline void for_each_type(F&& f) {
  f.template operator()<int8_t>(cfxInt8);
  f.template operator()<uint8_t>(cfxUint8);
  f.template operator()<int32_t>(cfxInt32);
  f.template operator()<uint32_t>(cfxUint32);
  f.template operator()<int64_t>(cfxInt64);
  f.template operator()<uint64_t>(cfxUint64);
  f.template operator()<Fp16>(cfxFloat16);
  f.template operator()<float>(cfxFloat32);
  f.template operator()<double>(cfxFloat64);
  f.template operator()<Bf16>(cfxBfloat16);
}

}  // namespace conflux::reduce_detail
