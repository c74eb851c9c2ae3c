#include "support/mp_harness.h"

#include "core/config.h"

#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <utility>

namespace conflux::test {
namespace {
cfxUniqueId g_id;

[[noreturn]] void child_main(int rank, int n, const RankBody& body, const RunOptions& options, int out_fd) {
  for (const auto& [k, v] : options.env) setenv(k.c_str(), v.c_str(), 1);
  conflux::reload_config();
  std::string message;
  cfxComm_t comm = nullptr;
  if (options.init_comm) {
    cfxResult_t r = cfxCommInitRank(&comm, n, g_id, rank);
    if (r != cfxSuccess) message = std::string("init failed: ") + cfxGetErrorString(r) + ": " + cfxGetLastError(nullptr);
  }
  if (message.empty()) message = body(comm, rank, n);
  if (comm != nullptr) cfxCommDestroy(comm);
  if (!message.empty()) {
    ssize_t w = write(out_fd, message.data(), message.size());
    (void)w;
  }
  close(out_fd);
  _exit(message.empty() ? 0 : 1);
}
}  // namespace

const cfxUniqueId& current_unique_id() { return g_id; }

// Sets the run's variables in this (parent) process and puts the previous
// values back afterwards, so one test's settings never leak into the next
// when a whole test binary runs in one process.
class ScopedEnv {
 public:
  explicit ScopedEnv(const std::map<std::string, std::string>& vars) {
    for (const auto& [k, v] : vars) {
      const char* old = std::getenv(k.c_str());
      saved_.emplace_back(k, old ? std::optional<std::string>(old) : std::nullopt);
      setenv(k.c_str(), v.c_str(), 1);
    }
    conflux::reload_config();
  }
  ~ScopedEnv() {
    for (const auto& [k, old] : saved_) {
      if (old) setenv(k.c_str(), old->c_str(), 1);
      else unsetenv(k.c_str());
    }
    conflux::reload_config();
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  std::vector<std::pair<std::string, std::optional<std::string>>> saved_;
};

std::vector<RankResult> run_ranks(int n, const RankBody& body, const RunOptions& options) {
  std::vector<RankResult> results(n);
  ScopedEnv env(options.env);
  // The ranks are forked before cfxGetUniqueId starts the rendezvous
  // thread, and wait for the id on a pipe: a child forked while another
  // thread holds an allocator lock inherits it locked (ASan's allocator
  // takes no fork handlers), and its next allocation would wait forever.
  std::vector<pid_t> pids(n);
  std::vector<int> fds(n), id_fds(n);
  std::fflush(nullptr);
  for (int r = 0; r < n; ++r) {
    int p[2], q[2];
    if (pipe(p) != 0 || pipe(q) != 0) std::abort();
    pid_t pid = fork();
    if (pid == 0) {
      close(p[0]);
      close(q[1]);
      for (int k = 0; k < r; ++k) close(id_fds[k]);  // the earlier ranks' id pipes
      size_t got = 0;
      while (got < sizeof g_id) {
        ssize_t k = read(q[0], reinterpret_cast<char*>(&g_id) + got, sizeof g_id - got);
        if (k <= 0) _exit(3);  // the parent could not make an id (it reports why)
        got += static_cast<size_t>(k);
      }
      close(q[0]);
      child_main(r, n, body, options, p[1]);
    }
    close(p[1]);
    close(q[0]);
    pids[r] = pid;
    fds[r] = p[0];
    id_fds[r] = q[1];
    results[r].rank = r;
  }
  const bool have_id = cfxGetUniqueId(&g_id) == cfxSuccess;
  const std::string id_error = have_id ? "" : std::string("cfxGetUniqueId failed: ") + cfxGetLastError(nullptr);
  if (have_id && options.id_out != nullptr) *options.id_out = g_id;
  for (int r = 0; r < n; ++r) {
    if (have_id) {
      ssize_t w = write(id_fds[r], &g_id, sizeof g_id);
      (void)w;  // a child that died early is reported by its exit status
    }
    close(id_fds[r]);
  }
  if (!have_id) {
    for (int r = 0; r < n; ++r) {
      waitpid(pids[r], nullptr, 0);
      close(fds[r]);
      results[r] = {r, 1, id_error};
    }
    return results;
  }
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(options.timeout_s);
  int alive = n;
  std::vector<bool> reaped(n, false);
  while (alive > 0) {
    for (int r = 0; r < n; ++r) {
      if (reaped[r]) continue;
      char buf[4096];
      for (;;) {
        pollfd pf{fds[r], POLLIN, 0};
        if (poll(&pf, 1, 0) <= 0) break;
        ssize_t k = read(fds[r], buf, sizeof buf);
        if (k <= 0) break;
        results[r].message.append(buf, static_cast<size_t>(k));
      }
      int status = 0;
      if (waitpid(pids[r], &status, WNOHANG) == pids[r]) {
        ssize_t k;
        while ((k = read(fds[r], buf, sizeof buf)) > 0) results[r].message.append(buf, static_cast<size_t>(k));
        close(fds[r]);
        reaped[r] = true;
        --alive;
        results[r].exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status);
      }
    }
    if (alive == 0) break;
    if (std::chrono::steady_clock::now() > deadline) {
      for (int r = 0; r < n; ++r) {
        if (reaped[r]) continue;
        kill(pids[r], SIGKILL);
        waitpid(pids[r], nullptr, 0);
        close(fds[r]);
        results[r].exit_code = -SIGKILL;
        results[r].message += " [hung: killed after " + std::to_string(options.timeout_s) + " s]";
      }
      break;
    }
    usleep(2000);
  }
  return results;
}

std::string summarize(const std::vector<RankResult>& results) {
  std::string s;
  for (const auto& r : results)
    if (r.exit_code != 0 || !r.message.empty())
      s += "rank " + std::to_string(r.rank) + " (exit " + std::to_string(r.exit_code) + "): " + r.message + "\n";
  return s;
}

}  // namespace conflux::test
