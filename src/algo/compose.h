// Helpers for builders whose steps depend on a variable number of earlier
// steps (Schedule::add takes a fixed list): steps with a dependency vector,
// and fences (zero-byte copies that wait for a set of steps) between rounds.
#pragma once

#include "algo/schedule.h"

#include <vector>

namespace conflux::algo {

inline Step make_step(StepKind kind, int peer) {
  Step st;
  st.kind = kind;
  st.peer = peer;
  return st;
}
inline Step send_step(int peer, Slice src) {
  Step st = make_step(StepKind::kSend, peer);
  st.src = src;
  return st;
}

inline int add_after(Schedule& s, Step step, const std::vector<int>& after) {
  step.dep_begin = static_cast<uint32_t>(s.deps.size());
  for (int d : after)
    if (d >= 0) s.deps.push_back(static_cast<uint32_t>(d));
  step.dep_count = static_cast<uint32_t>(s.deps.size()) - step.dep_begin;
  s.steps.push_back(step);
  return static_cast<int>(s.steps.size()) - 1;
}

// A step that completes once every step in `after` has; -1 if `after` holds
// no step (nothing to wait for).
inline int fence(Schedule& s, const std::vector<int>& after) {
  bool any = false;
  for (int d : after) any = any || d >= 0;
  if (!any) return -1;
  Step f;
  f.kind = StepKind::kCopy;
  f.src = f.dst = Slice{kScratch, 0, 0};
  return add_after(s, f, after);
}

// Every step of s from `first` on.
inline std::vector<int> steps_since(const Schedule& s, int first) {
  std::vector<int> out;
  for (int i = first; i < static_cast<int>(s.steps.size()); ++i) out.push_back(i);
  return out;
}

}  // namespace conflux::algo
