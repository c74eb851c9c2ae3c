// The algorithms the tuner chooses among, per collective: a name (the one
// CONFLUX_ALGO and `conflux plan` use), the schedule builder, what it cannot
// serve, and whether its schedules are symmetric under rotation by whole
// hosts (the simulator then builds one host's ranks only).
#pragma once

#include "algo/algorithms.h"
#include "sim/sim_model.h"

#include <string>
#include <vector>

namespace conflux::tune {

struct Candidate {
  std::string name;
  Coll coll;
  algo::Schedule (*build)(const algo::CollArgs&) = nullptr;
  bool host_rotation_symmetric = false;
  // Why this algorithm cannot serve `a` on `m`; empty when it can.
  std::string (*cannot_serve)(const algo::CollArgs& a, const sim::ClusterModel& m) = nullptr;
  // Its schedules have one-sided steps: they are not split over TCP
  // channels (flags count one call's signals, and the steps name no channel).
  bool one_sided = false;
};

// Candidates for one collective, in a fixed order (ties go to the first).
std::vector<const Candidate*> candidates_for(Coll c);
// Every distinct algorithm name, for messages about unknown names.
std::vector<std::string> algorithm_names();
// The algorithm the library used before the tuner existed (the fallback).
const Candidate* default_candidate(Coll c);

}  // namespace conflux::tune
