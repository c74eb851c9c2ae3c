// Schedule builders: pure rank math, no I/O. Each returns the schedule one
// rank runs; every rank builds its own from the same arguments.
#pragma once

#include "algo/schedule.h"
#include "core/coll.h"

#include <vector>

namespace conflux::algo {

// One piece of a placed exchange: `count` elements of rank src_rank's send
// buffer from src_offset go to rank dst_rank's receive buffer at
// dst_offset (elements of CollArgs::elem bytes).
struct Placement {
  int src_rank = 0, dst_rank = 0;
  size_t src_offset = 0, dst_offset = 0, count = 0;
};

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
  // AlltoAllv whose traffic every rank knows (the dynamic AlltoAllv learns
  // it first): all_sendcounts[s * nranks + d], all_sdispls[...] and
  // all_rdispls[d * nranks + s] are rank s's sendcounts[d] and sdispls[d],
  // and where rank d puts what s sends it. Builders that need them read
  // nothing else, so the arguments are the same on every rank (the tuner
  // simulates every rank from them). nullptr: only this rank's are known.
  const size_t* all_sendcounts = nullptr;
  const size_t* all_sdispls = nullptr;
  const size_t* all_rdispls = nullptr;
  // Hierarchical algorithms: host_of[r] is the host (any id) of rank r;
  // empty means every rank on its own host.
  std::vector<int> host_of;
  // Bytes of each half of every rank's staging area (BufIndex kStaging),
  // which the eager one-sided algorithms fill; 0: none.
  size_t staging_bytes = 0;
  // Every rank's buffers are registered cfxMemAlloc memory: one-sided steps
  // reach them with loads and stores (the cost model's concern only).
  bool registered = false;
  // The call is split over this many TCP channels (algo/channels.h): only
  // algorithms whose schedules split can serve it.
  int channels = 1;
  // A placed exchange (an AlltoAllv whose pieces land at stated places, as
  // MoE dispatch and combine need): the pieces this rank moves, or every
  // rank's (the verifier's and the simulator's view). Which rank moves a
  // piece is the builder's choice: placed_writes moves those it sends,
  // placed_reads those it receives.
  const Placement* placements = nullptr;
  size_t placement_count = 0;

  int ring_rank(int pos) const;  // rank at ring position pos (mod n)
  int ring_pos(int r) const;
};

Schedule ring_allreduce(const CollArgs& a);
Schedule ring_allgather(const CollArgs& a);
Schedule ring_reducescatter(const CollArgs& a);
Schedule chain_broadcast(const CollArgs& a);
Schedule chain_reduce(const CollArgs& a);
Schedule pairwise_alltoall(const CollArgs& a);   // AlltoAll and AlltoAllv
Schedule linear_gather(const CollArgs& a);   // every rank sends its block to the root
Schedule linear_scatter(const CollArgs& a);  // the root sends every rank its block
Schedule dissemination_barrier(const CollArgs& a);
Schedule point_to_point(const CollArgs& a);      // one Send or Recv

// NCCL's binary tree (ncclGetBtree) and double binary tree (ncclGetDtree):
// parent and children of `rank`, -1 where absent. Tree 0 is rooted at 0;
// tree 1 is tree 0 shifted by one for odd n (root 1) and mirrored for even n
// (root n-1), so no rank is interior in both.
struct TreeLinks {
  int parent = -1, child0 = -1, child1 = -1;
};
TreeLinks btree_links(int nranks, int rank);
TreeLinks dtree_links(int nranks, int tree, int rank);
int dtree_root(int nranks, int tree);

// Double binary tree, each tree carrying half the data, pipelined in chunks.
// AllReduce: ~2 log2(n) + 2 chunk latencies; per rank sends <= 2 x bytes
// (interior in one tree: up once, down twice for its half).
Schedule tree_allreduce(const CollArgs& a);
// Broadcast / Reduce: both trees re-rooted at the root; log2(n) + chunks
// latencies, each rank sends <= 2 x bytes / 2 per tree.
Schedule tree_broadcast(const CollArgs& a);
Schedule tree_reduce(const CollArgs& a);

// Recursive halving/doubling (Rabenseifner); non-powers of two fold the
// extra ranks into partners first (+2 steps, +bytes for those pairs).
// AllReduce: 2 log2(p) steps, 2 (p-1)/p x bytes per rank (p = power of two <= n).
Schedule rhd_allreduce(const CollArgs& a);
Schedule rd_allreduce(const CollArgs& a);  // recursive doubling: whole vector, log2 rounds
// ReduceScatter: log2(p) (+2) steps, (n-1)/n x total bytes per rank.
Schedule rhd_reducescatter(const CollArgs& a);
// AllGather by recursive doubling: log2(p) (+2) steps, (n-1) x block bytes.
Schedule rhd_allgather(const CollArgs& a);

// Bruck AllGather: ceil(log2 n) steps, (n-1) x block bytes per rank, plus a
// local rotation; any n.
Schedule bruck_allgather(const CollArgs& a);
// Bruck AlltoAll: ceil(log2 n) steps, ~ (n/2) log2(n) x block bytes per rank
// (latency-optimal for small blocks); uses 2 n x block bytes of scratch.
Schedule bruck_alltoall(const CollArgs& a);

