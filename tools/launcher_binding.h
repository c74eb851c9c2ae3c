// Which CPUs each local rank may run on. Ranks that spin while they wait
// must not share a core with the peer they wait for: unbound, the scheduler
// sometimes keeps two ranks of a 2-rank job on one core for the whole run
// (a futex wake places the woken rank on the waker's core), and every
// message then costs two context switches instead of a cache line.
// Open MPI's mpirun binds for the same reason; torchrun does not.
#pragma once

#include <sched.h>

#include <string>
#include <vector>

namespace conflux::tools::launcher {

enum class BindPolicy {
  kAuto,  // a block of cores per rank when there are enough, otherwise none
  kCore,  // a block of cores per rank; ranks share cores when they outnumber them
  kNone,  // leave the ranks wherever the launcher's own mask allows
};

// Parses "auto", "core" or "none"; false for anything else.
bool ParseBindPolicy(const std::string& text, BindPolicy* policy);

// One CPU set per rank, or none (empty) when the ranks stay unbound. The
// CPUs are those this process may use, ordered by package, core and
// hardware thread, so a block of them is whole cores of one package; rank r
// of n gets the r-th of n equal blocks. `note` says what was decided, for
// --verbose.
std::vector<cpu_set_t> RankCpuSets(BindPolicy policy, int nprocs, std::string* note);

// "0-3,8" for the set, as taskset and /proc/<pid>/status write it.
std::string CpuListOf(const cpu_set_t& set);

}  // namespace conflux::tools::launcher
