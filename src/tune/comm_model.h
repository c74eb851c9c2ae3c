// The modelled cluster of a real communicator: hosts from the rank table's
// host identities (numbered in order of first appearance, so every rank
// derives the same model), links from the transport choice, constants from
// calibration.
#pragma once

#include "bootstrap/rank_info.h"
#include "sim/sim_model.h"
#include "tune/calibrate.h"

#include <vector>

namespace conflux::tune {

sim::ClusterModel model_of(const std::vector<RankInfo>& table, bool same_host_tcp, const Constants& c);

}  // namespace conflux::tune
