// What `conflux run` was asked to launch: filled from the command line by
// cmd_run.cpp, read by the job supervisor and the environment builder.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace conflux::tools::launcher {

struct LaunchSpec {
  int nprocs = 1;
  std::string master_addr = "127.0.0.1";
  int master_port = 0;  // 0: pick a free port on master_addr
  // -x NAME=VALUE pairs, applied last so they override everything we set.
  std::vector<std::pair<std::string, std::string>> extra_env;
  bool prefix_output = true;
  std::string bind_to = "auto";  // auto, core or none: see launcher_binding.h
  bool verbose = false;  // say what was started and where the rendezvous is
  double grace_seconds = 3.0;    // SIGTERM -> SIGKILL delay when stopping ranks
  double timeout_seconds = 0.0;  // 0: no limit on the job's duration
  std::vector<std::string> command;  // program and its arguments
};

}  // namespace conflux::tools::launcher
