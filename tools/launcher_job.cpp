#include "launcher_job.h"

#include "launcher_binding.h"
#include "launcher_env.h"
#include "launcher_output.h"
#include "launcher_spawn.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <memory>
#include <optional>

extern char** environ;

namespace conflux::tools::launcher {
namespace {

using Clock = std::chrono::steady_clock;

// Signals we forward to the ranks rather than die from. SIGHUP too: when the
// terminal goes away the ranks (in their own process groups) would not hear
// of it otherwise.
constexpr int kForwardedSignals[] = {SIGINT, SIGTERM, SIGHUP};

// How long to keep reading output after the last rank exited, for pipes a
// backgrounded grandchild still holds open; we do not wait for it forever.
constexpr auto kOutputLinger = std::chrono::milliseconds(500);

// Self-pipe: the handler only writes the signal number; the poll loop does
// the work, so nothing unsafe ever runs inside a handler.
int g_signal_pipe[2] = {-1, -1};

void OnSignal(int sig) {
  int saved_errno = errno;
  unsigned char byte = static_cast<unsigned char>(sig);
  (void)!write(g_signal_pipe[1], &byte, 1);
  errno = saved_errno;
}

// Installs the handlers for the job's lifetime and restores the previous
// dispositions afterwards.
class SignalCapture {
 public:
  SignalCapture() {
    if (pipe2(g_signal_pipe, O_CLOEXEC | O_NONBLOCK) != 0) return;
    struct sigaction action {};
    action.sa_handler = OnSignal;
    sigemptyset(&action.sa_mask);
    action.sa_flags = SA_RESTART;
    for (int sig : kForwardedSignals) Install(sig, action);
    action.sa_flags = SA_RESTART | SA_NOCLDSTOP;
    Install(SIGCHLD, action);
    // A reader of our output that goes away must not kill the supervisor
    // (which would orphan the ranks); we drop the output instead.
    struct sigaction ignore {};
    ignore.sa_handler = SIG_IGN;
    Install(SIGPIPE, ignore);
  }
  ~SignalCapture() {
    for (auto& [sig, old] : saved_) sigaction(sig, &old, nullptr);
    for (int& fd : g_signal_pipe) {
      if (fd >= 0) close(fd);
      fd = -1;
    }
  }
  SignalCapture(const SignalCapture&) = delete;
  SignalCapture& operator=(const SignalCapture&) = delete;
  bool ok() const { return g_signal_pipe[0] >= 0; }

 private:
  void Install(int sig, const struct sigaction& action) {
    struct sigaction old {};
    sigaction(sig, &action, &old);
    saved_.emplace_back(sig, old);
  }
  std::vector<std::pair<int, struct sigaction>> saved_;
};

std::string SignalName(int sig) {
  static constexpr std::pair<int, const char*> kNames[] = {
      {SIGHUP, "SIGHUP"},   {SIGINT, "SIGINT"},   {SIGQUIT, "SIGQUIT"}, {SIGILL, "SIGILL"},
      {SIGTRAP, "SIGTRAP"}, {SIGABRT, "SIGABRT"}, {SIGBUS, "SIGBUS"},   {SIGFPE, "SIGFPE"},
      {SIGKILL, "SIGKILL"}, {SIGUSR1, "SIGUSR1"}, {SIGSEGV, "SIGSEGV"}, {SIGUSR2, "SIGUSR2"},
      {SIGPIPE, "SIGPIPE"}, {SIGALRM, "SIGALRM"}, {SIGTERM, "SIGTERM"}, {SIGXCPU, "SIGXCPU"},
      {SIGXFSZ, "SIGXFSZ"}, {SIGSYS, "SIGSYS"}};
  for (const auto& [number, name] : kNames) {
    if (number == sig) return name;
  }
  return "signal " + std::to_string(sig);
}

// Our own diagnostics, to stderr, one whole line per write.
__attribute__((format(printf, 1, 2))) void Say(const char* format, ...) {
  char text[1024];
  va_list args;
  va_start(args, format);
  std::vsnprintf(text, sizeof(text), format, args);
  va_end(args);
  WriteAll(STDERR_FILENO, std::string("conflux run: ") + text + "\n");
}

struct Rank {
  Rank(int rank_number, bool prefix)
      : number(rank_number),
        out(STDOUT_FILENO, prefix ? "[" + std::to_string(rank_number) + "] " : ""),
        err(STDERR_FILENO, prefix ? "[" + std::to_string(rank_number) + "] " : "") {}
  int number;
  pid_t pid = -1;
  bool running = false;
  int stdout_fd = -1;
  int stderr_fd = -1;
  LineForwarder out;
  LineForwarder err;
};

class Job {
 public:
  explicit Job(const LaunchSpec& spec) : spec_(spec) {}
  int Run();

