// `conflux`: one command, many subcommands (perf, run, topo, plan, sim).
#include "command_registry.h"

#include <conflux/conflux.h>

#include <algorithm>
#include <cstdio>
#include <memory>

namespace conflux::tools {
std::vector<CommandEntry>& command_registry() {
  static std::vector<CommandEntry> entries;
  return entries;
}
}  // namespace conflux::tools

int main(int argc, char** argv) {
  using namespace conflux::tools;
  CLI::App app{"conflux: topology-aware collective communication for host memory"};
  app.require_subcommand(1);
  app.set_version_flag("--version", std::to_string(CFX_MAJOR) + "." + std::to_string(CFX_MINOR) +
                                        "." + std::to_string(CFX_PATCH));
  auto& entries = command_registry();
  std::sort(entries.begin(), entries.end(),
            [](const CommandEntry& a, const CommandEntry& b) { return a.name < b.name; });
  std::function<int()> chosen;
  for (auto& entry : entries) {
    CLI::App* sub = app.add_subcommand(entry.name, entry.help);
    auto run = std::make_shared<std::function<int()>>(entry.setup(*sub));
    sub->callback([run, &chosen] { chosen = *run; });
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  return chosen ? chosen() : 1;
}
