#include "core/check_data.h"

#include "core/half.h"

#include <algorithm>
#include <cmath>
#include <cstdint>

namespace conflux::check {

double input_value(int rank, size_t index, cfxRedOp_t op) {
  if (op == cfxProd) return 1.0 + static_cast<double>((static_cast<size_t>(rank) + index) % 3 == 0);
  return static_cast<double>((static_cast<size_t>(rank) * 7 + index * 3) % 11 + 1);
}

void store(void* b, size_t i, cfxDataType_t t, double v) {
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

double load(const void* b, size_t i, cfxDataType_t t) {
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

double as_type(double v, cfxDataType_t t) {
  uint64_t tmp = 0;
  store(&tmp, 0, t, v);
  return load(&tmp, 0, t);
}

double reduced_value(int nranks, size_t index, cfxRedOp_t op, cfxDataType_t t) {
  double acc = input_value(0, index, op);
  for (int r = 1; r < nranks; ++r) {
    double v = input_value(r, index, op);
    switch (op) {
      case cfxSum:
      case cfxAvg: acc += v; break;
      case cfxProd: acc *= v; break;
      case cfxMax: acc = std::max(acc, v); break;
      case cfxMin: acc = std::min(acc, v); break;
      default: break;
    }
  }
  if (op != cfxAvg) return as_type(acc, t);
  bool integer = t == cfxInt8 || t == cfxUint8 || t == cfxInt32 || t == cfxUint32 || t == cfxInt64 || t == cfxUint64;
  if (integer) return std::trunc(acc / nranks);
  if (t == cfxFloat64) return acc / nranks;
  return as_type(static_cast<float>(acc) / static_cast<float>(nranks), t);
}

}  // namespace conflux::check
