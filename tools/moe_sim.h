// One MoE dispatch and combine of the benchmark's routings on a modelled
// cluster, as `conflux sim --coll moe` and `conflux plan moe` print it:
// the network bytes and predicted times of the placed (one host), flat and
// hierarchical paths, and which one the layer runs.
#pragma once

#include "sim/sim_model.h"

#include <CLI/CLI.hpp>

#include <string>

namespace conflux::tools {

struct MoeSimArgs {
  size_t tokens = 512, hidden = 7168, elem_bytes = 2;
  int experts = 64, top_k = 8;
  std::string routing = "uniform";
};

// --tokens (unless `with_tokens` is false), --hidden, --elem-bytes, --experts, --topk, --routing.
void add_moe_options(CLI::App& app, MoeSimArgs* args, const std::string& group, bool with_tokens = true);

// Prints the prediction; 0, 1 (the simulation failed) or 2 (bad arguments).
int print_moe_prediction(const sim::ClusterModel& model, const std::string& source, const MoeSimArgs& args,
                         size_t max_steps);

}  // namespace conflux::tools
