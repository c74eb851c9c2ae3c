#include "sim/sim.h"

#include "exec/wait_policy.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <queue>
#include <unordered_map>

namespace conflux::sim {

const char* path_class_name(PathClass c) {
  switch (c) {
    case PathClass::kShm: return "shm";
    case PathClass::kTcpLocal: return "tcp-local";
    case PathClass::kNet: return "net";
    default: return "?";
  }
}

std::string format_curve(const std::vector<CurvePoint>& curve) {
  std::string out;
  char buf[64];
  for (const CurvePoint& p : curve) {
    std::snprintf(buf, sizeof buf, "%s%.0f:%.2f", out.empty() ? "" : ",", p.bytes, p.us);
    out += buf;
  }
  return out;
}

bool parse_curve(const std::string& text, std::vector<CurvePoint>* out) {
  std::vector<CurvePoint> curve;
  size_t pos = 0;
  for (bool last = text.empty(); !last;) {
    size_t end = text.find(',', pos);
    last = end == std::string::npos;
    if (last) end = text.size();
    const std::string item = text.substr(pos, end - pos);
    CurvePoint p;
    char extra = 0;
    if (std::sscanf(item.c_str(), "%lf:%lf%c", &p.bytes, &p.us, &extra) != 2 || !std::isfinite(p.bytes) ||
        !std::isfinite(p.us) || p.bytes < 0 || p.us < 0 || (!curve.empty() && p.bytes <= curve.back().bytes))
      return false;
    curve.push_back(p);
    pos = end + 1;
  }
  if (curve.empty()) return false;
  *out = std::move(curve);
  return true;
}

double LinkParams::wire_us(double bytes) const {
  if (curve.empty()) return bytes / (gbps * 1e3);
  // Measured times include alpha once; what the curve adds above its
  // smallest message is the bytes' share.
  const double base = curve.front().us;
  if (bytes <= curve.front().bytes) return 0;
  for (size_t k = 1; k < curve.size(); ++k) {
    const CurvePoint& lo = curve[k - 1];
    const CurvePoint& hi = curve[k];
    if (bytes <= hi.bytes) {
      const double f = hi.bytes > lo.bytes ? (bytes - lo.bytes) / (hi.bytes - lo.bytes) : 1.0;
      return std::max(0.0, lo.us + f * (hi.us - lo.us) - base);
    }
  }
  return std::max(0.0, curve.back().us - base) + (bytes - curve.back().bytes) / (gbps * 1e3);
}

namespace {
// `bytes` of the `call_bytes` a rank copies in one call, the first `cached`
// of which run at `cached_gbps` (0: all at `gbps`): its share of the call's
// time.
double share_of_call_us(double bytes, double call_bytes, double cached, double cached_gbps, double gbps) {
  if (cached_gbps <= 0 || call_bytes <= 0) return bytes / (gbps * 1e3);
  const double in_cache = std::min(call_bytes, cached);
  const double call_us = in_cache / (cached_gbps * 1e3) + (call_bytes - in_cache) / (gbps * 1e3);
  return bytes * call_us / call_bytes;
}
}  // namespace

double ClusterModel::local_copy_us(double bytes, double call_bytes) const {
  if (copy_gbps <= 0) return 0;
  return share_of_call_us(bytes, call_bytes, call_cached_bytes, copy_cached_gbps, copy_gbps);
}

double ClusterModel::peer_memory_us(double bytes) const {
  // The slower of the cross-core stream and a memcpy (where one is known).
  double gbps = params(PathClass::kShm).gbps;
  if (copy_gbps > 0) gbps = std::min(gbps, copy_gbps);
  if (gbps <= 0) return 0;
  return other_core_share() * bytes / (gbps * 1e3);
}

double ClusterModel::slot_copy_us(double bytes) const {
  const double stream = params(PathClass::kShm).wire_us(bytes);
  if (copy_gbps <= 0) return stream;
  const double crossing = other_core_share();
  return crossing * stream + (1 - crossing) * std::min(stream, bytes / (copy_gbps * 1e3));
}

double ClusterModel::other_core_share() const {
  if (cores_per_host <= 0 || ranks_per_host <= cores_per_host) return 1;
  const double per_core = double(ranks_per_host) / cores_per_host;
  return (ranks_per_host - per_core) / (ranks_per_host - 1);
}

double ClusterModel::kernel_copy_us(double bytes, double call_bytes) const {
  return cma_us + share_of_call_us(bytes, call_bytes, call_cached_bytes, cma_cached_gbps, cma_gbps);
}

int ClusterModel::nhosts() const {
  if (host.empty()) return (nranks + ranks_per_host - 1) / ranks_per_host;
  return host.empty() ? 1 : *std::max_element(host.begin(), host.end()) + 1;
}

std::string ClusterModel::describe() const {
  char buf[256];
  PathClass local = same_host_tcp ? PathClass::kTcpLocal : PathClass::kShm;
  std::snprintf(buf, sizeof buf, "%d ranks on %d hosts, %s %.2fus %.2fGB/s, net %.2fus %.2fGB/s", nranks, nhosts(),
                path_class_name(local), params(local).lat_us, params(local).gbps, params(PathClass::kNet).lat_us,
                params(PathClass::kNet).gbps);
  std::string d = buf;
  if (call_us > 0) {
    std::snprintf(buf, sizeof buf, ", call %.2fus", call_us);
    d += buf;
  }
  if (switch_us > 0) {
    std::snprintf(buf, sizeof buf, ", switch %.2fus", switch_us);
    d += buf;
  }
  if (process_switch_us > 0) {
    std::snprintf(buf, sizeof buf, " (%.2fus between processes)", process_switch_us);
    d += buf;
  }
  if (machine_cores > 0) {
    std::snprintf(buf, sizeof buf, ", one machine: %d cores, net copies %.2fGB/s", machine_cores, machine_net_gbps);
    d += buf;
  }
  if (one_sided) {
    auto cached_rate = [&](double gbps) {
      if (gbps <= 0) return;
      std::snprintf(buf, sizeof buf, " (first %.0f KiB %.2fGB/s)", call_cached_bytes / 1024, gbps);
      d += buf;
    };
    std::snprintf(buf, sizeof buf, ", copy %.2fGB/s", copy_gbps);
    d += buf;
    cached_rate(copy_cached_gbps);
    std::snprintf(buf, sizeof buf, ", flag %.2fus, cma %.2fus %.2fGB/s", flag_us, cma_us, cma_gbps);
    d += buf;
    cached_rate(cma_cached_gbps);
    if (!reads_peer_buffers) d += " (refused)";
  }
  if (!params(PathClass::kNet).curve.empty()) d += ", net curve " + format_curve(params(PathClass::kNet).curve);
  return d;
}

double busbw_factor(Coll c, int n) {
  switch (c) {
    case Coll::kAllReduce: return n > 1 ? 2.0 * (n - 1) / n : 0;
    case Coll::kAllGather:
    case Coll::kReduceScatter:
    case Coll::kAlltoAll:
    case Coll::kAlltoAllv: return n > 1 ? double(n - 1) / n : 0;
    default: return 1.0;
  }
}

namespace {

using algo::StepKind;
constexpr uint32_t kNone = ~0u;
constexpr double kCacheLine = 64;

// What timing needs of every step, structure-of-arrays to stay compact.
struct Steps {
  std::vector<uint8_t> kind;
  // One-sided read/write: the peer's memory is mapped (staging,
  // registered). Copy: its destination is the rank's own staging area.
  std::vector<uint8_t> mapped;
  // reduce-from: sources, those read through the kernel, and peers' mapped ones
  std::vector<uint16_t> nsrc, kernel_srcs, mapped_srcs;
  std::vector<int32_t> owner;  // representative rank index
  std::vector<int32_t> peer;   // absolute peer rank (in the owner's frame)
  std::vector<uint64_t> bytes;
  std::vector<uint32_t> dep_begin{0}, deps;
  std::vector<uint32_t> match, next;  // matched send/recv; next step in the same FIFO
  std::vector<uint32_t> waiters_begin, waiters;  // by signal step: the waits it satisfies (CSR)
  size_t size() const { return kind.size(); }
  // Appends a step's timing fields (its dependencies are appended apart).
  void add(StepKind k, int32_t own, int32_t to, uint64_t b, uint8_t map, uint16_t srcs, uint16_t kernel,
           uint16_t mapped_peers) {
    kind.push_back(static_cast<uint8_t>(k));
    owner.push_back(own);
    peer.push_back(to);
    bytes.push_back(b);
    mapped.push_back(map);
    nsrc.push_back(srcs);
    kernel_srcs.push_back(kernel);
    mapped_srcs.push_back(mapped_peers);
  }
};

bool one_sided_data(StepKind k) { return k == StepKind::kRead || k == StepKind::kWrite || k == StepKind::kReduceFrom; }

// Cores that per-message overheads take in turn. Each core keeps its
// booked intervals in order, so a short task fits in a gap before work
// booked for later: a receive's overhead is booked when its send is placed,
// a wire time ahead of the clock, and a plain "core free at" time would
// hold the core idle until then (4 emulated hosts on 2 cores, 256 KiB ring:
// predicted 553 us against 344-415 measured).
class CorePool {
 public:
  explicit CorePool(int cores) : busy_(size_t(std::max(1, cores))) {}

