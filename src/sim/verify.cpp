#include "sim/verify.h"

#include <algorithm>
#include <random>
#include <sstream>
#include <unordered_map>

namespace conflux::sim {
namespace {

using algo::CollArgs;
using algo::Schedule;
using algo::Slice;
using algo::Step;
using algo::StepKind;

// Sets of ranks as sorted disjoint half-open intervals, stored flat. Id 0 is
// "undefined" (no data); contributions of a pipelined chunk share one id, so
// a slice of k elements costs one union, not k.
class RankSets {
 public:
  RankSets() {
    begin_.push_back(0);
    len_.push_back(0);
  }
  uint32_t singleton(int r) { return make({{r, r + 1}}); }
  // Union; with `disjoint`, an overlap sets *overlap and returns 0.
  uint32_t unite(uint32_t a, uint32_t b, bool disjoint, bool* overlap) {
    uint64_t key = (static_cast<uint64_t>(a) << 32 | b) ^ (disjoint ? 1ull << 63 : 0);
    if (auto it = memo_.find(key); it != memo_.end()) return it->second;
    std::vector<std::pair<int, int>> out;
    size_t i = 0, j = 0;
    auto push = [&](std::pair<int, int> iv) {
      if (!out.empty() && iv.first < out.back().second) {
        if (disjoint) *overlap = true;
        out.back().second = std::max(out.back().second, iv.second);
      } else if (!out.empty() && iv.first == out.back().second) {
        out.back().second = iv.second;
      } else {
        out.push_back(iv);
      }
    };
    while (i < len_[a] || j < len_[b]) {
      bool take_a = j >= len_[b] || (i < len_[a] && at(a, i).first <= at(b, j).first);
      push(take_a ? at(a, i++) : at(b, j++));
    }
    if (disjoint && *overlap) return 0;
    uint32_t id = make(out);
    memo_.emplace(key, id);
    return id;
  }
  bool is_range(uint32_t s, int lo, int hi) const {
    return len_[s] == 1 && at(s, 0) == std::pair<int, int>{lo, hi};
  }
  std::string str(uint32_t s) const {
    if (s == 0) return "undefined";
    std::ostringstream o;
    o << "{";
    for (uint32_t i = 0; i < len_[s] && i < 8; ++i) {
      auto [lo, hi] = at(s, i);
      o << (i ? "," : "") << lo;
      if (hi > lo + 1) o << ".." << hi - 1;
    }
    if (len_[s] > 8) o << ",...";
    o << "}";
    return o.str();
  }

 private:
  std::pair<int, int> at(uint32_t s, uint32_t i) const { return flat_[begin_[s] + i]; }
  uint32_t make(const std::vector<std::pair<int, int>>& ivs) {
    begin_.push_back(static_cast<uint32_t>(flat_.size()));
    len_.push_back(static_cast<uint32_t>(ivs.size()));
    flat_.insert(flat_.end(), ivs.begin(), ivs.end());
    return static_cast<uint32_t>(begin_.size() - 1);
  }
  std::vector<std::pair<int, int>> flat_;
  std::vector<uint32_t> begin_, len_;
  std::unordered_map<uint64_t, uint32_t> memo_;
};

struct Value {
  uint64_t idx = 0;  // element index in the originating rank's send buffer
  uint32_t set = 0;  // contributing ranks; 0 = undefined
};

// One element of some rank's memory plus its shadow: the step (global id)
// that wrote it last and the steps that have read it since (a list in the
// verifier's reader pool).
struct Cell {
  Value v;
  int32_t writer = -1;
  int32_t readers = -1;
};

// Where a BufIndex of one rank's call lives: which array, which elements.
enum Arr : int { kArrRecv = 0, kArrSend = 1, kArrScratch = 2, kArrStaging = 3 };
struct Binding {
  int arr = kArrRecv;
  size_t base = 0, size = 0;  // elements
};

struct Queue {
  std::vector<int> sends, recvs;  // rank-local step indices
  size_t send_head = 0, recv_head = 0;
};

// One rank's part of one call.
struct CallState {
  CollArgs args;
  Schedule sched;
  int entry = 0;     // rank-local index of the step where the call starts
  int first = 0;     // rank-local index of its first step
  int boundary = 0;  // rank-local index of the step where the call returns
  std::vector<Cell> recv, send;
  Binding bind[algo::kFirstExtraBuf];
  uint32_t signals_total = 0;           // kSignal steps in the schedule
  std::vector<int> signals_done;        // rank-local indices, in the order they ran
};

struct RankState {
  std::vector<CallState> calls;
  std::vector<Cell> scratch, staging;  // persist across calls
  size_t staging_half = 0;             // elements per half
  int base = 0;                        // global id of rank-local step 0
  // Rank-local steps: for each call, its entry (the caller hands over its
  // buffers), its steps, and its return (boundary).
  std::vector<int> call_of, step_of;  // step_of: kReturn, kEntry, or the step's index
  std::vector<uint32_t> pred_begin, pred;  // deps (rank-local), incl. call order
  std::vector<int32_t> qprev;              // previous step on the same link queue
  std::vector<uint32_t> pending;
  std::vector<uint32_t> dependents_begin, dependents;
  std::vector<uint32_t> know;  // Barrier: arrivals this step follows (in its call)
  std::vector<uint8_t> enabled, done, paired;
  std::unordered_map<int, int> queue_of;  // lane (peer + channel x n) -> index into queues
  std::vector<Queue> queues;
  std::vector<uint32_t> stamp;
  uint32_t stamp_now = 0;
  size_t completed = 0;
  int hb_for = -1;
  std::vector<int32_t> hb_cache;
};

struct Action {
  int rank, step;  // a local step, or the send of a pair
  int peer_step;   // the receive of a pair, -1 otherwise
};

const char* kind_name(StepKind k) {
  switch (k) {
    case StepKind::kSend: return "send";
    case StepKind::kRecv: return "recv";
    case StepKind::kRecvReduce: return "recv-reduce";
    case StepKind::kCopy: return "copy";
    case StepKind::kRead: return "read";
    case StepKind::kWrite: return "write";
    case StepKind::kReduceFrom: return "reduce-from";
    case StepKind::kSignal: return "signal";
    case StepKind::kWait: return "wait";
  }
  return "?";
}

constexpr size_t kMaxBitsetSteps = 12000;  // ancestor sets above this: search instead

class Verifier {
 public:
  Verifier(const std::vector<VerifyCall>& calls, uint64_t seed) : calls_(calls), rng_(seed) {
    n_ = calls.empty() ? 0 : static_cast<int>(calls[0].args.size());
    ranks_.resize(static_cast<size_t>(n_));
  }

