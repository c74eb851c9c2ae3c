#include "tune/candidates.h"

#include <algorithm>

namespace conflux::tune {
namespace {

std::string serves_any(const algo::CollArgs&, const sim::ClusterModel&) { return {}; }

std::string hier_needs_regular_hosts(const algo::CollArgs& a, const sim::ClusterModel& m) {
  if (m.nhosts() < 2) return "single host: nothing to make hierarchical";
  if (!algo::hier_supported(a)) return "needs the same number of ranks on every host";
  return {};
}

std::vector<Candidate>& registry() {
  // First of each collective: what the library ran before the tuner.
  // Symmetric: rotating every rank by one host maps the schedules onto
  // themselves (rings, the two-level rings); trees, XOR partners and Bruck
  // (log-many steps: cheap to simulate in full) are not marked.
  static std::vector<Candidate> all = {
      {"ring", Coll::kAllReduce, algo::ring_allreduce, true, serves_any},
      {"tree", Coll::kAllReduce, algo::tree_allreduce, false, serves_any},
      {"rhd", Coll::kAllReduce, algo::rhd_allreduce, false, serves_any},
      {"rd", Coll::kAllReduce, algo::rd_allreduce, false, serves_any},
      {"hier", Coll::kAllReduce, algo::hier_allreduce, true, hier_needs_regular_hosts},
      {"ring", Coll::kAllGather, algo::ring_allgather, true, serves_any},
      {"rhd", Coll::kAllGather, algo::rhd_allgather, false, serves_any},
      {"bruck", Coll::kAllGather, algo::bruck_allgather, false, serves_any},
      {"hier", Coll::kAllGather, algo::hier_allgather, true, hier_needs_regular_hosts},
      {"ring", Coll::kReduceScatter, algo::ring_reducescatter, true, serves_any},
      {"rhd", Coll::kReduceScatter, algo::rhd_reducescatter, false, serves_any},
      {"hier", Coll::kReduceScatter, algo::hier_reducescatter, true, hier_needs_regular_hosts},
      {"chain", Coll::kBroadcast, algo::chain_broadcast, false, serves_any},
      {"tree", Coll::kBroadcast, algo::tree_broadcast, false, serves_any},
      {"hier", Coll::kBroadcast, algo::hier_broadcast, false, hier_needs_regular_hosts},
      {"chain", Coll::kReduce, algo::chain_reduce, false, serves_any},
      {"tree", Coll::kReduce, algo::tree_reduce, false, serves_any},
      {"pairwise", Coll::kAlltoAll, algo::pairwise_alltoall, false, serves_any},
      {"bruck", Coll::kAlltoAll, algo::bruck_alltoall, false, serves_any},
      {"pairwise", Coll::kAlltoAllv, algo::pairwise_alltoall, false, serves_any},
      {"direct", Coll::kGather, algo::direct_gather, false, serves_any},
      {"direct", Coll::kScatter, algo::direct_scatter, false, serves_any},
      {"dissemination", Coll::kBarrier, algo::dissemination_barrier, true, serves_any},
  };
  return all;
}

}  // namespace

std::vector<const Candidate*> candidates_for(Coll c) {
  std::vector<const Candidate*> out;
  for (const Candidate& k : registry())
    if (k.coll == c) out.push_back(&k);
  return out;
}

std::vector<std::string> algorithm_names() {
  std::vector<std::string> names;
  for (const Candidate& k : registry())
    if (std::find(names.begin(), names.end(), k.name) == names.end()) names.push_back(k.name);
  return names;
}

const Candidate* default_candidate(Coll c) {
  auto v = candidates_for(c);
  return v.empty() ? nullptr : v.front();
}

}  // namespace conflux::tune
