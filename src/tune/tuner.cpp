#include "tune/tuner.h"

#include "algo/channels.h"
#include "core/log.h"

#include <algorithm>
#include <cstdio>

namespace conflux::tune {

Result<sim::SimResult> predict(const Candidate& c, const algo::CollArgs& args, const sim::ClusterModel& m,
                               size_t max_steps, int calls) {
  algo::CollArgs a = args;
  a.nranks = m.nranks;
  a.staging_bytes = m.staging_bytes;
  fill_hosts(&a, m);
  sim::SimOptions opt;
  opt.max_steps = max_steps;
  opt.calls = calls;
  // Rotation by whole hosts maps the schedule onto itself only for the
  // identity (host-major) ring order.
  // AllReduce blocks must be equal too: an empty block is skipped, which
  // breaks the symmetry (small messages are cheap to simulate in full).
  bool identity_ring = a.ring.empty();
  bool equal_blocks = a.coll != Coll::kAllReduce || a.count % size_t(m.nranks) == 0;
  // At thousands of ranks a message with fewer elements than ranks is pure
  // latency, and building N full schedules is O(N^2): round the count up to
  // one element per rank (same hop chain, a few bytes more) so one host's
  // schedules suffice.
  // The real schedule sends only a few messages per rank, so no rank's
  // per-message overhead serialises anything: leave the overhead out, or the
  // padded blocks would be charged for it.
  sim::ClusterModel padded;
  const sim::ClusterModel* model = &m;
  if (!equal_blocks && c.host_rotation_symmetric && m.nranks >= 2048 && a.count < size_t(m.nranks)) {
    a.count = size_t(m.nranks);
    equal_blocks = true;
    padded = m;
    padded.overhead_share = 0;
    padded.loopback_send_share = 0;
    model = &padded;
  }
  if (c.host_rotation_symmetric && identity_ring && equal_blocks && m.host.empty()) opt.period = m.ranks_per_host;
  return sim::simulate(*model, a, c.build, opt);
}

void fill_hosts(algo::CollArgs* a, const sim::ClusterModel& m) {
  if (!a->host_of.empty()) return;
  a->host_of.resize(size_t(m.nranks));
  for (int r = 0; r < m.nranks; ++r) a->host_of[size_t(r)] = m.host_of(r);
}

Result<Decision> decide(const algo::CollArgs& args, const sim::ClusterModel& m, const AlgoFilter& f,
                        const DecideOptions& opt) {
  Decision d;
  algo::CollArgs a = args;
  a.nranks = m.nranks;
  a.staging_bytes = m.staging_bytes;
  fill_hosts(&a, m);
  const size_t bytes = call_bytes(a);
  const AlgoRule* rule = f.rule_for(a.coll, bytes);
  // NCCL's grammar: a list for every collective applies to the collectives
  // that have one of its algorithms and leaves the others alone (ring does
  // not concern Broadcast).
  if (rule != nullptr && rule->coll < 0 && !rule->exclude) {
    bool has_one = false;
    for (const Candidate* c : candidates_for(a.coll))
      has_one = has_one || std::find(rule->names.begin(), rule->names.end(), c->name) != rule->names.end();
    if (!has_one) {
      auto names = algorithm_names();
      bool all_known = true;
      for (const std::string& name : rule->names)
        all_known = all_known && std::find(names.begin(), names.end(), name) != names.end();
      if (all_known) rule = nullptr;
    }
  }
  if (rule) {
    for (const std::string& name : rule->names) {
      auto names = algorithm_names();
      if (std::find(names.begin(), names.end(), name) == names.end()) {
        std::string known;
        for (auto& k : names) known += (known.empty() ? "" : ", ") + k;
        return invalid_argument("CONFLUX_ALGO rule \"" + rule->text + "\" names unknown algorithm \"" + name +
                                "\" (known: " + known + ")");
      }
    }
  }
  std::vector<const Candidate*> usable;
  for (const Candidate* c : candidates_for(a.coll)) {
    Prediction p;
    p.algo = c->name;
    p.why_not = c->cannot_serve ? c->cannot_serve(a, m) : "";
    if (p.why_not.empty() && !AlgoFilter::allows(rule, c->name)) p.why_not = "excluded by CONFLUX_ALGO \"" + rule->text + "\"";
    if (p.why_not.empty()) usable.push_back(c);
    d.predictions.push_back(p);
  }
  // A call split over TCP channels takes an algorithm whose schedules split,
  // where one can serve it (else it runs on one channel).
  if (a.channels > 1) {
    const std::string unsplit =
        "its schedules are not split over the " + std::to_string(a.channels) + " TCP channels this call uses";
    auto splits = [&](const Candidate* c) { return !c->one_sided && algo::channels_can_split(a.coll, c->build); };
    if (std::any_of(usable.begin(), usable.end(), splits)) {
      for (Prediction& p : d.predictions)
        for (const Candidate* c : usable)
          if (c->name == p.algo && !splits(c)) p.why_not = unsplit;
      usable.erase(std::remove_if(usable.begin(), usable.end(), [&](const Candidate* c) { return !splits(c); }),
                   usable.end());
    }
  }
  if (usable.empty()) {
    std::string msg = std::string(coll_name(a.coll)) + " of " + std::to_string(bytes) + " bytes on " +
                      std::to_string(m.nranks) + " ranks: no algorithm can serve it";
    if (rule) msg = "CONFLUX_ALGO rule \"" + rule->text + "\" leaves no usable algorithm for " + msg.substr(0, msg.find(':'));
    for (const Prediction& p : d.predictions) msg += "; " + p.algo + ": " + p.why_not;
    return invalid_argument(msg);
  }
  if (!opt.use_model) usable.erase(usable.begin() + 1, usable.end());  // registry order: the library's historical default first
  const bool simulate_all = opt.use_model && (usable.size() > 1 || opt.simulate_single);
  for (Prediction& p : d.predictions) {
    if (!p.why_not.empty() || !simulate_all) continue;
    for (const Candidate* c : usable)
      if (c->name == p.algo) {
        auto r = predict(*c, a, m, opt.max_steps);
        if (!r.ok()) {
          p.why_not = "simulation failed: " + r.status().message();
        } else {
          p.sim = r.value();
        }
      }
  }
  auto is_usable = [&](const Prediction& p) {
    return p.why_not.empty() &&
           std::any_of(usable.begin(), usable.end(), [&](const Candidate* c) { return c->name == p.algo; });
  };
  const Prediction* best = nullptr;
  for (const Prediction& p : d.predictions)
    if (is_usable(p) && (!best || p.sim.time_us < best->sim.time_us)) best = &p;
  if (!best) return internal_error(std::string(coll_name(a.coll)) + ": every candidate failed to simulate");
  // Between hosts a ring keeps exactly one TCP flow on each direction of
  // every link. The other patterns (rhd, hierarchical, trees) have several
  // flows meet on one port when their steps overlap, and TCP shares a port
  // between flows less well than one flow fills it: on emulated 1 Gbit/s
  // links (bench/line_rate) ring ran at 0.97-1.0 of one stream's rate where
  // rhd and hier ran 10-35% slower, while the model, which treats a port as
  // a fluid, put them within 1-12% of each other. So inside that band the
  // tie goes to ring, where the wire is what limits: a network at least
  // kWireBoundCopyRatio times slower than a shared-memory copy. Where the
  // network is nearly as fast as memory, TCP is CPU-bound and fewer steps
  // win instead (unshaped emulated hosts, 1.5 GB/s against 6.9: rhd ran
  // AllReduce 1 MiB 1.5x faster than ring).
  const Prediction* ring_tie = nullptr;
  const bool wire_bound = m.link[int(sim::PathClass::kNet)].gbps * kWireBoundCopyRatio <=
                          m.link[int(sim::PathClass::kShm)].gbps;
  if (m.nhosts() > 1 && wire_bound && best->algo != "ring")
    for (const Prediction& p : d.predictions)
      if (p.algo == "ring" && is_usable(p) && p.sim.time_us > 0 &&
          p.sim.time_us <= best->sim.time_us * (1.0 + kNetworkRingTieMargin))
        ring_tie = &p;
  const Prediction* fastest = best;
  if (ring_tie != nullptr) best = ring_tie;
  // A measured choice (a usable algorithm the table names) beats the
  // model's; the user's CONFLUX_ALGO rule beats both.
  const Prediction* modelled = best;
  const AlgoRule* measured = rule == nullptr && opt.measured != nullptr ? opt.measured->rule_for(a.coll, bytes) : nullptr;
  bool from_table = false;
  if (measured != nullptr && measured->names.size() == 1)
    for (const Prediction& p : d.predictions)
      if (p.why_not.empty() && p.algo == measured->names[0]) best = &p, from_table = true;
  for (const Candidate* c : candidates_for(a.coll))
    if (c->name == best->algo) d.chosen = c;
  char buf[320];
  if (from_table) {
    std::snprintf(buf, sizeof buf, "%s measured fastest on this host (%s); the model predicted %s (%.1f us)",
                  best->algo.c_str(), opt.measured_source.c_str(), modelled->algo.c_str(), modelled->sim.time_us);
  } else if (!opt.use_model) {
    std::snprintf(buf, sizeof buf, "%s: first usable algorithm (CONFLUX_TUNE=0, no cost model)", best->algo.c_str());
  } else if (best == ring_tie) {
    std::snprintf(buf, sizeof buf,
                  "ring: predicted %.1f us, within %.0f%% of %s (%.1f us); between hosts one TCP flow per link "
                  "direction runs closer to the link's rate than the model can tell",
                  best->sim.time_us, kNetworkRingTieMargin * 100, fastest->algo.c_str(), fastest->sim.time_us);
  } else if (usable.size() == 1) {
    std::snprintf(buf, sizeof buf, "%s is the only usable algorithm%s", best->algo.c_str(),
                  rule && !rule->exclude ? " (forced by CONFLUX_ALGO)" : "");
  } else {
    const Prediction* second = nullptr;
    for (const Prediction& p : d.predictions)
      if (p.why_not.empty() && &p != best && (!second || p.sim.time_us < second->sim.time_us)) second = &p;
    const sim::SimResult& s = best->sim;
    std::snprintf(buf, sizeof buf, "%s predicted fastest: %.1f us (%d latency hops, %.0f bytes on %s), %.2fx ahead of %s",
                  best->algo.c_str(), s.time_us, s.critical_hops, s.bottleneck_bytes, s.bottleneck.c_str(),
                  second && s.time_us > 0 ? second->sim.time_us / s.time_us : 1.0, second ? second->algo.c_str() : "-");
  }
  d.reason = buf;
  return d;
}

Result<const Candidate*> Tuner::choose(const algo::CollArgs& a) {
  std::lock_guard lock(mutex_);
  auto key = std::make_tuple(static_cast<int>(a.coll), call_bytes(a), a.registered, a.channels);
  auto it = memo_.find(key);
  if (it != memo_.end()) return it->second;
  DecideOptions opt;
  opt.use_model = use_model_;
  if (!measured_.rules.empty()) {
    opt.measured = &measured_;
    opt.measured_source = measured_source_;
  }
  // Every rank decides alone and must decide alike: price what the ranks
  // share, not what is this rank's own. Being in place is not shared (a
  // Gather or Scatter is in place at its root only, and an AllGather may be
  // in place on some ranks), and ranks that priced a call in and out of
  // place chose different algorithms on a knife edge.
  algo::CollArgs shared = a;
  shared.in_place = false;
  shared.rank = 0;
  CFX_ASSIGN_OR_RETURN(Decision d, decide(shared, model_, filter_, opt));
  CFX_INFO(kTune, "%s %zu bytes on %d ranks (%d hosts%s): %s — %s", coll_name(a.coll), call_bytes(a), model_.nranks,
           model_.nhosts(), a.registered ? ", registered buffers" : "", d.chosen->name.c_str(), d.reason.c_str());
  memo_[key] = d.chosen;
  return d.chosen;
}

void Tuner::set_measured(AlgoFilter table, std::string source) {
  std::lock_guard lock(mutex_);
  measured_ = std::move(table);
  measured_source_ = std::move(source);
  memo_.clear();
  generation_.fetch_add(1, std::memory_order_release);
}

void Tuner::set_filter(AlgoFilter filter) {
  std::lock_guard lock(mutex_);
  filter_ = std::move(filter);
  memo_.clear();
  generation_.fetch_add(1, std::memory_order_release);
}

Result<Decision> Tuner::model_decision(const algo::CollArgs& a) {
  DecideOptions opt;
  opt.use_model = use_model_;
  return decide(a, model_, AlgoFilter{}, opt);
}

}  // namespace conflux::tune
