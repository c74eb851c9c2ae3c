// Small operations: every rank has copied its input into its eager slot and
// announced it; each rank now reads what it needs from all slots and
// computes its output locally. One flag round, no system call. Reductions
// read the slots in rank order, so every rank gets bit-identical results.
#include "exec/reduce.h"
#include "exec/shm_coll_impl.h"

#include <cstring>

namespace conflux {

Status ShmCollImpl::run_eager(const OpDesc& op, int parity) {
  const size_t elem = datatype_size(op.dtype);
  const size_t block = op.count * elem;
  const int n = nranks_;
  auto* recv = static_cast<uint8_t*>(op.recvbuf);
  if (op.count == 0) return Status::Ok();
  const void* srcs[64];
  std::vector<const void*> many;
  const void** list = srcs;
  if (n > 64) {
    many.resize(n);
    list = many.data();
  }
  auto reduce_from_slots = [&](size_t offset) {
    for (int p = 0; p < n; ++p) list[p] = slot(p, parity) + offset;
    reduce_many(recv, list, n, op.count, op.dtype, op.op);
    if (op.op == cfxAvg) finalize_avg(recv, op.count, op.dtype, n);
  };
  switch (op.coll) {
    case Coll::kAllReduce: reduce_from_slots(0); break;
    case Coll::kReduce:
      if (rank_ == op.root) reduce_from_slots(0);
      break;
    case Coll::kReduceScatter: reduce_from_slots(static_cast<size_t>(rank_) * block); break;
    case Coll::kAllGather:
      for (int p = 0; p < n; ++p) std::memcpy(recv + static_cast<size_t>(p) * block, slot(p, parity), block);
      break;
    case Coll::kGather:
      if (rank_ == op.root)
        for (int p = 0; p < n; ++p) std::memcpy(recv + static_cast<size_t>(p) * block, slot(p, parity), block);
      break;
    case Coll::kBroadcast:
      if (rank_ != op.root || op.sendbuf != op.recvbuf) std::memcpy(recv, slot(op.root, parity), block);
      break;
    case Coll::kScatter:
      std::memmove(recv, slot(op.root, parity) + static_cast<size_t>(rank_) * block, block);
      break;
    case Coll::kAlltoAll:
      for (int p = 0; p < n; ++p)
        std::memcpy(recv + static_cast<size_t>(p) * block, slot(p, parity) + static_cast<size_t>(rank_) * block,
                    block);
      break;
    default: return internal_error("shared collectives: unexpected collective on the eager path");
  }
  return Status::Ok();
}

}  // namespace conflux
