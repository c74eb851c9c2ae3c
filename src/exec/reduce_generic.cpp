// Portable reduction kernels. The build uses -O2, where GCC only vectorises loops whose
// vector form replaces the scalar loop outright: no runtime alias checks, no epilogue.
// So the work goes in fixed-size blocks computed into a local buffer (which cannot alias
// the inputs) and then copied out; the fixed trip count vectorises fully, and a scalar
// loop does the last partial block. The local buffer also makes dst == a / dst == b safe.
#include <cstring>

#include "exec/reduce_internal.h"
#include "exec/reduce_ops.h"

namespace conflux {
namespace {

using namespace reduce_detail;

// Elements per block: 512 bytes of output, small enough to stay in registers/L1.
template <class S>
constexpr size_t kBlock = 512 / sizeof(S);

template <class T, cfxRedOp_t Op>
void binary_generic(void* dst, const void* a, const void* b, size_t n) {
  using S = typename Elem<T>::Storage;
  auto* d = static_cast<S*>(dst);
  const auto* pa = static_cast<const S*>(a);
  const auto* pb = static_cast<const S*>(b);
  constexpr size_t B = kBlock<S>;
  size_t i = 0;
  for (; i + B <= n; i += B) {
    S out[B];
    for (size_t j = 0; j < B; ++j)
      out[j] = Elem<T>::narrow(apply<Op>(Elem<T>::widen(pa[i + j]), Elem<T>::widen(pb[i + j])));
    std::memcpy(d + i, out, sizeof(out));
  }
  binary_scalar<T, Op>(d + i, pa + i, pb + i, n - i);
}

template <class T, cfxRedOp_t Op>
void many_generic(void* dst, const void* const* srcs, int nsrc, size_t n) {
  using S = typename Elem<T>::Storage;
  using A = typename Elem<T>::Acc;
  auto* d = static_cast<S*>(dst);
  constexpr size_t B = kBlock<S>;
  size_t i = 0;
  for (; i + B <= n; i += B) {
    // Accumulate the whole block over all sources before writing it: one pass over
    // memory, and fp16/bf16 round only once.
    A acc[B];
    const auto* s0 = static_cast<const S*>(srcs[0]) + i;
    for (size_t j = 0; j < B; ++j) acc[j] = Elem<T>::widen(s0[j]);
    for (int k = 1; k < nsrc; ++k) {
      const auto* sk = static_cast<const S*>(srcs[k]) + i;
      for (size_t j = 0; j < B; ++j) acc[j] = apply<Op>(acc[j], Elem<T>::widen(sk[j]));
    }
    S out[B];
    for (size_t j = 0; j < B; ++j) out[j] = Elem<T>::narrow(acc[j]);
    std::memcpy(d + i, out, sizeof(out));
  }
  many_scalar<T, Op>(d, srcs, nsrc, i, n - i);
}

template <class T>
void avg_generic(void* buf, size_t n, int divisor) {
  avg_scalar<T>(static_cast<typename Elem<T>::Storage*>(buf), n, divisor);
}

struct GenericTableBuilder {
  ReduceKernels* table;
  template <class T>
  void operator()(cfxDataType_t type) const {
    auto& bin = table->binary[type];
    auto& many = table->many[type];
    bin[cfxSum] = binary_generic<T, cfxSum>;
    bin[cfxProd] = binary_generic<T, cfxProd>;
    bin[cfxMax] = binary_generic<T, cfxMax>;
    bin[cfxMin] = binary_generic<T, cfxMin>;
    bin[cfxAvg] = bin[cfxSum];
    many[cfxSum] = many_generic<T, cfxSum>;
    many[cfxProd] = many_generic<T, cfxProd>;
    many[cfxMax] = many_generic<T, cfxMax>;
    many[cfxMin] = many_generic<T, cfxMin>;
    many[cfxAvg] = many[cfxSum];
    table->avg[type] = avg_generic<T>;
  }
};

ReduceKernels make_generic_table() {
  ReduceKernels table{};
  table.name = "generic";
  for_each_type(GenericTableBuilder{&table});
  return table;
}

}  // namespace

const ReduceKernels& generic_reduce_kernels() {
  static const ReduceKernels table = make_generic_table();
  return table;
}

}  // namespace conflux
