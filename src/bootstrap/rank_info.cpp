#include "bootstrap/rank_info.h"

#include "core/config.h"

#include <poll.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <fstream>
#include <sstream>

namespace conflux {
namespace {
uint64_t fnv1a64(const std::string& s) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  return h;
}

// Unique per boot of a kernel, and not namespaced: containers and network
// namespaces on one machine read the same.
std::string boot_id() {
  std::string id;
  std::ifstream("/proc/sys/kernel/random/boot_id") >> id;
  return id;
}
}  // namespace

uint64_t local_host_hash(std::string* name_out) {
  char host[256] = {};
  gethostname(host, sizeof host - 1);
  std::string identity;
  if (!config().hostid.empty()) {
    identity = "hostid:" + config().hostid;
    if (name_out) *name_out = config().hostid;
  } else {
    identity = std::string(host) + "/" + boot_id();
    if (name_out) *name_out = host;
  }
  return fnv1a64(identity);
}

uint64_t cpu_set_hash(const std::vector<int>& cpus) {
  std::string identity = "cpus:" + boot_id();
  for (int c : cpus) identity += "," + std::to_string(c);
  return fnv1a64(identity);
}

CoreSharing core_sharing(const std::vector<RankInfo>& table, const RankInfo& mine, int cores_if_unknown) {
  int sharing = 0;
  bool all_single = true;
  for (const RankInfo& r : table) {
    sharing += r.cpu_set_hash == mine.cpu_set_hash;
    all_single = all_single && r.cpu_set_size == 1;
  }
  CoreSharing c;
  c.sharing = std::max(sharing, 1);
  c.cores = mine.cpu_set_size > 0 ? mine.cpu_set_size : std::max(1, cores_if_unknown);
  // A rank whose set is wider than one core might share ours even with
  // another hash; one of unknown size might be anywhere.
  c.own_core = all_single && c.sharing == 1 && mine.cpu_set_size == 1;
  return c;
}

// NOLINTNEXTLINE(bugprone-easily-swappable-parameters): a pid and its start time, in RankInfo's order
bool process_ended(int pid, uint64_t start_time) {
  if (::kill(pid, 0) != 0 && errno == ESRCH) return true;
  if (start_time == 0) return false;
  const uint64_t now = process_start_time(pid);
  return now != 0 && now != start_time;
}

int open_pidfd(int pid) {
#ifdef SYS_pidfd_open
  return static_cast<int>(syscall(SYS_pidfd_open, pid, 0));
#else
  (void)pid;
  return -1;
#endif
}

// NOLINTNEXTLINE(bugprone-easily-swappable-parameters): a pidfd, then the pid it names
bool process_exited(int pidfd, int pid, uint64_t start_time) {
  if (pidfd >= 0) {
    pollfd p{pidfd, POLLIN, 0};
    return ::poll(&p, 1, 0) > 0;
  }
  return process_ended(pid, start_time);
}

uint64_t process_start_time(int pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(stat, line)) return 0;
  // Field 22 (starttime) follows the command name, which may hold spaces: skip past ')'.
  size_t close = line.rfind(')');
  if (close == std::string::npos) return 0;
  std::istringstream rest(line.substr(close + 2));
  std::string field;
  for (int i = 3; i <= 22 && rest >> field; ++i) {
    if (i == 22) return std::stoull(field);
  }
  return 0;
}

}  // namespace conflux
