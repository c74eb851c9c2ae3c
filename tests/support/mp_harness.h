// Multi-process test harness: forks N ranks that share a fresh unique id,
// runs a body in each, and reports every rank's failures in the parent.
// A rank that hangs is killed at the deadline and reported as such.
#pragma once

#include <conflux/conflux.h>

#include <functional>
#include <map>
#include <string>
#include <vector>

namespace conflux::test {

struct RankResult {
  int rank = 0;
  int exit_code = 0;  // -signal if killed
  std::string message;  // failures the body reported
};

// The body returns "" on success or a description of what went wrong.
using RankBody = std::function<std::string(cfxComm_t comm, int rank, int nranks)>;

struct RunOptions {
  std::map<std::string, std::string> env;  // set in each child before init
  int timeout_s = 120;
  bool init_comm = true;  // false: body gets comm == nullptr and does its own init
  cfxUniqueId* id_out = nullptr;
};

// Runs the body on n ranks; returns one result per rank.
std::vector<RankResult> run_ranks(int n, const RankBody& body, const RunOptions& options = {});
// "" when every rank succeeded, else one line per failing rank.
std::string summarize(const std::vector<RankResult>& results);

// The id the harness made for the current run (valid inside a body).
const cfxUniqueId& current_unique_id();

}  // namespace conflux::test