// Two-level: intra-host reduce-scatter (ring), inter-host allreduce among
// ranks of the same local slot (ring), intra-host all-gather (ring).
// Requires the same number of ranks on every host (any placement):
// hier_supported() says so; otherwise the builder returns an empty schedule
// named "unsupported" and the caller must pick another algorithm.
bool hier_supported(const CollArgs& a);
// AllReduce: 2(l-1) + 2(h-1) steps; 2 (l-1)/l + 2 (h-1)/(h l) x bytes per rank.
Schedule hier_allreduce(const CollArgs& a);
// AllReduce with one-sided host-local phases (every host's ranks share its
// memory): each local rank reduces its part from the host's inputs, the
// parts are AllReduced across hosts by ring, and each rank writes its part
// into its host peers' outputs. No slot-ring copies inside a host.
Schedule hier_direct_allreduce(const CollArgs& a);
// Broadcast: pipelined chain across hosts among the ranks in the root's
// local slot, then a chain inside every host: (h-1) + (l-1) hops + chunks;
// each rank sends <= bytes, one inter-host transfer per host.
Schedule hier_broadcast(const CollArgs& a);
// AllGather: ring across hosts within each local slot, then ring inside the
// host: (h-1) + (l-1) steps; (h-1) x block inter-host and (l-1) h x block
// intra-host bytes per rank.
Schedule hier_allgather(const CollArgs& a);
// ReduceScatter: ring inside the host over each slot's h blocks, then ring
// across hosts within each local slot: (l-1) + (h-1) steps; (h-1) x block
// inter-host and (l-1) h x block intra-host bytes per rank.
Schedule hier_reducescatter(const CollArgs& a);

// One-sided algorithms for ranks that share a host (every rank of the
// communicator, or the ranks of one host inside a hierarchical schedule).
// Flags order them: a rank's k-th signal of a call tells every peer it has
// done what came before it ("my buffers are published and my input is
// ready", "I no longer touch your buffers"); a rank returns only once every
// peer that reads or writes its buffers has signalled that it is done.
//
// Eager: every rank copies its input into its staging area, signals, and
// reads what it needs from the peers' staging areas (one flag round, no
// system call; the peers' staging areas are mapped). Serves a call while
// eager_stage_bytes() fits in a.staging_bytes.
size_t eager_stage_bytes(const CollArgs& a);  // bytes a rank stages (the root's, where only it stages)
Schedule eager_allreduce(const CollArgs& a);
Schedule eager_reducescatter(const CollArgs& a);
Schedule eager_reduce(const CollArgs& a);
Schedule eager_allgather(const CollArgs& a);
Schedule eager_broadcast(const CollArgs& a);
Schedule eager_gather(const CollArgs& a);
Schedule eager_scatter(const CollArgs& a);
Schedule eager_alltoall(const CollArgs& a);
// Direct: ranks read (and write) each other's user buffers, so each byte is
// copied once: with plain loads where the buffer is mapped (cfxMemAlloc
// memory), else with process_vm_readv/writev. Reductions: rank r reduces
// part r of the vector from every rank's input, a piece at a time, and
// (AllReduce) writes each reduced piece into every peer's output while it
// is in cache. Two flag rounds: arrive, and done.
Schedule direct_allreduce(const CollArgs& a);
Schedule direct_reducescatter(const CollArgs& a);
Schedule direct_reduce(const CollArgs& a);
Schedule direct_allgather(const CollArgs& a);   // each rank reads every peer's block
Schedule direct_broadcast(const CollArgs& a);   // peers read the root's input; the root writes a tail share
Schedule direct_gather(const CollArgs& a);
Schedule direct_scatter(const CollArgs& a);
Schedule direct_alltoall(const CollArgs& a);
// Push AllGather: each rank writes its block into every peer's output, so
// each input byte is read once (against n - 1 times when pulling).
Schedule push_allgather(const CollArgs& a);
// Split Broadcast: rank r copies part r of the root's input into every
// rank's output, so all cores share the copying and each byte of the input
// is read once.
Schedule split_broadcast(const CollArgs& a);
// AlltoAllv with every rank's counts known (all_sendcounts): pairwise, but
// only the pairs with something to move exchange messages.
Schedule sparse_alltoallv(const CollArgs& a);
// The same, one-sided: each rank reads its blocks from the peers' inputs
// (their displacements are known), then signals it is done.
Schedule direct_alltoallv(const CollArgs& a);
// Placed exchanges (CollArgs::placements), one-sided on one host: each
// piece is copied once, by the rank that sends it (placed_writes: straight
// into the receiver's buffer) or by the rank that receives it
// (placed_reads: straight out of the sender's). Every rank signals that its
// buffers are published, copies once the peers it touches have, then
// signals again and waits for every peer's second signal before returning,
// so no peer still touches its buffers.
Schedule placed_writes(const CollArgs& a);
Schedule placed_reads(const CollArgs& a);
// Either of them built into `reuse`, which is cleared first and keeps its
// storage: a caller that builds one per call (a step per row adds up)
// hands back the previous call's schedule instead of allocating afresh.
Schedule placed_exchange(const CollArgs& a, bool writes, Schedule reuse);
// Barrier by flags: signal, then wait for every peer's signal.
Schedule flag_barrier(const CollArgs& a);

// Pieces one-sided steps move at a time: a few stay in L2 while they are
// reduced and written on. Bounded by CollArgs::chunk_bytes, so tests with
// tiny chunks run many pieces.
inline constexpr size_t kOneSidedPieceBytes = size_t{128} * 1024;

}  // namespace conflux::algo
