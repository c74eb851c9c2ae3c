// `conflux perf moe`: the round trip a MoE layer pays, dispatch and combine.
#pragma once

#include <string>

namespace conflux::tools {

struct MoePerfOptions {
  std::string tokens = "1,8,128,512,4096";  // tokens per rank, a list
  std::string hidden = "2048";              // elements per token, a list
  int experts = 64;
  std::string topk = "8";                   // a list
  std::string routing = "uniform";          // uniform, zipfS, half; a list
  std::string dtype = "bfloat16";
  int empty_ranks = 0;                      // the last this many ranks dispatch no tokens
  int host_partial_sums = 0;                // cfxMoeConfig_t.host_partial_sums (multi-host combine)
  // Where dispatch puts the expert rows (and combine reads them back from):
  // "owned" the layer's own rows (cfxMoeExpertTokens); "heap" or "memalloc"
  // a caller's buffer of the worst-case size, from the heap or from
  // cfxMemAlloc (which peers on the host map instead of going through the kernel).
  std::string expert_buffers = "owned";
  int iters = 200;
  int warmup = 10;
  unsigned seed = 1;
};

int run_moe_perf(const MoePerfOptions& o);

}  // namespace conflux::tools