  VerifyResult run() {
    for (const VerifyCall& c : calls_)
      if (static_cast<int>(c.args.size()) != n_) return fail("every call needs arguments for every rank"), result_;
    if (n_ == 0) return result_;
    elem_ = std::max<size_t>(1, calls_[0].args[0].elem);
    for (const VerifyCall& c : calls_)
      if (std::max<size_t>(1, c.args[0].elem) != elem_) return fail("a sequence must use one element size"), result_;
    build();
    if (ok()) bind_all();
    if (ok()) check_static();
    if (ok()) simulate();
    if (ok()) check_progress();
    return result_;
  }

 private:
  bool ok() const { return result_.ok; }
  void fail(const std::string& msg) {
    if (!result_.ok) return;
    result_.ok = false;
    result_.error = msg;
  }
  int global(int r, int i) const { return ranks_[r].base + i; }
  int rank_of(int g) const { return g_rank_[g]; }
  int local_of(int g) const { return g - ranks_[g_rank_[g]].base; }
  static constexpr int kReturn = -1, kEntry = -2;
  bool is_boundary(int r, int i) const { return ranks_[r].step_of[i] < 0; }
  bool is_entry(int r, int i) const { return ranks_[r].step_of[i] == kEntry; }
  const Step& step(int r, int i) const {
    const RankState& rs = ranks_[r];
    return rs.calls[rs.call_of[i]].sched.steps[rs.step_of[i]];
  }
  CallState& call(int r, int i) { return ranks_[r].calls[ranks_[r].call_of[i]]; }
  std::string where(int r, int i) const {
    std::ostringstream o;
    const RankState& rs = ranks_[r];
    o << "rank " << r;
    if (calls_.size() > 1) o << " call " << rs.call_of[i];
    if (is_boundary(r, i)) {
      o << (is_entry(r, i) ? " entry" : " return");
      return o.str();
    }
    const Step& st = step(r, i);
    o << " step " << rs.step_of[i] << " (" << kind_name(st.kind);
    switch (st.kind) {
      case StepKind::kSend:
      case StepKind::kWrite: o << " to " << st.peer; break;
      case StepKind::kRecv:
      case StepKind::kRecvReduce:
      case StepKind::kRead: o << " from " << st.peer; break;
      case StepKind::kWait: o << " for rank " << st.peer << "'s signal " << st.count; break;
      default: break;
    }
    o << ")";
    return o.str();
  }

  // Builds every rank's schedule of every call and lays them end to end.
  void build() {
    for (int r = 0; r < n_ && ok(); ++r) {
      RankState& rs = ranks_[r];
      rs.base = total_;
      for (size_t c = 0; c < calls_.size(); ++c) {
        CallState cs;
        cs.args = calls_[c].args[r];
        cs.args.rank = r;
        cs.args.nranks = n_;
        cs.sched = calls_[c].build(cs.args);
        cs.entry = static_cast<int>(rs.step_of.size());
        rs.call_of.push_back(static_cast<int>(c));
        rs.step_of.push_back(kEntry);
        cs.first = static_cast<int>(rs.step_of.size());
        for (size_t i = 0; i < cs.sched.steps.size(); ++i) {
          rs.call_of.push_back(static_cast<int>(c));
          rs.step_of.push_back(static_cast<int>(i));
          const Step& st = cs.sched.steps[i];
          if (st.kind == StepKind::kSignal) ++cs.signals_total;
          if (algo::is_one_sided(st.kind)) one_sided_ = true;
        }
        cs.boundary = static_cast<int>(rs.step_of.size());
        rs.call_of.push_back(static_cast<int>(c));
        rs.step_of.push_back(kReturn);
        rs.calls.push_back(std::move(cs));
      }
      const size_t ns = rs.step_of.size();
      total_ += static_cast<int>(ns);
      for (size_t i = 0; i < ns; ++i) g_rank_.push_back(r);
    }
    for (int r = 0; r < n_ && ok(); ++r) link_steps(r);
  }

  // Dependencies (a call's entry waits for the previous call's return, its
  // first steps for its entry; a return waits for every step of its call)
  // and link queues.
  void link_steps(int r) {
    RankState& rs = ranks_[r];
    const size_t ns = rs.step_of.size();
    rs.pred_begin.assign(1, 0);
    rs.qprev.assign(ns, -1);
    for (size_t i = 0; i < ns && ok(); ++i) {
      CallState& cs = rs.calls[rs.call_of[i]];
      if (is_entry(r, static_cast<int>(i))) {
        if (rs.call_of[i] > 0) rs.pred.push_back(static_cast<uint32_t>(rs.calls[rs.call_of[i] - 1].boundary));
        rs.pred_begin.push_back(static_cast<uint32_t>(rs.pred.size()));
        continue;
      }
      if (is_boundary(r, static_cast<int>(i))) {
        for (int k = cs.entry; k < cs.boundary; ++k) rs.pred.push_back(static_cast<uint32_t>(k));
        rs.pred_begin.push_back(static_cast<uint32_t>(rs.pred.size()));
        continue;
      }
      const Step& st = step(r, static_cast<int>(i));
      const int own = rs.step_of[i];
      if (st.dep_begin + st.dep_count > cs.sched.deps.size()) return fail(where(r, static_cast<int>(i)) + ": deps out of range");
      for (uint32_t k = 0; k < st.dep_count; ++k) {
        uint32_t d = cs.sched.deps[st.dep_begin + k];
        if (static_cast<int>(d) >= own)
          return fail(where(r, static_cast<int>(i)) + ": depends on a later step " + std::to_string(d));
        rs.pred.push_back(static_cast<uint32_t>(cs.first) + d);
      }
      if (st.dep_count == 0) rs.pred.push_back(static_cast<uint32_t>(cs.entry));
      rs.pred_begin.push_back(static_cast<uint32_t>(rs.pred.size()));
      const bool message = st.kind == StepKind::kSend || st.kind == StepKind::kRecv || st.kind == StepKind::kRecvReduce;
      const bool with_peer = message || st.kind == StepKind::kRead || st.kind == StepKind::kWrite || st.kind == StepKind::kWait;
      if (with_peer && (st.peer < 0 || st.peer >= n_ || st.peer == r))
        return fail(where(r, static_cast<int>(i)) + ": bad peer " + std::to_string(st.peer));
      if (message) {
        auto [it, fresh] = rs.queue_of.emplace(lane(st.peer, st.channel), static_cast<int>(rs.queues.size()));
        if (fresh) rs.queues.emplace_back();
        Queue& q = rs.queues[it->second];
        auto& list = st.kind == StepKind::kSend ? q.sends : q.recvs;
        if (!list.empty()) rs.qprev[i] = list.back();
        list.push_back(static_cast<int>(i));
      }
    }
  }

