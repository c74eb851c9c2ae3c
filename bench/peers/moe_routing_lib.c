/* The benchmark's routings (tools/moe_routing.h) as a shared library, so
 * the Python baselines (bench/peers/moe_gloo.py) route the same tokens to
 * the same experts as `conflux perf moe` and the MPI driver. */
#include "../../tools/moe_routing.h"

/* Tokens 0..ntokens-1 of `rank` in `iteration`: top-k experts into idx and
 * weights into w (ntokens * k each). 0 on success, -1 for a bad routing. */
int moe_route_tokens(const char* routing, int experts, int k, int rank, int iteration, size_t ntokens, int32_t* idx,
                     float* w) {
  moe_routing r;
  if (moe_parse_routing(routing, &r) != 0 || experts < k || k < 1) return -1;
  double* cdf = malloc((size_t)experts * sizeof *cdf);
  if (cdf == NULL) return -1;
  moe_popularity(&r, experts, iteration, cdf);
  for (size_t t = 0; t < ntokens; ++t) moe_route(&r, cdf, experts, k, 1, rank, iteration, t, &idx[t * k], &w[t * k]);
  free(cdf);
  return 0;
}
