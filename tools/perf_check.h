// Data patterns and expected values for `conflux perf -c 1`: each rank fills
// its input from (rank, index); the expected output is computed directly, so
// #wrong counts elements that differ from what the collective must produce.
#pragma once

#include <conflux/conflux.h>

#include <cstddef>
#include <string>

namespace conflux::tools {

enum class PerfColl { kAllReduce, kAllGather, kReduceScatter, kBroadcast, kReduce, kAlltoAll, kSendRecv, kGather, kScatter };

bool parse_perf_coll(const std::string& name, PerfColl* out);
const char* perf_coll_name(PerfColl c);

// Element counts of the send and recv buffers for a test of `bytes` total
// (nccl-tests sizing: AllGather/ReduceScatter/AlltoAll/Gather/Scatter sizes are the full buffer).
void perf_buffer_counts(PerfColl c, size_t count, int nranks, size_t* send_count, size_t* recv_count);
// nccl-tests' bus bandwidth factor.
double busbw_factor(PerfColl c, int nranks);

void fill_input(void* buf, size_t n, cfxDataType_t t, cfxRedOp_t op, int rank, size_t offset = 0);
// Number of elements of the output that differ from the expected result.
size_t count_wrong(PerfColl c, const void* recv, size_t count, cfxDataType_t t, cfxRedOp_t op, int root, int rank,
                   int nranks);

}  // namespace conflux::tools