  // Sizes and aliasing of the caller's buffers, NCCL's in-place convention.
  void bind_call(int r, CallState& cs) {
    const CollArgs& a = cs.args;
    const size_t c = a.count, n = static_cast<size_t>(n_);
    const bool root = r == a.root;
    size_t send = 0, recv = 0, send_base = 0, recv_base = 0;
    bool alias = a.in_place;
    switch (a.coll) {
      case Coll::kAllReduce: send = recv = c; break;
      case Coll::kBroadcast: send = root || alias ? c : 0; recv = c; break;
      case Coll::kReduce: send = c; recv = root || alias ? c : 0; break;
      case Coll::kAllGather: send = c; recv = n * c; send_base = r * c; break;
      case Coll::kReduceScatter: send = n * c; recv = c; recv_base = r * c; break;
      case Coll::kAlltoAll: send = recv = n * c; break;
      case Coll::kAlltoAllv:
        if (a.placements != nullptr) {  // a placed exchange: every rank's pieces are listed
          for (size_t i = 0; i < a.placement_count; ++i) {
            const algo::Placement& p = a.placements[i];
            if (p.src_rank == r) send = std::max(send, p.src_offset + p.count);
            if (p.dst_rank == r) recv = std::max(recv, p.dst_offset + p.count);
          }
          break;
        }
        for (int j = 0; j < n_; ++j) {
          send = std::max(send, a.sdispls[j] + a.sendcounts[j]);
          recv = std::max(recv, a.rdispls[j] + a.recvcounts[j]);
        }
        if (alias) send = recv = std::max(send, recv);
        break;
      case Coll::kGather:
        send = c;
        recv = root ? n * c : 0;
        send_base = r * c;
        alias = alias && root;
        break;
      case Coll::kScatter:
        send = root ? n * c : 0;
        recv = c;
        recv_base = r * c;
        alias = alias && root;
        break;
      default: break;  // Barrier: no data
    }
    if (!alias) send_base = recv_base = 0;
    size_t whole = alias ? std::max(send_base + send, recv_base + recv) : recv;
    cs.recv.assign(whole, Cell{});
    cs.send.assign(alias ? 0 : send, Cell{});
    cs.bind[algo::kRecvBuf] = {kArrRecv, recv_base, recv};
    cs.bind[algo::kSendBuf] = {alias ? kArrRecv : kArrSend, send_base, send};
    uint32_t me = sets_.singleton(r);
    Binding& sb = cs.bind[algo::kSendBuf];
    for (size_t e = 0; e < sb.size; ++e) array(r, cs, sb.arr)[sb.base + e].v = Value{e, me};
    // The caller hands its buffers over at the call's entry: no peer may
    // touch them before it knows this rank is in the call.
    for (Cell& cl : cs.recv) cl.writer = global(r, cs.entry);
    for (Cell& cl : cs.send) cl.writer = global(r, cs.entry);
  }

  void bind_all() {
    std::vector<int> staging_calls(static_cast<size_t>(n_), 0);
    for (int r = 0; r < n_; ++r) {
      RankState& rs = ranks_[r];
      for (const CallState& cs : rs.calls) rs.staging_half = std::max(rs.staging_half, cs.args.staging_bytes / elem_);
      rs.staging.resize(2 * rs.staging_half);
    }
    for (size_t c = 0; c < calls_.size() && ok(); ++c) {
      // Calls that use staging alternate its halves; every rank must agree
      // whether a call does, or they would pick different halves later.
      int uses = -1;
      size_t extent = 0;
      for (int r = 0; r < n_ && ok(); ++r) {
        CallState& cs = ranks_[r].calls[c];
        const int mine = cs.sched.uses_staging() ? 1 : 0;
        if (uses >= 0 && mine != uses)
          return fail("rank " + std::to_string(r) + (mine ? " uses" : " does not use") +
                      " a staging area in call " + std::to_string(c) + " and rank 0 " + (uses ? "does" : "does not"));
        // Where a transport places the staging halves follows the stated
        // extent: ranks that state different ones look in different places.
        if (r > 0 && cs.sched.staging_extent != extent)
          return fail("rank " + std::to_string(r) + " states a staging extent of " +
                      std::to_string(cs.sched.staging_extent) + " bytes in call " + std::to_string(c) +
                      " and rank 0 one of " + std::to_string(extent));
        uses = mine;
        extent = cs.sched.staging_extent;
      }
      for (int r = 0; r < n_; ++r) {
        RankState& rs = ranks_[r];
        CallState& cs = rs.calls[c];
        bind_call(r, cs);
        size_t scratch = (cs.sched.scratch_bytes + elem_ - 1) / elem_;
        if (scratch > rs.scratch.size()) rs.scratch.resize(scratch);
        cs.bind[algo::kScratch] = {kArrScratch, 0, scratch};
        // A stated extent bounds every staging slice (the staging half may
        // then lie elsewhere, and be no larger).
        const size_t usable = extent > 0 ? std::min(extent, cs.args.staging_bytes) : cs.args.staging_bytes;
        const size_t half = usable / elem_;
        const size_t which = uses ? static_cast<size_t>(staging_calls[r]++ % 2) : 0;
        cs.bind[algo::kStaging] = {kArrStaging, which * rs.staging_half, half};
      }
    }
    for (int r = 0; r < n_ && ok(); ++r)
      for (size_t i = 0; i < ranks_[r].step_of.size() && ok(); ++i)
        if (!is_boundary(r, static_cast<int>(i))) slices_valid(r, static_cast<int>(i));
  }

  std::vector<Cell>& array(int r, CallState& cs, int arr) {
    switch (arr) {
      case kArrRecv: return cs.recv;
      case kArrSend: return cs.send;
      case kArrScratch: return ranks_[r].scratch;
      default: return ranks_[r].staging;
    }
  }

