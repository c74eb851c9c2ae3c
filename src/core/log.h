// Logging with levels and subsystems, NCCL-style:
//   CONFLUX_DEBUG=WARN|INFO|TRACE (default WARN; NONE silences warnings too)
//   CONFLUX_DEBUG_SUBSYS=INIT,NET,TOPO,TUNE,COLL,SHM,BOOT,ALL (^ excludes)
//   CONFLUX_DEBUG_FILE=path (%h host, %p pid), default stderr
// Each line: "host:pid:tid [rank] CONFLUX LEVEL SUBSYS message".
#pragma once

#include <cstdarg>

namespace conflux::log {

enum class Level { kNone = 0, kWarn = 1, kInfo = 2, kTrace = 3 };

enum Subsys : unsigned {
  kInit = 1u << 0,
  kNet = 1u << 1,
  kTopo = 1u << 2,
  kTune = 1u << 3,
  kColl = 1u << 4,
  kShm = 1u << 5,
  kBoot = 1u << 6,
  kProxy = 1u << 7,
  kAll = ~0u,
};

bool enabled(Level level, unsigned subsys);
void write(Level level, unsigned subsys, const char* fmt, ...) __attribute__((format(printf, 3, 4)));
// The rank printed in each line of this thread (-1: none).
void set_thread_rank(int rank);
// Re-reads the environment (tests change CONFLUX_DEBUG between cases).
void reload_from_env();

}  // namespace conflux::log

#define CFX_LOG(level, subsys, ...)                                                          \
  do {                                                                                       \
    if (::conflux::log::enabled(::conflux::log::Level::level, ::conflux::log::subsys))       \
      ::conflux::log::write(::conflux::log::Level::level, ::conflux::log::subsys, __VA_ARGS__); \
  } while (0)
#define CFX_WARN(subsys, ...) CFX_LOG(kWarn, subsys, __VA_ARGS__)
#define CFX_INFO(subsys, ...) CFX_LOG(kInfo, subsys, __VA_ARGS__)
#define CFX_TRACE(subsys, ...) CFX_LOG(kTrace, subsys, __VA_ARGS__)
