// CONFLUX_ALGO: which algorithms the tuner may use, in NCCL's grammar with
// UCC-style message-size ranges.
//   ring,tree                        only these, for every collective
//   ^tree                            anything but tree
//   allreduce:tree,ring;broadcast:ring   per-collective sections (';')
//   allreduce:0-64K:tree#allreduce:64K-inf:ring   size ranges ('#' separated
//                                    entries, [lo, hi) in bytes of the call's
//                                    buffer, K/M/G binary suffixes, inf)
// A rule with one name (after ranges) forces that algorithm: if it cannot
// serve the call the collective fails and says why. '@' before a name (UCC)
// is accepted and ignored.
#pragma once

#include "core/coll.h"
#include "core/status.h"

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace conflux::tune {

struct AlgoRule {
  int coll = -1;  // Coll, or -1 for every collective
  size_t lo = 0, hi = SIZE_MAX;
  bool exclude = false;
  std::vector<std::string> names;
  std::string text;  // the rule as written, for messages
};

struct AlgoFilter {
  std::vector<AlgoRule> rules;
  std::string spec;

  static Result<AlgoFilter> parse(const std::string& spec);
  // The rule governing (coll, bytes): the last matching collective-specific
  // rule, else the last matching generic one; nullptr if none.
  const AlgoRule* rule_for(Coll c, size_t bytes) const;
  static bool allows(const AlgoRule* rule, const std::string& name);
};

Result<size_t> parse_size(const std::string& text);  // "64K" -> 65536, "inf" -> SIZE_MAX
Result<Coll> parse_coll(const std::string& name);     // "allreduce" -> kAllReduce
std::string size_string(size_t bytes);                // 65536 -> "64K"

}  // namespace conflux::tune