  // A slice of rank `owner`'s memory in the call of rank `r`'s step `i`.
  bool slice_valid(int r, int i, int owner, const Slice& s, const char* what) {
    if (s.bytes == 0) return true;
    auto w = [&] { return where(r, i) + " " + what; };
    if (s.buf >= algo::kFirstExtraBuf) return fail(w() + ": extra buffers are not modelled"), false;
    if (owner != r) {
      if (s.buf == algo::kScratch) return fail(w() + ": names rank " + std::to_string(owner) + "'s scratch, which is private"), false;
      // A call that goes through the staging areas does not publish the
      // ranks' own buffers (the executor skips it): it may not reach them.
      if (s.buf != algo::kStaging && call(r, i).sched.uses_staging())
        return fail(w() + ": reaches rank " + std::to_string(owner) +
                    "'s buffers in a call that uses staging, where they are not published"), false;
      const std::vector<int>& host = call(r, i).args.host_of;
      if (!host.empty() && host[owner] != host[r])
        return fail(w() + ": one-sided access to rank " + std::to_string(owner) + " on another host"), false;
    }
    if (s.offset % elem_ || s.bytes % elem_) return fail(w() + ": slice not element-aligned"), false;
    const Binding& b = ranks_[owner].calls[ranks_[r].call_of[i]].bind[s.buf];
    if ((s.offset + s.bytes) / elem_ > b.size) {
      std::ostringstream o;
      o << w() << ": slice [" << s.offset << ", " << s.offset + s.bytes << ") bytes overruns buffer " << s.buf;
      if (owner != r) o << " of rank " << owner;
      o << " of " << b.size * elem_ << " bytes";
      return fail(o.str()), false;
    }
    return true;
  }

  bool slices_valid(int r, int i) {
    const Step& st = step(r, i);
    const CallState& cs = call(r, i);
    switch (st.kind) {
      case StepKind::kSend: return slice_valid(r, i, r, st.src, "src");
      case StepKind::kRecv: return slice_valid(r, i, r, st.dst, "dst");
      case StepKind::kRecvReduce:
        if (st.with.bytes != st.dst.bytes) return fail(where(r, i) + ": with/dst sizes differ"), false;
        return slice_valid(r, i, r, st.dst, "dst") && slice_valid(r, i, r, st.with, "with");
      case StepKind::kCopy:
        if (st.src.bytes != st.dst.bytes) return fail(where(r, i) + ": copy sizes differ"), false;
        return slice_valid(r, i, r, st.src, "src") && slice_valid(r, i, r, st.dst, "dst");
      case StepKind::kRead:
        if (st.src.bytes != st.dst.bytes) return fail(where(r, i) + ": read sizes differ"), false;
        return slice_valid(r, i, st.peer, st.src, "src") && slice_valid(r, i, r, st.dst, "dst");
      case StepKind::kWrite:
        if (st.src.bytes != st.dst.bytes) return fail(where(r, i) + ": write sizes differ"), false;
        return slice_valid(r, i, r, st.src, "src") && slice_valid(r, i, st.peer, st.dst, "dst");
      case StepKind::kReduceFrom: {
        if (st.src_count == 0) return fail(where(r, i) + ": reduces from no source"), false;
        if (st.src_begin + st.src_count > cs.sched.sources.size()) return fail(where(r, i) + ": sources out of range"), false;
        for (uint32_t k = 0; k < st.src_count; ++k) {
          const algo::Source& src = cs.sched.sources[st.src_begin + k];
          const int owner = src.peer < 0 ? r : src.peer;
          if (owner >= n_) return fail(where(r, i) + ": bad source rank " + std::to_string(owner)), false;
          if (src.slice.bytes != st.dst.bytes) return fail(where(r, i) + ": source and dst sizes differ"), false;
          if (!slice_valid(r, i, owner, src.slice, "source")) return false;
        }
        return slice_valid(r, i, r, st.dst, "dst");
      }
      case StepKind::kSignal: return true;
      case StepKind::kWait:
        if (st.count == 0) return fail(where(r, i) + ": waits for signal 0"), false;
        return true;
    }
    return true;
  }

  // A wait for a peer's k-th signal of a call needs k signals in the
  // peer's schedule of that call: the executor compares flags, and a flag
  // that a later call raised would satisfy it too.
  void check_static() {
    for (int r = 0; r < n_ && ok(); ++r)
      for (size_t i = 0; i < ranks_[r].step_of.size() && ok(); ++i) {
        if (is_boundary(r, static_cast<int>(i))) continue;
        const Step& st = step(r, static_cast<int>(i));
        if (st.kind != StepKind::kWait) continue;
        const uint32_t has = ranks_[st.peer].calls[ranks_[r].call_of[i]].signals_total;
        if (st.count > has)
          fail(where(r, static_cast<int>(i)) + " waits for a signal rank " + std::to_string(st.peer) +
               " never makes: it signals " + std::to_string(has) +
               " time(s) in this call, so only a later call's flag would satisfy the wait (a flag reused too early)");
      }
  }

  // --- happens-before -----------------------------------------------------

  // Within one rank, two-sided schedules only: a path of deps or queue
  // edges from y back to x, which only ever goes to lower indices.
  bool hb_local(int r, int x, int y) {
    if (x == y) return true;
    if (x > y) return false;
    RankState& rs = ranks_[r];
    if (rs.hb_for != y) {
      rs.hb_for = y;
      rs.hb_cache.clear();
    }
    if (std::find(rs.hb_cache.begin(), rs.hb_cache.end(), x) != rs.hb_cache.end()) return true;
    uint32_t stamp = ++rs.stamp_now;
    stack_.clear();
    stack_.push_back(y);
    rs.stamp[y] = stamp;
    bool found = false;
    while (!stack_.empty() && !found) {
      int v = stack_.back();
      stack_.pop_back();
      auto visit = [&](int u) {
        if (u < x || rs.stamp[u] == stamp) return;
        if (u == x) found = true;
        rs.stamp[u] = stamp;
        stack_.push_back(u);
      };
      visit(rs.qprev[v]);
      for (uint32_t k = rs.pred_begin[v]; k < rs.pred_begin[v + 1] && !found; ++k) visit(static_cast<int>(rs.pred[k]));
    }
    if (found) rs.hb_cache.push_back(x);
    return found;
  }

