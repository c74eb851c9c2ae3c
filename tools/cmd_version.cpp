// `conflux version`: the library version and what this build supports.
#include "command_registry.h"

#include <conflux/conflux.h>

#include <cstdio>

namespace {
const conflux::tools::RegisterCommand kVersion{
    "version", "Print the library version and build features", [](CLI::App&) {
      return [] {
        int v = 0;
        cfxGetVersion(&v);
        std::printf("conflux %d.%d.%d\n", v / 10000, (v / 100) % 100, v % 100);
#ifdef CONFLUX_HAVE_OFI
        std::printf("transports: shm tcp ofi\n");
#else
        std::printf("transports: shm tcp (libfabric not built)\n");
#endif
        return 0;
      };
    }};
}  // namespace
