#include "core/coll.h"

namespace conflux {

const char* coll_name(Coll c) {
  switch (c) {
    case Coll::kAllReduce: return "allreduce";
    case Coll::kBroadcast: return "broadcast";
    case Coll::kReduce: return "reduce";
    case Coll::kAllGather: return "allgather";
    case Coll::kReduceScatter: return "reducescatter";
    case Coll::kAlltoAll: return "alltoall";
    case Coll::kAlltoAllv: return "alltoallv";
    case Coll::kGather: return "gather";
    case Coll::kScatter: return "scatter";
    case Coll::kSend: return "send/recv";
    case Coll::kRecv: return "recv";
    case Coll::kBarrier: return "barrier";
    default: return "unknown";
  }
}

const char* datatype_name(cfxDataType_t t) {
  static const char* const kNames[] = {"int8",    "uint8",   "int32",   "uint32",  "int64",
                                       "uint64",  "float16", "float32", "float64", "bfloat16"};
  return (t >= 0 && t < cfxNumTypes) ? kNames[t] : "invalid";
}

const char* redop_name(cfxRedOp_t op) {
  static const char* const kNames[] = {"sum", "prod", "max", "min", "avg"};
  return (op >= 0 && op < cfxNumOps) ? kNames[op] : "invalid";
}

std::string describe(const OpSig& sig) {
  auto c = static_cast<Coll>(sig.coll);
  std::string s = std::string(coll_name(c)) + " #" + std::to_string(sig.seq) + " (";
  if (c != Coll::kBarrier) {
    s += "count=" + std::to_string(sig.count) + ", " + datatype_name(static_cast<cfxDataType_t>(sig.dtype));
    if (c == Coll::kAllReduce || c == Coll::kReduce || c == Coll::kReduceScatter)
      s += std::string(", ") + redop_name(static_cast<cfxRedOp_t>(sig.op));
    if (c == Coll::kBroadcast || c == Coll::kReduce || c == Coll::kGather || c == Coll::kScatter)
      s += ", root=" + std::to_string(sig.root);
    if (sig.registered) s += ", registered buffers";
    if (sig.root == -2) s += ", dynamic: counts";
    if (sig.root == -3) s += ", dynamic: data";
  }
  return s + ")";
}

}  // namespace conflux
