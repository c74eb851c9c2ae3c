// Machine constants for the cost model, measured on this host at first use
// and cached per host identity:
//   shm   latency: the flag hand-off below; bandwidth: a 1 MiB message
//         streamed one way through a ring of slots between two cores (the
//         sender's copy in and the receiver's copy out run at once; a rank
//         that sends and receives does both on its core, see sim.cpp)
//   tcp   loopback ping-pong, polled as the executor polls (latency), and
//         a 16 MiB stream (bandwidth), the two threads on two cores
//   net   the tcp numbers (no peer host to measure against at first use);
//         CONFLUX_TUNE_NET="lat_us,GB/s" overrides, e.g. for a capped link
//   reduce  float32 sum kernel throughput
//   switch  a hand-off between two threads pinned to one core (what waking
//         a sleeping rank costs where ranks outnumber cores)
//   copy  memcpy of 8 MiB (one-sided copies of mapped memory)
//   flag  half a flag ping-pong between two threads on two cores, each
//         yielding between polls (a signal seen by a peer). The executor's
//         own exchange, its receiver spinning, reads less in fast moments
//         (0.23 against 0.60-0.67 us; 0.79 against 0.88 in a slow one), but
//         as the latency it priced no more points within 25% (bench/README,
//         "The simulator against measurements")
//   call  a call's fixed cost: 8-byte exchanges over real shm links, one
//         per executor run against 16 in one (calibrate_call.h)
//   cma   process_vm_readv: a 4 KiB piece of another process's memory per
//         call, read while that process reads this one's (as the ranks of
//         a single-copy call do), and two threads exchanging 256 KiB and
//         4 MiB for the bandwidth (one-sided copies of ordinary buffers,
//         which the kernel pins page by page)
// Cache: $CONFLUX_TUNE_CACHE (a directory; "off" disables the cache), else
// $XDG_CACHE_HOME/conflux, else ~/.cache/conflux; file tune-<host>.txt.
// CONFLUX_TUNE_CALIBRATE=0 skips measuring and uses the built-in defaults.
#pragma once

#include "sim/sim_model.h"

#include <functional>
#include <string>
#include <vector>

namespace conflux::tune {

// The least share of their wall time the calibration's threads must run
// for its constants to describe the machine rather than other work that
// shared its cores (alone on its core a measuring thread ran 0.86-0.98 of
// its time here, beside one busy process per core 0.001-0.03).
inline constexpr double kCoresHeldEnough = 0.75;

struct Constants {
  sim::LinkParams shm{2.0, 5.0}, tcp{15.0, 2.0}, net{15.0, 2.0};
  double reduce_gbps = 4.0;
  double switch_us = 0;  // a hand-off between two threads yielding one core (0: unknown)
  double process_switch_us = 0;  // the same between two processes (0: unknown, at switch_us)
  double copy_gbps = 10.0;  // memcpy of buffers larger than the caches
  double copy_cached_gbps = 0;  // memcpy of a call's first 256 KiB, in the caches (0: at copy_gbps)
  double flag_us = 0.3;     // a flag store seen by a thread on another core polling with yields
  double cma_us = 1.5;      // one process_vm_readv call of a small piece
  double cma_gbps = 4.0;    // process_vm_readv of a call's bytes past its first 256 KiB
  double cma_cached_gbps = 0;  // process_vm_readv of a call's first 256 KiB (0: at cma_gbps)
  // A collective call's fixed cost beyond its messages (0: unknown): on
  // one host the calibration's (measure_shm_call_us); between hosts the
  // network probe measures it over the real link and replaces this.
  double call_us = 0;
  double held = 1;  // least share of their due core time the measuring threads ran (1: all)
  double measured_at = 0;  // when, in seconds since the epoch (0: not recorded)
  std::string source = "defaults";  // "measured", "cache <path>", "defaults"; busy_note() where busy

  // Measured while other work shared the cores: the times are that work's.
  bool busy() const;
  std::string busy_note() const;  // "" where not busy
  std::string busy_source() const;  // the source of the defaults a busy calibration leaves

  std::string to_text() const;                 // one "key value" per line
  static bool from_text(const std::string& text, Constants* out);
  void apply_to(sim::ClusterModel* m) const;   // fills link params, reduce and switch costs
};

// The two cores a calibration's two-thread measurements pin to: this
// process's first two allowed ones, else its one and another online one.
// The constants describe the machine, not the process: a rank that
// `conflux run` (or mpirun, srun) bound to one core calibrates on that core
// and another, or its two threads would share a core and a polled
// ping-pong would read 60x slow (180 us against 3 on loopback TCP). One
// core where the machine has one.
std::vector<int> calibration_cores();

// Measures now (about 0.3 s): each constant's median over three passes in
// which the measuring threads held their cores. Where three passes found
// the cores busy with other work before two clean ones: the built-in
// defaults, marked busy(), with `held` the least share seen.
Constants measure_constants();
// The same with another pass function (each call measures every constant
// once and sets held).
Constants measure_constants(const std::function<Constants()>& pass);
// Cached constants for this host: from the cache file, else measured and
// stored. Thread-safe; the result is memoised for the process.
Constants machine_constants();
// The directory of per-host caches: CONFLUX_TUNE_CACHE (0/off/none: no
// caching, ""), else $XDG_CACHE_HOME/conflux, else ~/.cache/conflux.
std::string cache_dir();
// The constants' cache file for this host ("" when caching is off).
std::string cache_file();
// This host's name in cache file names (CONFLUX_HOSTID overrides the hostname).
std::string host_key();
// mkdir -p.
void mkdirs(const std::string& path);
// An exclusive flock on <path>.lock while it lives: one process per host
// writes a cache file, the others wait and read it.
class FileLock {
 public:
  explicit FileLock(const std::string& path);
  ~FileLock();
  FileLock(const FileLock&) = delete;
  FileLock& operator=(const FileLock&) = delete;

 private:
  int fd_;
};

}  // namespace conflux::tune
