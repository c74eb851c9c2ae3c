#include "perf_check.h"

#include "core/half.h"

#include <algorithm>
#include <cmath>
#include <cstdint>

namespace conflux::tools {
namespace {

double value_at(int rank, size_t i, cfxRedOp_t op) {
  if (op == cfxProd) return 1.0 + static_cast<double>((static_cast<size_t>(rank) + i) % 3 == 0);
  return static_cast<double>((static_cast<size_t>(rank) * 7 + i * 3) % 11 + 1);
}

void put(void* b, size_t i, cfxDataType_t t, double v) {
  switch (t) {
    case cfxInt8: static_cast<int8_t*>(b)[i] = static_cast<int8_t>(v); break;
    case cfxUint8: static_cast<uint8_t*>(b)[i] = static_cast<uint8_t>(v); break;
    case cfxInt32: static_cast<int32_t*>(b)[i] = static_cast<int32_t>(v); break;
    case cfxUint32: static_cast<uint32_t*>(b)[i] = static_cast<uint32_t>(v); break;
    case cfxInt64: static_cast<int64_t*>(b)[i] = static_cast<int64_t>(v); break;
    case cfxUint64: static_cast<uint64_t*>(b)[i] = static_cast<uint64_t>(v); break;
    case cfxFloat16: static_cast<uint16_t*>(b)[i] = float_to_half(static_cast<float>(v)); break;
    case cfxBfloat16: static_cast<uint16_t*>(b)[i] = float_to_bf16(static_cast<float>(v)); break;
    case cfxFloat32: static_cast<float*>(b)[i] = static_cast<float>(v); break;
    case cfxFloat64: static_cast<double*>(b)[i] = v; break;
    default: break;
  }
}

double get(const void* b, size_t i, cfxDataType_t t) {
  switch (t) {
    case cfxInt8: return static_cast<const int8_t*>(b)[i];
    case cfxUint8: return static_cast<const uint8_t*>(b)[i];
    case cfxInt32: return static_cast<const int32_t*>(b)[i];
    case cfxUint32: return static_cast<const uint32_t*>(b)[i];
    case cfxInt64: return static_cast<double>(static_cast<const int64_t*>(b)[i]);
    case cfxUint64: return static_cast<double>(static_cast<const uint64_t*>(b)[i]);
    case cfxFloat16: return half_to_float(static_cast<const uint16_t*>(b)[i]);
    case cfxBfloat16: return bf16_to_float(static_cast<const uint16_t*>(b)[i]);
    case cfxFloat32: return static_cast<const float*>(b)[i];
    case cfxFloat64: return static_cast<const double*>(b)[i];
    default: return NAN;
  }
}

// As stored in type t (so fp16 and integer rounding match the library's).
double as_type(double v, cfxDataType_t t) {
  uint64_t tmp = 0;
  put(&tmp, 0, t, v);
  return get(&tmp, 0, t);
}

double reduced(int nranks, size_t i, cfxRedOp_t op, cfxDataType_t t) {
  double acc = value_at(0, i, op);
  for (int r = 1; r < nranks; ++r) {
    double v = value_at(r, i, op);
    if (op == cfxSum || op == cfxAvg) acc += v;
    else if (op == cfxProd) acc *= v;
    else if (op == cfxMax) acc = std::max(acc, v);
    else acc = std::min(acc, v);
  }
  if (op != cfxAvg) return as_type(acc, t);
  bool integer = t <= cfxUint64;
  if (integer) return std::trunc(acc / nranks);
  if (t == cfxFloat64) return acc / nranks;
  return as_type(static_cast<float>(acc) / static_cast<float>(nranks), t);
}

}  // namespace

bool parse_perf_coll(const std::string& name, PerfColl* out) {
  struct N { const char* name; PerfColl c; };
  static const N kNames[] = {{"allreduce", PerfColl::kAllReduce}, {"allgather", PerfColl::kAllGather},
                             {"reducescatter", PerfColl::kReduceScatter}, {"broadcast", PerfColl::kBroadcast},
                             {"reduce", PerfColl::kReduce}, {"alltoall", PerfColl::kAlltoAll},
                             {"sendrecv", PerfColl::kSendRecv}, {"gather", PerfColl::kGather},
                             {"scatter", PerfColl::kScatter}};
  for (const auto& n : kNames)
    if (name == n.name) {
      *out = n.c;
      return true;
    }
  return false;
}

const char* perf_coll_name(PerfColl c) {
  static const char* const kNames[] = {"allreduce", "allgather", "reducescatter", "broadcast", "reduce",
                                       "alltoall",  "sendrecv",  "gather",        "scatter"};
  return kNames[static_cast<int>(c)];
}

void perf_buffer_counts(PerfColl c, size_t count, int nranks, size_t* send_count, size_t* recv_count) {
  size_t n = static_cast<size_t>(nranks);
  switch (c) {
    case PerfColl::kAllGather:
    case PerfColl::kGather: *send_count = count / n; *recv_count = count / n * n; break;
    case PerfColl::kReduceScatter:
    case PerfColl::kScatter: *send_count = count / n * n; *recv_count = count / n; break;
    case PerfColl::kAlltoAll: *send_count = *recv_count = count / n * n; break;
    default: *send_count = *recv_count = count; break;
  }
}

double busbw_factor(PerfColl c, int nranks) {
  double n = nranks;
  switch (c) {
    case PerfColl::kAllReduce: return 2.0 * (n - 1) / n;
    case PerfColl::kAllGather:
    case PerfColl::kReduceScatter:
    case PerfColl::kAlltoAll:
    case PerfColl::kGather:
    case PerfColl::kScatter: return (n - 1) / n;
    default: return 1.0;
  }
}

void fill_input(void* buf, size_t n, cfxDataType_t t, cfxRedOp_t op, int rank, size_t offset) {
  for (size_t i = 0; i < n; ++i) put(buf, i, t, value_at(rank, offset + i, op));
}

size_t count_wrong(PerfColl c, const void* recv, size_t count, cfxDataType_t t, cfxRedOp_t op, int root, int rank,
                   int nranks) {
  size_t send_count = 0, recv_count = 0;
  perf_buffer_counts(c, count, nranks, &send_count, &recv_count);
  size_t wrong = 0;
  auto expect = [&](size_t i, double want) {
    if (get(recv, i, t) != want) ++wrong;
  };
  const size_t block = (c == PerfColl::kAllReduce || c == PerfColl::kBroadcast || c == PerfColl::kReduce ||
                        c == PerfColl::kSendRecv)
                           ? count
                           : count / static_cast<size_t>(nranks);
  switch (c) {
    case PerfColl::kAllReduce:
      for (size_t i = 0; i < recv_count; ++i) expect(i, reduced(nranks, i, op, t));
      break;
    case PerfColl::kReduce:
      if (rank == root)
        for (size_t i = 0; i < recv_count; ++i) expect(i, reduced(nranks, i, op, t));
      break;
    case PerfColl::kBroadcast:
      for (size_t i = 0; i < recv_count; ++i) expect(i, as_type(value_at(root, i, op), t));
      break;
    case PerfColl::kSendRecv:
      for (size_t i = 0; i < recv_count; ++i) expect(i, as_type(value_at((rank - 1 + nranks) % nranks, i, op), t));
      break;
    case PerfColl::kAllGather:
      for (size_t i = 0; i < recv_count; ++i) expect(i, as_type(value_at(static_cast<int>(i / block), i % block, op), t));
      break;
    case PerfColl::kGather:
      if (rank == root)
        for (size_t i = 0; i < recv_count; ++i) expect(i, as_type(value_at(static_cast<int>(i / block), i % block, op), t));
      break;
    case PerfColl::kReduceScatter:
      for (size_t i = 0; i < recv_count; ++i) expect(i, reduced(nranks, rank * block + i, op, t));
      break;
    case PerfColl::kScatter:
      for (size_t i = 0; i < recv_count; ++i) expect(i, as_type(value_at(root, rank * block + i, op), t));
      break;
    case PerfColl::kAlltoAll:
      for (size_t i = 0; i < recv_count; ++i)
        expect(i, as_type(value_at(static_cast<int>(i / block), rank * block + i % block, op), t));
      break;
  }
  return wrong;
}

}  // namespace conflux::tools
