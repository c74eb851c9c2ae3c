// `conflux run -n N [options] [--] prog args...`: a minimal single-host
// torchrun/mpirun. Starts N ranks of prog with torchrun's environment
// variables (which cfxCommInitFromEnv reads), prefixes their output with the
// rank, forwards signals, and stops the whole job when one rank fails.
// The work is in launcher_*.cpp; this file is the command line.
#include "command_registry.h"
#include "launcher_job.h"
#include "launcher_spec.h"

#include <cstdio>
#include <memory>

namespace {

using conflux::tools::launcher::LaunchSpec;

// Parses "NAME=VALUE" into the spec's -x list; false (and a message) when
// malformed.
bool ParseExtraEnv(const std::vector<std::string>& assignments, LaunchSpec& spec) {
  for (const auto& assignment : assignments) {
    size_t eq = assignment.find('=');
    if (eq == 0 || eq == std::string::npos) {
      std::fprintf(stderr, "conflux run: -x expects NAME=VALUE, got '%s'\n", assignment.c_str());
      return false;
    }
    spec.extra_env.emplace_back(assignment.substr(0, eq), assignment.substr(eq + 1));
  }
  return true;
}

const conflux::tools::RegisterCommand kRun{
    "run", "Start N local ranks of a program (torchrun-style environment)", [](CLI::App& app) {
      // Shared with the callback below, which runs after parsing fills it.
      auto spec = std::make_shared<LaunchSpec>();
      auto extra_env = std::make_shared<std::vector<std::string>>();
      app.add_option("-n,--nproc,--nproc-per-node", spec->nprocs, "Number of ranks to start")
          ->check(CLI::Range(1, 4096))
          ->capture_default_str();
      app.add_option("--master-addr", spec->master_addr,
                     "Rendezvous address given to the ranks (MASTER_ADDR)")
          ->capture_default_str();
      app.add_option("--master-port", spec->master_port,
                     "Rendezvous port (MASTER_PORT); 0 picks a free one")
          ->check(CLI::Range(0, 65535))
          ->capture_default_str();
      // One value per -x: otherwise `-x A=1 prog` would swallow prog.
      app.add_option("-x,--env", *extra_env, "Extra environment variable NAME=VALUE (repeatable)")
          ->allow_extra_args(false);
      app.add_flag_callback(
          "--no-prefix", [spec] { spec->prefix_output = false; },
          "Do not prefix output lines with [rank]");
      app.add_option("--grace", spec->grace_seconds,
                     "Seconds between SIGTERM and SIGKILL when stopping ranks")
          ->check(CLI::NonNegativeNumber)
          ->capture_default_str();
      app.add_option("--timeout", spec->timeout_seconds,
                     "Stop the job and exit 124 after this many seconds (0: never)")
          ->check(CLI::NonNegativeNumber)
          ->capture_default_str();
      app.add_option("--bind-to", spec->bind_to,
                     "CPU binding of the ranks: core (a block of cores each), none, or auto "
                     "(core when the ranks do not outnumber the CPUs)")
          ->check(CLI::IsMember({"auto", "core", "none"}))
          ->capture_default_str();
      app.add_flag("-v,--verbose", spec->verbose, "Say what was started and where");
      // Everything from the program name on belongs to the program, options
      // included (`conflux run -n 2 sh -c ...`); `--` also ends our options.
      app.add_option("command", spec->command, "Program to run, then its arguments")
          ->required()
          ->allow_extra_args();
      app.positionals_at_end();
      return [spec, extra_env] {
        if (!ParseExtraEnv(*extra_env, *spec)) return 2;
        return conflux::tools::launcher::RunJob(*spec);
      };
    }};

}  // namespace
