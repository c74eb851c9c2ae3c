// What a communicator needs from the tuner, kept here so the communicator's
// code stays short: its tuner (the communicator owns it), and the
// constants in a form one AllReduce can average.
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
#include <memory>

namespace conflux::tune {

using ConstantsArray = std::array<double, 16>;
// Where to_array puts the network's constants (the probe replaces them).
inline constexpr size_t kNetLatIndex = 4, kNetGbpsIndex = 5;
ConstantsArray to_array(const Constants& c);
Constants from_array(const ConstantsArray& a, const std::string& source);

// layout: measured_table.h's layout_key; the measured table's entry for it,
// if any, is loaded into the tuner. CONFLUX_TUNE=0 (Config::tune) turns the
// cost model off: the first usable algorithm; CONFLUX_ALGO still applies.
Result<std::unique_ptr<Tuner>> make_tuner(sim::ClusterModel model, const std::string& algo_spec,
                                          const std::string& layout);

}  // namespace conflux::tune