 private:
  bool Start(int port);
  void Loop();
  void DrainSignals();
  void ReadOutput(int& fd, LineForwarder& forwarder);
  void Reap();
  void CheckDeadlines(Clock::time_point now);
  void BeginStop(int exit_code);
  void SignalRunning(int sig);
  void SweepProcessGroups();
  int RunningCount() const;
  int PollTimeoutMs(Clock::time_point now) const;

  const LaunchSpec& spec_;
  std::vector<std::unique_ptr<Rank>> ranks_;
  int exit_code_ = 0;
  bool stopping_ = false;
  bool swept_ = false;
  std::optional<Clock::time_point> timeout_at_;
  std::optional<Clock::time_point> kill_at_;
  std::optional<Clock::time_point> linger_until_;
};

Clock::duration Seconds(double s) {
  return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(s));
}

int Job::Run() {
  std::string error;
  int port = spec_.master_port;
  if (port == 0 && (port = FindFreePort(spec_.master_addr, &error)) == 0) {
    Say("%s", error.c_str());
    return 1;
  }
  SignalCapture signals;
  if (!signals.ok()) {
    Say("cannot create the signal pipe: %s", std::strerror(errno));
    return 1;
  }
  if (spec_.timeout_seconds > 0) timeout_at_ = Clock::now() + Seconds(spec_.timeout_seconds);
  Start(port);
  Loop();
  for (auto& rank : ranks_) {
    rank->out.Flush();
    rank->err.Flush();
    for (int fd : {rank->stdout_fd, rank->stderr_fd}) {
      if (fd >= 0) close(fd);
    }
  }
  return exit_code_;
}

// Starts every rank; stops early (and begins stopping the started ones) when
// the program cannot be executed, since the next ranks would fail the same.
bool Job::Start(int port) {
  // A terminal cannot be read from outside its foreground process group (the
  // reader would be stopped by SIGTTIN), so only a redirected stdin is handed
  // to rank 0; everyone else reads /dev/null.
  const std::string job_id = NewJobId();
  int devnull = open("/dev/null", O_RDONLY | O_CLOEXEC);
  bool stdin_usable = fcntl(STDIN_FILENO, F_GETFD) != -1 && !isatty(STDIN_FILENO);
  BindPolicy policy = BindPolicy::kAuto;
  ParseBindPolicy(spec_.bind_to, &policy);  // the command line accepted only valid ones
  std::string binding_note;
  const std::vector<cpu_set_t> cpu_sets = RankCpuSets(policy, spec_.nprocs, &binding_note);
  if (spec_.verbose) Say("%s", binding_note.c_str());
  for (int r = 0; r < spec_.nprocs; ++r) {
    auto rank = std::make_unique<Rank>(r, spec_.prefix_output);
    int stdin_fd = (r == 0 && stdin_usable) ? STDIN_FILENO : devnull;
    const cpu_set_t* cpus = cpu_sets.empty() ? nullptr : &cpu_sets[static_cast<size_t>(r)];
    if (cpus != nullptr && spec_.verbose) Say("rank %d on CPUs %s", r, CpuListOf(*cpus).c_str());
    SpawnedRank spawned =
        SpawnRank(spec_.command, RankEnvironment(environ, spec_, port, job_id, r), stdin_fd, cpus);
    if (spawned.pid < 0) {
      Say("cannot start rank %d: %s", r, spawned.error.c_str());
      BeginStop(1);
      break;
    }
    rank->pid = spawned.pid;
    rank->running = true;
    rank->stdout_fd = spawned.stdout_fd;
    rank->stderr_fd = spawned.stderr_fd;
    ranks_.push_back(std::move(rank));
    if (spawned.exec_errno != 0) {
      Say("cannot execute '%s': %s", spec_.command[0].c_str(), std::strerror(spawned.exec_errno));
      BeginStop(127);
      break;
    }
  }
  if (devnull >= 0) close(devnull);
  if (!stopping_ && spec_.verbose) {
    Say("started %d ranks of '%s', rendezvous at %s:%d", spec_.nprocs, spec_.command[0].c_str(),
        spec_.master_addr.c_str(), port);
  }
  return !stopping_;
}

void Job::Loop() {
  for (;;) {
    bool any_open = std::any_of(ranks_.begin(), ranks_.end(), [](const auto& rank) {
      return rank->stdout_fd >= 0 || rank->stderr_fd >= 0;
    });
    Clock::time_point now = Clock::now();
    if (RunningCount() == 0) {
      if (stopping_ && !swept_) SweepProcessGroups();
      if (!any_open) return;
      if (!linger_until_) linger_until_ = now + kOutputLinger;
      if (now >= *linger_until_) return;
    }
    std::vector<pollfd> fds;
    fds.push_back({g_signal_pipe[0], POLLIN, 0});
    for (const auto& rank : ranks_) {
      if (rank->stdout_fd >= 0) fds.push_back({rank->stdout_fd, POLLIN, 0});
      if (rank->stderr_fd >= 0) fds.push_back({rank->stderr_fd, POLLIN, 0});
    }
    int ready = poll(fds.data(), fds.size(), PollTimeoutMs(now));
    if (ready < 0 && errno != EINTR) {
      Say("poll failed: %s; killing all ranks", std::strerror(errno));
      BeginStop(1);
      SignalRunning(SIGKILL);
    }
    if (ready > 0) {
      if (fds[0].revents != 0) DrainSignals();
      // Match revents back to ranks by descriptor: ranks_ is small.
      for (size_t i = 1; i < fds.size(); ++i) {
        if (fds[i].revents == 0) continue;
        for (auto& rank : ranks_) {
          if (fds[i].fd == rank->stdout_fd) ReadOutput(rank->stdout_fd, rank->out);
          if (fds[i].fd == rank->stderr_fd) ReadOutput(rank->stderr_fd, rank->err);
        }
      }
    }
    Reap();
    CheckDeadlines(Clock::now());
  }
}

void Job::DrainSignals() {
  unsigned char buffer[64];
  ssize_t n;
  while ((n = read(g_signal_pipe[0], buffer, sizeof(buffer))) > 0) {
    for (ssize_t i = 0; i < n; ++i) {
      int sig = buffer[i];
      if (sig == SIGCHLD) continue;  // Reap() runs after every wake-up anyway
      if (!stopping_) {
        Say("caught %s; forwarding it to %d running ranks", SignalName(sig).c_str(),
            RunningCount());
        stopping_ = true;
        exit_code_ = 128 + sig;
        SignalRunning(sig);
        kill_at_ = Clock::now() + Seconds(spec_.grace_seconds);
      } else {
        // A second interrupt is the user insisting: no more grace.
        Say("caught %s again; killing all ranks now", SignalName(sig).c_str());
        SignalRunning(SIGKILL);
        kill_at_.reset();
      }
    }
  }
}

void Job::ReadOutput(int& fd, LineForwarder& forwarder) {
  char buffer[65536];
  ssize_t n = read(fd, buffer, sizeof(buffer));
  if (n > 0) {
    forwarder.Append(buffer, static_cast<size_t>(n));
  } else if (n == 0 || (errno != EINTR && errno != EAGAIN)) {
    forwarder.Flush();
    close(fd);
    fd = -1;
  }
}

void Job::Reap() {
  for (auto& rank : ranks_) {
    if (!rank->running) continue;
    int status = 0;
    pid_t done = waitpid(rank->pid, &status, WNOHANG);
    if (done == 0 || (done < 0 && errno == EINTR)) continue;
    rank->running = false;
    if (done < 0 || stopping_) continue;  // ranks we are stopping end as they may
    int code = 0;
    if (WIFEXITED(status) && WEXITSTATUS(status) != 0) {
      code = WEXITSTATUS(status);
      Say("rank %d (pid %d) exited with status %d", rank->number, rank->pid, code);
    } else if (WIFSIGNALED(status)) {
      code = 128 + WTERMSIG(status);
      Say("rank %d (pid %d) killed by signal %s%s", rank->number, rank->pid,
          SignalName(WTERMSIG(status)).c_str(), WCOREDUMP(status) ? " (core dumped)" : "");
    }
    if (code != 0) {
      if (int others = RunningCount(); others > 0) {
        Say("stopping the other %d running ranks (SIGTERM, SIGKILL after %g s)", others,
            spec_.grace_seconds);
      }
      BeginStop(code);
    }
  }
}

void Job::CheckDeadlines(Clock::time_point now) {
  if (timeout_at_ && now >= *timeout_at_) {
    timeout_at_.reset();
    if (!stopping_) {
      Say("job exceeded --timeout %g s; stopping %d running ranks", spec_.timeout_seconds,
          RunningCount());
      BeginStop(124);
    }
  }
  if (kill_at_ && now >= *kill_at_) {
    kill_at_.reset();
    for (const auto& rank : ranks_) {
      if (rank->running) {
        Say("rank %d (pid %d) still running %g s after SIGTERM; sending SIGKILL", rank->number,
            rank->pid, spec_.grace_seconds);
      }
    }
    SignalRunning(SIGKILL);
  }
}

// The first reason to stop decides the exit status; later ones only add to
// the log. Ranks get SIGTERM now and SIGKILL when the grace period ends.
void Job::BeginStop(int exit_code) {
  if (stopping_) return;
  stopping_ = true;
  exit_code_ = exit_code;
  SignalRunning(SIGTERM);
  kill_at_ = Clock::now() + Seconds(spec_.grace_seconds);
}

// Each rank leads its own process group, so signalling the group also
// reaches whatever the rank started (a shell's children, worker pools).
void Job::SignalRunning(int sig) {
  for (const auto& rank : ranks_) {
    if (!rank->running) continue;
    if (kill(-rank->pid, sig) != 0) kill(rank->pid, sig);
  }
}

// A job being torn down goes entirely: a rank may exit on our signal while
// something it started (a shell's background job, which ignores SIGINT)
// lives on in its process group. A group id stays reserved while any member
// lives, so this reaches only those leftovers. A job that succeeded is left
// alone: what its ranks left running was their choice.
void Job::SweepProcessGroups() {
  swept_ = true;
  for (const auto& rank : ranks_) kill(-rank->pid, SIGKILL);
}

int Job::RunningCount() const {
  return static_cast<int>(
      std::count_if(ranks_.begin(), ranks_.end(), [](const auto& rank) { return rank->running; }));
}

int Job::PollTimeoutMs(Clock::time_point now) const {
  std::optional<Clock::time_point> next;
  for (const auto& deadline : {timeout_at_, kill_at_, linger_until_}) {
    if (deadline && (!next || *deadline < *next)) next = deadline;
  }
  if (!next) return -1;
  if (*next <= now) return 0;
  // Round up so we never wake a hair before the deadline and spin.
  auto ms = std::chrono::ceil<std::chrono::milliseconds>(*next - now).count();
  return static_cast<int>(std::min<long long>(ms, 60'000));
}

}  // namespace

int RunJob(const LaunchSpec& spec) { return Job(spec).Run(); }

}  // namespace conflux::tools::launcher
