/* MPI side of bench/compare: one source, compiled with mpicc.openmpi and
 * mpicc.mpich. Times one collective over a size ladder like nccl-tests
 * (warmup, barrier, timed iterations, time averaged over ranks, busbw with
 * the nccl-tests factors) and prints nccl-tests style rows from rank 0:
 *   size count type redop root time(us) algbw busbw #wrong
 * Sizes follow nccl-tests / conflux perf: "size" is the total buffer
 * (allgather: the gathered output, reducescatter/alltoall: the full input).
 * Usage: mpi_bench COLL MINBYTES MAXBYTES FACTOR ITERS WARMUP CHECK
 * COLL: allreduce|allgather|reducescatter|broadcast|alltoall (float, sum). */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { AR, AG, RS, BC, A2A };

static int coll_of(const char* s) {
  if (!strcmp(s, "allreduce")) return AR;
  if (!strcmp(s, "allgather")) return AG;
  if (!strcmp(s, "reducescatter")) return RS;
  if (!strcmp(s, "broadcast")) return BC;
  if (!strcmp(s, "alltoall")) return A2A;
  return -1;
}

static double busbw_factor(int c, int n) {
  switch (c) {
    case AR: return 2.0 * (n - 1) / n;
    case AG: case RS: case A2A: return (double)(n - 1) / n;
    default: return 1.0;
  }
}

/* Input values are small integers so float sums are exact. */
static void fill(int c, float* in, float* out, size_t cnt, size_t sc, size_t rc, int rank, int n) {
  size_t i;
  switch (c) {
    case AR: for (i = 0; i < cnt; ++i) in[i] = (float)((rank + 1) * ((i % 13) + 1)); break;
    case AG: for (i = 0; i < sc; ++i) in[i] = (float)(rank * 1000 + (i % 97)); break;
    case RS: for (i = 0; i < sc; ++i) in[i] = (float)((rank + 1) * ((i % 13) + 1)); break;
    case BC: for (i = 0; i < cnt; ++i) out[i] = rank == 0 ? (float)(1000 + (i % 97)) : 0.0f; break;
    case A2A: {
      size_t per = sc / (size_t)n;
      if (!per) per = 1;
      for (i = 0; i < sc; ++i) in[i] = (float)(rank * 1000 + (int)(i / per) * 10 + (int)((i % per) % 7));
      break;
    }
  }
  if (c != BC) memset(out, 0, rc * sizeof(float));
}

static long check(int c, const float* out, size_t cnt, size_t rc, int rank, int n) {
  long wrong = 0;
  size_t i;
  float tri = (float)(n * (n + 1) / 2);
  switch (c) {
    case AR: for (i = 0; i < cnt; ++i) wrong += out[i] != tri * (float)((i % 13) + 1); break;
    case AG: {
      size_t per = rc / (size_t)n;
      for (i = 0; i < rc; ++i) wrong += out[i] != (float)((int)(i / per) * 1000 + ((i % per) % 97));
      break;
    }
    case RS:
      for (i = 0; i < rc; ++i) wrong += out[i] != tri * (float)((((size_t)rank * rc + i) % 13) + 1);
      break;
    case BC: for (i = 0; i < cnt; ++i) wrong += out[i] != (float)(1000 + (i % 97)); break;
    case A2A: {
      size_t per = rc / (size_t)n;
      for (i = 0; i < rc; ++i)
        wrong += out[i] != (float)((int)(i / per) * 1000 + rank * 10 + (int)((i % per) % 7));
      break;
    }
  }
  return wrong;
}

static void run_once(int c, float* in, float* out, size_t cnt, size_t sc, size_t rc, int n) {
  (void)sc;
  switch (c) {
    case AR: MPI_Allreduce(in, out, (int)cnt, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD); break;
    case AG: MPI_Allgather(in, (int)(rc / n), MPI_FLOAT, out, (int)(rc / n), MPI_FLOAT, MPI_COMM_WORLD); break;
    case RS: MPI_Reduce_scatter_block(in, out, (int)rc, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD); break;
    case BC: MPI_Bcast(out, (int)cnt, MPI_FLOAT, 0, MPI_COMM_WORLD); break;
    case A2A: MPI_Alltoall(in, (int)(rc / n), MPI_FLOAT, out, (int)(rc / n), MPI_FLOAT, MPI_COMM_WORLD); break;
  }
}