  // Books `work` us on the core that can start it soonest at or after
  // `from`; returns when it ends. Intervals that ended before `now` (the
  // clock never goes back) are dropped.
  double book(double from, double work, double now) {
    size_t best_core = 0;
    double best_start = 1e300;
    for (size_t c = 0; c < busy_.size(); ++c) {
      auto& iv = busy_[c];
      size_t drop = 0;
      while (drop < iv.size() && iv[drop].second <= now) ++drop;
      iv.erase(iv.begin(), iv.begin() + static_cast<std::ptrdiff_t>(drop));
      double start = from;
      for (const auto& [a, b] : iv) {
        if (start + work <= a) break;
        start = std::max(start, b);
      }
      if (start < best_start) best_start = start, best_core = c;
    }
    // Intervals that touch are kept as one: a saturated core (the usual
    // state where ranks outnumber cores) stays a short list to search.
    auto& iv = busy_[best_core];
    const double end = best_start + work;
    booked_ += work;
    auto at = iv.insert(std::lower_bound(iv.begin(), iv.end(), std::make_pair(best_start, end)), {best_start, end});
    if (at + 1 != iv.end() && (at + 1)->first <= at->second) {
      at->second = std::max(at->second, (at + 1)->second);
      iv.erase(at + 1);
    }
    if (at != iv.begin() && (at - 1)->second >= at->first) {
      (at - 1)->second = std::max((at - 1)->second, at->second);
      iv.erase(at);
    }
    return end;
  }

