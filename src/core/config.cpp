#include "core/config.h"

#include "core/log.h"

#include <cstdlib>
#include <deque>
#include <mutex>
#include <string_view>

namespace conflux {
namespace {

std::string env_string(const char* name, const std::string& fallback) {
  const char* v = std::getenv(name);
  return (v != nullptr && *v != '\0') ? std::string(v) : fallback;
}

// Accepts plain integers and K/M/G suffixes (powers of two), as NCCL's
// users expect for sizes.
int64_t env_int(const char* name, int64_t fallback, int64_t min_value) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return fallback;
  char* end = nullptr;
  long long value = std::strtoll(v, &end, 10);
  std::string_view suffix(end);
  if (suffix == "K" || suffix == "k") value <<= 10;
  else if (suffix == "M" || suffix == "m") value <<= 20;
  else if (suffix == "G" || suffix == "g") value <<= 30;
  else if (!suffix.empty() || end == v) {
    CFX_WARN(kInit, "ignoring %s=%s: not an integer", name, v);
    return fallback;
  }
  if (value < min_value) {
    CFX_WARN(kInit, "ignoring %s=%s: below the minimum %lld", name, v,
             static_cast<long long>(min_value));
    return fallback;
  }
  return value;
}

bool is_off(const std::string& v) { return v == "0" || v == "off" || v == "none"; }

std::string tune_cache_dir() {
  const char* dir = std::getenv("CONFLUX_TUNE_CACHE");
  if (dir != nullptr && *dir != '\0') return is_off(dir) ? "" : std::string(dir);
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg != nullptr && *xdg != '\0') return std::string(xdg) + "/conflux";
  if (const char* home = std::getenv("HOME"); home != nullptr && *home != '\0') return std::string(home) + "/.cache/conflux";
  return "";
}

Config parse() {
  Config c;
  c.timeout_ms = env_int("CONFLUX_TIMEOUT", 0, 0) * 1000;
  c.init_timeout_ms = env_int("CONFLUX_INIT_TIMEOUT", c.init_timeout_ms / 1000, 1) * 1000;
  c.heartbeat_timeout_ms = env_int("CONFLUX_HEARTBEAT_TIMEOUT", c.heartbeat_timeout_ms / 1000, 0) * 1000;
  c.chunk_bytes = static_cast<size_t>(env_int("CONFLUX_CHUNK_SIZE", c.chunk_bytes, 8));
  std::string t = env_string("CONFLUX_TRANSPORT", "auto");
  if (t == "tcp") c.transport = TransportChoice::kTcp;
  else if (t == "shm") c.transport = TransportChoice::kShm;
  else if (t == "ofi") c.transport = TransportChoice::kOfi;
  else if (t != "auto") CFX_WARN(kInit, "ignoring CONFLUX_TRANSPORT=%s (auto|tcp|shm|ofi)", t.c_str());
  c.socket_ifname = env_string("CONFLUX_SOCKET_IFNAME", "");
  c.hostid = env_string("CONFLUX_HOSTID", "");
  c.root = env_string("CONFLUX_ROOT", "");
  c.master_addr = env_string("MASTER_ADDR", "");
  c.shm_slot_bytes = static_cast<size_t>(env_int("CONFLUX_SHM_SLOT_SIZE", c.shm_slot_bytes, 64));
  c.shm_slot_bytes = (c.shm_slot_bytes + 63) / 64 * 64;  // whole cache lines keep elements aligned
  c.shm_slots = static_cast<int>(env_int("CONFLUX_SHM_SLOTS", c.shm_slots, 2));
  c.spin_iterations = static_cast<int>(env_int("CONFLUX_SPIN", c.spin_iterations, 0));
  c.tcp_buffer_bytes = static_cast<size_t>(env_int("CONFLUX_SOCKET_BUFSIZE", c.tcp_buffer_bytes, 0));
  c.tcp_channels = static_cast<int>(env_int("CONFLUX_TCP_CHANNELS", c.tcp_channels, 1));
  if (c.tcp_channels > kMaxTcpChannels) {
    CFX_WARN(kInit, "CONFLUX_TCP_CHANNELS=%d: using the maximum, %d", c.tcp_channels, kMaxTcpChannels);
    c.tcp_channels = kMaxTcpChannels;
  }
  c.channel_min_bytes = env_int("CONFLUX_CHANNEL_MIN_BYTES", c.channel_min_bytes, 0);
  c.ofi_provider = env_string("CONFLUX_OFI_PROVIDER", "");
  c.ofi_piece_bytes = static_cast<size_t>(env_int("CONFLUX_OFI_PIECE_SIZE", c.ofi_piece_bytes, 64));
  c.ofi_inline_bytes = static_cast<size_t>(env_int("CONFLUX_OFI_INLINE", c.ofi_inline_bytes, 0));
  c.ofi_mr_always = env_string("CONFLUX_OFI_MR", "") == "always";
  c.ofi_wait_fd = env_string("CONFLUX_OFI_WAIT", "") == "1";
  c.algo = env_string("CONFLUX_ALGO", "");
  c.shm_collectives = env_int("CONFLUX_SHM_COLL", 1, 0) != 0;
  c.moe_placed = env_int("CONFLUX_MOE_PLACED", 1, 0) != 0;
  c.moe_hier = env_int("CONFLUX_MOE_HIER", 1, 0) != 0;
  c.shm_staging_bytes = static_cast<size_t>(env_int("CONFLUX_SHM_STAGING_SIZE", c.shm_staging_bytes, 0));
  c.shm_staging_bytes = (c.shm_staging_bytes + 63) / 64 * 64;
  c.tune = !is_off(env_string("CONFLUX_TUNE", "1"));
  c.tune_calibrate = !is_off(env_string("CONFLUX_TUNE_CALIBRATE", "1"));
  c.tune_cache_dir = tune_cache_dir();
  c.tune_table = env_string("CONFLUX_TUNE_TABLE", "");
  c.tune_net = env_string("CONFLUX_TUNE_NET", "");
  if (const std::string v = env_string("CONFLUX_TUNE_OVERHEAD", ""); !v.empty()) {
    char* end = nullptr;
    const double share = std::strtod(v.c_str(), &end);
    if (*end == '\0' && share >= 0 && share <= 1) c.tune_overhead = share;
    else CFX_WARN(kInit, "ignoring CONFLUX_TUNE_OVERHEAD=%s (a share between 0 and 1)", v.c_str());
  }
  c.topo_file = env_string("CONFLUX_TOPO_FILE", "");
  c.reduce_isa = env_string("CONFLUX_REDUCE_ISA", "");
  if (env_string("CONFLUX_NET", "") == "ofi") c.transport = TransportChoice::kOfi;
  return c;
}

std::mutex g_mutex;
// Every version ever parsed stays alive: callers may hold a reference to an
// older one while a test reloads the environment.
std::deque<Config>& configs() {
  static std::deque<Config> all;
  return all;
}

}  // namespace

const char* transport_name(TransportChoice t) {
  switch (t) {
    case TransportChoice::kTcp: return "tcp";
    case TransportChoice::kShm: return "shm";
    case TransportChoice::kOfi: return "ofi";
    case TransportChoice::kAuto: break;
  }
  return "auto";
}

const Config& config() {
  std::lock_guard lock(g_mutex);
  if (configs().empty()) configs().push_back(parse());
  return configs().back();
}

void reload_config() {
  std::lock_guard lock(g_mutex);
  configs().push_back(parse());
  log::reload_from_env();
}

}  // namespace conflux
