#include "transport/shm/stale_files.h"

#include "bootstrap/auth.h"
#include "bootstrap/rank_info.h"
#include "core/log.h"
#include "transport/shm/shm_segment.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <ctime>
#include <memory>
#include <mutex>

namespace conflux {
namespace {

// A process keeps its pid namespace (unshare and setns change only its
// children's), so it is read once.
uint64_t pid_namespace_of_self() {
  static const uint64_t ns = [] {
    struct stat st{};
    return stat("/proc/self/ns/pid", &st) == 0 ? static_cast<uint64_t>(st.st_ino) : 0;
  }();
  return ns;
}

bool starts_with(const std::string& s, const char* prefix) { return s.rfind(prefix, 0) == 0; }

// Whether `name` is a segment's file name in /dev/shm (segment_name's,
// without its '/').
bool is_segment_file_name(const std::string& name) {
  unsigned long long comm = 0;
  int rank = 0, pid = 0, used = 0;
  return std::sscanf(name.c_str(), "cfx-%16llx-%d-%d%n", &comm, &rank, &pid, &used) == 3 &&
         static_cast<size_t>(used) == name.size();
}

// Whether the file open as `fd`, named `name` in the sweep's directory,
// was left by a process that is gone.
bool left_by_a_gone_process(const std::string& name, int fd, const struct stat& st) {
  if (starts_with(name, "cfx_")) {
    auto stamp = stamp_of_region_name(name);
    return stamp && process_gone(*stamp);
  }
  if (!is_segment_file_name(name)) return false;
  if (auto stamp = ShmSegment::maker(fd)) return process_gone(*stamp);
  // A creator finishes its segment's header within milliseconds of
  // creating the file, before anyone else may use it; one still unfinished
  // long after was left by a creator killed while making it (the stamp is
  // in the header it never finished), whatever its pid namespace.
  return ShmSegment::unfinished(fd) && time(nullptr) - st.st_mtime >= kUnfinishedSegmentSeconds;
}

}  // namespace

ProcessStamp this_process_stamp() {
  ProcessStamp s;
  s.pid = static_cast<int32_t>(getpid());
  s.start_ticks = process_start_time(s.pid);
  s.pid_namespace = pid_namespace_of_self();
  return s;
}

bool process_gone(const ProcessStamp& stamp) {
  if (stamp.pid <= 0 || stamp.start_ticks == 0 || stamp.pid_namespace == 0) return false;
  if (stamp.pid_namespace != pid_namespace_of_self()) return false;
  return process_ended(stamp.pid, stamp.start_ticks);
}

std::string segment_name(uint64_t comm_id, int rank, int pid) {
  char name[64];
  std::snprintf(name, sizeof name, "/cfx-%016llx-%d-%d", static_cast<unsigned long long>(comm_id), rank, pid);
  return name;
}

std::string region_name(const ProcessStamp& maker, uint64_t tag) {
  char name[96];
  std::snprintf(name, sizeof name, "cfx_%d_%llx_%llx_%016llx", static_cast<int>(maker.pid),
                static_cast<unsigned long long>(maker.start_ticks),
                static_cast<unsigned long long>(maker.pid_namespace), static_cast<unsigned long long>(tag));
  return name;
}

std::string libfabric_region_name() {
  uint64_t tag = 0;
  random_bytes(&tag, sizeof tag);
  return region_name(this_process_stamp(), tag);
}

std::optional<ProcessStamp> stamp_of_region_name(const std::string& name) {
  int pid = 0;
  unsigned long long start = 0, ns = 0, tag = 0;
  int used = 0;
  if (std::sscanf(name.c_str(), "cfx_%d_%llx_%llx_%llx%n", &pid, &start, &ns, &tag, &used) != 4 ||
      static_cast<size_t>(used) != name.size())
    return std::nullopt;
  return ProcessStamp{pid, start, ns};
}

SweptFiles sweep_stale_files(const std::string& dir) {
  SweptFiles swept;
  std::unique_ptr<DIR, int (*)(DIR*)> d(opendir(dir.c_str()), closedir);
  if (!d) return swept;
  const int dir_fd = dirfd(d.get());
  const uid_t me = geteuid();
  while (dirent* e = readdir(d.get())) {
    const std::string name = e->d_name;
    if (!starts_with(name, "cfx-") && !starts_with(name, "cfx_")) continue;
    int fd = openat(dir_fd, name.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) continue;
    struct stat st{};
    const bool stale = fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == me &&
                       left_by_a_gone_process(name, fd, st);
    ::close(fd);
    if (!stale) continue;
    if (unlinkat(dir_fd, name.c_str(), 0) == 0) {
      ++swept.files;
      swept.bytes += static_cast<uint64_t>(st.st_blocks) * 512;
    }
  }
  return swept;
}

void sweep_stale_files_once() {
  static std::once_flag once;
  std::call_once(once, [] {
    SweptFiles swept = sweep_stale_files("/dev/shm");
    if (swept.files > 0)
      CFX_INFO(kShm, "removed %d shared-memory files (%.1f MB) left in /dev/shm by processes that are gone",
               swept.files, static_cast<double>(swept.bytes) / 1e6);
  });
}

}  // namespace conflux