  // Per call, the time these cores need for the work booked on them: a
  // stream of calls cannot run faster than its cores do their work.
  double busy_per_call(int calls) const { return booked_ / std::max(1, calls) / double(busy_.size()); }

 private:
  std::vector<std::vector<std::pair<double, double>>> busy_;
  double booked_ = 0;  // all cores together
};

uint64_t pair_key(int a, int b) { return (uint64_t(uint32_t(a)) << 32) | uint32_t(b); }

class Sim {
 public:
  Sim(const ClusterModel& m, int period, int calls)
      : m_(m), reps_(period > 0 ? period : m.nranks), calls_(std::max(1, calls)) {}

  Status load(const algo::CollArgs& args, const Builder& build);
  Status run(SimResult* out);

 private:
  int rep_of(int r) const { return r % reps_; }
  void complete(uint32_t i, double t, int hops);
  void release(uint32_t i);

  const ClusterModel& m_;
  int reps_;
  int calls_;
  Steps s_;
  std::vector<uint8_t> first_call_;  // by step: it belongs to the first of the calls played
  size_t barriers_ = 0;              // steps that open a rank's next call
  std::vector<uint32_t> pending_, dependents_begin_, dependents_;
  std::vector<double> ready_, done_;
  std::vector<int32_t> hops_ready_, hops_;
  std::vector<double> port_free_, port_bytes_;
  using Event = std::pair<double, uint32_t>;
  std::priority_queue<Event, std::vector<Event>, std::greater<>> sends_;
  std::vector<uint32_t> work_;
  std::vector<double> core_free_;  // by representative: when its one-sided copies are done
  std::vector<double> awake_until_;  // by representative: when it last woke from a wait (ranks > cores)
  // By representative, ranks > cores: switched in for a flag or a message
  // and has done nothing else since, so the rest of what it waits for
  // finds it awake.
  std::vector<uint8_t> switched_in_;
  std::vector<double> active_until_;  // by representative: when its latest step so far ended
  std::vector<double> arrived_;       // by receive step: when its message was there to take
  std::vector<double> kernel_call_bytes_;  // by representative: what one call copies through the kernel
  std::vector<double> local_call_bytes_;   // by representative: what one call copies locally
  std::vector<double> staged_read_bytes_;  // by representative: what its peers read of its staging area in one call
  size_t finished_ = 0;
};

Status Sim::load(const algo::CollArgs& args, const Builder& build) {
  // sendq[(src rep, dst abs)] and recvq[(dst rep, src abs in dst's frame)].
  std::unordered_map<uint64_t, std::vector<uint32_t>> sendq, recvq;
  std::vector<std::vector<uint32_t>> signals(static_cast<size_t>(reps_));
  struct Wait {
    uint32_t step;
    int peer_rep;
    uint32_t count;  // the peer's count-th signal of call `call`
    int call;
  };
  std::vector<Wait> waits;
  std::vector<uint32_t> signals_per_call(static_cast<size_t>(reps_), 0);
  kernel_call_bytes_.assign(size_t(reps_), 0.0);
  local_call_bytes_.assign(size_t(reps_), 0.0);
  staged_read_bytes_.assign(size_t(reps_), 0.0);
  for (int r = 0; r < reps_; ++r) {
    algo::CollArgs a = args;
    a.rank = r;
    a.nranks = m_.nranks;
    const algo::Schedule sch = build(a);
    uint32_t previous_call_done = kNone;  // a step that completes with this rank's previous call
    for (int call = 0; call < calls_; ++call) {
      const uint32_t base = static_cast<uint32_t>(s_.size());
      for (const algo::Step& st : sch.steps) {
        const uint32_t id = static_cast<uint32_t>(s_.size());
        const algo::Slice& remote = st.kind == StepKind::kRead ? st.src : st.dst;
        uint16_t kernel = 0, peers = 0;
        for (uint32_t k = 0; k < st.src_count; ++k) {
          const algo::Source& src = sch.sources[st.src_begin + k];
          if (src.peer < 0) continue;
          ++peers;
          if (src.slice.buf != algo::kStaging && !a.registered) ++kernel;
          if (call == 0 && src.slice.buf == algo::kStaging)  // charged to the peer, as reads are (below)
            staged_read_bytes_[size_t(rep_of(src.peer))] += double(src.slice.bytes);
        }
        const bool mapped = st.kind == StepKind::kCopy ? st.dst.buf == algo::kStaging
                                                       : remote.buf == algo::kStaging || a.registered;
        s_.add(st.kind, r, st.peer, st.kind == StepKind::kSend ? st.src.bytes : st.dst.bytes, mapped ? 1 : 0,
               static_cast<uint16_t>(st.src_count), kernel, static_cast<uint16_t>(peers - kernel));
        if (call == 0) {  // what one call copies, by kind
          const double bytes = double(st.dst.bytes);
          if ((st.kind == StepKind::kRead || st.kind == StepKind::kWrite) && !mapped)
            kernel_call_bytes_[size_t(r)] += bytes;
          if (st.kind == StepKind::kReduceFrom) kernel_call_bytes_[size_t(r)] += double(kernel) * bytes;
          if (st.kind == StepKind::kCopy) local_call_bytes_[size_t(r)] += bytes;
          // Reads of a peer's staging area, charged to the peer (by
          // symmetry, what representative r reads of peer p is what p's
          // representative has read by every rank of its class).
          // (A reduction's staged sources are counted with its sources, above.)
          if (st.kind == StepKind::kRead && st.src.buf == algo::kStaging && st.peer >= 0)
            staged_read_bytes_[size_t(rep_of(st.peer))] += double(st.src.bytes);
        }
        first_call_.push_back(call == 0 ? 1 : 0);
        if (st.kind == StepKind::kSignal) signals[size_t(r)].push_back(id);
        if (st.kind == StepKind::kWait) waits.push_back({id, rep_of(st.peer), st.count, call});
        for (uint32_t k = 0; k < st.dep_count; ++k) s_.deps.push_back(base + sch.deps[st.dep_begin + k]);
        if (st.dep_count == 0 && previous_call_done != kNone) s_.deps.push_back(previous_call_done);
        s_.dep_begin.push_back(static_cast<uint32_t>(s_.deps.size()));
        if (st.kind == StepKind::kSend) {
          if (st.peer < 0 || st.peer >= m_.nranks)
            return invalid_argument("rank " + std::to_string(r) + " sends to bad peer");
          sendq[pair_key(r, st.peer)].push_back(id);
        } else if (st.kind == StepKind::kRecv || st.kind == StepKind::kRecvReduce) {
          if (st.peer < 0 || st.peer >= m_.nranks)
            return invalid_argument("rank " + std::to_string(r) + " receives from bad peer");
          recvq[pair_key(r, st.peer)].push_back(id);
        }
      }
      if (call == 0) signals_per_call[size_t(r)] = static_cast<uint32_t>(signals[size_t(r)].size());
      if (call + 1 < calls_ && s_.size() > base) {
        // The call returns when all of its steps are done: a step of no cost
        // that waits for every one of them opens the next call.
        previous_call_done = static_cast<uint32_t>(s_.size());
        ++barriers_;
        for (uint32_t k = base; k < previous_call_done; ++k) s_.deps.push_back(k);
        s_.dep_begin.push_back(static_cast<uint32_t>(s_.deps.size()));
        s_.add(StepKind::kCopy, r, -1, 0, 0, 0, 0, 0);
        first_call_.push_back(call == 0 ? 1 : 0);
      }
    }
  }
  s_.match.assign(s_.size(), kNone);
  s_.next.assign(s_.size(), kNone);
  auto chain = [&](const std::vector<uint32_t>& q) {
    for (size_t k = 1; k < q.size(); ++k) s_.next[q[k - 1]] = q[k];
  };
  for (auto& [key, q] : sendq) {
    int src = static_cast<int>(key >> 32), dst = static_cast<int>(key & 0xffffffffu);
    int shift = dst - rep_of(dst);  // move the pair so the receiver is a representative
    int label = ((src - shift) % m_.nranks + m_.nranks) % m_.nranks;
    auto it = recvq.find(pair_key(rep_of(dst), label));
    size_t nrecv = it == recvq.end() ? 0 : it->second.size();
    if (nrecv != q.size())
      return invalid_argument("rank " + std::to_string(src) + " sends " + std::to_string(q.size()) +
                              " messages to rank " + std::to_string(dst) + " which receives " + std::to_string(nrecv));
    for (size_t k = 0; k < q.size(); ++k) {
      s_.match[q[k]] = it->second[k];
      s_.match[it->second[k]] = q[k];
    }
    chain(q);
  }
  for (auto& [key, q] : recvq) {
    for (uint32_t id : q)
      if (s_.match[id] == kNone)
        return invalid_argument("rank " + std::to_string(key >> 32) + " receives from rank " +
                                std::to_string(key & 0xffffffffu) + " which never sends");
    chain(q);
  }
  // A wait for a peer's k-th signal is released by that signal of the same call.
  std::vector<uint32_t> count(s_.size() + 1, 0);
  for (const Wait& w : waits) {
    const auto& list = signals[size_t(w.peer_rep)];
    const uint32_t per_call = signals_per_call[size_t(w.peer_rep)];
    if (w.count == 0 || w.count > per_call)
      return invalid_argument("a wait for signal " + std::to_string(w.count) + " of rank " +
                              std::to_string(w.peer_rep) + ", which signals " + std::to_string(per_call) + " times");
    s_.match[w.step] = list[size_t(w.call) * per_call + w.count - 1];
    ++count[s_.match[w.step] + 1];
  }
  for (size_t i = 0; i < s_.size(); ++i) count[i + 1] += count[i];
  s_.waiters_begin = count;
  s_.waiters.assign(waits.size(), 0);
  for (const Wait& w : waits) s_.waiters[count[s_.match[w.step]]++] = w.step;
  return Status::Ok();
}

void Sim::release(uint32_t i) {
  if (--pending_[i] != 0) return;
  if (s_.kind[i] == static_cast<uint8_t>(StepKind::kSend)) {
    sends_.push({ready_[i], i});
  } else {
    work_.push_back(i);
  }
}

void Sim::complete(uint32_t i, double t, int hops) {
  done_[i] = t;
  hops_[i] = hops;
  ++finished_;
  // Work of its own (a send, a copy, a read) ends a rank's wait: it sleeps
  // again at the next one.
  const auto kind = StepKind(s_.kind[i]);
  if (kind != StepKind::kWait && kind != StepKind::kRecv && kind != StepKind::kRecvReduce)
    switched_in_[size_t(s_.owner[i])] = 0;
  double& active = active_until_[size_t(s_.owner[i])];
  active = std::max(active, t);
  auto bump = [&](uint32_t d) {
    ready_[d] = std::max(ready_[d], t);
    hops_ready_[d] = std::max(hops_ready_[d], hops);
    release(d);
  };
  for (uint32_t k = dependents_begin_[i]; k < dependents_begin_[i + 1]; ++k) bump(dependents_[k]);
  if (s_.next[i] != kNone) bump(s_.next[i]);
  if (StepKind(s_.kind[i]) == StepKind::kSignal) {
    // Seen by the waiting peers a flag's hand-off later.
    for (uint32_t k = s_.waiters_begin[i]; k < s_.waiters_begin[i + 1]; ++k) {
      const uint32_t w = s_.waiters[k];
      ready_[w] = std::max(ready_[w], t + m_.flag_us);
      hops_ready_[w] = std::max(hops_ready_[w], hops + 1);
      release(w);
    }
  }
}

Status Sim::run(SimResult* out) {
  const size_t n = s_.size();
  pending_.assign(n, 0);
  ready_.assign(n, 0.0);
  done_.assign(n, 0.0);
  hops_ready_.assign(n, 0);
  hops_.assign(n, 0);
  // Dependents in CSR form; pending = deps + FIFO predecessor + (receives) the matched send.
  std::vector<uint32_t> count(n + 1, 0);
  for (uint32_t d : s_.deps) ++count[d + 1];
  for (size_t i = 0; i < n; ++i) count[i + 1] += count[i];
  dependents_begin_ = count;
  dependents_.assign(s_.deps.size(), 0);
  for (size_t i = 0; i < n; ++i)
    for (uint32_t k = s_.dep_begin[i]; k < s_.dep_begin[i + 1]; ++k) dependents_[count[s_.deps[k]]++] = uint32_t(i);
  for (size_t i = 0; i < n; ++i) pending_[i] += s_.dep_begin[i + 1] - s_.dep_begin[i];
  for (size_t i = 0; i < n; ++i) {
    if (s_.next[i] != kNone) ++pending_[s_.next[i]];
    if (s_.kind[i] == uint8_t(StepKind::kRecv) || s_.kind[i] == uint8_t(StepKind::kRecvReduce) ||
        s_.kind[i] == uint8_t(StepKind::kWait))
      ++pending_[i];
  }
  core_free_.assign(size_t(reps_), 0.0);
  awake_until_.assign(size_t(reps_), 0.0);
  switched_in_.assign(size_t(reps_), 0);
  active_until_.assign(size_t(reps_), 0.0);
  arrived_.assign(n, 0.0);
  for (size_t i = 0; i < n; ++i) {
    if (pending_[i] != 0) continue;
    if (s_.kind[i] == uint8_t(StepKind::kSend)) sends_.push({0.0, uint32_t(i)});
    else work_.push_back(uint32_t(i));
  }
  // Ports: per representative rank one for its messages inside its host,
  // both directions (its core copies them), per host a NIC egress and ingress.
  const int nhosts = m_.nhosts();
  port_free_.assign(size_t(reps_) + 2 * size_t(nhosts), 0.0);
  port_bytes_.assign(port_free_.size(), 0.0);
  auto local_port = [&](int rep) { return size_t(rep); };
  auto nic_port = [&](int host, bool in) { return size_t(reps_) + 2 * size_t(host) + (in ? 1 : 0); };
  // Oversubscribed hosts: a pool of cores per host that per-message
  // overheads take in turn (earliest free core first).
  // Emulated hosts on one machine: one pool for everybody.
  const bool machine_pool = m_.machine_cores > 0 && m_.nranks > m_.machine_cores;
  const bool cpu_bound =
      machine_pool || (m_.cores_per_host > 0 && m_.ranks_per_host > m_.cores_per_host && m_.host.empty());
  const int pools = machine_pool ? 1 : nhosts;
  const int pool_cores = machine_pool ? m_.machine_cores : std::max(1, m_.cores_per_host);
  std::vector<CorePool> cores(cpu_bound ? size_t(pools) : 0, CorePool(pool_cores));
  double machine_net_free = 0;  // the machine-wide copy bandwidth of inter-host bytes
  double now = 0;               // the simulation's clock: start time of the send being placed
  auto on_cpu = [&](int host, double from, double work) {
    return cores[machine_pool ? 0 : size_t(host)].book(from, work, now);
  };
  // A sleeping rank switched in at `from` (ranks > cores): when it runs.
  // A waiting rank spins and hands its core to a queued rank every
  // kYieldEvery; a rank that waits too hands it back as soon. So for about
  // a round trip of those hand-offs (two switches and two yield intervals)
  // of the ranks sharing a pool as many as it has cores are on one, and a
  // rank whose wait ends while it is one of them goes on without a switch:
  // such a wake-up costs a switch only for the queued share, (ranks -
  // cores) / ranks of them. A longer wait means the rank's core went to
  // one doing work, and it waits behind that rank: a whole switch.
  // At 4 ranks on 2 cores, 64 B and 16 KiB, the measured medians imply
  // 0.25-0.65 of a whole switch per wake-up (ring, rhd, bruck, pairwise,
  // eager; bench/results/switch-counts-4-ranks.txt), where the 256 KiB
  // ring, whose steps wait longer, pays about every one.
  // A wake-up by a socket (loopback TCP, or TCP between emulated hosts)
  // goes through the kernel's socket wake-up, which moves the woken rank
  // to the waker's core: a whole switch still prices it (4 ranks over
  // loopback, 64 KiB AllGather: with half a switch bruck was priced below
  // rhd, and ran 1.17x slower).
  const int pool_ranks = machine_pool ? m_.nranks : m_.ranks_per_host;
  const double queued_share = cpu_bound ? 1.0 - double(pool_cores) / double(std::max(1, pool_ranks)) : 1.0;
  const double round_trip_us =
      2 * (m_.rank_switch_us() + std::chrono::duration<double, std::micro>(kYieldEvery).count());
  auto switch_in = [&](int rep, double from, bool by_socket) {
    switched_in_[size_t(rep)] = 1;
    const bool near_its_core = !by_socket && from <= active_until_[size_t(rep)] + round_trip_us;
    return on_cpu(m_.host_of(rep), from, m_.rank_switch_us() * (near_its_core ? queued_share : 1.0));
  };
  size_t messages = 0;
  for (;;) {
    while (!work_.empty()) {  // receives and copies resolve as soon as their inputs are known
      uint32_t i = work_.back();
      work_.pop_back();
      double cost = 0;
      auto kind = StepKind(s_.kind[i]);
      if (kind == StepKind::kRecvReduce && m_.reduce_gbps > 0) cost = double(s_.bytes[i]) / (m_.reduce_gbps * 1e3);
      if (kind == StepKind::kCopy) {
        const auto rep = size_t(s_.owner[i]);
        cost = m_.local_copy_us(double(s_.bytes[i]), local_call_bytes_[rep]);
        // A copy into the staging area writes lines that peers read in the
        // area's previous use, and now hold in their caches: each comes
        // back across cores before it is written, at the rate a peer's
        // fresh lines cross (2 ranks, 16 KiB eager ReduceScatter: 0.33-0.37
        // us slower than the ring, whose sender writes half as many lines
        // that its peer read). The first line's return overlaps the flag's,
        // which the signal pays: a call of one line costs one flag round.
        if (s_.mapped[i] && m_.one_sided) {
          const double returned = std::min(double(s_.bytes[i]), staged_read_bytes_[rep]) - kCacheLine;
          if (returned > 0) cost += m_.peer_memory_us(returned);
        }
      }
      if (kind == StepKind::kCopy && cost > 0) {
        // The rank's own core makes its local copies between the copies it
        // makes of its messages inside the host (its port), not beside them.
        // With more ranks than cores it also takes its turn on one.
        const size_t port = local_port(s_.owner[i]);
        double start = std::max(ready_[i], port_free_[port]);
        if (cpu_bound) start = on_cpu(m_.host_of(s_.owner[i]), start, cost) - cost;
        port_free_[port] = start + cost;
        complete(i, start + cost, hops_ready_[i]);
        continue;
      }
      if (one_sided_data(kind)) {
        // Memory traffic on the rank that runs it, one step after another:
        // a peer's mapped memory at the rate its lines cross between cores,
        // ordinary buffers through the kernel (a call, then its bandwidth);
        // a reduction reads its sources and writes once, as a pairwise
        // kernel reads two and writes one, and waits for each mapped peer
        // source's lines to come over besides.
        const double bytes = double(s_.bytes[i]);
        const double kernel = m_.kernel_copy_us(bytes, kernel_call_bytes_[size_t(s_.owner[i])]);
        if (kind == StepKind::kReduceFrom) {
          const double reduce = m_.reduce_gbps > 0 ? bytes * (s_.nsrc[i] + 1) / 3.0 / (m_.reduce_gbps * 1e3) : 0;
          cost = reduce + s_.kernel_srcs[i] * kernel + s_.mapped_srcs[i] * m_.peer_memory_us(bytes);
        } else {
          cost = s_.mapped[i] ? m_.peer_memory_us(bytes) : kernel;
        }
        const int rep = s_.owner[i];
        double start = std::max(ready_[i], core_free_[size_t(rep)]);
        if (cpu_bound) start = on_cpu(m_.host_of(rep), start, cost) - cost;
        core_free_[size_t(rep)] = start + cost;
        complete(i, start + cost, hops_ready_[i]);
        continue;
      }
      if (kind == StepKind::kWait && cpu_bound) {
        // With more ranks than cores a waiter sleeps, and waking it takes a
        // switch; once awake it sees every flag already raised, so a wait
        // whose flag came while its rank was still awake (busy, or woken
        // for another flag) costs no second switch. Nor does one whose flag
        // comes later in the same round of waits: a woken rank that still
        // waits yields its core rather than sleep (the executor's wait
        // yields before it sleeps), so it sees the flag as it is raised.
        // An eager call's rank waits for every peer but sleeps about once
        // (4 ranks on 2 cores, 64 B single-copy AllGather, two rounds of
        // waits: priced at 70 us with a switch per flag, measured 37).
        // (Being awake does not occupy the rank's core: its other steps
        // run at their own pace.)
        const auto rep = size_t(s_.owner[i]);
        if (ready_[i] <= std::max(core_free_[rep], awake_until_[rep])) {
          complete(i, ready_[i], hops_ready_[i]);
          continue;
        }
        if (switched_in_[rep]) {
          complete(i, std::max(ready_[i], awake_until_[rep]), hops_ready_[i]);
          continue;
        }
        awake_until_[rep] = switch_in(int(rep), ready_[i], false);
        complete(i, awake_until_[rep], hops_ready_[i]);
        continue;
      }
      if ((kind == StepKind::kRecv || kind == StepKind::kRecvReduce) && cpu_bound) {
        // With more ranks than cores a rank that waited for this message
        // slept, and switching it in takes a core first. One that reaches
        // the receive with the message already there (it was busy when the
        // message came) does not sleep: a chain's ranks forward a stream of
        // small Broadcasts in batches (4 ranks on 2 cores, 64 B: priced at
        // 5.4 us a call with a switch per message, measured 1.5-2.0). Nor
        // does one that another message or flag of the same wait switched
        // in already (as for waits, above).
        const auto rep = size_t(s_.owner[i]);
        if (!switched_in_[rep] && arrived_[i] > active_until_[rep]) {
          const bool by_socket = m_.path(s_.peer[i], int(rep)) != PathClass::kShm;
          complete(i, switch_in(int(rep), ready_[i], by_socket) + cost, hops_ready_[i]);
          continue;
        }
      }
      complete(i, ready_[i] + cost, hops_ready_[i]);
    }
    if (sends_.empty()) break;
    auto [t, i] = sends_.top();
    sends_.pop();
    now = t;
    const int src = s_.owner[i], dst = s_.peer[i];
    const int dst_rep = rep_of(dst);
    PathClass pc = m_.path(src, dst);
    const LinkParams& lp = m_.params(pc);
    size_t out_port, in_port;
    if (pc == PathClass::kNet) {
      out_port = nic_port(m_.host_of(src), false);
      in_port = nic_port(m_.host_of(dst_rep), true);
    } else {
      // Between the ranks of a host a rank's own core copies what it sends
      // (into a peer's slots, or a loopback socket) and what it receives:
      // sending and receiving at once share that core (a two-way exchange
      // runs at half a one-way stream's rate, where both cores copy at
      // once), so a rank has one port for both directions.
      out_port = local_port(src);
      in_port = local_port(dst_rep);
    }
    // LogP's overhead: half of alpha is the sender's work per message and
    // holds its port (a rank posting many messages serialises them), the
    // other half is flight time (over loopback TCP all of it is the
    // sender's work, below). A lone message still costs alpha + S/B.
    // The egress port serialises the sender's messages; the ingress port
    // then takes the bytes when it is free (cut-through: a message waits for
    // a busy receiver, not for both ports to be idle at once, which would
    // starve many-to-many patterns such as pairwise AlltoAll).
    // Between hosts emulated on one machine no wire carries the bytes: the
    // machine's cores copy them, and a lone one-way stream gets the whole
    // machine. The probe timed its link with both directions busy, each
    // with half the machine; so a message's bytes take its link's time
    // scaled to the machine's rate, and the machine's pool below queues
    // every link's bytes (a 2-host 4 MiB Broadcast, one-way, was priced
    // at the two-way rate: 1747 us against 626-650 measured).
    const bool one_machine_link = pc == PathClass::kNet && m_.machine_net_gbps > 0;
    double wire = lp.wire_us(double(s_.bytes[i]));
    if (one_machine_link) wire *= lp.gbps / m_.machine_net_gbps;
    if (pc == PathClass::kShm) wire = m_.slot_copy_us(double(s_.bytes[i]));
    // On loopback TCP nothing is in flight: the sender's system call also
    // runs the receive path (the kernel delivers into the peer's socket on
    // the sender's core), so all of alpha is the sender's work and holds its
    // port. Priced at half, a 2-rank stream of 64 B Broadcasts read 2.9 us a
    // call against 5.6 measured, and every small loopback call about 0.4x.
    const double send_share = pc == PathClass::kTcpLocal ? m_.loopback_send_share : m_.overhead_share;
    const double send_work = lp.lat_us * send_share;
    const double overhead = lp.lat_us * m_.overhead_share;  // the receiver's, where it waits for a core
    double start = std::max(t, port_free_[out_port]);
    // Between the ranks of a host the sender itself copies a message into
    // the slots (or the loopback socket): with more ranks than cores that
    // copy, the message's wire time (the receiver's copy runs beside it),
    // takes a core too.
    if (cpu_bound) {
      const double work = send_work + (pc == PathClass::kNet ? 0.0 : wire);
      start = on_cpu(m_.host_of(src), start, work) - work;
    }
    double dur = wire + send_work;
    port_free_[out_port] = start + dur;
    if (one_machine_link) {
      // Every emulated link's bytes are copied by the same machine.
      machine_net_free = std::max(machine_net_free, start) + wire;
      dur = std::max(dur, machine_net_free - start);
    }
    const double sent = start + dur;
    double in_done = std::max(sent, port_free_[in_port] + wire);
    port_free_[in_port] = in_done;
    dur = in_done - start;
    port_bytes_[out_port] += double(s_.bytes[i]);
    port_bytes_[in_port] += double(s_.bytes[i]);
    ++messages;
    uint32_t r = s_.match[i];
    const double flight = lp.lat_us - send_work;
    double arrive = start + dur + flight;
    // Through slot rings a message is store-and-forward per piece: the
    // receiver's copy of the last piece starts when the sender's copy of it
    // ends, so a lone message takes one piece's copy longer than its stream
    // (2-rank ping-pong, 64 KiB: 6.3-7.2 us one way, against 2.2 us for
    // 64 KiB of a one-way stream). The receiver's port is not held for it:
    // a rank copies its own sends in the meantime.
    if (pc == PathClass::kShm && m_.shm_piece_bytes > 0) {
      const double fill = m_.slot_copy_us(std::min(double(s_.bytes[i]), double(m_.shm_piece_bytes)));
      arrive = std::max(arrive, sent + fill + flight);
    }
    // The receiver's turn on a core (whether it slept meanwhile is
    // priced at its receive, above). Inside the host its core also copies
    // the bytes out of the slots (or the socket): both sides' copies take
    // core time (4 ranks on 2 cores, a 256 KiB chain Broadcast: priced at
    // 14 us a call with the sender's copy alone, measured 32-36).
    if (cpu_bound) {
      const double copy_out = pc == PathClass::kNet ? 0.0 : wire;
      arrive = on_cpu(m_.host_of(dst_rep), arrive, overhead + copy_out);
    }
    arrived_[r] = arrive;
    ready_[r] = std::max(ready_[r], arrive);
    hops_ready_[r] = std::max(hops_ready_[r], hops_ready_[i] + 1);
    complete(i, start + dur, hops_ready_[i]);
    release(r);
  }
  if (finished_ != n)
    return internal_error("schedule deadlocks: " + std::to_string(n - finished_) + " of " + std::to_string(n) +
                          " steps never become ready");
  const double calls = calls_;
  out->steps = (n - barriers_) / size_t(calls_);
  out->messages = messages / size_t(calls_);
  double first = 0, last = 0;
  for (size_t i = 0; i < n; ++i) {
    last = std::max(last, done_[i]);
    if (!first_call_[i]) continue;
    first = std::max(first, done_[i]);
    out->critical_hops = std::max(out->critical_hops, hops_[i]);
  }
  // Every call on every rank pays the fixed call cost, in turn.
  out->first_call_us = n > 0 ? first + m_.call_us : 0;
  out->time_us = calls_ > 1 && n > 0 ? (last - first) / (calls - 1) + m_.call_us : out->first_call_us;
  // A few calls' spread understates a pipeline whose first rank races
  // ahead: the later calls' work, booked on shared cores, pushes the first
  // call's end late (4 ranks on 2 cores, 256 KiB chain Broadcast: 14 us a
  // call from 3 calls, 28 from 12). The cores' work per call bounds it.
  if (calls_ > 1 && n > 0)
    for (const CorePool& pool : cores) out->time_us = std::max(out->time_us, pool.busy_per_call(calls_) + m_.call_us);
  size_t best = 0;
  for (size_t p = 0; p < port_bytes_.size(); ++p)
    if (port_bytes_[p] > port_bytes_[best]) best = p;
  out->bottleneck_bytes = port_bytes_.empty() ? 0 : port_bytes_[best] / calls;
  const size_t rank_ports = size_t(reps_);
  if (best < rank_ports)
    out->bottleneck = "rank " + std::to_string(best) + " sent+received";
  else
    out->bottleneck = "host " + std::to_string((best - rank_ports) / 2) + " NIC" + ((best - rank_ports) % 2 ? " ingress" : " egress");
  return Status::Ok();
}

}  // namespace

Result<SimResult> simulate(const ClusterModel& model, const algo::CollArgs& args, const Builder& build,
                           const SimOptions& opt) {
  if (model.nranks < 1) return invalid_argument("simulate: need at least one rank");
  int period = opt.period;
  if (period > 0 && (model.nranks % period != 0 || !model.host.empty() || period % model.ranks_per_host != 0))
    period = 0;  // no usable symmetry: simulate every rank
  if (period >= model.nranks) period = 0;
  if (model.machine_cores > 0 || model.machine_net_gbps > 0) period = 0;  // one machine's pools span every host
  const int reps = period > 0 ? period : model.nranks;
  // Coarsen chunking until the estimated step count fits: rank 0's schedule
  // size times the number of ranks built.
  algo::CollArgs a = args;
  a.nranks = model.nranks;
  a.rank = 0;
  for (int guard = 0; guard < 40; ++guard) {
    size_t est = build(a).steps.size() * size_t(reps) * size_t(std::max(1, opt.calls));
    if (est <= opt.max_steps || a.chunk_bytes >= (size_t(1) << 40)) break;
    a.chunk_bytes *= 2;
  }
  Sim sim(model, period, opt.calls);
  CFX_RETURN_IF_ERROR(sim.load(a, build));
  SimResult r;
  CFX_RETURN_IF_ERROR(sim.run(&r));
  r.chunk_bytes = a.chunk_bytes;
  r.symmetric = period > 0;
  return r;
}

}  // namespace conflux::sim