  // Every predecessor of global step g: its rank's deps and queue order,
  // and the step of another rank it synchronised with (the send a receive
  // matched, the signal a wait saw).
  template <typename F>
  void for_each_pred(int g, F f) {
    const int r = rank_of(g), i = local_of(g);
    const RankState& rs = ranks_[r];
    if (rs.qprev[i] >= 0) f(rs.base + rs.qprev[i]);
    for (uint32_t k = rs.pred_begin[i]; k < rs.pred_begin[i + 1]; ++k) f(rs.base + static_cast<int>(rs.pred[k]));
    if (sync_from_[g] >= 0) f(sync_from_[g]);
  }

  // Ancestor sets for one-sided runs, computed as each step starts (all
  // its predecessors have run by then).
  void compute_ancestors(int g) {
    if (!use_bitsets_) return;
    std::vector<uint64_t>& a = anc_[g];
    a.assign(words_, 0);
    for_each_pred(g, [&](int p) {
      const std::vector<uint64_t>& pa = anc_[p];
      for (size_t w = 0; w < words_ && w < pa.size(); ++w) a[w] |= pa[w];
      a[static_cast<size_t>(p) / 64] |= 1ull << (p % 64);
    });
  }

  bool hb(int gx, int gy) {
    if (gx == gy) return true;
    const int rx = rank_of(gx), ry = rank_of(gy);
    if (!one_sided_) return rx == ry && hb_local(rx, local_of(gx), local_of(gy));
    if (use_bitsets_) return (anc_[gy][static_cast<size_t>(gx) / 64] >> (gx % 64)) & 1;
    // Too many steps for ancestor sets: search backwards from y. A step of
    // x's rank in an earlier call than x's cannot lead to x.
    const int cx = ranks_[rx].call_of[local_of(gx)];
    const uint32_t stamp = ++g_stamp_now_;
    stack_.clear();
    stack_.push_back(gy);
    g_stamp_[gy] = stamp;
    bool found = false;
    while (!stack_.empty() && !found) {
      const int v = stack_.back();
      stack_.pop_back();
      for_each_pred(v, [&](int u) {
        if (found || g_stamp_[u] == stamp) return;
        g_stamp_[u] = stamp;
        if (u == gx) found = true;
        else if (rank_of(u) != rx || ranks_[rx].call_of[local_of(u)] >= cx) stack_.push_back(u);
      });
    }
    return found;
  }

  // --- memory ---------------------------------------------------------------

  Cell& cell(int owner, int call_index, const Slice& s, size_t e) {
    CallState& cs = ranks_[owner].calls[call_index];
    const Binding& b = cs.bind[s.buf];
    return array(owner, cs, b.arr)[b.base + s.offset / elem_ + e];
  }

  void add_reader(Cell& c, int g) {
    if (c.readers < 0 || reader_pool_[c.readers].first != g) {
      reader_pool_.push_back({g, c.readers});
      c.readers = static_cast<int32_t>(reader_pool_.size() - 1);
    }
  }

  // Reads `owner`'s slice on behalf of rank r's step i: every value must be
  // defined and its writer ordered before the step.
  void read(int r, int i, int owner, const Slice& s, const char* what, std::vector<Value>* out) {
    out->clear();
    const int g = global(r, i), c = ranks_[r].call_of[i];
    const size_t k = s.bytes / elem_;
    const std::string whose = owner == r ? "" : " of rank " + std::to_string(owner);
    for (size_t e = 0; e < k && ok(); ++e) {
      Cell& cl = cell(owner, c, s, e);
      if (cl.writer >= 0 && !hb(cl.writer, g))
        return fail(where(r, i) + " reads " + what + whose + " element " + std::to_string(e) +
                    " written by unordered " + where(rank_of(cl.writer), local_of(cl.writer)) +
                    " (read-before-write race)");
      if (cl.v.set == 0)
        return fail(where(r, i) + " reads undefined " + what + whose + " element " + std::to_string(e) +
                    " of buffer " + std::to_string(s.buf));
      add_reader(cl, g);
      out->push_back(cl.v);
    }
  }

  // Writes values into `owner`'s slice on behalf of rank r's step i: the
  // previous writer and every reader since must be ordered before it.
  void write(int r, int i, int owner, const Slice& s, const std::vector<Value>& vals) {
    const int c = ranks_[r].call_of[i];
    const Binding& b = ranks_[owner].calls[c].bind[s.buf];
    if (s.bytes > 0 && b.arr == kArrSend)
      return fail(where(r, i) + " writes the caller's send buffer" + (owner == r ? "" : " of rank " + std::to_string(owner)));
    for (size_t e = 0; e < vals.size() && ok(); ++e) write_cell(r, i, cell(owner, c, s, e), s.buf, e, vals[e]);
  }

  void write_cell(int r, int i, Cell& cl, int buf, size_t e, const Value& v) {
    const int g = global(r, i);
    if (cl.writer >= 0 && !hb(cl.writer, g))
      return fail(where(r, i) + " overwrites element " + std::to_string(e) + " of buffer " + std::to_string(buf) +
                  " also written by unordered " + where(rank_of(cl.writer), local_of(cl.writer)) +
                  " (write-write race)");
    for (int32_t p = cl.readers; p >= 0; p = reader_pool_[p].second) {
      const int reader = reader_pool_[p].first;
      if (!hb(reader, g))
        return fail(where(r, i) + " overwrites element " + std::to_string(e) + " of buffer " + std::to_string(buf) +
                    " that unordered " + where(rank_of(reader), local_of(reader)) + " reads (write-after-read race)");
    }
    cl.writer = g;
    cl.readers = -1;
    cl.v = v;
  }

  // --- running ----------------------------------------------------------------

  int lane(int peer, int channel) const { return peer + channel * n_; }

  void enable(int r, int i) {
    RankState& rs = ranks_[r];
    rs.enabled[i] = 1;
    if (is_boundary(r, i)) return ready_.push_back({r, i, -1});
    const Step& st = step(r, i);
    switch (st.kind) {
      case StepKind::kSend: try_pair(r, st.peer, st.channel); break;
      case StepKind::kRecv:
      case StepKind::kRecvReduce: try_pair(st.peer, r, st.channel); break;
      case StepKind::kWait: {
        const std::vector<int>& seen = ranks_[st.peer].calls[rs.call_of[i]].signals_done;
        if (seen.size() >= st.count) ready_.push_back({r, i, -1});
        else waiting_[key(st.peer, rs.call_of[i])].push_back({r, i});
        break;
      }
      default: ready_.push_back({r, i, -1}); break;
    }
  }
  static uint64_t key(int rank, int call) { return static_cast<uint64_t>(rank) << 32 | static_cast<uint32_t>(call); }

