// Paths the tests need, fixed at configure time.
#pragma once

#include <string>

namespace conflux::test {
std::string source_dir();
std::string topology_dir();  // tests/data/topologies: the vendored real topology files
std::string tool_path();     // the built `conflux` command
}  // namespace conflux::test
