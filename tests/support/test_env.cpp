#include "support/test_env.h"

#include <cstdlib>

namespace conflux::test {
std::string source_dir() { return CONFLUX_SOURCE_DIR; }
std::string topology_dir() {
  if (const char* dir = std::getenv("CONFLUX_TOPOLOGY_DIR")) return dir;
  return CONFLUX_TOPOLOGY_DIR;
}
std::string tool_path() { return CONFLUX_TOOL_PATH; }
}  // namespace conflux::test
