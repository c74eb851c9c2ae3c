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
  bool contains(uint32_t s, int r) const {
    for (uint32_t i = 0; i < len_[s]; ++i)
      if (at(s, i).first <= r && r < at(s, i).second) return true;
    return false;
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

// One element of a rank's memory plus its shadow: who wrote it last and who
// has read it since (a list in the rank's reader pool).
struct Cell {
  Value v;
  int32_t writer = -1;
  int32_t readers = -1;
};

struct Binding {
  int arr = 0;  // 0: the receive (or in-place) array, 1: a separate send array, 2: scratch
  size_t base = 0, size = 0;  // elements
};

struct Queue {
  std::vector<int> sends, recvs;
  size_t send_head = 0, recv_head = 0;
};

struct RankState {
  CollArgs args;
  Schedule sched;
  std::vector<Cell> mem[3];
  Binding bind[3];  // by BufIndex
  std::vector<uint32_t> pending;
  std::vector<uint32_t> dependents_begin, dependents;
  std::vector<int32_t> qprev;     // previous step on the same link queue
  std::vector<uint32_t> know;     // Barrier: arrivals this step follows
  std::vector<uint8_t> enabled, done, paired;
  std::unordered_map<int, int> queue_of;  // lane (peer + channel x n) -> index into queues
  std::vector<Queue> queues;
  std::vector<std::pair<int32_t, int32_t>> reader_pool;  // (step, next)
  std::vector<uint32_t> stamp;
  uint32_t stamp_now = 0;
  size_t completed = 0;
  int hb_for = -1;                  // step whose verified ancestors are cached
  std::vector<int32_t> hb_cache;
};

struct Action {
  int rank, step;  // copy, or the send of a pair
  int peer_step;   // the receive of a pair, -1 for a copy
};

const char* kind_name(StepKind k) {
  switch (k) {
    case StepKind::kSend: return "send";
    case StepKind::kRecv: return "recv";
    case StepKind::kRecvReduce: return "recv-reduce";
    case StepKind::kCopy: return "copy";
  }
  return "?";
}

class Verifier {
 public:
  Verifier(const std::vector<CollArgs>& args, uint64_t seed) : n_(static_cast<int>(args.size())), rng_(seed) {
    ranks_.resize(n_);
    for (int r = 0; r < n_; ++r) ranks_[r].args = args[r];
  }

  VerifyResult run(const ScheduleBuilder& build) {
    coll_ = ranks_.empty() ? Coll::kBarrier : ranks_[0].args.coll;
    elem_ = ranks_.empty() ? 1 : std::max<size_t>(1, ranks_[0].args.elem);
    for (int r = 0; r < n_ && ok(); ++r) {
      RankState& rs = ranks_[r];
      rs.args.rank = r;
      rs.args.nranks = n_;
      rs.sched = build(rs.args);
      setup(r);
    }
    if (ok()) simulate();
    if (ok()) check_progress();
    if (ok()) check_outputs();
    return result_;
  }

 private:
  bool ok() const { return result_.ok; }
  void fail(const std::string& msg) {
    if (!result_.ok) return;
    result_.ok = false;
    result_.error = msg;
  }
  std::string where(int r, int i) const {
    const Step& st = ranks_[r].sched.steps[i];
    std::ostringstream o;
    o << "rank " << r << " step " << i << " (" << kind_name(st.kind);
    if (st.kind != StepKind::kCopy) o << (st.kind == StepKind::kSend ? " to " : " from ") << st.peer;
    o << ")";
    return o.str();
  }

  // Sizes and aliasing of the caller's buffers, NCCL's in-place convention.
  void bind_buffers(int r) {
    RankState& rs = ranks_[r];
    const CollArgs& a = rs.args;
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
    rs.mem[0].assign(whole, Cell{});
    rs.mem[1].assign(alias ? 0 : send, Cell{});
    rs.bind[algo::kRecvBuf] = {0, recv_base, recv};
    rs.bind[algo::kSendBuf] = {alias ? 0 : 1, send_base, send};
    size_t scratch = (rs.sched.scratch_bytes + elem_ - 1) / elem_;
    rs.mem[2].assign(scratch, Cell{});
    rs.bind[algo::kScratch] = {2, 0, scratch};
    uint32_t me = sets_.singleton(r);
    Binding& sb = rs.bind[algo::kSendBuf];
    for (size_t e = 0; e < sb.size; ++e) rs.mem[sb.arr][sb.base + e].v = Value{e, me};
  }

  void setup(int r) {
    RankState& rs = ranks_[r];
    bind_buffers(r);
    const auto& steps = rs.sched.steps;
    const size_t ns = steps.size();
    rs.pending.assign(ns, 0);
    rs.qprev.assign(ns, -1);
    rs.know.assign(ns, 0);
    rs.enabled.assign(ns, 0);
    rs.done.assign(ns, 0);
    rs.paired.assign(ns, 0);
    rs.stamp.assign(ns, 0);
    rs.dependents_begin.assign(ns + 1, 0);
    for (size_t i = 0; i < ns; ++i) {
      const Step& st = steps[i];
      if (st.dep_begin + st.dep_count > rs.sched.deps.size()) return fail(where(r, i) + ": deps out of range");
      for (uint32_t k = 0; k < st.dep_count; ++k) {
        uint32_t d = rs.sched.deps[st.dep_begin + k];
        if (d >= i) return fail(where(r, i) + ": depends on a later step " + std::to_string(d));
        ++rs.dependents_begin[d + 1];
      }
      rs.pending[i] = st.dep_count;
      if (st.kind != StepKind::kCopy) {
        if (st.peer < 0 || st.peer >= n_ || st.peer == r)
          return fail(where(r, i) + ": bad peer " + std::to_string(st.peer));
        auto [it, fresh] = rs.queue_of.emplace(lane(st.peer, st.channel), static_cast<int>(rs.queues.size()));
        if (fresh) rs.queues.emplace_back();
        Queue& q = rs.queues[it->second];
        auto& list = st.kind == StepKind::kSend ? q.sends : q.recvs;
        if (!list.empty()) rs.qprev[i] = list.back();
        list.push_back(static_cast<int>(i));
      }
      if (!slices_valid(r, static_cast<int>(i))) return;
    }
    for (size_t i = 0; i < ns; ++i) rs.dependents_begin[i + 1] += rs.dependents_begin[i];
    rs.dependents.assign(rs.sched.deps.size(), 0);
  }

  bool slice_valid(int r, int i, const Slice& s, const char* what) {
    RankState& rs = ranks_[r];
    if (s.bytes == 0) return true;
    // Messages are built only on failure: this runs for every slice.
    auto w = [&] { return where(r, i) + " " + what; };
    if (s.buf > algo::kScratch) return fail(w() + ": extra buffers are not modelled"), false;
    if (s.offset % elem_ || s.bytes % elem_) return fail(w() + ": slice not element-aligned"), false;
    const Binding& b = rs.bind[s.buf];
    if ((s.offset + s.bytes) / elem_ > b.size) {
      std::ostringstream o;
      o << w() << ": slice [" << s.offset << ", " << s.offset + s.bytes << ") bytes overruns buffer " << s.buf
        << " of " << b.size * elem_ << " bytes";
      return fail(o.str()), false;
    }
    return true;
  }
  bool slices_valid(int r, int i) {
    const Step& st = ranks_[r].sched.steps[i];
    switch (st.kind) {
      case StepKind::kSend: return slice_valid(r, i, st.src, "src");
      case StepKind::kRecv: return slice_valid(r, i, st.dst, "dst");
      case StepKind::kRecvReduce:
        if (st.with.bytes != st.dst.bytes) return fail(where(r, i) + ": with/dst sizes differ"), false;
        return slice_valid(r, i, st.dst, "dst") && slice_valid(r, i, st.with, "with");
      case StepKind::kCopy:
        if (st.src.bytes != st.dst.bytes) return fail(where(r, i) + ": copy sizes differ"), false;
        return slice_valid(r, i, st.src, "src") && slice_valid(r, i, st.dst, "dst");
    }
    return true;
  }

  // Happens-before between steps x < y of one rank: a path of deps or
  // queue-order edges from y back to x. Paths only go to lower indices, so
  // the search never leaves [x, y].
  bool hb(int r, int x, int y) {
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
      const Step& st = rs.sched.steps[v];
      auto visit = [&](int u) {
        if (u < x || rs.stamp[u] == stamp) return;
        if (u == x) found = true;
        rs.stamp[u] = stamp;
        stack_.push_back(u);
      };
      visit(rs.qprev[v]);
      for (uint32_t k = 0; k < st.dep_count && !found; ++k) visit(static_cast<int>(rs.sched.deps[st.dep_begin + k]));
    }
    if (found) rs.hb_cache.push_back(x);
    return found;
  }

  Cell& cell(int r, const Slice& s, size_t e) {
    RankState& rs = ranks_[r];
    const Binding& b = rs.bind[s.buf];
    return rs.mem[b.arr][b.base + s.offset / elem_ + e];
  }

  // Reads a slice on behalf of step i: every value must be defined and its
  // writer ordered before i.
  void read(int r, int i, const Slice& s, const char* what, std::vector<Value>* out) {
    RankState& rs = ranks_[r];
    out->clear();
    const size_t k = s.bytes / elem_;
    for (size_t e = 0; e < k && ok(); ++e) {
      Cell& c = cell(r, s, e);
      if (c.writer >= 0 && !hb(r, c.writer, i))
        return fail(where(r, i) + " reads " + what + " element " + std::to_string(e) + " written by unordered " +
                    where(r, c.writer) + " (read-before-write race)");
      if (c.v.set == 0)
        return fail(where(r, i) + " reads undefined " + what + " element " + std::to_string(e) + " of buffer " +
                    std::to_string(s.buf));
      if (c.readers < 0 || rs.reader_pool[c.readers].first != i) {
        rs.reader_pool.push_back({i, c.readers});
        c.readers = static_cast<int32_t>(rs.reader_pool.size() - 1);
      }
      out->push_back(c.v);
    }
  }

  // Writes values into a slice on behalf of step i: the previous writer and
  // every reader since must be ordered before i.
  void write(int r, int i, const Slice& s, const std::vector<Value>& vals) {
    RankState& rs = ranks_[r];
    const Binding& b = rs.bind[s.buf];
    if (s.bytes > 0 && b.arr == 1) return fail(where(r, i) + " writes the caller's send buffer");
    for (size_t e = 0; e < vals.size() && ok(); ++e) {
      Cell& c = cell(r, s, e);
      if (c.writer >= 0 && !hb(r, c.writer, i))
        return fail(where(r, i) + " overwrites element " + std::to_string(e) + " of buffer " + std::to_string(s.buf) +
                    " also written by unordered " + where(r, c.writer) + " (write-write race)");
      for (int32_t p = c.readers; p >= 0; p = rs.reader_pool[p].second) {
        int reader = rs.reader_pool[p].first;
        if (!hb(r, reader, i))
          return fail(where(r, i) + " overwrites element " + std::to_string(e) + " of buffer " +
                      std::to_string(s.buf) + " that unordered " + where(r, reader) +
                      " reads (write-after-read race)");
      }
      c.writer = i;
      c.readers = -1;
      c.v = vals[e];
    }
  }

  void enable(int r, int i) {
    RankState& rs = ranks_[r];
    const Step& st = rs.sched.steps[i];
    rs.enabled[i] = 1;
    if (st.kind == StepKind::kCopy) {
      ready_.push_back({r, i, -1});
    } else if (st.kind == StepKind::kSend) {
      try_pair(r, st.peer, st.channel);
    } else {
      try_pair(st.peer, r, st.channel);
    }
  }

  // The heads of sender s's queue to d and of d's queue from s are the k-th
  // send and the k-th receive; once both are posted they can complete.
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

  uint32_t knowledge_of(int r, int i) {
    RankState& rs = ranks_[r];
    const Step& st = rs.sched.steps[i];
    bool unused = false;
    uint32_t k = sets_.singleton(r);
    if (rs.qprev[i] >= 0) k = sets_.unite(k, rs.know[rs.qprev[i]], false, &unused);
    for (uint32_t d = 0; d < st.dep_count; ++d) k = sets_.unite(k, rs.know[rs.sched.deps[st.dep_begin + d]], false, &unused);
    return k;
  }

  void complete(int r, int i) {
    RankState& rs = ranks_[r];
    rs.done[i] = 1;
    ++rs.completed;
    ++result_.steps;
    for (uint32_t k = rs.dependents_begin[i]; k < rs.dependents_begin[i + 1]; ++k) {
      int d = static_cast<int>(rs.dependents[k]);
      if (--rs.pending[d] == 0) enable(r, d);
    }
  }

  void run_copy(int r, int i) {
    const Step& st = ranks_[r].sched.steps[i];
    read(r, i, st.src, "src", &buf_);
    if (ok()) write(r, i, st.dst, buf_);
    if (barrier_) ranks_[r].know[i] = knowledge_of(r, i);
    complete(r, i);
  }

  // Messages pair up per lane: a peer and one of the connections to it.
  int lane(int peer, int channel) const { return peer + channel * n_; }

  void run_pair(int s, int si, int d, int ri) {
    RankState& snd = ranks_[s];
    RankState& rcv = ranks_[d];
    const Step& ss = snd.sched.steps[si];
    const Step& rr = rcv.sched.steps[ri];
    if (ss.src.bytes != rr.dst.bytes) {
      std::ostringstream o;
      o << where(s, si) << " sends " << ss.src.bytes << " bytes but the matching " << where(d, ri) << " expects "
        << rr.dst.bytes;
      return fail(o.str());
    }
    read(s, si, ss.src, "src", &buf_);
    if (rr.kind == StepKind::kRecvReduce && ok()) {
      read(d, ri, rr.with, "with", &with_);
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
    if (ok()) write(d, ri, rr.dst, buf_);
    if (barrier_) {
      snd.know[si] = knowledge_of(s, si);
      bool unused = false;
      rcv.know[ri] = sets_.unite(knowledge_of(d, ri), snd.know[si], false, &unused);
    }
    const int channel = snd.sched.steps[si].channel;
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
    barrier_ = coll_ == Coll::kBarrier;
    for (int r = 0; r < n_; ++r) {
      RankState& rs = ranks_[r];
      std::vector<uint32_t> fill(rs.dependents_begin.begin(), rs.dependents_begin.end() - 1);
      for (size_t i = 0; i < rs.sched.steps.size(); ++i) {
        const Step& st = rs.sched.steps[i];
        for (uint32_t k = 0; k < st.dep_count; ++k) rs.dependents[fill[rs.sched.deps[st.dep_begin + k]]++] = i;
      }
    }
    for (int r = 0; r < n_; ++r)
      for (size_t i = 0; i < ranks_[r].sched.steps.size(); ++i)
        if (ranks_[r].pending[i] == 0) enable(r, static_cast<int>(i));
    while (!ready_.empty() && ok()) {
      size_t pick = std::uniform_int_distribution<size_t>(0, ready_.size() - 1)(rng_);
      Action act = ready_[pick];
      ready_[pick] = ready_.back();
      ready_.pop_back();
      if (act.peer_step < 0)
        run_copy(act.rank, act.step);
      else
        run_pair(act.rank, act.step, ranks_[act.rank].sched.steps[act.step].peer, act.peer_step);
    }
  }

  void check_progress() {
    for (int r = 0; r < n_; ++r) {
      RankState& rs = ranks_[r];
      if (rs.completed == rs.sched.steps.size()) continue;
      for (size_t i = 0; i < rs.sched.steps.size(); ++i) {
        if (rs.done[i]) continue;
        std::string why;
        const Step& st = rs.sched.steps[i];
        if (!rs.enabled[i]) {
          why = "waits for its deps";
        } else if (st.kind != StepKind::kCopy) {
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

  void expect(int r, size_t e, Value want) {
    RankState& rs = ranks_[r];
    const Binding& b = rs.bind[algo::kRecvBuf];
    const Value& got = rs.mem[b.arr][b.base + e].v;
    bool all = want.set == kAllRanks;
    bool good = got.set != 0 && got.idx == want.idx &&
                (all ? sets_.is_range(got.set, 0, n_) : sets_.is_range(got.set, static_cast<int>(want.set), static_cast<int>(want.set) + 1));
    if (good) return;
    std::ostringstream o;
    o << "rank " << r << " output element " << e << " holds element " << got.idx << " of " << sets_.str(got.set)
      << ", expected element " << want.idx << " of " << (all ? "every rank" : "rank " + std::to_string(want.set));
    fail(o.str());
  }
  static constexpr uint32_t kAllRanks = 0xffffffffu;

  void check_outputs() {
    const size_t n = static_cast<size_t>(n_);
    for (int r = 0; r < n_ && ok(); ++r) {
      const CollArgs& a = ranks_[r].args;
      const size_t c = a.count;
      const uint32_t root = static_cast<uint32_t>(a.root);
      const bool is_root = r == a.root;
      auto each = [&](size_t total, auto fn) {
        for (size_t e = 0; e < total && ok(); ++e) expect(r, e, fn(e));
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
          for (int j = 0; j < n_ && ok(); ++j) {
            const CollArgs& b = ranks_[j].args;
            if (a.recvcounts[j] != b.sendcounts[r]) return fail("test error: AlltoAllv counts disagree");
            for (size_t k = 0; k < a.recvcounts[j] && ok(); ++k)
              expect(r, a.rdispls[j] + k, Value{b.sdispls[r] + k, static_cast<uint32_t>(j)});
          }
          break;
        case Coll::kGather:
          if (is_root) each(n * c, [&](size_t e) { return Value{e % c, static_cast<uint32_t>(e / c)}; });
          break;
        case Coll::kScatter: each(c, [&](size_t e) { return Value{r * c + e, root}; }); break;
        case Coll::kBarrier: {
          RankState& rs = ranks_[r];
          bool unused = false;
          uint32_t k = sets_.singleton(r);
          for (uint32_t s : rs.know) k = sets_.unite(k, s, false, &unused);
          if (!sets_.is_range(k, 0, n_))
            fail("barrier: rank " + std::to_string(r) + " can leave knowing only of arrivals " + sets_.str(k));
          break;
        }
        default: fail("collective not modelled by the verifier"); break;
      }
    }
  }

  int n_;
  Coll coll_ = Coll::kBarrier;
  size_t elem_ = 1;
  bool barrier_ = false;
  std::mt19937_64 rng_;
  std::vector<RankState> ranks_;
  std::vector<Action> ready_;
  std::vector<int> stack_;
  std::vector<Value> buf_, with_;
  RankSets sets_;
  VerifyResult result_;
};

}  // namespace

VerifyResult verify(const std::vector<algo::CollArgs>& args, const ScheduleBuilder& build, uint64_t seed) {
  Verifier v(args, seed);
  return v.run(build);
}

VerifyResult verify(const algo::CollArgs& args, const ScheduleBuilder& build, uint64_t seed) {
  std::vector<algo::CollArgs> all(static_cast<size_t>(std::max(args.nranks, 0)), args);
  for (int r = 0; r < args.nranks; ++r) all[r].rank = r;
  return verify(all, build, seed);
}

}  // namespace conflux::sim
