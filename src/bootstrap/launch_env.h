// What cfxCommInitFromEnv learns from the launcher: torchrun, Open MPI,
// MPICH/Hydra or Slurm variables, and the rendezvous address.
#pragma once

#include "bootstrap/unique_id.h"

#include <functional>
#include <string>

namespace conflux {

struct LaunchEnv {
  int rank = -1;
  int nranks = 0;
  int local_rank = -1;
  std::string launcher;  // "torchrun", "openmpi", "mpich", "slurm", "conflux"
  std::string root;      // host:port of the rendezvous
};

using EnvLookup = std::function<const char*(const char*)>;

// `lookup` defaults to getenv; tests pass a map.
Result<LaunchEnv> read_launch_env(const EnvLookup& lookup = nullptr);
// The unique id every rank of the job derives alike: root address from the
// environment; secret and communicator id from CONFLUX_SECRET, else from the
// job's identity (launcher job id and the rendezvous address).
Result<UniqueIdData> unique_id_from_env(const LaunchEnv& env, const EnvLookup& lookup = nullptr);

}  // namespace conflux
