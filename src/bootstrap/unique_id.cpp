#include "bootstrap/unique_id.h"

#include <netinet/in.h>

#include <cstring>

namespace conflux {
namespace {

constexpr uint32_t kIdMagic = 0x43465849;  // "CFXI"
constexpr uint16_t kIdVersion = 1;

#pragma pack(push, 1)
struct WireId {
  uint32_t magic;
  uint16_t version;
  uint16_t family;
  uint16_t port;
  uint8_t addr[16];
  uint8_t secret[32];
  uint64_t comm_id;
  uint32_t checksum;  // FNV-1a of everything before it
};
#pragma pack(pop)
static_assert(sizeof(WireId) <= CFX_UNIQUE_ID_BYTES);

uint32_t fnv1a(const void* data, size_t n) {
  uint32_t h = 2166136261u;
  auto* p = static_cast<const uint8_t*>(data);
  for (size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 16777619u;
  return h;
}

}  // namespace

cfxUniqueId encode_unique_id(const UniqueIdData& data) {
  WireId w{};
  w.magic = kIdMagic;
  w.version = kIdVersion;
  w.family = static_cast<uint16_t>(data.root.family());
  w.port = static_cast<uint16_t>(data.root.port());
  if (data.root.family() == AF_INET)
    std::memcpy(w.addr, &reinterpret_cast<const sockaddr_in*>(&data.root.storage)->sin_addr, 4);
  else
    std::memcpy(w.addr, &reinterpret_cast<const sockaddr_in6*>(&data.root.storage)->sin6_addr, 16);
  std::memcpy(w.secret, data.secret.data(), 32);
  w.comm_id = data.comm_id;
  w.checksum = fnv1a(&w, offsetof(WireId, checksum));
  cfxUniqueId id{};
  std::memcpy(id.internal, &w, sizeof w);
  return id;
}

Result<UniqueIdData> decode_unique_id(const cfxUniqueId& id) {
  WireId w;
  std::memcpy(&w, id.internal, sizeof w);
  if (w.magic != kIdMagic || w.version != kIdVersion)
    return invalid_argument("not a conflux unique id (bad magic or version: was it made by cfxGetUniqueId?)");
  if (w.checksum != fnv1a(&w, offsetof(WireId, checksum)))
    return invalid_argument("corrupt unique id (checksum mismatch)");
  if (w.family != AF_INET && w.family != AF_INET6) return invalid_argument("corrupt unique id (address family)");
  UniqueIdData d;
  d.root.storage.ss_family = w.family;
  if (w.family == AF_INET) {
    d.root.len = sizeof(sockaddr_in);
    std::memcpy(&reinterpret_cast<sockaddr_in*>(&d.root.storage)->sin_addr, w.addr, 4);
  } else {
    d.root.len = sizeof(sockaddr_in6);
    std::memcpy(&reinterpret_cast<sockaddr_in6*>(&d.root.storage)->sin6_addr, w.addr, 16);
  }
  d.root.set_port(w.port);
  std::memcpy(d.secret.data(), w.secret, 32);
  d.comm_id = w.comm_id;
  return d;
}

}  // namespace conflux
