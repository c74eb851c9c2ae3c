// What the topology costs and what to do about it: a flattened or virtual
// PCI tree, 2.5 GT/s x1 virtual bridges, identical NUMA affinity masks, GPUs
// and NICs with no common switch. Includes the gaps build_system() recorded.
#pragma once

#include "topo/system.h"

#include <vector>

namespace conflux::topo {

std::vector<Diagnostic> advise(const System& sys);

}  // namespace conflux::topo
