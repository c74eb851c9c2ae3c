// Runs a whole `conflux run` job: starts the ranks, forwards their output,
// forwards our signals, stops everyone when one fails or time runs out, and
// returns the exit status the launcher should exit with.
#pragma once

#include "launcher_spec.h"

namespace conflux::tools::launcher {

// Exit status: 0 when every rank exited 0; the first failing rank's status
// (128 + signal when it was killed); 124 on --timeout; 127 when the program
// cannot be executed; 128 + signal when we were interrupted.
int RunJob(const LaunchSpec& spec);

}  // namespace conflux::tools::launcher
