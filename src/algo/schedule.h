// Algorithms are data: a Schedule is, for one rank, the list of steps it
// runs over slices of its buffers, with the dependencies between them. Two
// kinds of step move data between ranks:
//  - two-sided messages (send, recv, recv-reduce): both ranks take part and
//    messages match in order per (peer, channel);
//  - one-sided access to a peer of the same host (read, write, reduce-from),
//    ordered by flags (signal, wait): a rank reads or writes a peer's
//    buffers directly, so a byte is copied once. How the peer's memory is
//    reached (a mapping, or process_vm_readv/writev) is the shm transport's
//    business, not the schedule's.
// The executor, the verifier and the simulator all read the same Schedule.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace conflux::algo {

// Buffers a schedule refers to by index; the executor binds pointers.
// kStaging is this rank's staging area in shared memory, which same-host
// peers read with plain loads (the eager one-sided algorithms copy small
// inputs there). Consecutive calls that use it alternate between its two
// halves, so a call may fill its half while a slower peer still reads the
// previous call's: every such call waits for a signal from every peer, and
// a peer signals only once it has left the call before, which makes the
// half of the call before that free again.
enum BufIndex : uint16_t { kSendBuf = 0, kRecvBuf = 1, kScratch = 2, kStaging = 3, kFirstExtraBuf = 4 };

struct Slice {
  uint16_t buf = kSendBuf;
  size_t offset = 0;  // bytes
  size_t bytes = 0;
};

enum class StepKind : uint8_t {
  kSend,        // send src to peer
  kRecv,        // receive from peer into dst
  kRecvReduce,  // dst = reduce(with, incoming from peer)
  kCopy,        // dst = src (local)
  // One-sided, with a peer on this host. Slices that name the peer's memory
  // use the peer's buffer indices (its send, receive or staging buffer in
  // the same call).
  kRead,        // dst (ours) = src (peer's)
  kWrite,       // dst (peer's) = src (ours)
  kReduceFrom,  // dst (ours) = reduction of the sources, in their order (each ours or a peer's)
  kSignal,      // makes this rank's next flag value visible to every peer: "done so far"
  kWait,        // until `peer` has signalled `count` times in this call
};

// Whether the step reaches into a peer's memory or flags.
constexpr bool is_one_sided(StepKind k) {
  return k == StepKind::kRead || k == StepKind::kWrite || k == StepKind::kReduceFrom || k == StepKind::kSignal ||
         k == StepKind::kWait;
}
// Whether the step runs as soon as its dependencies are done, without a
// link: copies and the one-sided steps that move data or raise our flag.
constexpr bool runs_at_once(StepKind k) {
  return k == StepKind::kCopy || k == StepKind::kRead || k == StepKind::kWrite || k == StepKind::kReduceFrom ||
         k == StepKind::kSignal;
}

// A source of kReduceFrom: a slice of a peer's buffer, or of ours (peer -1).
struct Source {
  int peer = -1;
  Slice slice;
};

struct Step {
  StepKind kind = StepKind::kCopy;
  // Which of the connections to `peer` carries it (multi-channel TCP, see
  // algo/channels.h); messages match k-th to k-th per (peer, channel).
  uint8_t channel = 0;
  int peer = -1;
  Slice src;   // kSend, kCopy, kRead (the peer's), kWrite
  Slice dst;   // kRecv, kRecvReduce, kCopy, kRead, kWrite (the peer's), kReduceFrom
  Slice with;  // kRecvReduce
  uint32_t count = 0;      // kWait: the peer's signals in this call to wait for
  uint32_t src_begin = 0;  // kReduceFrom: Schedule::sources[src_begin, src_begin + src_count)
  uint32_t src_count = 0;
  uint16_t sig = 0;  // index into the executor's signature table (p2p groups differ per op)
  uint32_t dep_begin = 0;  // deps live in Schedule::deps[dep_begin, dep_begin + dep_count)
  uint32_t dep_count = 0;
};

struct Schedule {
  std::vector<Step> steps;
  std::vector<uint32_t> deps;
  std::vector<Source> sources;  // of kReduceFrom steps
  size_t scratch_bytes = 0;
  // Bytes of each rank's staging half the call uses, the same on every
  // rank of the call (the eager algorithms set it; 0: not stated). Calls
  // that stage a few bytes have them placed in the flag's cache line
  // (transport/peer_memory.h), which every rank must agree on.
  size_t staging_extent = 0;
  std::string algorithm;  // e.g. "ring", for logs and `conflux plan`

