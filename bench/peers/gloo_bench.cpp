// Gloo side of bench/compare: the same size ladder, data, checks and output
// rows as mpi_bench.c, with gloo::allreduce / allgather / broadcast /
// alltoall over the TCP transport on 127.0.0.1 and a FileStore rendezvous.
// Ranks are started by the caller with RANK, WORLD_SIZE and
// GLOO_STORE_DIR (an empty directory shared by the ranks) in the environment.
// Usage: gloo_bench COLL MINBYTES MAXBYTES FACTOR ITERS WARMUP CHECK
// COLL: allreduce|allgather|broadcast|alltoall (reducescatter: not offered
// by Gloo's options API; the driver says so and exits 3).
#include <gloo/allgather.h>
#include <gloo/allreduce.h>
#include <gloo/alltoall.h>
#include <gloo/barrier.h>
#include <gloo/broadcast.h>
#include <gloo/math.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/file_store.h>
#include <gloo/transport/tcp/device.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

namespace {

enum Coll { AR, AG, BC, A2A };
constexpr auto kTimeout = std::chrono::seconds(600);

size_t parse_size(const char* s) {
  char* end = nullptr;
  double v = std::strtod(s, &end);
  if (end && (*end == 'K' || *end == 'k')) v *= 1024;
  if (end && (*end == 'M' || *end == 'm')) v *= 1024 * 1024;
  if (end && (*end == 'G' || *end == 'g')) v *= 1024.0 * 1024 * 1024;
  return static_cast<size_t>(v);
}

using Ctx = std::shared_ptr<gloo::Context>;

void sum_f(void* c, const void* a, const void* b, size_t n) {
  gloo::sum<float>(static_cast<float*>(c), static_cast<const float*>(a), static_cast<const float*>(b), n);
}
void sum_d(void* c, const void* a, const void* b, size_t n) {
  gloo::sum<double>(static_cast<double*>(c), static_cast<const double*>(a), static_cast<const double*>(b), n);
}

double allreduce_scalar(const Ctx& ctx, double v) {
  double out = 0;
  gloo::AllreduceOptions o(ctx);
  o.setInput(&v, 1);
  o.setOutput(&out, 1);
  o.setReduceFunction(&sum_d);
  o.setTag(7);
  o.setTimeout(kTimeout);
  gloo::allreduce(o);
  return out;
}

void barrier(const Ctx& ctx) {
  gloo::BarrierOptions o(ctx);
  o.setTag(9);
  o.setTimeout(kTimeout);
  gloo::barrier(o);
}

void run_once(Coll c, const Ctx& ctx, float* in, float* out, size_t cnt, size_t sc, size_t rc) {
  switch (c) {
    case AR: {
      gloo::AllreduceOptions o(ctx);
      o.setInput(in, cnt);
      o.setOutput(out, cnt);
      o.setReduceFunction(&sum_f);
      o.setTimeout(kTimeout);
      gloo::allreduce(o);
      break;
    }
    case AG: {
      gloo::AllgatherOptions o(ctx);
      o.setInput(in, sc);
      o.setOutput(out, rc);
      o.setTimeout(kTimeout);
      gloo::allgather(o);
      break;
    }
    case BC: {
      gloo::BroadcastOptions o(ctx);
      o.setOutput(out, cnt);
      o.setRoot(0);
      o.setTimeout(kTimeout);
      gloo::broadcast(o);
      break;
    }
    case A2A: {
      gloo::AlltoallOptions o(ctx);
      o.setInput(in, sc);
      o.setOutput(out, rc);
      o.setTimeout(kTimeout);
      gloo::alltoall(o);
      break;
    }
  }
}

void fill(Coll c, float* in, float* out, size_t cnt, size_t sc, size_t rc, int rank, int n) {
  switch (c) {
    case AR: for (size_t i = 0; i < cnt; ++i) in[i] = float((rank + 1) * int((i % 13) + 1)); break;
    case AG: for (size_t i = 0; i < sc; ++i) in[i] = float(rank * 1000 + int(i % 97)); break;
    case BC: for (size_t i = 0; i < cnt; ++i) out[i] = rank == 0 ? float(1000 + int(i % 97)) : 0.0f; break;
    case A2A: {
      size_t per = std::max<size_t>(sc / size_t(n), 1);
      for (size_t i = 0; i < sc; ++i) in[i] = float(rank * 1000 + int(i / per) * 10 + int((i % per) % 7));
      break;
    }
  }
  if (c != BC) std::memset(out, 0, rc * sizeof(float));
}

long check(Coll c, const float* out, size_t cnt, size_t rc, int rank, int n) {
  long wrong = 0;
  float tri = float(n * (n + 1) / 2);
  size_t per = std::max<size_t>(rc / size_t(n), 1);
  switch (c) {
    case AR: for (size_t i = 0; i < cnt; ++i) wrong += out[i] != tri * float((i % 13) + 1); break;
    case AG: for (size_t i = 0; i < rc; ++i) wrong += out[i] != float(int(i / per) * 1000 + int((i % per) % 97)); break;
    case BC: for (size_t i = 0; i < cnt; ++i) wrong += out[i] != float(1000 + int(i % 97)); break;
    case A2A:
      for (size_t i = 0; i < rc; ++i) wrong += out[i] != float(int(i / per) * 1000 + rank * 10 + int((i % per) % 7));
      break;
  }
  return wrong;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 8) {
    std::fprintf(stderr, "usage: %s COLL MINBYTES MAXBYTES FACTOR ITERS WARMUP CHECK [MIN_SECONDS]\n", argv[0]);
    return 2;
  }
  std::string name = argv[1];
  Coll c;
  if (name == "allreduce") c = AR;
  else if (name == "allgather") c = AG;
  else if (name == "broadcast") c = BC;
  else if (name == "alltoall") c = A2A;
  else {
    std::fprintf(stderr, "gloo_bench: %s is not offered by this driver\n", name.c_str());
    return 3;
  }
  const char* r = std::getenv("RANK");
  const char* w = std::getenv("WORLD_SIZE");
  const char* dir = std::getenv("GLOO_STORE_DIR");
  if (!r || !w || !dir) {
    std::fprintf(stderr, "gloo_bench: RANK, WORLD_SIZE and GLOO_STORE_DIR must be set\n");
    return 2;
  }
  int rank = std::atoi(r), n = std::atoi(w);
  size_t minb = parse_size(argv[2]), maxb = parse_size(argv[3]);
  int factor = std::max(std::atoi(argv[4]), 2), iters = std::max(std::atoi(argv[5]), 1);
  int warmup = std::atoi(argv[6]), docheck = std::atoi(argv[7]);
  // Time each size for at least this long (after a first batch of ITERS,
  // which also warms up): every library is then timed past its warm-up.
  const double min_seconds = argc > 8 ? std::atof(argv[8]) : 0;

