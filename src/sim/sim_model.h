// The modelled cluster the simulator runs schedules on: which host each rank
// lives on, and an alpha-beta link per path class. Times are microseconds,
// bandwidths GB/s (1 GB/s = 1000 bytes/us).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace conflux::sim {

// Path classes, cheapest first: shared memory inside a host, TCP between
// processes of one host (loopback; used when shm is off), and the network.
enum class PathClass : int { kShm = 0, kTcpLocal = 1, kNet = 2, kCount = 3 };
const char* path_class_name(PathClass c);

// One point of a measured message-time curve: a message of `bytes` took `us`.
struct CurvePoint {
  double bytes = 0;
  double us = 0;
};

struct LinkParams {
  LinkParams() = default;
  LinkParams(double lat, double bw) : lat_us(lat), gbps(bw) {}

  double lat_us = 1.0;  // alpha: per-message latency, including software overhead
  double gbps = 10.0;   // beta: GB/s of one port of this class
  // Optional measured message times, bytes ascending (the network probe's
  // exchanges). Where present, a message's time beyond alpha follows the
  // curve, linear between its points and at `gbps` past the last, instead
  // of bytes/gbps: TCP's cost is not linear in size (a message of two
  // segments costs several us more than one of a single segment, and
  // messages that stay in cache copy faster than a 2 MiB stream).
  std::vector<CurvePoint> curve;

  // Time a message of `bytes` adds to alpha (its bytes' share of the link).
  double wire_us(double bytes) const;
};

// "8:10.5,2048:15.2,...": bytes:us pairs, bytes strictly ascending.
std::string format_curve(const std::vector<CurvePoint>& curve);
bool parse_curve(const std::string& text, std::vector<CurvePoint>* out);

struct ClusterModel {
  int nranks = 1;
  int ranks_per_host = 1;     // used when `host` is empty: rank r is on host r / ranks_per_host
  std::vector<int> host;      // optional explicit host index per rank (a real communicator's table)
  bool same_host_tcp = false; // ranks on one host talk over loopback TCP instead of shm
  LinkParams link[3] = {{1.0, 20.0}, {10.0, 3.0}, {5.0, 12.5}};
  double reduce_gbps = 0;     // recv-reduce cost per byte on the receiver (0: free)
  double copy_gbps = 0;       // local copy cost, and one-sided copies of mapped memory (0: free)
  // One-sided steps between ranks of one host (the shm transport reaches
  // their memory): whether they can run at all, whether they reach peers'
  // ordinary buffers (process_vm_readv; ptrace rules may forbid it), each
  // half of a rank's staging area, what a signal takes to be seen, and
  // what a kernel copy costs per call and per byte. They are priced as
  // memory traffic on the rank that runs them, not as wire time.
  bool one_sided = false;
  bool reads_peer_buffers = false;
  size_t staging_bytes = 0;
  double flag_us = 0.3;
  // Bytes a shared-memory slot ring carries per piece (0: cut-through). A
  // message through slots is store-and-forward per piece: the receiver
  // copies a piece out only after the sender has copied all of it in.
  size_t shm_piece_bytes = 0;
  double cma_us = 1.5;
  double cma_gbps = 4.0;
  // A call's first call_cached_bytes of each kind of copy a rank makes
  // stay in the caches and run at their own rate (0: at the large one):
  // its local copies at copy_cached_gbps (a 256 KiB memcpy runs at about
  // 110 GB/s here, an 8 MiB one at 45), its kernel copies at
  // cma_cached_gbps (ranks read each other's fresh buffers at once: 256 KiB
  // at about 12 GB/s, the next megabytes at about 9).
  double call_cached_bytes = 256 << 10;
  double copy_cached_gbps = 0;
  double cma_cached_gbps = 0;
  // A local copy of `bytes`, one process_vm_readv/writev of `bytes` (the
  // call's cost and its bytes): each its share of the `call_bytes` of its
  // kind that its rank copies in the call.
  double local_copy_us(double bytes, double call_bytes) const;
  // Copying `bytes` of a peer's mapped memory (its staging area, a
  // registered buffer), which its own core has just written: the lines
  // cross between cores at about the slot stream's rate (a cross-core
  // stream of fresh data), not at a memcpy's from this core's caches
  // (64 KiB a peer just wrote: 23-29 GB/s, against 107-113 for data this
  // core wrote; a float sum of it with local data 17 GB/s against 47).
  // Where ranks outnumber cores, only the share of peers that ran on
  // another core pays it.
  double peer_memory_us(double bytes) const;
  // Where ranks outnumber a host's cores (cores_per_host; a machine-wide
  // pool of emulated hosts leaves it at 1), the share of a rank's peers that
  // ran on another core, (ranks - ranks per core) / (ranks - 1): the lines
  // a peer on this rank's core wrote or read are still in this core's
  // caches and cost no crossing. 1 where every rank has its own core.
  double other_core_share() const;
  // Copying `bytes` of a message into or out of a slot ring: at the slot
  // stream's rate, which is that of lines crossing between cores; where
  // ranks outnumber cores, the messages between ranks that took turns on
  // one core (1 - other_core_share()) cross nothing and are copied at a
  // memcpy's rate.
  double slot_copy_us(double bytes) const;
  double kernel_copy_us(double bytes, double call_bytes) const;
  double call_us = 0;         // fixed cost of one collective call (entering the executor, its set-up)
  double overhead_share = 0.5;  // share of alpha that is per-message sender work (serialises a rank's sends)
  // The same share for loopback TCP between ranks of one host: all of alpha,
  // since the sender's system call also runs the receive path and nothing
  // is in flight (its receiver still pays alpha x overhead_share of core
  // time for its own recv where cores are short).
  double loopback_send_share = 1.0;
  // Cores each host gives its ranks; 0 = at least one per rank. With fewer
  // cores than ranks, every message's sender and receiver overhead (alpha x
  // overhead_share each) must get one of the host's cores in turn.
  int cores_per_host = 0;
  // Emulated hosts on one machine (network namespaces): every host's ranks
  // share these cores for message overheads (0 = no machine-wide pool), and
  // all inter-host bytes share this much copy bandwidth, GB/s (0 = none):
  // the kernel moves them on the same cores.
  int machine_cores = 0;
  double machine_net_gbps = 0;
  // Where ranks outnumber the cores they share (either pool above), the
  // rank a message or flag is for is usually off its core: switching it
  // onto one costs this much core time before its receive overhead (the
  // simulator charges the queued ranks' share of it for a wake-up soon
  // after the rank's last work, when it may still hold its core). Ranks are
  // processes, so it is the measured hand-off between two processes
  // yielding one core (process_switch_us); where that is unknown, the one
  // between two threads (switch_us), which leaves no address space and
  // costs less (1.9 against 5-6 us here). 0 = free.
  double switch_us = 0;
  double process_switch_us = 0;
  double rank_switch_us() const { return process_switch_us > 0 ? process_switch_us : switch_us; }

  int host_of(int rank) const { return host.empty() ? rank / ranks_per_host : host[rank]; }
  PathClass path(int a, int b) const {
    if (host_of(a) != host_of(b)) return PathClass::kNet;
    return same_host_tcp ? PathClass::kTcpLocal : PathClass::kShm;
  }
  const LinkParams& params(PathClass c) const { return link[static_cast<int>(c)]; }
  int nhosts() const;
  std::string describe() const;  // "128 hosts x 8 ranks, shm 1us 20GB/s, net 5us 50GB/s"
};

}  // namespace conflux::sim
