// Algorithms are data: a Schedule is, for one rank, the list of steps it
// runs (send, recv, recv-reduce, copy) over slices of its buffers, with the
// dependencies between them. The executor, and the verifier/simulator of
// later layers, all read the same Schedule.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace conflux::algo {

// Buffers a schedule refers to by index; the executor binds pointers.
enum BufIndex : uint16_t { kSendBuf = 0, kRecvBuf = 1, kScratch = 2, kFirstExtraBuf = 3 };

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
};

struct Step {
  StepKind kind = StepKind::kCopy;
  // Which of the connections to `peer` carries it (multi-channel TCP, see
  // algo/channels.h); messages match k-th to k-th per (peer, channel).
  uint8_t channel = 0;
  int peer = -1;
  Slice src;   // kSend, kCopy
  Slice dst;   // kRecv, kRecvReduce, kCopy
  Slice with;  // kRecvReduce
  uint16_t sig = 0;  // index into the executor's signature table (p2p groups differ per op)
  uint32_t dep_begin = 0;  // deps live in Schedule::deps[dep_begin, dep_begin + dep_count)
  uint32_t dep_count = 0;
};

struct Schedule {
  std::vector<Step> steps;
  std::vector<uint32_t> deps;
  size_t scratch_bytes = 0;
  std::string algorithm;  // e.g. "ring", for logs and `conflux plan`

  // Each add returns the step's index; a negative dependency is ignored, so
  // builders can pass "the step that would exist" without special cases.
  int add(Step step, std::initializer_list<int> after = {});
  int send(int peer, Slice src, std::initializer_list<int> after = {});
  int recv(int peer, Slice dst, std::initializer_list<int> after = {});
  int recv_reduce(int peer, Slice dst, Slice with, std::initializer_list<int> after = {});
  int copy(Slice src, Slice dst, std::initializer_list<int> after = {});
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
