// `conflux perf <collective>`: nccl-tests-compatible benchmark. Same flags
// (-b -e -f -i -n -w -c -d -o -r), same columns, same busbw factors, same
// "Avg bus bandwidth" footer. Runs under `conflux run`, mpirun, torchrun, srun.
#include "command_registry.h"
#include "perf_check.h"
#include "perf_moe.h"

#include <conflux/conflux.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

using conflux::tools::PerfColl;

struct PerfOptions {
  std::string coll = "allreduce";
  std::string min_bytes = "32M", max_bytes = "32M";
  int factor = 2;
  std::string step_bytes;
  int iters = 20;
  int warmup = 5;
  int check = 1;
  std::string dtype = "float";
  std::string op = "sum";
  int root = 0;
  bool oop_only = false;
  bool memalloc = false;
  int registration = 0;  // -R 1: cfxCommRegister the (cfxMemAlloc) buffers, as nccl-tests' -R
  double min_time = 0;   // --min-time: time each size for at least this many seconds
};

// A benchmark buffer, zero-filled: from the heap, or from cfxMemAlloc
// (--memalloc) so the intra-host path maps it instead of process_vm_readv.
class PerfBuffer {
 public:
  PerfBuffer() = default;
  PerfBuffer(const PerfBuffer&) = delete;
  PerfBuffer& operator=(const PerfBuffer&) = delete;
  ~PerfBuffer() { release(); }
  cfxResult_t allocate(size_t bytes, bool shared) {
    release();
    shared_ = shared;
    if (shared) {
      void* p = nullptr;
      cfxResult_t r = cfxMemAlloc(&p, bytes);
      if (r != cfxSuccess) return r;
      data_ = static_cast<char*>(p);
    } else {
      data_ = new char[bytes];
    }
    std::memset(data_, 0, bytes);
    return cfxSuccess;
  }
  char* data() { return data_; }
  const char* data() const { return data_; }

 private:
  void release() {
    if (data_ != nullptr && shared_) cfxMemFree(data_);
    else delete[] data_;
    data_ = nullptr;
  }
  char* data_ = nullptr;
  bool shared_ = false;
};

bool parse_size(const std::string& s, size_t* out) {
  char* end = nullptr;
  double v = std::strtod(s.c_str(), &end);
  if (end == s.c_str() || v < 0) return false;
  std::string suffix(end);
  double mult = 1;
  if (suffix == "K" || suffix == "k" || suffix == "KB") mult = 1024;
  else if (suffix == "M" || suffix == "m" || suffix == "MB") mult = 1024.0 * 1024;
  else if (suffix == "G" || suffix == "g" || suffix == "GB") mult = 1024.0 * 1024 * 1024;
  else if (!suffix.empty() && suffix != "B") return false;
  *out = static_cast<size_t>(v * mult);
  return true;
}

bool parse_dtype(const std::string& s, cfxDataType_t* t) {
  struct N { const char* name; cfxDataType_t t; };
  static const N kNames[] = {{"int8", cfxInt8},       {"char", cfxInt8},       {"uint8", cfxUint8},
                             {"int32", cfxInt32},     {"int", cfxInt32},       {"uint32", cfxUint32},
                             {"int64", cfxInt64},     {"uint64", cfxUint64},   {"half", cfxFloat16},
                             {"float16", cfxFloat16}, {"float", cfxFloat32},   {"float32", cfxFloat32},
                             {"double", cfxFloat64},  {"float64", cfxFloat64}, {"bfloat16", cfxBfloat16}};
  for (const auto& n : kNames)
    if (s == n.name) {
      *t = n.t;
      return true;
    }
  return false;
}

bool parse_op(const std::string& s, cfxRedOp_t* op) {
  static const char* const kNames[] = {"sum", "prod", "max", "min", "avg"};
  for (int i = 0; i < 5; ++i)
    if (s == kNames[i]) {
      *op = static_cast<cfxRedOp_t>(i);
      return true;
    }
  return false;
}

