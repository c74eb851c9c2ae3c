#include "algo/schedule.h"

#include <algorithm>

namespace conflux::algo {

int Schedule::add(Step step, std::initializer_list<int> after) {
  step.dep_begin = static_cast<uint32_t>(deps.size());
  for (int d : after)
    if (d >= 0) deps.push_back(static_cast<uint32_t>(d));
  step.dep_count = static_cast<uint32_t>(deps.size()) - step.dep_begin;
  steps.push_back(step);
  return static_cast<int>(steps.size()) - 1;
}

int Schedule::send(int peer, Slice src, std::initializer_list<int> after) {
  Step s;
  s.kind = StepKind::kSend;
  s.peer = peer;
  s.src = src;
  return add(s, after);
}

int Schedule::recv(int peer, Slice dst, std::initializer_list<int> after) {
  Step s;
  s.kind = StepKind::kRecv;
  s.peer = peer;
  s.dst = dst;
  return add(s, after);
}

int Schedule::recv_reduce(int peer, Slice dst, Slice with, std::initializer_list<int> after) {
  Step s;
  s.kind = StepKind::kRecvReduce;
  s.peer = peer;
  s.dst = dst;
  s.with = with;
  return add(s, after);
}

int Schedule::copy(Slice src, Slice dst, std::initializer_list<int> after) {
  Step s;
  s.kind = StepKind::kCopy;
  s.src = src;
  s.dst = dst;
  return add(s, after);
}

size_t part_begin(size_t count, int parts, int index) {
  size_t n = static_cast<size_t>(parts);
  size_t i = static_cast<size_t>(index);
  return i * (count / n) + std::min(i, count % n);
}

size_t part_size(size_t count, int parts, int index) {
  size_t n = static_cast<size_t>(parts);
  return count / n + (static_cast<size_t>(index) < count % n ? 1 : 0);
}

size_t chunk_count(size_t bytes, size_t elem, size_t chunk_bytes) {
  size_t chunk = std::max(elem, chunk_bytes / elem * elem);
  return std::max<size_t>(1, (bytes + chunk - 1) / chunk);
}

Slice chunk_of(const Slice& s, size_t elem, size_t n, size_t c) {
  size_t elems = s.bytes / elem;
  size_t begin = part_begin(elems, static_cast<int>(n), static_cast<int>(c));
  size_t size = part_size(elems, static_cast<int>(n), static_cast<int>(c));
  return Slice{s.buf, s.offset + begin * elem, size * elem};
}

}  // namespace conflux::algo
