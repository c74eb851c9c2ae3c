#include "algo/schedule.h"

#include <algorithm>

namespace conflux::algo {

void Schedule::clear() {
  steps.clear();
  deps.clear();
  sources.clear();
  scratch_bytes = 0;
  staging_extent = 0;
  algorithm.clear();
  shape_steps_ = shape_deps_ = shape_sources_ = kUnknown;
}

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

namespace {

// Shape::in_order: after the first wait, only waits until the last one,
// then steps that each depend on every wait and on no step after the
// waits (so they may run in any order, and reads and writes of one peer
// go in one transfer, as the graph runs them).
bool in_order(const Schedule& s, const Schedule::Shape& sh) {
  if (!sh.link_steps.empty() || s.steps.empty()) return false;
  const size_t n = s.steps.size();
  size_t first = 0;
  while (first < n && s.steps[first].kind != StepKind::kWait) ++first;
  size_t end = first;
  while (end < n && s.steps[end].kind == StepKind::kWait) ++end;
  if (end - first > 64) return false;
  const uint64_t all = end - first == 64 ? ~uint64_t{0} : (uint64_t{1} << (end - first)) - 1;
  std::vector<uint64_t> waited(n, 0);  // the waits each step follows, by bit
  for (size_t i = 0; i < n; ++i) {
    const Step& st = s.steps[i];
    if (i >= first && i < end) waited[i] = uint64_t{1} << (i - first);
    for (uint32_t k = 0; k < st.dep_count; ++k) {
      const uint32_t d = s.deps[st.dep_begin + k];
      if (d >= i || (i >= end && d >= end)) return false;  // a later step, or another after the waits
      waited[i] |= waited[d];
    }
    if (i >= end && (st.kind == StepKind::kWait || waited[i] != all)) return false;
  }
  return true;
}

}  // namespace

const Schedule::Shape& Schedule::derive_shape() const {
  // Filled in place: a cleared schedule built again keeps these vectors' storage.
  Shape& sh = shape_;
  sh.one_sided = sh.uses_staging = sh.in_order = false;
  sh.staging_reach = 0;
  sh.one_sided_peers.clear();
  sh.ready_at_once.clear();
  sh.ready_waits.clear();
  sh.link_steps.clear();
  auto staged = [&sh](const Slice& sl) {
    if (sl.buf != kStaging || sl.bytes == 0) return false;
    sh.staging_reach = std::max(sh.staging_reach, sl.offset + sl.bytes);
    return true;
  };
  const size_t n = steps.size();
  sh.dep_counts.resize(n);
  sh.dependents_begin.assign(n + 1, 0);
  for (size_t i = 0; i < n; ++i) {
    const Step& s = steps[i];
    if (is_one_sided(s.kind)) {
      sh.one_sided = true;
      if (s.peer >= 0) sh.one_sided_peers.push_back(s.peer);
    }
    // Every staged slice counts towards the reach: no short-circuit.
    const bool src = staged(s.src), dst = staged(s.dst), with = staged(s.with);
    if (src || dst || with) sh.uses_staging = true;
    sh.dep_counts[i] = s.dep_count;
    for (uint32_t k = 0; k < s.dep_count; ++k) ++sh.dependents_begin[deps[s.dep_begin + k] + 1];
    if (runs_at_once(s.kind)) {
      if (s.dep_count == 0) sh.ready_at_once.push_back(static_cast<int>(i));
    } else if (s.kind == StepKind::kWait) {
      if (s.dep_count == 0) sh.ready_waits.push_back(static_cast<int>(i));
    } else {
      sh.link_steps.push_back(static_cast<int>(i));
    }
  }
  for (const Source& src : sources) {
    if (staged(src.slice)) sh.uses_staging = true;
    if (src.peer >= 0) sh.one_sided_peers.push_back(src.peer);
  }
  std::sort(sh.one_sided_peers.begin(), sh.one_sided_peers.end());
  sh.one_sided_peers.erase(std::unique(sh.one_sided_peers.begin(), sh.one_sided_peers.end()), sh.one_sided_peers.end());
  // dependents_begin[d + 1] holds d's count: its prefix sums are where each
  // step's dependents start, one place to the right. Filling advances
  // dependents_begin[d], which leaves each entry at the next one's start;
  // shifting it back by one restores the starts.
  for (size_t i = 0; i < n; ++i) sh.dependents_begin[i + 1] += sh.dependents_begin[i];
  sh.dependents.resize(deps.size());
  for (size_t i = 0; i < n; ++i) {
    const Step& s = steps[i];
    for (uint32_t k = 0; k < s.dep_count; ++k)
      sh.dependents[sh.dependents_begin[deps[s.dep_begin + k]]++] = static_cast<uint32_t>(i);
  }
  for (size_t i = n; i > 0; --i) sh.dependents_begin[i] = sh.dependents_begin[i - 1];
  sh.dependents_begin[0] = 0;
  sh.in_order = in_order(*this, sh);
  shape_steps_ = steps.size();
  shape_deps_ = deps.size();
  shape_sources_ = sources.size();
  return shape_;
}

}  // namespace conflux::algo
