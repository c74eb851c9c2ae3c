// Human and machine-readable views of a System: the `nvidia-smi topo -m`
// style matrix (text) and the JSON form `conflux topo --format json` prints.
#pragma once

#include "topo/system.h"

#include <string>
#include <vector>

namespace conflux::topo {

// Devices, GPU/NIC matrix with CPU and NUMA affinity, link bandwidths, advice.
std::string to_text(const System& sys, const std::vector<Diagnostic>& advice);

// {"devices": [{"id","kind","busid","numa",...}], "paths": {"GPU0": {"GPU1":
// {"type":"NVL","bw":240.0}, "NIC0": {...}}}, "warnings": [...]}
std::string to_json(const System& sys, const std::vector<Diagnostic>& advice);

}  // namespace conflux::topo
