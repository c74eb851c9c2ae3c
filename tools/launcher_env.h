// The environment each rank starts with (torchrun's variables, which the
// library's cfxCommInitFromEnv reads) and the rendezvous port behind it.
#pragma once

#include "launcher_spec.h"

#include <string>
#include <vector>

namespace conflux::tools::launcher {

// A TCP port that was free on `addr` a moment ago (bind to port 0, ask the
// kernel which one it chose, release it). Returns 0 and fills `error` when
// `addr` cannot be bound.
int FindFreePort(const std::string& addr, std::string* error);

// "NAME=VALUE" strings for rank `rank`: `base` (our own environment) minus
// any other launcher's rank variables, plus RANK, WORLD_SIZE, LOCAL_RANK,
// LOCAL_WORLD_SIZE, GROUP_RANK, MASTER_ADDR, MASTER_PORT, CONFLUX_ROOT,
// CONFLUX_JOB_ID (unless already set), then the spec's -x overrides.
std::vector<std::string> RankEnvironment(char* const* base, const LaunchSpec& spec, int port,
                                         const std::string& job_id, int rank);

// An id no other job on this host shares (pid and start time). The library
// folds CONFLUX_JOB_ID into the communicator's identity, so two jobs that
// happen to rendezvous on the same address:port never join each other.
std::string NewJobId();

}  // namespace conflux::tools::launcher
