#include "launcher_spawn.h"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace conflux::tools::launcher {
namespace {

struct Pipe {
  int read_end = -1;
  int write_end = -1;
  bool Open() {
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) != 0) return false;
    read_end = fds[0];
    write_end = fds[1];
    return true;
  }
  void Close() {
    if (read_end >= 0) close(read_end);
    if (write_end >= 0) close(write_end);
    read_end = write_end = -1;
  }
};

std::vector<char*> CStrings(const std::vector<std::string>& strings) {
  std::vector<char*> out;
  out.reserve(strings.size() + 1);
  for (const auto& s : strings) out.push_back(const_cast<char*>(s.c_str()));
  out.push_back(nullptr);
  return out;
}

// Runs in the child between fork and exec: only async-signal-safe calls.
[[noreturn]] void ExecChild(char* const* argv, char* const* envp, int stdin_fd, int out_fd,
                            int err_fd, int report_fd, const cpu_set_t* cpus) {
  setpgid(0, 0);
  // A binding the kernel refuses (a cgroup without those CPUs) leaves the
  // rank where it was: slower perhaps, but running.
  if (cpus != nullptr) (void)sched_setaffinity(0, sizeof *cpus, cpus);
  // Our handlers vanish at exec, but an ignored SIGPIPE and a blocked mask
  // would be inherited and silently change how the program behaves.
  for (int sig : {SIGINT, SIGTERM, SIGCHLD, SIGPIPE}) signal(sig, SIG_DFL);
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, nullptr);
  if (dup2(stdin_fd, STDIN_FILENO) < 0 || dup2(out_fd, STDOUT_FILENO) < 0 ||
      dup2(err_fd, STDERR_FILENO) < 0) {
    int err = errno;
    (void)!write(report_fd, &err, sizeof(err));
    _exit(127);
  }
  execvpe(argv[0], argv, envp);
  int err = errno;
  (void)!write(report_fd, &err, sizeof(err));
  _exit(127);
}

}  // namespace

SpawnedRank SpawnRank(const std::vector<std::string>& command, const std::vector<std::string>& env,
                      int stdin_fd, const cpu_set_t* cpus) {
  SpawnedRank result;
  Pipe out, err, report;
  if (!out.Open() || !err.Open() || !report.Open()) {
    result.error = std::string("cannot create pipes: ") + std::strerror(errno);
    out.Close();
    err.Close();
    report.Close();
    return result;
  }
  // Built before fork: allocation is not safe in the child.
  std::vector<char*> argv = CStrings(command);
  std::vector<char*> envp = CStrings(env);
  pid_t pid = fork();
  if (pid < 0) {
    result.error = std::string("fork failed: ") + std::strerror(errno);
    out.Close();
    err.Close();
    report.Close();
    return result;
  }
  if (pid == 0) {
    ExecChild(argv.data(), envp.data(), stdin_fd, out.write_end, err.write_end, report.write_end, cpus);
  }
  // Also set the group here: whichever of parent and child runs first, the
  // group exists before we could ever signal it.
  setpgid(pid, pid);
  close(out.write_end);
  close(err.write_end);
  close(report.write_end);
  // The report pipe is close-on-exec: EOF means exec succeeded, four bytes
  // are the errno of a failed exec.
  int exec_errno = 0;
  ssize_t n;
  do {
    n = read(report.read_end, &exec_errno, sizeof(exec_errno));
  } while (n < 0 && errno == EINTR);
  close(report.read_end);
  result.pid = pid;
  result.stdout_fd = out.read_end;
  result.stderr_fd = err.read_end;
  result.exec_errno = n == static_cast<ssize_t>(sizeof(exec_errno)) ? exec_errno : 0;
  return result;
}

}  // namespace conflux::tools::launcher
