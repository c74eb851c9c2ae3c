/* What MoE users do today on MPI, timed like `conflux perf moe`: route the
 * tokens (the same routings, tools/moe_routing.h), permute one copy of each
 * token per (token, expert) pair into destination order, MPI_Alltoall of
 * the counts, MPI_Alltoallv of the tokens, the experts (the identity), an
 * MPI_Alltoallv back and the weighted sum in token order. With "known" the
 * counts exchange is skipped (every rank is handed the counts in advance):
 * the lower bound of what sending counts with the data could save.
 *
 * usage: moe_mpi TOKENS HIDDEN EXPERTS TOPK ROUTING ITERS WARMUP EMPTY_RANKS known|exchange
 * Prints one row: tokens hidden topk routing median_us p99_us wire_MiB_per_iteration */
#include "../../tools/moe_routing.h"

#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int cmp_double(const void* a, const void* b) {
  const double x = *(const double*)a, y = *(const double*)b;
  return (x > y) - (x < y);
}

static double pct(double* v, int n, double p) {
  qsort(v, (size_t)n, sizeof *v, cmp_double);
  int i = (int)(p * (n - 1) + 0.5);
  return v[i < n ? i : n - 1];
}

/* bf16 helpers: float -> bf16 round to nearest even, and back. */
static inline float bf16_f(uint16_t b) {
  uint32_t u = (uint32_t)b << 16;
  float f;
  memcpy(&f, &u, 4);
  return f;
}
static inline uint16_t f_bf16(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  u += 0x7fff + ((u >> 16) & 1);
  return (uint16_t)(u >> 16);
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank, n;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  if (argc < 10) {
    if (rank == 0) fprintf(stderr, "usage: %s TOKENS HIDDEN EXPERTS TOPK ROUTING ITERS WARMUP EMPTY_RANKS known|exchange\n", argv[0]);
    MPI_Finalize();
    return 2;
  }
  const size_t tokens = strtoull(argv[1], NULL, 10), hidden = strtoull(argv[2], NULL, 10);
  const int experts = atoi(argv[3]), k = atoi(argv[4]);
  moe_routing routing;
  if (moe_parse_routing(argv[5], &routing) != 0 || experts < k || k < 1) {
    if (rank == 0) fprintf(stderr, "moe_mpi: bad routing or top-k\n");
    MPI_Finalize();
    return 2;
  }
  const int iters = atoi(argv[6]), warmup = atoi(argv[7]), empty = atoi(argv[8]);
  const int known = strcmp(argv[9], "known") == 0;
  const size_t nt = rank >= n - empty ? 0 : tokens, row = hidden * 2; /* bf16 */
  uint16_t* tok = malloc((nt ? nt : 1) * row);
  uint16_t* out = malloc((nt ? nt : 1) * row);
  for (size_t i = 0; i < (nt ? nt : 1) * hidden; ++i) tok[i] = f_bf16((float)(i % 97) * 0.25f);
  int32_t* idx = malloc((nt ? nt : 1) * (size_t)k * sizeof *idx);
  float* w = malloc((nt ? nt : 1) * (size_t)k * sizeof *w);
  double* cdf = malloc((size_t)experts * sizeof *cdf);
  int *scount = calloc((size_t)n, sizeof(int)), *rcount = calloc((size_t)n, sizeof(int));
  int *sdispl = calloc((size_t)n, sizeof(int)), *rdispl = calloc((size_t)n, sizeof(int));
  int *fill = calloc((size_t)n, sizeof(int));
  size_t* pos = malloc((nt ? nt : 1) * (size_t)k * sizeof *pos);
  double* times = malloc((size_t)(iters > 0 ? iters : 1) * sizeof *times);
  double wire = 0;
  for (int it = 0; it < warmup + iters; ++it) {
    moe_popularity(&routing, experts, it, cdf);
    for (size_t t = 0; t < nt; ++t) moe_route(&routing, cdf, experts, k, 1, rank, it, t, &idx[t * k], &w[t * k]);
    /* With counts known in advance, the receive side's counts are handed
       over before the clock starts. */
    memset(scount, 0, (size_t)n * sizeof(int));
    for (size_t p = 0; p < nt * (size_t)k; ++p) scount[(int)((int64_t)idx[p] * n / experts)] += (int)row;
    if (known) MPI_Alltoall(scount, 1, MPI_INT, rcount, 1, MPI_INT, MPI_COMM_WORLD);
    MPI_Barrier(MPI_COMM_WORLD);
    const double t0 = MPI_Wtime();
    /* Permute: one row per (token, expert) pair, in destination order. */
    memset(scount, 0, (size_t)n * sizeof(int));
    for (size_t p = 0; p < nt * (size_t)k; ++p) scount[(int)((int64_t)idx[p] * n / experts)] += (int)row;
    int at = 0;
    for (int d = 0; d < n; ++d) sdispl[d] = at, at += scount[d];
    char* sbuf = malloc(at ? (size_t)at : 1);
    memcpy(fill, sdispl, (size_t)n * sizeof(int));
    for (size_t p = 0; p < nt * (size_t)k; ++p) {
      const int d = (int)((int64_t)idx[p] * n / experts);
      pos[p] = (size_t)fill[d];
      memcpy(sbuf + fill[d], (char*)tok + (p / (size_t)k) * row, row);
      fill[d] += (int)row;
    }
    if (!known) MPI_Alltoall(scount, 1, MPI_INT, rcount, 1, MPI_INT, MPI_COMM_WORLD);
    int rt = 0;
    for (int s = 0; s < n; ++s) rdispl[s] = rt, rt += rcount[s];
    char* rbuf = malloc(rt ? (size_t)rt : 1);
    MPI_Alltoallv(sbuf, scount, sdispl, MPI_BYTE, rbuf, rcount, rdispl, MPI_BYTE, MPI_COMM_WORLD);
    /* The experts are the identity; their rows go back the way they came. */
    MPI_Alltoallv(rbuf, rcount, rdispl, MPI_BYTE, sbuf, scount, sdispl, MPI_BYTE, MPI_COMM_WORLD);
    for (size_t t = 0; t < nt; ++t)
      for (size_t i = 0; i < hidden; ++i) {
        float acc = 0;
        for (int j = 0; j < k; ++j) acc += w[t * k + j] * bf16_f(((uint16_t*)(sbuf + pos[t * k + j]))[i]);
        out[t * hidden + i] = f_bf16(acc);
      }
    const double us = (MPI_Wtime() - t0) * 1e6;
    if (it >= warmup) {
      times[it - warmup] = us;
      for (int d = 0; d < n; ++d)
        if (d != rank) wire += 2.0 * scount[d];
    }
    free(sbuf);
    free(rbuf);
  }
  double* slowest = malloc((size_t)(iters > 0 ? iters : 1) * sizeof *slowest);
  MPI_Allreduce(times, slowest, iters, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  double all_wire = 0;
  MPI_Allreduce(&wire, &all_wire, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  if (rank == 0)
    printf("  %8zu %7zu %5d %10s %11.1f %11.1f %13.3f\n", tokens, hidden, k, argv[5], pct(slowest, iters, 0.5),
           pct(slowest, iters, 0.99), all_wire / iters / (1 << 20));
  free(tok), free(out), free(idx), free(w), free(cdf), free(scount), free(rcount), free(sdispl), free(rdispl);
  free(fill), free(pos), free(times), free(slowest);
  MPI_Finalize();
  return 0;
}
