#include "tune/candidates.h"

#include <algorithm>

namespace conflux::tune {
namespace {

std::string serves_any(const algo::CollArgs&, const sim::ClusterModel&) { return {}; }

// One-sided algorithms run between ranks that share a host's memory.
std::string needs_one_host(const algo::CollArgs& a, const sim::ClusterModel& m) {
  (void)a;
  if (!m.one_sided) return "no one-sided access between the ranks (not all on one host with shared memory, or CONFLUX_SHM_COLL=0)";
  if (m.nhosts() > 1) return "needs every rank on one host";
  return {};
}

std::string eager_fits(const algo::CollArgs& a, const sim::ClusterModel& m) {
  std::string why = needs_one_host(a, m);
  if (!why.empty()) return why;
  const size_t need = algo::eager_stage_bytes(a);
  if (need > a.staging_bytes)
    return "stages " + std::to_string(need) + " bytes per rank, more than the staging area's " +
           std::to_string(a.staging_bytes);
  return {};
}

// Single-copy algorithms reach peers' buffers directly: mapped where every
// rank registered them, else through the kernel, where allowed.
std::string direct_reaches(const algo::CollArgs& a, const sim::ClusterModel& m) {
  std::string why = needs_one_host(a, m);
  if (!why.empty()) return why;
  if (!a.registered && !m.reads_peer_buffers)
    return "peers' ordinary buffers are out of reach (process_vm_readv refused); register cfxMemAlloc buffers";
  return {};
}

// AlltoAllv algorithms that need every rank's counts (the dynamic AlltoAllv knows them).
std::string knows_all_counts(const algo::CollArgs& a, const sim::ClusterModel& m) {
  (void)m;
  return a.all_sendcounts != nullptr ? "" : "needs every rank's counts (the dynamic AlltoAllv)";
}

// Pairwise AlltoAllv reads only this rank's counts: where every rank's are
// known, sparse is the same exchange without the empty messages, and its
// arguments (unlike this rank's counts) are the same on every rank.
std::string own_counts_only(const algo::CollArgs& a, const sim::ClusterModel& m) {
  (void)m;
  return a.all_sendcounts == nullptr ? "" : "every rank's counts are known: sparse is pairwise without the empty pairs";
}

std::string direct_knows_all_counts(const algo::CollArgs& a, const sim::ClusterModel& m) {
  std::string why = knows_all_counts(a, m);
  return why.empty() ? direct_reaches(a, m) : why;
}

std::string hier_needs_regular_hosts(const algo::CollArgs& a, const sim::ClusterModel& m) {
  if (m.nhosts() < 2) return "single host: nothing to make hierarchical";
  if (!algo::hier_supported(a)) return "needs the same number of ranks on every host";
  return {};
}

// Hierarchical with one-sided host-local phases: hier's layout, and
// one-sided access inside every host.
std::string hier_direct_reaches(const algo::CollArgs& a, const sim::ClusterModel& m) {
  std::string why = hier_needs_regular_hosts(a, m);
  if (!why.empty()) return why;
  if (!m.one_sided) return "no one-sided access between the ranks of a host (one rank per host, or CONFLUX_SHM_COLL=0)";
  if (!a.registered && !m.reads_peer_buffers)
    return "peers' ordinary buffers are out of reach (process_vm_readv refused); register cfxMemAlloc buffers";
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
      {"hier_direct", Coll::kAllReduce, algo::hier_direct_allreduce, true, hier_direct_reaches, true},
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
      {"pairwise", Coll::kAlltoAllv, algo::pairwise_alltoall, false, own_counts_only},
      {"sparse", Coll::kAlltoAllv, algo::sparse_alltoallv, false, knows_all_counts},
      {"linear", Coll::kGather, algo::linear_gather, false, serves_any},
      {"linear", Coll::kScatter, algo::linear_scatter, false, serves_any},
      {"dissemination", Coll::kBarrier, algo::dissemination_barrier, true, serves_any},
      // One host, one-sided: through the staging areas, or single-copy.
      {"eager", Coll::kAllReduce, algo::eager_allreduce, false, eager_fits, true},
      {"direct", Coll::kAllReduce, algo::direct_allreduce, false, direct_reaches, true},
      {"eager", Coll::kAllGather, algo::eager_allgather, false, eager_fits, true},
      {"direct", Coll::kAllGather, algo::direct_allgather, false, direct_reaches, true},
      {"push", Coll::kAllGather, algo::push_allgather, false, direct_reaches, true},
      {"eager", Coll::kReduceScatter, algo::eager_reducescatter, false, eager_fits, true},
      {"direct", Coll::kReduceScatter, algo::direct_reducescatter, false, direct_reaches, true},
      {"eager", Coll::kBroadcast, algo::eager_broadcast, false, eager_fits, true},
      {"direct", Coll::kBroadcast, algo::direct_broadcast, false, direct_reaches, true},
      {"split", Coll::kBroadcast, algo::split_broadcast, false, direct_reaches, true},
      {"eager", Coll::kReduce, algo::eager_reduce, false, eager_fits, true},
      {"direct", Coll::kReduce, algo::direct_reduce, false, direct_reaches, true},
      {"eager", Coll::kAlltoAll, algo::eager_alltoall, false, eager_fits, true},
      {"direct", Coll::kAlltoAll, algo::direct_alltoall, false, direct_reaches, true},
      {"eager", Coll::kGather, algo::eager_gather, false, eager_fits, true},
      {"direct", Coll::kGather, algo::direct_gather, false, direct_reaches, true},
      {"eager", Coll::kScatter, algo::eager_scatter, false, eager_fits, true},
      {"direct", Coll::kScatter, algo::direct_scatter, false, direct_reaches, true},
      {"flag", Coll::kBarrier, algo::flag_barrier, false, needs_one_host, true},
      {"direct", Coll::kAlltoAllv, algo::direct_alltoallv, false, direct_knows_all_counts, true},
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
