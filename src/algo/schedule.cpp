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

namespace conflux::algo {

namespace {

int add_with(Schedule& s, Step step, const std::vector<int>& after) {
  step.dep_begin = static_cast<uint32_t>(s.deps.size());
  for (int d : after)
    if (d >= 0) s.deps.push_back(static_cast<uint32_t>(d));
  step.dep_count = static_cast<uint32_t>(s.deps.size()) - step.dep_begin;
  s.steps.push_back(step);
  return static_cast<int>(s.steps.size()) - 1;
}

}  // namespace

bool is_one_sided(StepKind k) {
  switch (k) {
    case StepKind::kRead:
    case StepKind::kWrite:
    case StepKind::kReduceFrom:
    case StepKind::kSignal:
    case StepKind::kWait: return true;
    default: return false;
  }
}

int Schedule::copy(Slice src, Slice dst, const std::vector<int>& after) {
  Step s;
  s.kind = StepKind::kCopy;
  s.src = src;
  s.dst = dst;
  return add_with(*this, s, after);
}

int Schedule::read(int peer, Slice theirs, Slice ours, const std::vector<int>& after) {
  Step s;
  s.kind = StepKind::kRead;
  s.peer = peer;
  s.src = theirs;
  s.dst = ours;
  return add_with(*this, s, after);
}

int Schedule::write(int peer, Slice ours, Slice theirs, const std::vector<int>& after) {
  Step s;
  s.kind = StepKind::kWrite;
  s.peer = peer;
  s.src = ours;
  s.dst = theirs;
  return add_with(*this, s, after);
}

int Schedule::reduce_from(const std::vector<Source>& from, Slice ours, const std::vector<int>& after) {
  Step s;
  s.kind = StepKind::kReduceFrom;
  s.dst = ours;
  s.src_begin = static_cast<uint32_t>(sources.size());
  s.src_count = static_cast<uint32_t>(from.size());
  sources.insert(sources.end(), from.begin(), from.end());
  return add_with(*this, s, after);
}

int Schedule::signal(const std::vector<int>& after) {
  Step s;
  s.kind = StepKind::kSignal;
  return add_with(*this, s, after);
}

int Schedule::wait(int peer, uint32_t count, const std::vector<int>& after) {
  Step s;
  s.kind = StepKind::kWait;
  s.peer = peer;
  s.count = count;
  return add_with(*this, s, after);
}

uint8_t Schedule::props() const {
  if (props_ & kKnown) return props_;
  uint8_t p = kKnown;
  size_t reach = 0;
  auto staged = [&reach](const Slice& sl) {
    if (sl.buf != kStaging || sl.bytes == 0) return false;
    reach = std::max(reach, sl.offset + sl.bytes);
    return true;
  };
  for (const Step& s : steps) {
    if (is_one_sided(s.kind)) p |= kOneSided;
    // Every staged slice counts towards the reach: no short-circuit.
    const bool src = staged(s.src), dst = staged(s.dst), with = staged(s.with);
    if (src || dst || with) p |= kUsesStaging;
  }
  for (const Source& src : sources) {
    if (staged(src.slice)) p |= kUsesStaging;
  }
  staging_reach_ = reach;
  props_ = p;
  return p;
}

}  // namespace conflux::algo
