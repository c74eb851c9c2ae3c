// `conflux version`: the library version and what this build supports.
#include "command_registry.h"

#include "transport/registry.h"

#include <conflux/conflux.h>

#include <cstdio>
#include <string>

namespace {
const conflux::tools::RegisterCommand kVersion{
    "version", "Print the library version and build features", [](CLI::App&) {
      return [] {
        int v = 0;
        cfxGetVersion(&v);
        std::printf("conflux %d.%d.%d\n", v / 10000, (v / 100) % 100, v % 100);
        std::string list;
        for (const std::string& t : conflux::built_transports()) list += " " + t;
        const bool ofi = list.find("ofi") != std::string::npos;
        std::printf("transports:%s%s\n", list.c_str(), ofi ? "" : " (libfabric not built)");
        return 0;
      };
    }};
}  // namespace
