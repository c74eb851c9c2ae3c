// Schedule builders: pure rank math, no I/O. Each returns the schedule one
// rank runs; every rank builds its own from the same arguments.
#pragma once

#include "algo/schedule.h"
#include "core/coll.h"

#include <vector>

namespace conflux::algo {

struct CollArgs {
  Coll coll = Coll::kAllReduce;
  int nranks = 1;
  int rank = 0;
  size_t count = 0;      // the call's count (per-rank block for AllGather/ReduceScatter/AlltoAll/Gather/Scatter)
  size_t elem = 1;       // bytes per element
  int root = 0;
  int peer = -1;         // Send/Recv
  bool in_place = false;
  size_t chunk_bytes = 512 * 1024;
  std::vector<int> ring;  // ring[pos] = rank; empty means 0..n-1
  // AlltoAllv, in elements.
  const size_t* sendcounts = nullptr;
  const size_t* sdispls = nullptr;
  const size_t* recvcounts = nullptr;
  const size_t* rdispls = nullptr;

  int ring_rank(int pos) const;  // rank at ring position pos (mod n)
  int ring_pos(int r) const;
};

Schedule ring_allreduce(const CollArgs& a);
Schedule ring_allgather(const CollArgs& a);
Schedule ring_reducescatter(const CollArgs& a);
Schedule chain_broadcast(const CollArgs& a);
Schedule chain_reduce(const CollArgs& a);
Schedule pairwise_alltoall(const CollArgs& a);   // AlltoAll and AlltoAllv
Schedule direct_gather(const CollArgs& a);
Schedule direct_scatter(const CollArgs& a);
Schedule dissemination_barrier(const CollArgs& a);
Schedule point_to_point(const CollArgs& a);      // one Send or Recv

}  // namespace conflux::algo