  // Empties the schedule for another build, keeping its storage: a caller
  // that builds a large schedule per call (MoE's placed exchanges, a step
  // per row) reuses the memory instead of allocating and faulting it in.
  void clear();

  // Each add returns the step's index; a negative dependency is ignored, so
  // builders can pass "the step that would exist" without special cases.
  int add(Step step, std::initializer_list<int> after = {});
  int send(int peer, Slice src, std::initializer_list<int> after = {});
  int recv(int peer, Slice dst, std::initializer_list<int> after = {});
  int recv_reduce(int peer, Slice dst, Slice with, std::initializer_list<int> after = {});
  int copy(Slice src, Slice dst, std::initializer_list<int> after = {});
  int copy(Slice src, Slice dst, const std::vector<int>& after);
  int read(int peer, Slice theirs, Slice ours, const std::vector<int>& after = {});
  int write(int peer, Slice ours, Slice theirs, const std::vector<int>& after = {});
  int reduce_from(const std::vector<Source>& from, Slice ours, const std::vector<int>& after = {});
  int signal(const std::vector<int>& after = {});
  int wait(int peer, uint32_t count, const std::vector<int>& after = {});

  // Whether any step reaches a peer's memory or flags, and whether any uses
  // a staging area (this rank's or a peer's). Computed once per schedule.
  bool one_sided() const { return shape().one_sided; }
  bool uses_staging() const { return shape().uses_staging; }
  // The end of the farthest staging slice any step names (this rank's
  // staging or a peer's): where it exceeds staging_extent, the extent is wrong.
  size_t staging_reach() const { return shape().staging_reach; }

  // What every run of the schedule starts from, derived once from the
  // steps (the executor runs a cached schedule call after call, so none of
  // this is rebuilt per call). Appending steps after it was read rebuilds
  // it; changing a step in place does not.
  struct Shape {
    bool one_sided = false, uses_staging = false;
    size_t staging_reach = 0;
    // The steps that depend on step i: dependents[dependents_begin[i],
    // dependents_begin[i + 1]).
    std::vector<uint32_t> dependents_begin, dependents;
    // Every step's dependency count, to copy as the run's pending counts.
    std::vector<uint32_t> dep_counts;
    // The steps ready at the start, in schedule order: those that run at
    // once (copies and one-sided data or signal steps), and flag waits.
    std::vector<int> ready_at_once, ready_waits;
    // The steps that go over links (send, recv, recv-reduce), in schedule
    // order: each link's messages keep this order.
    std::vector<int> link_steps;
    // The peers whose memory or flags one-sided steps reach, ascending.
    std::vector<int> one_sided_peers;
    // Whether running the steps in schedule order, each wait holding up
    // what follows it, is exactly what the dependency graph allows: no
    // links, the waits together, and every step after them depending on
    // every one of them (the eager algorithms: stage, signal, wait for every
    // peer, read or reduce). Such a schedule needs none of the graph's
    // bookkeeping to run.
    bool in_order = false;
  };
  const Shape& shape() const {
    // Builders append steps (compose.h) without reading the shape; should
    // one append after reading it, the counts no longer match and it is
    // derived again.
    if (shape_steps_ == steps.size() && shape_deps_ == deps.size() && shape_sources_ == sources.size()) return shape_;
    return derive_shape();
  }

 private:
  const Shape& derive_shape() const;
  static constexpr size_t kUnknown = SIZE_MAX;
  mutable size_t shape_steps_ = kUnknown, shape_deps_ = kUnknown, shape_sources_ = kUnknown;
  mutable Shape shape_;
};

// Element-aligned balanced partition of `count` into `parts`: the first
// count % parts parts get one extra element.
size_t part_begin(size_t count, int parts, int index);
size_t part_size(size_t count, int parts, int index);

// Number of chunks a region of `bytes` is pipelined in, each a whole number
// of elements no larger than chunk_bytes (at least one chunk).
size_t chunk_count(size_t bytes, size_t elem, size_t chunk_bytes);
// The c-th of n chunks of a slice (balanced, element-aligned).
Slice chunk_of(const Slice& s, size_t elem, size_t n, size_t c);

}  // namespace conflux::algo