  void try_pair(int s, int d, int channel) {
    RankState& snd = ranks_[s];
    RankState& rcv = ranks_[d];
    auto qs = snd.queue_of.find(lane(d, channel));
    auto qr = rcv.queue_of.find(lane(s, channel));
    if (qs == snd.queue_of.end() || qr == rcv.queue_of.end()) return;
    Queue& a = snd.queues[qs->second];
    Queue& b = rcv.queues[qr->second];
    if (a.send_head >= a.sends.size() || b.recv_head >= b.recvs.size()) return;
    int si = a.sends[a.send_head], ri = b.recvs[b.recv_head];
    if (!snd.enabled[si] || !rcv.enabled[ri] || snd.paired[si]) return;
    snd.paired[si] = 1;
    ready_.push_back({s, si, ri});
  }

  bool barrier_call(int r, int i) { return call(r, i).args.coll == Coll::kBarrier; }

  uint32_t knowledge_of(int r, int i) {
    RankState& rs = ranks_[r];
    bool unused = false;
    uint32_t k = sets_.singleton(r);
    auto add = [&](int p) {
      if (p >= 0 && rs.know[p] != 0) k = sets_.unite(k, rs.know[p], false, &unused);
    };
    add(rs.qprev[i]);
    for (uint32_t d = rs.pred_begin[i]; d < rs.pred_begin[i + 1]; ++d) add(static_cast<int>(rs.pred[d]));
    return k;
  }
  void learn(int r, int i, int from_g) {
    if (!barrier_call(r, i)) return;
    RankState& rs = ranks_[r];
    rs.know[i] = knowledge_of(r, i);
    if (from_g >= 0) {
      bool unused = false;
      uint32_t theirs = ranks_[rank_of(from_g)].know[local_of(from_g)];
      if (theirs != 0) rs.know[i] = sets_.unite(rs.know[i], theirs, false, &unused);
    }
  }

  void complete(int r, int i) {
    RankState& rs = ranks_[r];
    rs.done[i] = 1;
    ++rs.completed;
    if (!is_boundary(r, i)) ++result_.steps;
    for (uint32_t k = rs.dependents_begin[i]; k < rs.dependents_begin[i + 1]; ++k) {
      int d = static_cast<int>(rs.dependents[k]);
      if (--rs.pending[d] == 0) enable(r, d);
    }
  }

  // The call returns: its outputs are checked, then the caller touches its
  // buffers (reads the output, writes the next input), which no peer may
  // still be reading or writing.
  void run_return(int r, int i) {
    CallState& cs = call(r, i);
    if (cs.args.coll == Coll::kBarrier) {
      RankState& rs = ranks_[r];
      uint32_t k = knowledge_of(r, i);
      if (!sets_.is_range(k, 0, n_))
        return fail("barrier: rank " + std::to_string(r) + " can leave knowing only of arrivals " + sets_.str(k));
      rs.know[i] = 0;  // knowledge is per call
    }
    check_outputs(r, cs);
    compute_ancestors(global(r, i));
    for (int buf : {algo::kRecvBuf, algo::kSendBuf}) {
      const Binding& b = cs.bind[buf];
      std::vector<Cell>& arr = array(r, cs, b.arr);
      for (size_t e = 0; e < b.size && ok(); ++e) {
        Cell& cl = arr[b.base + e];
        const int g = global(r, i);
        if (cl.writer >= 0 && !hb(cl.writer, g))
          return fail(where(r, i) + ": element " + std::to_string(e) + " of buffer " + std::to_string(buf) +
                      " is still written by " + where(rank_of(cl.writer), local_of(cl.writer)) +
                      " after the call returned");
        write_cell(r, i, cl, buf, e, cl.v);
      }
    }
    complete(r, i);
  }

  void run_local(int r, int i) {
    if (is_entry(r, i)) {
      compute_ancestors(global(r, i));
      return complete(r, i);
    }
    if (is_boundary(r, i)) return run_return(r, i);
    const Step& st = step(r, i);
    const int g = global(r, i);
    if (st.kind == StepKind::kWait) {
      const std::vector<int>& seen = ranks_[st.peer].calls[ranks_[r].call_of[i]].signals_done;
      sync_from_[g] = global(st.peer, seen[st.count - 1]);
    }
    compute_ancestors(g);
    switch (st.kind) {
      case StepKind::kCopy:
        read(r, i, r, st.src, "src", &buf_);
        if (ok()) write(r, i, r, st.dst, buf_);
        break;
      case StepKind::kRead:
        read(r, i, st.peer, st.src, "src", &buf_);
        if (ok()) write(r, i, r, st.dst, buf_);
        break;
      case StepKind::kWrite:
        read(r, i, r, st.src, "src", &buf_);
        if (ok()) write(r, i, st.peer, st.dst, buf_);
        break;
      case StepKind::kReduceFrom: run_reduce_from(r, i); break;
      case StepKind::kSignal: run_signal(r, i); break;
      case StepKind::kWait: learn(r, i, sync_from_[g]); return complete(r, i);
      default: break;
    }
    learn(r, i, -1);
    if (ok()) complete(r, i);
  }

  void run_reduce_from(int r, int i) {
    const Step& st = step(r, i);
    const CallState& cs = call(r, i);
    for (uint32_t k = 0; k < st.src_count && ok(); ++k) {
      const algo::Source& src = cs.sched.sources[st.src_begin + k];
      read(r, i, src.peer < 0 ? r : src.peer, src.slice, "source", k == 0 ? &buf_ : &with_);
      if (k == 0 || !ok()) continue;
      for (size_t e = 0; e < buf_.size() && ok(); ++e) {
        if (buf_[e].idx != with_[e].idx) {
          std::ostringstream o;
          o << where(r, i) << " reduces element " << buf_[e].idx << " with element " << with_[e].idx;
          return fail(o.str());
        }
        bool overlap = false;
        uint32_t u = sets_.unite(buf_[e].set, with_[e].set, true, &overlap);
        if (overlap)
          return fail(where(r, i) + " counts a contribution twice: " + sets_.str(buf_[e].set) + " + " +
                      sets_.str(with_[e].set));
        buf_[e].set = u;
      }
    }
    if (ok()) write(r, i, r, st.dst, buf_);
  }

