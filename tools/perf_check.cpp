#include "perf_check.h"

#include "core/check_data.h"

#include <algorithm>
#include <cmath>
#include <cstdint>

namespace conflux::tools {
namespace {

using check::as_type;
using check::input_value;
using check::load;
using check::reduced_value;
using check::store;

}  // namespace

bool parse_perf_coll(const std::string& name, PerfColl* out) {
  struct N { const char* name; PerfColl c; };
  static const N kNames[] = {{"allreduce", PerfColl::kAllReduce}, {"allgather", PerfColl::kAllGather},
                             {"reducescatter", PerfColl::kReduceScatter}, {"broadcast", PerfColl::kBroadcast},
                             {"reduce", PerfColl::kReduce}, {"alltoall", PerfColl::kAlltoAll},
                             {"sendrecv", PerfColl::kSendRecv}, {"gather", PerfColl::kGather},
                             {"scatter", PerfColl::kScatter}};
  for (const auto& n : kNames)
    if (name == n.name) {
      *out = n.c;
      return true;
    }
  return false;
}

const char* perf_coll_name(PerfColl c) {
  static const char* const kNames[] = {"allreduce", "allgather", "reducescatter", "broadcast", "reduce",
                                       "alltoall",  "sendrecv",  "gather",        "scatter"};
  return kNames[static_cast<int>(c)];
}

void perf_buffer_counts(PerfColl c, size_t count, int nranks, size_t* send_count, size_t* recv_count) {
  size_t n = static_cast<size_t>(nranks);
  switch (c) {
    case PerfColl::kAllGather:
    case PerfColl::kGather: *send_count = count / n; *recv_count = count / n * n; break;
    case PerfColl::kReduceScatter:
    case PerfColl::kScatter: *send_count = count / n * n; *recv_count = count / n; break;
    case PerfColl::kAlltoAll: *send_count = *recv_count = count / n * n; break;
    default: *send_count = *recv_count = count; break;
  }
}

double busbw_factor(PerfColl c, int nranks) {
  double n = nranks;
  switch (c) {
    case PerfColl::kAllReduce: return 2.0 * (n - 1) / n;
    case PerfColl::kAllGather:
    case PerfColl::kReduceScatter:
    case PerfColl::kAlltoAll:
    case PerfColl::kGather:
    case PerfColl::kScatter: return (n - 1) / n;
    default: return 1.0;
  }
}

void fill_input(void* buf, size_t n, cfxDataType_t t, cfxRedOp_t op, int rank, size_t offset) {
  for (size_t i = 0; i < n; ++i) store(buf, i, t, input_value(rank, offset + i, op));
}

size_t count_wrong(PerfColl c, const void* recv, size_t count, cfxDataType_t t, cfxRedOp_t op, int root, int rank,
                   int nranks) {
  size_t send_count = 0, recv_count = 0;
  perf_buffer_counts(c, count, nranks, &send_count, &recv_count);
  size_t wrong = 0;
  auto expect = [&](size_t i, double want) {
    if (load(recv, i, t) != want) ++wrong;
  };
  const size_t block = (c == PerfColl::kAllReduce || c == PerfColl::kBroadcast || c == PerfColl::kReduce ||
                        c == PerfColl::kSendRecv)
                           ? count
                           : count / static_cast<size_t>(nranks);
  switch (c) {
    case PerfColl::kAllReduce:
      for (size_t i = 0; i < recv_count; ++i) expect(i, reduced_value(nranks, i, op, t));
      break;
    case PerfColl::kReduce:
      if (rank == root)
        for (size_t i = 0; i < recv_count; ++i) expect(i, reduced_value(nranks, i, op, t));
      break;
    case PerfColl::kBroadcast:
      for (size_t i = 0; i < recv_count; ++i) expect(i, as_type(input_value(root, i, op), t));
      break;
    case PerfColl::kSendRecv:
      for (size_t i = 0; i < recv_count; ++i) expect(i, as_type(input_value((rank - 1 + nranks) % nranks, i, op), t));
      break;
    case PerfColl::kAllGather:
      for (size_t i = 0; i < recv_count; ++i) expect(i, as_type(input_value(static_cast<int>(i / block), i % block, op), t));
      break;
    case PerfColl::kGather:
      if (rank == root)
        for (size_t i = 0; i < recv_count; ++i) expect(i, as_type(input_value(static_cast<int>(i / block), i % block, op), t));
      break;
    case PerfColl::kReduceScatter:
      for (size_t i = 0; i < recv_count; ++i) expect(i, reduced_value(nranks, rank * block + i, op, t));
      break;
    case PerfColl::kScatter:
      for (size_t i = 0; i < recv_count; ++i) expect(i, as_type(input_value(root, rank * block + i, op), t));
      break;
    case PerfColl::kAlltoAll:
      for (size_t i = 0; i < recv_count; ++i)
        expect(i, as_type(input_value(static_cast<int>(i / block), rank * block + i % block, op), t));
      break;
  }
  return wrong;
}

}  // namespace conflux::tools
