// What a communicator needs from the tuner, kept here so the communicator's
// code stays one call: a tuner per communicator (keyed by the communicator
// and its id, so a new communicator at a recycled address never inherits a
// stale model), and the constants in a form one AllReduce can average.
//
// Every rank must make the same choice, or ranks would run different
// schedules: ranks on different hosts calibrate separately, so the
// communicator averages the constants once (one small AllReduce with the
// default algorithm, which also hands every rank rank 0's network probe:
// core/network_probe.h) before its first tuned call; the model is derived from
// the rank table identically on every rank; the simulation is deterministic.
#pragma once

#include "tune/calibrate.h"
#include "tune/tuner.h"

#include <array>
#include <cstddef>
#include <cstdint>

namespace conflux::tune {

// CONFLUX_TUNE=0 turns the cost model off (the first usable algorithm, as
// before the tuner); CONFLUX_ALGO still applies.
bool tuning_enabled();

using ConstantsArray = std::array<double, 8>;
// Where to_array puts the network's constants (the probe replaces them).
inline constexpr size_t kNetLatIndex = 4, kNetGbpsIndex = 5;
ConstantsArray to_array(const Constants& c);
Constants from_array(const ConstantsArray& a, const std::string& source);

Tuner* find_tuner(const void* comm, uint64_t comm_id);
// layout: measured_table.h's layout_key; the measured table's entry for it,
// if any, is loaded into the tuner.
Result<Tuner*> install_tuner(const void* comm, uint64_t comm_id, sim::ClusterModel model, const std::string& algo_spec,
                             const std::string& layout);

}  // namespace conflux::tune
