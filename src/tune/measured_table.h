// Measured algorithm tables: `conflux tune` times every usable algorithm of
// each collective on this host's layout and stores, per layout, the fastest
// one by size as a CONFLUX_ALGO-style range string
// ("allreduce:0-2K:rd#allreduce:2K-inf:ring"). A communicator whose layout
// has an entry prefers the measured choice over the cost model's where it
// is usable (MPICH's and Open MPI's tuning files, made on the machine that
// runs them). The file is one "<layout key> <rules>" line per layout.
#pragma once

#include "core/status.h"
#include "tune/algo_filter.h"

#include <string>

namespace conflux::tune {

// What a measured table is valid for: rank and host counts, the transport
// forced (auto/tcp/shm/ofi) and whether the intra-host fast path is on.
std::string layout_key(int nranks, int nhosts, const std::string& transport, bool shm_collectives);

// CONFLUX_TUNE_TABLE (a path; 0/off/none: no table), else
// <cache dir>/algos-<host>.txt; "" when there is none.
std::string measured_table_file();

// The rules stored for key in path; an empty filter when the file or the
// entry is missing. A malformed entry is an error naming the file.
Result<AlgoFilter> load_measured_table(const std::string& path, const std::string& key);

// Replaces (or adds) key's entry in path, under a lock; other entries stay.
Status store_measured_table(const std::string& path, const std::string& key, const std::string& rules);

}  // namespace conflux::tune
