// Subcommands of the `conflux` tool register themselves here at static
// initialisation, so main.cpp never needs editing when one is added.
#pragma once

#include <CLI/CLI.hpp>

#include <functional>
#include <string>
#include <vector>

namespace conflux::tools {

// Adds the subcommand's options to `app` and returns the callback that runs
// it (its exit status) once CLI11 has parsed the command line.
using CommandSetup = std::function<std::function<int()>(CLI::App& app)>;

struct CommandEntry {
  std::string name;
  std::string help;
  CommandSetup setup;
};

std::vector<CommandEntry>& command_registry();

struct RegisterCommand {
  RegisterCommand(std::string name, std::string help, CommandSetup setup) {
    command_registry().push_back({std::move(name), std::move(help), std::move(setup)});
  }
};

}  // namespace conflux::tools