const char* type_label(cfxDataType_t t) {
  static const char* const kLabels[] = {"int8", "uint8", "int32", "uint32", "int64", "uint64", "half", "float",
                                        "double", "bfloat16"};
  return kLabels[t];
}

struct Bench {
  PerfColl coll;
  cfxComm_t comm;
  int rank, nranks;
  cfxDataType_t dtype;
  cfxRedOp_t op;
  int root;
  size_t elem;
  PerfBuffer send, recv;

  cfxResult_t once(size_t count, bool in_place) {
    size_t sc = 0, rc = 0;
    conflux::tools::perf_buffer_counts(coll, count, nranks, &sc, &rc);
    char* s = send.data();
    char* r = recv.data();
    switch (coll) {
      case PerfColl::kAllReduce: return cfxAllReduce(in_place ? r : s, r, rc, dtype, op, comm);
      case PerfColl::kBroadcast: return cfxBroadcast(in_place ? r : s, r, rc, dtype, root, comm);
      case PerfColl::kReduce: return cfxReduce(in_place ? r : s, r, rc, dtype, op, root, comm);
      case PerfColl::kAllGather: return cfxAllGather(in_place ? r + rank * sc * elem : s, r, sc, dtype, comm);
      case PerfColl::kReduceScatter:
        return cfxReduceScatter(s, in_place ? s + rank * rc * elem : r, rc, dtype, op, comm);
      case PerfColl::kAlltoAll: return cfxAlltoAll(in_place ? r : s, r, rc / nranks, dtype, comm);
      case PerfColl::kGather: return cfxGather(in_place ? r + rank * sc * elem : s, r, sc, dtype, root, comm);
      case PerfColl::kScatter: return cfxScatter(s, in_place ? s + rank * rc * elem : r, rc, dtype, root, comm);
      case PerfColl::kSendRecv: {
        cfxGroupStart();
        cfxSend(s, sc, dtype, (rank + 1) % nranks, comm);
        cfxRecv(r, rc, dtype, (rank - 1 + nranks) % nranks, comm);
        return cfxGroupEnd();
      }
    }
    return cfxInternalError;
  }

  // Where the result lands, for the check.
  const char* result_buffer(size_t count, bool in_place) const {
    size_t sc = 0, rc = 0;
    conflux::tools::perf_buffer_counts(coll, count, nranks, &sc, &rc);
    if (in_place && (coll == PerfColl::kReduceScatter || coll == PerfColl::kScatter)) return send.data() + rank * rc * elem;
    return recv.data();
  }

  void prepare_inputs(size_t count, bool in_place) {
    size_t sc = 0, rc = 0;
    conflux::tools::perf_buffer_counts(coll, count, nranks, &sc, &rc);
    conflux::tools::fill_input(send.data(), sc, dtype, op, rank);
    std::memset(recv.data(), 0, rc * elem);
    if (!in_place) return;
    switch (coll) {
      case PerfColl::kAllGather:
      case PerfColl::kGather: std::memcpy(recv.data() + rank * sc * elem, send.data(), sc * elem); break;
      case PerfColl::kReduceScatter:
      case PerfColl::kScatter: break;  // in place inside sendbuf
      default: std::memcpy(recv.data(), send.data(), sc * elem); break;
    }
  }
};

double allreduce_avg(cfxComm_t comm, double v, int nranks) {
  double sum = 0;
  cfxAllReduce(&v, &sum, 1, cfxFloat64, cfxSum, comm);
  return sum / nranks;
}

