// Shared-memory files left in /dev/shm by processes that are gone.
//
// A rank's segment loses its name once every same-host peer has mapped it,
// and the libfabric shm provider's region when its endpoint closes. A rank
// killed before that (SIGKILL, the OOM killer, scancel, a test that kills
// ranks on purpose) leaves the file, and its memory, in /dev/shm until the
// machine reboots: a few megabytes each, until /dev/shm is full and every
// new segment fails. Each such file records the process that made it
// (a ProcessStamp: in the segment's header, or in the region's name), and
// the first communicator a process creates removes the files whose maker is
// provably gone. A segment whose creator was killed while writing its
// header (torch's test harness kills ranks that are still starting) has no
// stamp; it is known by a header still unfinished a minute later.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace conflux {

// One process, told apart from a later one that reuses its pid.
struct ProcessStamp {
  int32_t pid = 0;
  uint64_t start_ticks = 0;    // /proc/<pid>/stat's starttime
  uint64_t pid_namespace = 0;  // inode of the maker's /proc/self/ns/pid
};

ProcessStamp this_process_stamp();

// True only when the stamped process is provably gone: it lived in this
// process's pid namespace (another namespace's pids are not ours to look
// up), and no process has its pid now, or the one that has it started at
// another time. A stamp with a field unknown (0) is never gone.
bool process_gone(const ProcessStamp& stamp);

// A rank's segment, as shm_open names it: "/cfx-<communicator id>-<rank>-<pid>"
// (the file in /dev/shm has no leading '/').
std::string segment_name(uint64_t comm_id, int rank, int pid);

// A libfabric shm provider's region name: the stamp of its maker and a tag,
// "cfx_<pid>_<start>_<namespace>_<tag>" (hex after the pid).
std::string region_name(const ProcessStamp& maker, uint64_t tag);
// This process's region name, with a random tag.
std::string libfabric_region_name();
// The stamp in a region name; nullopt for any other name.
std::optional<ProcessStamp> stamp_of_region_name(const std::string& name);

struct SweptFiles {
  int files = 0;
  uint64_t bytes = 0;
};

// A segment whose header is still unfinished this long after its file was
// last modified was left by a creator killed while making it.
inline constexpr long kUnfinishedSegmentSeconds = 60;

// Removes from `dir` this user's conflux segments ("cfx-...", stamped in
// their header) and libfabric regions ("cfx_...", stamped in their name)
// whose maker is gone, and segments left unfinished for
// kUnfinishedSegmentSeconds. Files of live processes, of other users, of
// another pid namespace, or that carry no stamp (other versions) are left
// alone.
SweptFiles sweep_stale_files(const std::string& dir);

// sweep_stale_files("/dev/shm"), once per process; logs what it removed.
void sweep_stale_files_once();

}  // namespace conflux