  void run_signal(int r, int i) {
    CallState& cs = call(r, i);
    // Peers count a rank's signals: they must happen in one order.
    if (!cs.signals_done.empty() && !hb(global(r, cs.signals_done.back()), global(r, i)))
      return fail(where(r, i) + " is not ordered after this rank's previous signal (" +
                  where(r, cs.signals_done.back()) + "): peers could count them in either order");
    cs.signals_done.push_back(i);
    auto it = waiting_.find(key(r, ranks_[r].call_of[i]));
    if (it == waiting_.end()) return;
    std::vector<std::pair<int, int>>& list = it->second;
    for (size_t k = 0; k < list.size();) {
      const auto [wr, wi] = list[k];
      if (step(wr, wi).count <= cs.signals_done.size()) {
        ready_.push_back({wr, wi, -1});
        list[k] = list.back();
        list.pop_back();
      } else {
        ++k;
      }
    }
  }

  void run_pair(int s, int si, int d, int ri) {
    RankState& snd = ranks_[s];
    RankState& rcv = ranks_[d];
    const Step& ss = step(s, si);
    const Step& rr = step(d, ri);
    if (ss.src.bytes != rr.dst.bytes) {
      std::ostringstream o;
      o << where(s, si) << " sends " << ss.src.bytes << " bytes but the matching " << where(d, ri) << " expects "
        << rr.dst.bytes;
      return fail(o.str());
    }
    compute_ancestors(global(s, si));
    sync_from_[global(d, ri)] = global(s, si);
    compute_ancestors(global(d, ri));
    read(s, si, s, ss.src, "src", &buf_);
    if (rr.kind == StepKind::kRecvReduce && ok()) {
      read(d, ri, d, rr.with, "with", &with_);
      for (size_t e = 0; e < buf_.size() && ok(); ++e) {
        if (buf_[e].idx != with_[e].idx) {
          std::ostringstream o;
          o << where(d, ri) << " reduces element " << with_[e].idx << " with element " << buf_[e].idx;
          return fail(o.str());
        }
        bool overlap = false;
        uint32_t u = sets_.unite(with_[e].set, buf_[e].set, true, &overlap);
        if (overlap)
          return fail(where(d, ri) + " counts a contribution twice: " + sets_.str(with_[e].set) + " + " +
                      sets_.str(buf_[e].set));
        buf_[e].set = u;
      }
    }
    if (ok()) write(d, ri, d, rr.dst, buf_);
    learn(s, si, -1);
    learn(d, ri, global(s, si));
    const int channel = ss.channel;
    Queue& a = snd.queues[snd.queue_of[lane(d, channel)]];
    Queue& b = rcv.queues[rcv.queue_of[lane(s, channel)]];
    ++a.send_head;
    ++b.recv_head;
    ++result_.messages;
    complete(s, si);
    complete(d, ri);
    try_pair(s, d, channel);
  }

  void simulate() {
    sync_from_.assign(static_cast<size_t>(total_), -1);
    use_bitsets_ = one_sided_ && static_cast<size_t>(total_) <= kMaxBitsetSteps;
    if (use_bitsets_) {
      words_ = (static_cast<size_t>(total_) + 63) / 64;
      anc_.resize(static_cast<size_t>(total_));
    } else if (one_sided_) {
      g_stamp_.assign(static_cast<size_t>(total_), 0);
    }
    for (int r = 0; r < n_; ++r) {
      RankState& rs = ranks_[r];
      const size_t ns = rs.step_of.size();
      rs.pending.assign(ns, 0);
      rs.know.assign(ns, 0);
      rs.enabled.assign(ns, 0);
      rs.done.assign(ns, 0);
      rs.paired.assign(ns, 0);
      rs.stamp.assign(ns, 0);
      rs.dependents_begin.assign(ns + 1, 0);
      for (size_t i = 0; i < ns; ++i) {
        rs.pending[i] = rs.pred_begin[i + 1] - rs.pred_begin[i];
        for (uint32_t k = rs.pred_begin[i]; k < rs.pred_begin[i + 1]; ++k) ++rs.dependents_begin[rs.pred[k] + 1];
      }
      for (size_t i = 0; i < ns; ++i) rs.dependents_begin[i + 1] += rs.dependents_begin[i];
      rs.dependents.assign(rs.pred.size(), 0);
      std::vector<uint32_t> fill(rs.dependents_begin.begin(), rs.dependents_begin.end() - 1);
      for (size_t i = 0; i < ns; ++i)
        for (uint32_t k = rs.pred_begin[i]; k < rs.pred_begin[i + 1]; ++k)
          rs.dependents[fill[rs.pred[k]]++] = static_cast<uint32_t>(i);
    }
    for (int r = 0; r < n_; ++r)
      for (size_t i = 0; i < ranks_[r].step_of.size(); ++i)
        if (ranks_[r].pending[i] == 0) enable(r, static_cast<int>(i));
    while (!ready_.empty() && ok()) {
      size_t pick = std::uniform_int_distribution<size_t>(0, ready_.size() - 1)(rng_);
      Action act = ready_[pick];
      ready_[pick] = ready_.back();
      ready_.pop_back();
      if (act.peer_step < 0)
        run_local(act.rank, act.step);
      else
        run_pair(act.rank, act.step, step(act.rank, act.step).peer, act.peer_step);
    }
  }

