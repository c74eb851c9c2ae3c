/* The routings the MoE benchmark uses, in C so that `conflux perf moe` and
 * the MPI driver (bench/peers/moe_mpi.c) route the same tokens to the same
 * experts: uniform, Zipf(s) over the experts with the hot ones rotating
 * from iteration to iteration, and one expert taking half the tokens. Each
 * token gets top_k distinct experts; the draw is a function of (seed, rank,
 * iteration, token) only. */
#ifndef CONFLUX_TOOLS_MOE_ROUTING_H
#define CONFLUX_TOOLS_MOE_ROUTING_H

#include <math.h>
#include <stdlib.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

typedef enum { MOE_UNIFORM = 0, MOE_ZIPF = 1, MOE_HALF = 2 } moe_routing_kind;

typedef struct {
  moe_routing_kind kind;
  double zipf_s; /* MOE_ZIPF */
} moe_routing;

/* "uniform", "zipf0.5", "zipf1", "zipf1.5", "half": 0 on success. */
static inline int moe_parse_routing(const char* text, moe_routing* out) {
  if (strcmp(text, "uniform") == 0) {
    out->kind = MOE_UNIFORM;
    return 0;
  }
  if (strcmp(text, "half") == 0) {
    out->kind = MOE_HALF;
    return 0;
  }
  if (strncmp(text, "zipf", 4) == 0) {
    char* end = NULL;
    out->kind = MOE_ZIPF;
    out->zipf_s = strtod(text + 4, &end);
    return (end != text + 4 && *end == '\0' && out->zipf_s > 0) ? 0 : -1;
  }
  return -1;
}

static inline uint64_t moe_mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

/* A uniform double in [0, 1) from a counter. */
static inline double moe_unit(uint64_t* state) {
  *state = moe_mix(*state);
  return (double)(*state >> 11) * (1.0 / 9007199254740992.0);
}

/* Expert popularity for one iteration: cdf[e] over the experts (cdf has
 * num_experts entries, the last 1). Zipf's hot experts rotate by 7 ids per
 * iteration. */
static inline void moe_popularity(const moe_routing* r, int num_experts, int iteration, double* cdf) {
  double total = 0;
  for (int e = 0; e < num_experts; ++e) {
    double w = 1.0;
    if (r->kind == MOE_ZIPF) {
      const int order = (e + num_experts - (iteration * 7) % num_experts) % num_experts;
      w = 1.0 / pow((double)(order + 1), r->zipf_s);
    }
    total += w;
    cdf[e] = total;
  }
  for (int e = 0; e < num_experts; ++e) cdf[e] /= total;
}

/* Token t's top_k distinct experts into experts[0..top_k), and weights that
 * sum to 1. cdf from moe_popularity. */
static inline void moe_route(const moe_routing* r, const double* cdf, int num_experts, int top_k, uint64_t seed, int rank,
                             int iteration, size_t token, int32_t* experts, float* weights) {
  uint64_t state = moe_mix(seed ^ moe_mix((uint64_t)rank << 40 ^ (uint64_t)iteration << 24 ^ (uint64_t)token));
  const int hot = (iteration * 5) % num_experts;
  float wsum = 0;
  for (int j = 0; j < top_k; ++j) {
    int e = 0;
    for (;;) {
      if (r->kind == MOE_HALF && j == 0 && moe_unit(&state) < 0.5) {
        e = hot;
      } else {
        const double u = moe_unit(&state);
        int lo = 0, hi = num_experts - 1;
        while (lo < hi) {
          const int mid = (lo + hi) / 2;
          if (cdf[mid] > u) hi = mid;
          else lo = mid + 1;
        }
        e = lo;
      }
      int seen = 0;
      for (int q = 0; q < j; ++q) seen |= experts[q] == e;
      if (!seen) break;
    }
    experts[j] = e;
    weights[j] = (float)(1.0 + moe_unit(&state));
    wsum += weights[j];
  }
  for (int j = 0; j < top_k; ++j) weights[j] /= wsum;
}

#endif
