#include "core/shared_mem.h"

#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <iterator>
#include <map>
#include <mutex>

namespace conflux {
namespace {

struct Region {
  size_t size;
  int fd;
  uint64_t id;
};

// How many regions exist: lookups skip the lock (and the map) when none does.
std::atomic<size_t> g_live{0};

std::mutex& mu() {
  static std::mutex m;
  return m;
}
// By base address; leaked on purpose (buffers may be freed during exit).
std::map<uintptr_t, Region>& regions() {
  static auto* r = new std::map<uintptr_t, Region>;
  return *r;
}

}  // namespace

Result<void*> shared_mem_alloc(size_t bytes) {
  if (bytes == 0) return invalid_argument("cfxMemAlloc: size is 0");
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  const size_t size = (bytes + page - 1) / page * page;
  int fd = memfd_create("conflux-mem", MFD_CLOEXEC);
  if (fd < 0) return system_error("cfxMemAlloc: memfd_create", errno);
  if (ftruncate(fd, static_cast<off_t>(size)) != 0) {
    int err = errno;
    ::close(fd);
    return system_error("cfxMemAlloc: ftruncate to " + std::to_string(size) + " bytes", err);
  }
  void* p = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) {
    int err = errno;
    ::close(fd);
    return system_error("cfxMemAlloc: mmap of " + std::to_string(size) + " bytes", err);
  }
  static uint64_t next_id = 0;
  std::lock_guard lk(mu());
  regions()[reinterpret_cast<uintptr_t>(p)] = Region{size, fd, ++next_id};
  g_live.fetch_add(1, std::memory_order_release);
  return p;
}

Status shared_mem_free(void* ptr) {
  if (ptr == nullptr) return Status::Ok();  // like free()
  std::lock_guard lk(mu());
  auto it = regions().find(reinterpret_cast<uintptr_t>(ptr));
  if (it == regions().end()) return invalid_argument("cfxMemFree: pointer was not returned by cfxMemAlloc");
  munmap(ptr, it->second.size);
  ::close(it->second.fd);
  regions().erase(it);
  g_live.fetch_sub(1, std::memory_order_release);
  return Status::Ok();
}

SharedRegionRef shared_region_of(const void* ptr) {
  if (g_live.load(std::memory_order_acquire) == 0) return {};
  const auto p = reinterpret_cast<uintptr_t>(ptr);
  std::lock_guard lk(mu());
  auto& r = regions();
  auto it = r.upper_bound(p);
  if (it == r.begin()) return {};
  --it;
  if (p >= it->first + it->second.size) return {};
  return SharedRegionRef{it->second.id, it->first, it->second.size, it->second.fd, 0};
}

}  // namespace conflux