int run_perf(const PerfOptions& o, const conflux::tools::MoePerfOptions& moe) {
  if (o.coll == "moe") return conflux::tools::run_moe_perf(moe);
  PerfColl coll;
  cfxDataType_t dtype;
  cfxRedOp_t op;
  size_t min_bytes = 0, max_bytes = 0, step = 0;
  if (!conflux::tools::parse_perf_coll(o.coll, &coll)) {
    std::fprintf(stderr, "conflux perf: unknown collective '%s'\n", o.coll.c_str());
    return 2;
  }
  if (!parse_dtype(o.dtype, &dtype) || !parse_op(o.op, &op) || !parse_size(o.min_bytes, &min_bytes) ||
      !parse_size(o.max_bytes, &max_bytes) || (!o.step_bytes.empty() && !parse_size(o.step_bytes, &step)) ||
      o.factor < 1 || min_bytes > max_bytes || o.iters < 1) {
    std::fprintf(stderr, "conflux perf: bad option value (sizes, -d type, -o op, -f factor or -n iterations)\n");
    return 2;
  }
  cfxComm_t comm = nullptr;
  if (cfxCommInitFromEnv(&comm) != cfxSuccess) {
    std::fprintf(stderr, "conflux perf: %s\n", cfxGetLastError(nullptr));
    return 1;
  }
  int rank = 0, nranks = 1;
  cfxCommUserRank(comm, &rank);
  cfxCommCount(comm, &nranks);
  if (o.root < 0 || o.root >= nranks) {
    if (rank == 0) std::fprintf(stderr, "conflux perf: root %d out of range\n", o.root);
    cfxCommDestroy(comm);
    return 2;
  }
  Bench b{coll, comm, rank, nranks, dtype, op, o.root, cfxTypeSize(dtype), {}, {}};
  size_t max_count = std::max<size_t>(max_bytes / b.elem, 1);
  size_t sc = 0, rc = 0;
  conflux::tools::perf_buffer_counts(coll, max_count, nranks, &sc, &rc);
  for (PerfBuffer* buf : {&b.send, &b.recv}) {
    if (cfxResult_t r = buf->allocate(std::max(sc, rc) * b.elem + 64, o.memalloc || o.registration != 0); r != cfxSuccess) {
      std::fprintf(stderr, "conflux perf: rank %d: buffers of %zu bytes: %s\n", rank, std::max(sc, rc) * b.elem + 64,
                   cfxGetLastError(nullptr));
      cfxCommDestroy(comm);
      return 2;
    }
  }
  // Registered for the whole run (nccl-tests registers once, too).
  std::vector<void*> handles;
  if (o.registration != 0)
    for (PerfBuffer* buf : {&b.send, &b.recv}) {
      void* h = nullptr;
      if (cfxCommRegister(comm, buf->data(), std::max(sc, rc) * b.elem + 64, &h) != cfxSuccess) {
        std::fprintf(stderr, "conflux perf: rank %d: %s\n", rank, cfxGetLastError(comm));
        cfxCommDestroy(comm);
        return 2;
      }
      handles.push_back(h);
    }

  const bool rooted = coll == PerfColl::kBroadcast || coll == PerfColl::kReduce || coll == PerfColl::kGather ||
                      coll == PerfColl::kScatter;
  const bool reducing = coll == PerfColl::kAllReduce || coll == PerfColl::kReduce || coll == PerfColl::kReduceScatter;
  const bool has_in_place = coll != PerfColl::kSendRecv && !o.oop_only;
  if (rank == 0) {
    std::printf("# conflux perf %s: %d ranks, iters %d, warmup %d, check %d, type %s, op %s\n",
                conflux::tools::perf_coll_name(coll), nranks, o.iters, o.warmup, o.check, type_label(dtype),
                reducing ? o.op.c_str() : "none");
    std::printf("#\n#%64s%32s\n", "out-of-place", "in-place");
    std::printf("#%12s%14s%10s%8s%7s%10s%9s%9s%7s%10s%9s%9s%7s\n", "size", "count", "type", "redop", "root", "time",
                "algbw", "busbw", "#wrong", "time", "algbw", "busbw", "#wrong");
    std::printf("#%12s%14s%10s%8s%7s%10s%9s%9s%7s%10s%9s%9s%7s\n", "(B)", "(elements)", "", "", "", "(us)", "(GB/s)",
                "(GB/s)", "", "(us)", "(GB/s)", "(GB/s)", "");
    std::fflush(stdout);
  }
  double busbw_sum = 0;
  int busbw_points = 0;
  size_t total_wrong = 0;
  int failed = 0;
  for (size_t bytes = min_bytes;;) {
    size_t count = bytes / b.elem;
    size_t sc2 = 0, rc2 = 0;
    conflux::tools::perf_buffer_counts(coll, count, nranks, &sc2, &rc2);
    size_t shown_count = std::max(sc2, rc2);
    size_t shown_bytes = shown_count * b.elem;
    struct Result { double us = 0, algbw = 0, busbw = 0; size_t wrong = 0; };
    Result res[2];
    for (int pass = 0; pass < (has_in_place ? 2 : 1) && !failed; ++pass) {
      bool in_place = pass == 1;
      b.prepare_inputs(count, in_place);
      for (int w = 0; w < o.warmup && !failed; ++w) failed = b.once(count, in_place) != cfxSuccess;
      if (failed) break;
      cfxBarrier(comm);
      auto t0 = std::chrono::steady_clock::now();
      for (int it = 0; it < o.iters && !failed; ++it) failed = b.once(count, in_place) != cfxSuccess;
      double sec = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / o.iters;
      if (failed) break;
      if (o.min_time > 0) {
        // The first batch was a warm-up too: time again for at least
        // min_time, as many iterations as the slowest rank needs (agreed).
        double slowest = 0;
        cfxAllReduce(&sec, &slowest, 1, cfxFloat64, cfxMax, comm);
        if (slowest * o.iters < o.min_time) {
          const long more = std::min(100'000'000L, static_cast<long>(o.min_time / std::max(slowest, 1e-9)) + 1);
          cfxBarrier(comm);
          t0 = std::chrono::steady_clock::now();
          for (long it = 0; it < more && !failed; ++it) failed = b.once(count, in_place) != cfxSuccess;
          sec = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / static_cast<double>(more);
          if (failed) break;
        }
      }
      double avg = allreduce_avg(comm, sec, nranks);
      res[pass].us = avg * 1e6;
      res[pass].algbw = avg > 0 ? static_cast<double>(shown_bytes) / avg / 1e9 : 0;
      res[pass].busbw = res[pass].algbw * conflux::tools::busbw_factor(coll, nranks);
      if (o.check) {
        b.prepare_inputs(count, in_place);
        failed = b.once(count, in_place) != cfxSuccess;
        if (failed) break;
        double wrong = static_cast<double>(
            conflux::tools::count_wrong(coll, b.result_buffer(count, in_place), count, dtype, op, o.root, rank, nranks));
        double all = 0;
        cfxAllReduce(&wrong, &all, 1, cfxFloat64, cfxSum, comm);
        res[pass].wrong = static_cast<size_t>(all);
        total_wrong += res[pass].wrong;
      }
    }
    if (failed) {
      std::fprintf(stderr, "conflux perf: rank %d: %s\n", rank, cfxGetLastError(comm));
      break;
    }
    if (rank == 0) {
      std::printf(" %12zu%14zu%10s%8s%7d", shown_bytes, shown_count, type_label(dtype), reducing ? o.op.c_str() : "none",
                  rooted ? o.root : -1);
      for (int pass = 0; pass < 2; ++pass) {
        if (pass == 1 && !has_in_place) {
          std::printf(" %9s %8s %8s %6s", "N/A", "N/A", "N/A", "N/A");
          continue;
        }
        std::printf(" %9.2f %8.2f %8.2f %6s", res[pass].us, res[pass].algbw, res[pass].busbw,
                    o.check ? std::to_string(res[pass].wrong).c_str() : "N/A");
      }
      std::printf("\n");
      std::fflush(stdout);
    }
    busbw_sum += res[0].busbw + (has_in_place ? res[1].busbw : 0);
    busbw_points += has_in_place ? 2 : 1;
    if (bytes >= max_bytes) break;
    size_t next = step > 0 ? bytes + step : bytes * static_cast<size_t>(o.factor);
    if (next <= bytes) next = bytes + 1;
    bytes = std::min(next, max_bytes);
  }
  if (rank == 0 && !failed) {
    std::printf("# Out of bounds values : %zu %s\n", total_wrong, total_wrong == 0 ? "OK" : "FAILED");
    std::printf("# Avg bus bandwidth    : %g \n#\n", busbw_points ? busbw_sum / busbw_points : 0.0);
  }
  for (void* h : handles) cfxCommDeregister(comm, h);
  cfxCommDestroy(comm);
  if (failed) return 1;
  return total_wrong == 0 ? 0 : 3;
}

