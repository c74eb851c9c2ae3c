// The kinds of operation and the signature every message carries, so a
// receiver can tell before touching user memory that both sides are in the
// same call (mismatch detection).
#pragma once

#include <conflux/conflux.h>

#include <cstddef>
#include <cstdint>
#include <string>

namespace conflux {

enum class Coll : uint8_t {
  kAllReduce = 0,
  kBroadcast,
  kReduce,
  kAllGather,
  kReduceScatter,
  kAlltoAll,
  kAlltoAllv,
  kGather,
  kScatter,
  kSend,
  kRecv,
  kBarrier,
  kCount
};

const char* coll_name(Coll c);

// dst[i] = a[i] (op) b[i] for i < count elements (exec/reduce.h has the
// kernels). dst may alias a or b (same pointer, not partially overlapping).
using ReduceFn = void (*)(void* dst, const void* a, const void* b, size_t count);
const char* datatype_name(cfxDataType_t t);
const char* redop_name(cfxRedOp_t op);
// Bytes per element; 0 if invalid.
inline constexpr size_t kDatatypeSizes[] = {1, 1, 4, 4, 8, 8, 2, 4, 8, 2};
inline size_t datatype_size(cfxDataType_t t) {
  const auto& kSizes = kDatatypeSizes;
  static_assert(sizeof kSizes / sizeof kSizes[0] == cfxNumTypes);
  return (t >= 0 && t < cfxNumTypes) ? kSizes[t] : 0;
}

// Signature of the operation a message belongs to. Point-to-point messages
// are signed as kSend by both sides (a Recv expects a Send's signature).
struct OpSig {
  uint32_t seq = 0;      // collective sequence number, or per-peer p2p sequence
  uint8_t coll = 0;
  uint8_t dtype = 0;
  uint8_t op = 0;
  // 1: this rank's buffers are registered (cfxCommRegister). Every rank of a
  // call must agree, so the tuner can count on peers' buffers being mapped.
  uint8_t registered = 0;
  int32_t root = -1;
  uint32_t reserved = 0;  // explicit: signatures are compared bytewise
  uint64_t count = 0;    // the call's count argument (0 for AlltoAllv: counts differ legitimately)
};
static_assert(sizeof(OpSig) == 24);

std::string describe(const OpSig& sig);  // "allreduce #5 (count=100, float32, sum)"

}  // namespace conflux
