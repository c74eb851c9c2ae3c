// Starts one rank: fork, its own process group, stdout/stderr into pipes,
// exec. Exec failures come back to the parent as an errno instead of as a
// mysterious exit status 127.
#pragma once

#include <sched.h>
#include <sys/types.h>

#include <string>
#include <vector>

namespace conflux::tools::launcher {

struct SpawnedRank {
  pid_t pid = -1;       // -1 when fork itself failed (see error)
  int stdout_fd = -1;   // read ends, close-on-exec, owned by the caller
  int stderr_fd = -1;
  int exec_errno = 0;   // non-zero: the child could not exec the program
  std::string error;    // set when pipe/fork failed before a child existed
};

// `stdin_fd` becomes the child's standard input (the caller decides who may
// read the terminal). The child leads a new process group whose id is its
// pid, so kill(-pid, sig) reaches everything it starts. A non-null `cpus`
// binds the child (and what it starts) to those CPUs before it execs.
SpawnedRank SpawnRank(const std::vector<std::string>& command, const std::vector<std::string>& env,
                      int stdin_fd, const cpu_set_t* cpus);

}  // namespace conflux::tools::launcher
