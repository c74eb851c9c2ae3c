// Reduction kernels against memcpy, 4 KiB .. 64 MiB per operand.
//
// bytes_per_second counts memory traffic: every byte read plus every byte written
// (memcpy: 2 x size; binary reduce: 3 x size; reduce_many with n sources: (n+1) x size).
// With that convention a kernel that runs "at memory speed" shows the same GB/s as
// memcpy, whatever its number of operands. size is the bytes of one operand.
//
// Variants: "active" uses the public reduce_fn (the runtime choice), "generic" the
// portable table, so the two ISAs can be compared on one machine.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "core/half.h"
#include "exec/reduce.h"
#include "exec/reduce_internal.h"

namespace conflux {
namespace {

constexpr int64_t kMinBytes = 4 << 10;
constexpr int64_t kMaxBytes = 64 << 20;

// Buffers filled with small valid values of the element type (no NaN/inf slow paths),
// touched once so page faults are not timed.
std::vector<uint8_t> make_buffer(size_t bytes, cfxDataType_t type) {
  std::vector<uint8_t> buf(bytes);
  const size_t n = bytes / 4;
  switch (type) {
    case cfxFloat32: {
      auto* p = reinterpret_cast<float*>(buf.data());
      for (size_t i = 0; i < n; ++i) p[i] = static_cast<float>(i % 17) * 0.25f;
      break;
    }
    case cfxFloat16:
    case cfxBfloat16: {
      auto* p = reinterpret_cast<uint16_t*>(buf.data());
      for (size_t i = 0; i < bytes / 2; ++i) {
        const float v = static_cast<float>(i % 17) * 0.25f;
        p[i] = type == cfxFloat16 ? float_to_half(v) : float_to_bf16(v);
      }
      break;
    }
    case cfxFloat64: {
      auto* p = reinterpret_cast<double*>(buf.data());
      for (size_t i = 0; i < bytes / 8; ++i) p[i] = static_cast<double>(i % 17) * 0.25;
      break;
    }
    default:
      for (size_t i = 0; i < bytes; ++i) buf[i] = static_cast<uint8_t>(i * 7);
  }
  return buf;
}

size_t type_size(cfxDataType_t type) {
  switch (type) {
    case cfxFloat16: case cfxBfloat16: return 2;
    case cfxFloat64: case cfxInt64: case cfxUint64: return 8;
    case cfxInt8: case cfxUint8: return 1;
    default: return 4;
  }
}

void BM_Memcpy(benchmark::State& state) {
  const size_t bytes = static_cast<size_t>(state.range(0));
  auto src = make_buffer(bytes, cfxUint8), dst = make_buffer(bytes, cfxUint8);
  for (auto _ : state) {
    std::memcpy(dst.data(), src.data(), bytes);
    benchmark::DoNotOptimize(dst.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * 2 * static_cast<int64_t>(bytes));
}

// dst = a op b, dst separate (out-of-place) or dst == a (in-place, the executor's
// recv-reduce into its accumulation buffer).
void run_binary(benchmark::State& state, ReduceFn fn, cfxDataType_t type, bool in_place) {
  const size_t bytes = static_cast<size_t>(state.range(0));
  auto a = make_buffer(bytes, type), b = make_buffer(bytes, type), out = make_buffer(bytes, type);
  void* dst = in_place ? a.data() : out.data();
  const size_t count = bytes / type_size(type);
  for (auto _ : state) {
    fn(dst, a.data(), b.data(), count);
    benchmark::DoNotOptimize(dst);
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * 3 * static_cast<int64_t>(bytes));
}

void BM_Reduce(benchmark::State& state, cfxDataType_t type, bool generic, bool in_place) {
  const ReduceFn fn = generic ? generic_reduce_kernels().binary[type][cfxSum] : reduce_fn(type, cfxSum);
  state.SetLabel(generic ? "generic" : reduce_isa());
  run_binary(state, fn, type, in_place);
}

void BM_ReduceMany(benchmark::State& state, int nsrc, bool generic) {
  const size_t bytes = static_cast<size_t>(state.range(0));
  std::vector<std::vector<uint8_t>> inputs;
  std::vector<const void*> srcs;
  for (int k = 0; k < nsrc; ++k) inputs.push_back(make_buffer(bytes, cfxFloat32));
  for (auto& in : inputs) srcs.push_back(in.data());
  auto out = make_buffer(bytes, cfxFloat32);
  const size_t count = bytes / sizeof(float);
  const ReduceManyFn many = generic ? generic_reduce_kernels().many[cfxFloat32][cfxSum] : nullptr;
  state.SetLabel(generic ? "generic" : reduce_isa());
  for (auto _ : state) {
    if (many) many(out.data(), srcs.data(), nsrc, count);
    else reduce_many(out.data(), srcs.data(), nsrc, count, cfxFloat32, cfxSum);
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * (nsrc + 1) * static_cast<int64_t>(bytes));
}

void sizes(benchmark::internal::Benchmark* b) { b->RangeMultiplier(4)->Range(kMinBytes, kMaxBytes); }

BENCHMARK(BM_Memcpy)->Apply(sizes);
BENCHMARK_CAPTURE(BM_Reduce, f32_sum, cfxFloat32, false, false)->Apply(sizes);
BENCHMARK_CAPTURE(BM_Reduce, f32_sum_inplace, cfxFloat32, false, true)->Apply(sizes);
BENCHMARK_CAPTURE(BM_Reduce, f32_sum_generic, cfxFloat32, true, false)->Apply(sizes);
BENCHMARK_CAPTURE(BM_Reduce, f16_sum, cfxFloat16, false, false)->Apply(sizes);
BENCHMARK_CAPTURE(BM_Reduce, f16_sum_generic, cfxFloat16, true, false)->Apply(sizes);
BENCHMARK_CAPTURE(BM_Reduce, bf16_sum, cfxBfloat16, false, false)->Apply(sizes);
BENCHMARK_CAPTURE(BM_Reduce, bf16_sum_generic, cfxBfloat16, true, false)->Apply(sizes);
BENCHMARK_CAPTURE(BM_Reduce, f64_sum, cfxFloat64, false, false)->Apply(sizes);
BENCHMARK_CAPTURE(BM_Reduce, i32_sum, cfxInt32, false, false)->Apply(sizes);
BENCHMARK_CAPTURE(BM_ReduceMany, f32_sum_2src, 2, false)->Apply(sizes);
BENCHMARK_CAPTURE(BM_ReduceMany, f32_sum_4src, 4, false)->Apply(sizes);
BENCHMARK_CAPTURE(BM_ReduceMany, f32_sum_8src, 8, false)->Apply(sizes);
BENCHMARK_CAPTURE(BM_ReduceMany, f32_sum_8src_generic, 8, true)->Apply(sizes);

}  // namespace
}  // namespace conflux