  void check_progress() {
    for (int r = 0; r < n_; ++r) {
      RankState& rs = ranks_[r];
      if (rs.completed == rs.step_of.size()) continue;
      for (size_t i = 0; i < rs.step_of.size(); ++i) {
        if (rs.done[i]) continue;
        std::string why;
        if (!rs.enabled[i] || is_boundary(r, static_cast<int>(i))) {
          why = "waits for its deps";
        } else if (step(r, static_cast<int>(i)).kind == StepKind::kWait) {
          const Step& st = step(r, static_cast<int>(i));
          why = "rank " + std::to_string(st.peer) + " signalled only " +
                std::to_string(ranks_[st.peer].calls[rs.call_of[i]].signals_done.size()) + " time(s)";
        } else {
          const Step& st = step(r, static_cast<int>(i));
          bool sending = st.kind == StepKind::kSend;
          const RankState& other = ranks_[st.peer];
          auto q = other.queue_of.find(lane(r, st.channel));
          const Queue& own = rs.queues[rs.queue_of.at(lane(st.peer, st.channel))];
          size_t mine = 0;
          for (int j : (sending ? own.sends : own.recvs)) {
            if (j == static_cast<int>(i)) break;
            ++mine;
          }
          size_t theirs = q == other.queue_of.end() ? 0
                          : (sending ? other.queues[q->second].recvs.size() : other.queues[q->second].sends.size());
          why = mine >= theirs ? "has no matching " + std::string(sending ? "receive" : "send") + " on rank " +
                                     std::to_string(st.peer) + " (message " + std::to_string(mine) + ", peer has " +
                                     std::to_string(theirs) + ")"
                               : "waits for its match on rank " + std::to_string(st.peer);
        }
        return fail("deadlock: " + where(r, static_cast<int>(i)) + " never completes: " + why);
      }
    }
  }

  void expect(int r, CallState& cs, size_t e, Value want) {
    const Binding& b = cs.bind[algo::kRecvBuf];
    const Value& got = array(r, cs, b.arr)[b.base + e].v;
    bool all = want.set == kAllRanks;
    bool good = got.set != 0 && got.idx == want.idx &&
                (all ? sets_.is_range(got.set, 0, n_)
                     : sets_.is_range(got.set, static_cast<int>(want.set), static_cast<int>(want.set) + 1));
    if (good) return;
    std::ostringstream o;
    o << "rank " << r << " output element " << e << " holds element " << got.idx << " of " << sets_.str(got.set)
      << ", expected element " << want.idx << " of " << (all ? "every rank" : "rank " + std::to_string(want.set));
    fail(o.str());
  }
  static constexpr uint32_t kAllRanks = 0xffffffffu;

  void check_outputs(int r, CallState& cs) {
    const size_t n = static_cast<size_t>(n_);
    const CollArgs& a = cs.args;
    const size_t c = a.count;
    const uint32_t root = static_cast<uint32_t>(a.root);
    const bool is_root = r == a.root;
    auto each = [&](size_t total, auto fn) {
      for (size_t e = 0; e < total && ok(); ++e) expect(r, cs, e, fn(e));
    };
    switch (a.coll) {
      case Coll::kAllReduce: each(c, [&](size_t e) { return Value{e, kAllRanks}; }); break;
      case Coll::kBroadcast: each(c, [&](size_t e) { return Value{e, root}; }); break;
      case Coll::kReduce:
        if (is_root) each(c, [&](size_t e) { return Value{e, kAllRanks}; });
        break;
      case Coll::kAllGather: each(n * c, [&](size_t e) { return Value{e % c, static_cast<uint32_t>(e / c)}; }); break;
      case Coll::kReduceScatter: each(c, [&](size_t e) { return Value{r * c + e, kAllRanks}; }); break;
      case Coll::kAlltoAll:
        each(n * c, [&](size_t e) { return Value{r * c + e % c, static_cast<uint32_t>(e / c)}; });
        break;
      case Coll::kAlltoAllv:
        if (a.placements != nullptr) {
          for (size_t i = 0; i < a.placement_count && ok(); ++i) {
            const algo::Placement& p = a.placements[i];
            if (p.dst_rank != r) continue;
            for (size_t k = 0; k < p.count && ok(); ++k)
              expect(r, cs, p.dst_offset + k, Value{p.src_offset + k, static_cast<uint32_t>(p.src_rank)});
          }
          break;
        }
        for (int j = 0; j < n_ && ok(); ++j) {
          const CollArgs& b = ranks_[j].calls[static_cast<size_t>(&cs - ranks_[r].calls.data())].args;
          if (a.recvcounts[j] != b.sendcounts[r]) return fail("test error: AlltoAllv counts disagree");
          for (size_t k = 0; k < a.recvcounts[j] && ok(); ++k)
            expect(r, cs, a.rdispls[j] + k, Value{b.sdispls[r] + k, static_cast<uint32_t>(j)});
        }
        break;
      case Coll::kGather:
        if (is_root) each(n * c, [&](size_t e) { return Value{e % c, static_cast<uint32_t>(e / c)}; });
        break;
      case Coll::kScatter: each(c, [&](size_t e) { return Value{r * c + e, root}; }); break;
      case Coll::kBarrier: break;  // checked by knowledge
      default: fail("collective not modelled by the verifier"); break;
    }
  }

  const std::vector<VerifyCall>& calls_;
  int n_ = 0;
  int total_ = 0;
  size_t elem_ = 1;
  bool one_sided_ = false;
  bool use_bitsets_ = false;
  size_t words_ = 0;
  std::mt19937_64 rng_;
  std::vector<RankState> ranks_;
  std::vector<int> g_rank_;
  std::vector<int> sync_from_;
  std::vector<std::vector<uint64_t>> anc_;
  std::vector<uint32_t> g_stamp_;
  uint32_t g_stamp_now_ = 0;
  std::vector<std::pair<int32_t, int32_t>> reader_pool_;  // (global step, next)
  std::unordered_map<uint64_t, std::vector<std::pair<int, int>>> waiting_;  // (signaller, call) -> waits (rank, step)
  std::vector<Action> ready_;
  std::vector<int> stack_;
  std::vector<Value> buf_, with_;
  RankSets sets_;
  VerifyResult result_;
};

}  // namespace

std::vector<algo::CollArgs> on_every_rank(const algo::CollArgs& args) {
  std::vector<algo::CollArgs> all(static_cast<size_t>(std::max(args.nranks, 0)), args);
  for (int r = 0; r < args.nranks; ++r) all[r].rank = r;
  return all;
}

VerifyResult verify_sequence(const std::vector<VerifyCall>& calls, uint64_t seed) {
  Verifier v(calls, seed);
  return v.run();
}

VerifyResult verify(const std::vector<algo::CollArgs>& args, const ScheduleBuilder& build, uint64_t seed) {
  return verify_sequence({VerifyCall{args, build}}, seed);
}

VerifyResult verify(const algo::CollArgs& args, const ScheduleBuilder& build, uint64_t seed) {
  return verify(on_every_rank(args), build, seed);
}

}  // namespace conflux::sim
