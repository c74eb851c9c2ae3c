#include "launcher_env.h"

#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <string_view>
#include <utility>

namespace conflux::tools::launcher {
namespace {

// Rank identities of other launchers. If `conflux run` itself runs inside a
// Slurm step or under mpirun, children would otherwise see two launchers'
// answers to "which rank am I" and the library could believe the wrong one.
constexpr std::string_view kForeignRankVariables[] = {
    "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK",
    "OMPI_COMM_WORLD_LOCAL_SIZE", "PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID", "PMIX_RANK",
    "SLURM_PROCID", "SLURM_NTASKS", "SLURM_NPROCS", "SLURM_LOCALID"};

// A small name -> value list; the environment is ~100 entries, so linear
// search keeps this simple without losing anything.
class EnvList {
 public:
  void Set(std::string name, std::string value) {
    for (auto& entry : entries_) {
      if (entry.first == name) {
        entry.second = std::move(value);
        return;
      }
    }
    entries_.emplace_back(std::move(name), std::move(value));
  }
  bool Has(const std::string& name) const {
    return std::any_of(entries_.begin(), entries_.end(),
                       [&](const auto& entry) { return entry.first == name; });
  }
  std::vector<std::string> Strings() const {
    std::vector<std::string> out;
    out.reserve(entries_.size());
    for (const auto& [name, value] : entries_) out.push_back(name + "=" + value);
    return out;
  }

 private:
  std::vector<std::pair<std::string, std::string>> entries_;
};

bool IsForeignRankVariable(std::string_view name) {
  return std::find(std::begin(kForeignRankVariables), std::end(kForeignRankVariables), name) !=
         std::end(kForeignRankVariables);
}

}  // namespace

int FindFreePort(const std::string& addr, std::string* error) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV;
  addrinfo* found = nullptr;
  if (int rc = getaddrinfo(addr.c_str(), "0", &hints, &found); rc != 0) {
    *error = "cannot resolve master address '" + addr + "': " + gai_strerror(rc);
    return 0;
  }
  int port = 0;
  std::string last_error = "no usable address";
  for (addrinfo* ai = found; ai != nullptr && port == 0; ai = ai->ai_next) {
    int fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
    if (fd < 0) {
      last_error = std::strerror(errno);
      continue;
    }
    sockaddr_storage bound{};
    socklen_t len = sizeof(bound);
    if (bind(fd, ai->ai_addr, ai->ai_addrlen) == 0 &&
        getsockname(fd, reinterpret_cast<sockaddr*>(&bound), &len) == 0) {
      port = bound.ss_family == AF_INET6
                 ? ntohs(reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port)
                 : ntohs(reinterpret_cast<sockaddr_in*>(&bound)->sin_port);
    } else {
      last_error = std::strerror(errno);
    }
    close(fd);
  }
  freeaddrinfo(found);
  if (port == 0) *error = "cannot bind a TCP port on '" + addr + "': " + last_error;
  return port;
}

std::string NewJobId() {
  auto now = std::chrono::system_clock::now().time_since_epoch();
  return "conflux-run-" + std::to_string(getpid()) + "-" +
         std::to_string(std::chrono::duration_cast<std::chrono::nanoseconds>(now).count());
}

std::vector<std::string> RankEnvironment(char* const* base, const LaunchSpec& spec, int port,
                                         const std::string& job_id, int rank) {
  EnvList env;
  for (char* const* entry = base; entry != nullptr && *entry != nullptr; ++entry) {
    std::string_view text(*entry);
    size_t eq = text.find('=');
    if (eq == std::string_view::npos || IsForeignRankVariable(text.substr(0, eq))) continue;
    env.Set(std::string(text.substr(0, eq)), std::string(text.substr(eq + 1)));
  }
  // One host, so local and global numbering coincide and there is one group.
  env.Set("RANK", std::to_string(rank));
  env.Set("WORLD_SIZE", std::to_string(spec.nprocs));
  env.Set("LOCAL_RANK", std::to_string(rank));
  env.Set("LOCAL_WORLD_SIZE", std::to_string(spec.nprocs));
  env.Set("GROUP_RANK", "0");
  env.Set("MASTER_ADDR", spec.master_addr);
  env.Set("MASTER_PORT", std::to_string(port));
  // An IPv6 literal needs brackets so the port separator stays unambiguous.
  bool ipv6_literal = spec.master_addr.find(':') != std::string::npos;
  env.Set("CONFLUX_ROOT", (ipv6_literal ? "[" + spec.master_addr + "]" : spec.master_addr) + ":" +
                              std::to_string(port));
  // A job id the user chose (to tie jobs together, or from a scheduler) wins.
  if (!env.Has("CONFLUX_JOB_ID")) env.Set("CONFLUX_JOB_ID", job_id);
  for (const auto& [name, value] : spec.extra_env) env.Set(name, value);
  return env.Strings();
}

}  // namespace conflux::tools::launcher
