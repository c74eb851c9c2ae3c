#include "core/log.h"

#include <unistd.h>
#include <sys/syscall.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <string_view>

namespace conflux::log {
namespace {

struct Settings {
  Level level = Level::kWarn;
  unsigned subsys = kAll;
  FILE* out = stderr;
};

unsigned subsys_bit(std::string_view name) {
  struct Named { const char* name; unsigned bit; };
  static constexpr Named kNames[] = {{"INIT", kInit}, {"NET", kNet},   {"TOPO", kTopo},
                                     {"TUNE", kTune}, {"COLL", kColl}, {"SHM", kShm},
                                     {"BOOT", kBoot}, {"PROXY", kProxy}, {"ALL", kAll}};
  for (const auto& n : kNames)
    if (name == n.name) return n.bit;
  return 0;
}

Settings parse_env() {
  Settings s;
  if (const char* v = std::getenv("CONFLUX_DEBUG")) {
    std::string_view l(v);
    if (l == "NONE") s.level = Level::kNone;
    else if (l == "WARN") s.level = Level::kWarn;
    else if (l == "INFO") s.level = Level::kInfo;
    else if (l == "TRACE") s.level = Level::kTrace;
  }
  if (const char* v = std::getenv("CONFLUX_DEBUG_SUBSYS")) {
    std::string_view list(v);
    bool exclude = !list.empty() && list[0] == '^';
    if (exclude) list.remove_prefix(1);
    unsigned mask = 0;
    while (!list.empty()) {
      size_t comma = list.find(',');
      mask |= subsys_bit(list.substr(0, comma));
      if (comma == std::string_view::npos) break;
      list.remove_prefix(comma + 1);
    }
    s.subsys = exclude ? ~mask : mask;
  }
  if (const char* v = std::getenv("CONFLUX_DEBUG_FILE")) {
    std::string path;
    for (const char* p = v; *p; ++p) {
      if (p[0] == '%' && p[1] == 'p') { path += std::to_string(getpid()); ++p; }
      else if (p[0] == '%' && p[1] == 'h') {
        char host[256] = {};
        gethostname(host, sizeof host - 1);
        path += host;
        ++p;
      } else path += *p;
    }
    if (FILE* f = std::fopen(path.c_str(), "a")) s.out = f;
  }
  return s;
}

std::mutex g_mutex;
Settings g_settings = parse_env();
std::atomic<int> g_level{static_cast<int>(g_settings.level)};
std::atomic<unsigned> g_subsys{g_settings.subsys};
thread_local int t_rank = -1;

const char* level_name(Level l) {
  switch (l) {
    case Level::kWarn: return "WARN";
    case Level::kInfo: return "INFO";
    case Level::kTrace: return "TRACE";
    default: return "";
  }
}

const char* subsys_name(unsigned s) {
  switch (s) {
    case kInit: return "INIT";
    case kNet: return "NET";
    case kTopo: return "TOPO";
    case kTune: return "TUNE";
    case kColl: return "COLL";
    case kShm: return "SHM";
    case kBoot: return "BOOT";
    case kProxy: return "PROXY";
    default: return "ALL";
  }
}

}  // namespace

bool enabled(Level level, unsigned subsys) {
  return static_cast<int>(level) <= g_level.load(std::memory_order_relaxed) &&
         (subsys & g_subsys.load(std::memory_order_relaxed)) != 0;
}

void set_thread_rank(int rank) { t_rank = rank; }

void reload_from_env() {
  std::lock_guard lock(g_mutex);
  g_settings = parse_env();
  g_level = static_cast<int>(g_settings.level);
  g_subsys = g_settings.subsys;
}

void write(Level level, unsigned subsys, const char* fmt, ...) {
  char message[2048];
  va_list args;
  va_start(args, fmt);
  std::vsnprintf(message, sizeof message, fmt, args);
  va_end(args);
  char host[64] = {};
  gethostname(host, sizeof host - 1);
  char rank[24] = "";
  if (t_rank >= 0) std::snprintf(rank, sizeof rank, " [%d]", t_rank);
  std::lock_guard lock(g_mutex);
  std::fprintf(g_settings.out, "%s:%d:%ld%s CONFLUX %s %s %s\n", host, static_cast<int>(getpid()),
               static_cast<long>(syscall(SYS_gettid)), rank, level_name(level),
               subsys_name(subsys), message);
  std::fflush(g_settings.out);
}

}  // namespace conflux::log