static size_t parse_size(const char* s) {
  char* end = NULL;
  double v = strtod(s, &end);
  if (end && (*end == 'K' || *end == 'k')) v *= 1024;
  if (end && (*end == 'M' || *end == 'm')) v *= 1024 * 1024;
  if (end && (*end == 'G' || *end == 'g')) v *= 1024.0 * 1024 * 1024;
  return (size_t)v;
}

int main(int argc, char** argv) {
  int rank, n;
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  if (argc < 8 || coll_of(argv[1]) < 0) {
    if (rank == 0) fprintf(stderr, "usage: %s COLL MINBYTES MAXBYTES FACTOR ITERS WARMUP CHECK [MIN_SECONDS]\n", argv[0]);
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  int c = coll_of(argv[1]);
  size_t minb = parse_size(argv[2]), maxb = parse_size(argv[3]);
  int factor = atoi(argv[4]), iters = atoi(argv[5]), warmup = atoi(argv[6]), docheck = atoi(argv[7]);
  /* Time each size for at least this long (after a first batch of ITERS,
     which also warms up): every library is then timed past its warm-up. */
  double min_seconds = argc > 8 ? atof(argv[8]) : 0;
  if (factor < 2) factor = 2;
  if (iters < 1) iters = 1;
  size_t maxcnt = maxb / sizeof(float) + 1;
  float* in = malloc(maxcnt * sizeof(float));
  float* out = malloc(maxcnt * sizeof(float));
  if (!in || !out) { fprintf(stderr, "rank %d: out of memory\n", rank); MPI_Abort(MPI_COMM_WORLD, 3); }
  memset(in, 0, maxcnt * sizeof(float));
  memset(out, 0, maxcnt * sizeof(float));
  const char* names[] = {"allreduce", "allgather", "reducescatter", "broadcast", "alltoall"};
  if (rank == 0) {
    printf("# mpi_bench %s: %d ranks, iters %d, warmup %d, check %d, type float\n", names[c], n, iters, warmup, docheck);
    printf("#        size         count      type   redop   root      time    algbw    busbw #wrong\n");
  }
  long total_wrong = 0;
  for (size_t bytes = minb; bytes <= maxb; bytes *= (size_t)factor) {
    size_t cnt = bytes / sizeof(float), sc = cnt, rc = cnt;
    if (c == AG) { sc = cnt / n; rc = sc * n; }
    if (c == RS) { sc = cnt / n * n; rc = cnt / n; }
    if (c == A2A) { sc = rc = cnt / n * n; }
    size_t shown = (sc > rc ? sc : rc);
    fill(c, in, out, cnt, sc, rc, rank, n);
    for (int w = 0; w < warmup; ++w) run_once(c, in, out, cnt, sc, rc, n);
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    for (int it = 0; it < iters; ++it) run_once(c, in, out, cnt, sc, rc, n);
    double sec = (MPI_Wtime() - t0) / iters, sum = 0, slowest = 0;
    MPI_Allreduce(&sec, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    if (min_seconds > 0 && slowest * iters < min_seconds) {
      long more = (long)(min_seconds / (slowest > 0 ? slowest : 1e-9)) + 1;
      if (more > 100000000L) more = 100000000L;
      MPI_Barrier(MPI_COMM_WORLD);
      t0 = MPI_Wtime();
      for (long it = 0; it < more; ++it) run_once(c, in, out, cnt, sc, rc, n);
      sec = (MPI_Wtime() - t0) / (double)more;
    }
    MPI_Allreduce(&sec, &sum, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    double avg = sum / n;
    long wrong = 0, wsum = 0;
    if (docheck) {
      fill(c, in, out, cnt, sc, rc, rank, n);
      run_once(c, in, out, cnt, sc, rc, n);
      wrong = check(c, out, cnt, rc, rank, n);
    }
    MPI_Allreduce(&wrong, &wsum, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    total_wrong += wsum;
    if (rank == 0) {
      double algbw = avg > 0 ? (double)(shown * sizeof(float)) / avg / 1e9 : 0;
      printf("%14zu %13zu %9s %7s %6d %9.2f %8.2f %8.2f %6ld\n", shown * sizeof(float), shown, "float",
             (c == AR || c == RS) ? "sum" : "none", c == BC ? 0 : -1, avg * 1e6, algbw, algbw * busbw_factor(c, n),
             wsum);
      fflush(stdout);
    }
  }
  if (rank == 0) printf("# Out of bounds values : %ld %s\n", total_wrong, total_wrong ? "FAILED" : "OK");
  free(in);
  free(out);
  MPI_Finalize();
  return 0;
}