  gloo::transport::tcp::attr attr;
  attr.hostname = "127.0.0.1";
  auto dev = gloo::transport::tcp::CreateDevice(attr);
  gloo::rendezvous::FileStore store(dir);
  auto ctx = std::make_shared<gloo::rendezvous::Context>(rank, n);
  ctx->setTimeout(kTimeout);
  ctx->connectFullMesh(store, dev);
  Ctx base = ctx;

  size_t maxcnt = maxb / sizeof(float) + 1;
  std::vector<float> in(maxcnt, 0.0f), out(maxcnt, 0.0f);
  const char* names[] = {"allreduce", "allgather", "broadcast", "alltoall"};
  if (rank == 0) {
    std::printf("# gloo_bench %s: %d ranks, iters %d, warmup %d, check %d, type float\n", names[c], n, iters, warmup,
                docheck);
    std::printf("#        size         count      type   redop   root      time    algbw    busbw #wrong\n");
  }
  long total_wrong = 0;
  for (size_t bytes = minb; bytes <= maxb; bytes *= size_t(factor)) {
    size_t cnt = bytes / sizeof(float), sc = cnt, rc = cnt;
    if (c == AG) { sc = cnt / n; rc = sc * n; }
    if (c == A2A) { sc = rc = cnt / n * n; }
    size_t shown = std::max(sc, rc);
    if (shown == 0 || (c != AR && c != BC && sc / size_t(n) == 0 && c == A2A) || (c == AG && sc == 0)) continue;
    fill(c, in.data(), out.data(), cnt, sc, rc, rank, n);
    for (int i = 0; i < warmup; ++i) run_once(c, base, in.data(), out.data(), cnt, sc, rc);
    barrier(base);
    auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < iters; ++i) run_once(c, base, in.data(), out.data(), cnt, sc, rc);
    double sec = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / iters;
    const double total = allreduce_scalar(base, sec);  // the same on every rank: it picks the count
    if (min_seconds > 0 && total / n * iters < min_seconds) {
      const long more = std::min(100000000L, static_cast<long>(min_seconds / std::max(total / n, 1e-9)) + 1);
      barrier(base);
      t0 = std::chrono::steady_clock::now();
      for (long i = 0; i < more; ++i) run_once(c, base, in.data(), out.data(), cnt, sc, rc);
      sec = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / static_cast<double>(more);
    }
    double avg = allreduce_scalar(base, sec) / n;
    long wrong = 0;
    if (docheck) {
      fill(c, in.data(), out.data(), cnt, sc, rc, rank, n);
      run_once(c, base, in.data(), out.data(), cnt, sc, rc);
      wrong = check(c, out.data(), cnt, rc, rank, n);
    }
    long wsum = long(allreduce_scalar(base, double(wrong)));
    total_wrong += wsum;
    if (rank == 0) {
      double factor_bw = c == AR ? 2.0 * (n - 1) / n : (c == BC ? 1.0 : double(n - 1) / n);
      double algbw = avg > 0 ? double(shown * sizeof(float)) / avg / 1e9 : 0;
      std::printf("%14zu %13zu %9s %7s %6d %9.2f %8.2f %8.2f %6ld\n", shown * sizeof(float), shown, "float",
                  c == AR ? "sum" : "none", c == BC ? 0 : -1, avg * 1e6, algbw, algbw * factor_bw, wsum);
      std::fflush(stdout);
    }
  }
  if (rank == 0) std::printf("# Out of bounds values : %ld %s\n", total_wrong, total_wrong ? "FAILED" : "OK");
  barrier(base);  // no rank closes its pairs while a peer still uses them
  return 0;
}
