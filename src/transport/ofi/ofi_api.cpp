#include "transport/ofi/ofi_api.h"

#include <dlfcn.h>
#include <signal.h>

#include <iterator>
#include <string>

namespace conflux {
namespace {

template <class Fn>
bool resolve(void* lib, const char* name, Fn* out) {
  *out = reinterpret_cast<Fn>(dlsym(lib, name));
  return *out != nullptr;
}

Result<const OfiApi*> load() {
  constexpr int kSignals[] = {SIGSEGV, SIGABRT, SIGBUS, SIGILL, SIGFPE};
  struct sigaction saved[std::size(kSignals)] = {};
  for (size_t i = 0; i < std::size(kSignals); ++i) sigaction(kSignals[i], nullptr, &saved[i]);
  void* lib = dlopen("libfabric.so.1", RTLD_NOW | RTLD_LOCAL);
  for (size_t i = 0; i < std::size(kSignals); ++i) sigaction(kSignals[i], &saved[i], nullptr);
  if (lib == nullptr) {
    const char* why = dlerror();
    return invalid_usage(std::string("libfabric: cannot load libfabric.so.1 (") + (why ? why : "?") +
                         "); install libfabric1 or choose another CONFLUX_TRANSPORT");
  }
  static OfiApi api;
  const bool all = resolve(lib, "fi_getinfo", &api.getinfo) && resolve(lib, "fi_freeinfo", &api.freeinfo) &&
                   resolve(lib, "fi_dupinfo", &api.dupinfo) && resolve(lib, "fi_fabric", &api.fabric) &&
                   resolve(lib, "fi_strerror", &api.strerror);
  if (!all) return internal_error("libfabric.so.1 lacks one of fi_getinfo, fi_freeinfo, fi_dupinfo, fi_fabric, fi_strerror");
  return static_cast<const OfiApi*>(&api);
}

}  // namespace

Result<const OfiApi*> ofi_api() {
  static const Result<const OfiApi*> loaded = load();  // thread-safe, once
  return loaded;
}

}  // namespace conflux
