// What each rank tells every other at init (fixed layout: it travels raw
// over the bootstrap connection between processes of the same build).
#pragma once

#include <sys/socket.h>

#include <cstdint>
#include <string>
#include <vector>

namespace conflux {

struct RankInfo {
  int32_t rank = -1;
  int32_t pid = 0;
  uint64_t host_hash = 0;        // equal on ranks that share memory (CONFLUX_HOSTID overrides)
  char hostname[64] = {};
  int32_t numa_node = -1;        // -1 unknown
  uint32_t listen_len = 0;
  sockaddr_storage listen_addr{};  // where this rank accepts TCP peer connections
  char nic[32] = {};              // the network interface it listens on
  char shm_name[48] = {};         // its shared-memory segment, for same-host peers
  uint64_t shm_bytes = 0;
  uint64_t pid_start_time = 0;    // with pid, identifies the process (pids get reused)
  uint32_t ofi_name_len = 0;      // libfabric endpoint address (CONFLUX_TRANSPORT=ofi), else 0
  char ofi_name[92] = {};
  char topo_nic[32] = {};         // nearest NIC by the topology model (path class, then bandwidth)
  uint32_t fallback_len = 0;      // a second address of the same listener (the route to the
  sockaddr_storage fallback_addr{};  // rendezvous) when listen_addr is the nearest NIC; else 0
  int32_t tcp_channels = 1;       // CONFLUX_TCP_CHANNELS; the communicator uses the smallest
  // The cores this rank may run on, as one identity: equal on ranks of one
  // kernel (boot id) with the same CPU affinity, which compete for the same
  // cores whatever their hostnames (containers, network namespaces).
  uint64_t cpu_set_hash = 0;
  int32_t cpu_set_size = 0;       // CPUs in that affinity set; 0 unknown
};

// This host's identity: CONFLUX_HOSTID when set, else hostname + boot id.
uint64_t local_host_hash(std::string* name_out = nullptr);
// Identity of a CPU affinity set on this kernel (RankInfo::cpu_set_hash).
uint64_t cpu_set_hash(const std::vector<int>& cpus);
uint64_t process_start_time(int pid);  // from /proc/<pid>/stat; 0 if unknown
// Whether the process `pid` that started at `start_time` (0: unknown) has
// ended: no process has the pid now, or the one that has it started at
// another time (the pid was reused).
bool process_ended(int pid, uint64_t start_time);
// A pidfd for `pid`, or -1 where the kernel gives none. It turns readable
// when the process exits, even while it is an unreaped zombie (which
// kill(pid, 0) still finds), and it names that one process, never a later
// one that reuses the pid. The caller closes it.
int open_pidfd(int pid);
// Whether a peer process has exited: its pidfd is readable where it has
// one (pidfd >= 0), else process_ended(pid, start_time). Does not block.
bool process_exited(int pidfd, int pid, uint64_t start_time);

// Where this rank runs, against the job's other ranks (from their
// RankInfo). `sharing` counts the ranks (this one included) whose affinity
// set is this rank's; `cores` is that set's size. `own_core`: every rank of
// the job is bound to one core and none shares this rank's, so no rank of
// the job can ever be waiting to run on this rank's core.
struct CoreSharing {
  int sharing = 1;
  int cores = 1;
  bool own_core = false;
  bool oversubscribed() const { return sharing > cores; }
};
CoreSharing core_sharing(const std::vector<RankInfo>& table, const RankInfo& mine, int cores_if_unknown);

}  // namespace conflux