const conflux::tools::RegisterCommand kPerf{
    "perf", "nccl-tests style benchmark of one collective (run it under `conflux run`, mpirun, torchrun or srun)",
    [](CLI::App& app) {
      auto o = std::make_shared<PerfOptions>();
      auto moe = std::make_shared<conflux::tools::MoePerfOptions>();
      app.add_option("collective", o->coll,
                     "allreduce|allgather|reducescatter|broadcast|reduce|alltoall|sendrecv|gather|scatter|moe")
          ->required();
      auto* m = app.add_option_group("moe", "perf moe: MoE dispatch + combine round trips");
      m->add_option("--tokens", moe->tokens, "tokens per rank (comma list)");
      m->add_option("--hidden", moe->hidden, "elements per token (comma list)");
      m->add_option("--experts", moe->experts, "experts");
      m->add_option("--topk", moe->topk, "experts per token (comma list)");
      m->add_option("--routing", moe->routing, "uniform, zipfS (e.g. zipf1.5; hot experts rotate), half (comma list)");
      m->add_option("--empty-ranks", moe->empty_ranks, "the last this many ranks dispatch no tokens");
      m->add_option("--host-partial-sums", moe->host_partial_sums,
                    "across hosts, combine sends one partial per (token, host): 1 in float, 2 in the datatype")
          ->check(CLI::Range(0, 2));
      m->add_option("--expert-buffers", moe->expert_buffers,
                    "owned (the layer's rows), heap or memalloc (a caller's buffer of the worst-case size)")
          ->check(CLI::IsMember({"owned", "heap", "memalloc"}));
      m->add_option("--moe-dtype", moe->dtype, "bfloat16|half|float");
      m->add_option("--moe-iters", moe->iters, "timed iterations per case");
      m->add_option("--moe-warmup", moe->warmup, "untimed iterations per case");
      m->add_option("--seed", moe->seed, "routing seed");
      app.add_option("-b,--minbytes", o->min_bytes, "smallest size (K/M/G suffixes)");
      app.add_option("-e,--maxbytes", o->max_bytes, "largest size");
      app.add_option("-f,--stepfactor", o->factor, "multiply the size by this each step");
      app.add_option("-i,--stepbytes", o->step_bytes, "add this to the size each step (instead of -f)");
      app.add_option("-n,--iters", o->iters, "timed iterations per size");
      app.add_option("-w,--warmup_iters", o->warmup, "untimed iterations per size");
      app.add_option("--min-time", o->min_time,
                     "time each size for at least this many seconds (after the -n batch, which warms up too)")
          ->check(CLI::NonNegativeNumber);
      app.add_option("-c,--check", o->check, "check results (1) or not (0)");
      app.add_option("-d,--datatype", o->dtype, "int8|uint8|int32|uint32|int64|uint64|half|float|double|bfloat16");
      app.add_option("-o,--op", o->op, "sum|prod|max|min|avg");
      app.add_option("-r,--root", o->root, "root rank of rooted collectives");
      app.add_flag("--oop-only", o->oop_only, "skip the in-place pass");
      app.add_flag("--memalloc", o->memalloc, "buffers from cfxMemAlloc (shared memory) instead of the heap");
      app.add_option("-R,--local_register", o->registration,
                     "1: register the buffers with the communicator (cfxCommRegister; implies --memalloc)")
          ->check(CLI::Range(0, 1));
      return [o, moe] { return run_perf(*o, *moe); };
    }};

}  // namespace
