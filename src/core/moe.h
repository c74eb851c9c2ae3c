// The MoE layer object behind cfxMoe*: routing tokens to the ranks of
// their top-k experts (dispatch) and the weighted expert outputs back in
// token order (combine), on the communicator's collectives.
//
// Dispatch sends each token once to each destination rank, with a record
// of which of that rank's experts it goes to (and the weights). Counts are
// found inside the call: the dynamic AlltoAllv gathers every rank's bytes
// per destination and rows per expert first, so every rank checks every
// capacity alike before data moves and the receive buffer is sized to what
// arrives. Combine returns each (token, expert) row and the token's rank
// adds them in j order, so the result does not depend on where experts live.
//
// On a communicator that spans hosts, dispatch is hierarchical (core/moe_hier.cpp): a token crosses the network
// once per destination host, to a proxy there (the rank with the sender's
// local index), which fans it out to that host's ranks with their experts.
// Combine returns every (token, expert) row unchanged, so the token's rank
// still adds them in j order; or, with config.host_partial_sums, each host
// adds its experts' weighted rows first and one partial per (token, host)
// crosses back.
//
// When every rank shares one host (one-sided peer memory to all), the
// layer takes the placed path instead (core/moe_placed.cpp): only the
// counts are exchanged, every rank computes where each of its rows lands,
// and the rows are copied once, straight from the tokens into the experts'
// blocks (dispatch) and from the experts' outputs to the token's rank
// (combine), as placed exchanges (algo::placed_writes / placed_reads).
#pragma once

#include "algo/schedule.h"
#include "core/comm.h"
#include "core/op.h"
#include "core/shared_bytes.h"

#include <conflux/conflux.h>

#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

namespace conflux {
// Byte buffers that resize() leaves uninitialised: the MoE layer sizes
// buffers it then fills completely, and zeroing them first would be a
// pass over every byte for nothing.
template <typename T>
struct UninitAllocator : std::allocator<T> {
  template <typename U>
  struct rebind {
    using other = UninitAllocator<U>;
  };
  UninitAllocator() = default;
  template <typename U>
  UninitAllocator(const UninitAllocator<U>&) {}
  template <typename U>
  void construct(U* p) noexcept {
    ::new (static_cast<void*>(p)) U;
  }
  template <typename U, typename... Args>
  void construct(U* p, Args&&... args) {
    ::new (static_cast<void*>(p)) U(std::forward<Args>(args)...);
  }
};
using Bytes = std::vector<uint8_t, UninitAllocator<uint8_t>>;

// Sizes a scratch buffer that the caller then fills afresh. Growing keeps
// no contents (no copy of the old bytes) and leaves half as much again of
// room: the sizes of a skewed routing wander from call to call, and each
// new maximum used to cost a reallocation, a copy and fresh pages to fault
// in, in the slowest iterations. Room never touched is never committed.
inline void fit(Bytes* b, size_t bytes) {
  if (bytes > b->capacity()) {
    b->clear();
    b->reserve(bytes + bytes / 2);
  }
  b->resize(bytes);
}
}  // namespace conflux

struct cfxMoe {
  cfxComm* comm = nullptr;
  cfxMoeConfig_t config{};
  std::vector<int> expert_rank;    // by expert id
  std::vector<int> local_experts;  // this rank's, ascending
  std::vector<int> local_index;    // by expert id: its index among this rank's, or -1
  size_t elem = 0, row_bytes = 0;
  // The most rows this rank's experts can receive in one dispatch (every
  // rank's max_tokens_per_rank tokens, top_k pairs each, within each
  // expert's capacity, plus alignment): the layer's own expert rows are
  // reserved at this size once, so they never move. A buffer that grows
  // moves to a new region, which the owner and every peer writing into it
  // fault in page by page again: under a rotating skewed routing new
  // maxima kept coming and cost more than the copies.
  size_t worst_expert_rows = 0;
  bool placed = false;  // rows move by the placed path (core/moe_placed.cpp)
  bool hier = false;    // dispatch goes through one proxy per host (core/moe_hier.cpp)
  // Hosts (ranks grouped by shared memory, in order of their lowest rank):
  // each rank's host, its index among its host's ranks, and each host's ranks.
  std::vector<int> host_of, index_on_host;
  std::vector<std::vector<int>> host_ranks;
  // Scratch kept from call to call: buffers of a few MiB, allocated afresh
  // each call, cost page faults on every byte.
  conflux::Bytes send_scratch, recv_scratch;
  conflux::Bytes forward_scratch;           // the hierarchical dispatch's second exchange
  conflux::Bytes own_targets;  // a proxy's targets of the rows it keeps (RecordTarget, packed)
  std::vector<conflux::SharedBytes> spare_rows;  // expert-row buffers of freed handles
  // The storage of placed schedules that freed handles and single calls
  // left: they hold a step per run of rows (tens of thousands at 4096
  // tokens), and built afresh each call their memory went back to the
  // system and was faulted in again, which cost more than the copies.
  std::vector<conflux::algo::Schedule> spare_schedules;
};

struct cfxMoeHandle {
  cfxMoe* moe = nullptr;
  size_t ntokens = 0;
  // The placed path (moe->placed): for pair p, the row of its destination
  // rank's expert block it went to (-1: dropped), and the schedules of its
  // exchanges, built once from the routing and kept for combine and replays.
  std::vector<int64_t> pair_row;
  std::shared_ptr<const conflux::algo::Schedule> dispatch_schedule, combine_schedule;
  size_t remote_pairs = 0;  // pairs whose expert is on another rank (combine's receive rows)
  // Token side. For pair p = t * top_k + j: the rank it went to and its
  // position among the rows that rank returns in combine (-1: none, e.g.
  // an expert id that was dropped).
  std::vector<int32_t> pair_rank;
  std::vector<uint32_t> pair_slot;
  std::vector<float> pair_weight;
  // Tokens sent to each rank, ascending, and the rows that rank returns.
  std::vector<std::vector<uint32_t>> sent;
  std::vector<size_t> returned_rows;
  // Expert side: for each source rank, each (token, expert) row it sent, in
  // the order it returns them: the row in expert_tokens (or -1: dropped)
  // and the weight.
  struct Target {
    int64_t row;
    float weight;
  };
  std::vector<std::vector<Target>> targets;
  std::vector<std::vector<uint32_t>> records;  // by source rank: each record's targets count, in order
  std::vector<size_t> tokens_per_expert, block_offset;  // by local expert, in rows
  size_t expert_rows = 0;  // rows of expert_tokens this dispatch filled (with alignment)
  size_t dropped = 0;
  // [s * n + d]: (token, expert) pairs and records rank s sent rank d: the
  // traffic of combine (reversed) and of a replay, known to every rank.
  std::vector<uint64_t> pair_matrix, record_matrix;
  // The hierarchical path (moe->hier): [s * hosts + host], the tokens rank s
  // sent to that host's proxy (known to every rank); and as a proxy, for
  // each source rank, each record's target count and, per target in j
  // order, the rank of this host holding it, the row's position among
  // those that rank returns to this proxy, and its weight.
  std::vector<uint64_t> host_records;
  struct ProxyTarget {
    int32_t rank;
    uint32_t pos;
    float weight;
  };
  std::vector<std::vector<uint32_t>> proxy_records;
  std::vector<std::vector<ProxyTarget>> proxy_targets;
  // Expert rows, when the caller gave no buffer: in shared memory, so that
  // on one host dispatch's writes and combine's reads (when expert_out is
  // these rows) go through a mapping, not the kernel.
  conflux::SharedBytes owned_rows;
  size_t wire_bytes = 0, received_bytes = 0, committed_bytes = 0;  // cfxMoeStats
  size_t network_bytes = 0;  // of wire_bytes, those sent to ranks on other hosts (cfxMoeNetworkBytes)
};

namespace conflux::moe {

// What a dispatch found wrong on a rank, gathered with its counts so that
// every rank fails alike: kind << 56 | value << 24 | token.
enum BadKind : uint64_t { kNoProblem = 0, kExpertOutOfRange = 1, kTooManyTokens = 2 };
uint64_t bad_word(BadKind kind, uint64_t value, uint64_t token);

inline size_t aligned(size_t rows, size_t alignment) {
  return alignment > 1 ? (rows + alignment - 1) / alignment * alignment : rows;
}

// Element i of a row of the layer's datatype, as float, and back (rounded).
float load(const void* base, size_t i, cfxDataType_t t);
void store(void* base, size_t i, float v, cfxDataType_t t);

// Combine's sum: tokens_out[t] = sum over j, in order, of pair t*k+j's
// weight times its row rows[t*k+j] (nullptr: dropped, contributes
// nothing), accumulated in float and rounded once to the datatype.
void sum_rows(const cfxMoeHandle& h, const uint8_t* const* rows, const float* weights, bool use_handle_weights,
              void* tokens_out);

// Gives the handle the layer's own expert rows for `rows` rows: a freed
// handle's buffer where there is one, reserved at cfxMoe::worst_expert_rows.
void take_owned_rows(cfxMoe* moe, cfxMoeHandle* h, size_t rows);

// Hands a placed schedule's storage back to the layer (cfxMoe::spare_schedules)
// when nothing else holds it, and resets the pointer.
void keep_schedule(cfxMoe* moe, std::shared_ptr<const algo::Schedule>* schedule);

// Runs the communicator's operation under the layer's deadline.
Status run_op(cfxMoe* moe, OpDesc op);
// Every rank's `mine` (the same length on every rank), in rank order.
Result<std::vector<uint64_t>> gather_words(cfxMoe* moe, const std::vector<uint64_t>& mine);

// The most rows an expert keeps when a dispatch routes `pairs` (token,
// expert) pairs in all: capacity_factor times its even share, or no limit
// (UINT64_MAX) when dropless.
uint64_t expert_capacity(const cfxMoeConfig_t& c, uint64_t pairs);

// Every rank's dispatch words, each rank's `stride` words from all[s *
// stride]: its problem word at 0, its expert_capacity_rows at 1
// (UINT64_MAX: the layer keeps the rows) and its rows per expert from
// `rows_at`. Fails alike on every rank for a problem or an overflow;
// otherwise gives the rows each expert keeps under the capacity policy.
Status check_dispatch_words(const cfxMoe& moe, const std::vector<uint64_t>& all, size_t stride, size_t rows_at,
                            std::vector<size_t>* kept);

// One token row as it reached an expert rank: its `m` (expert, weight)
// targets there (RecordTarget, packed) and its row.
struct RecordTarget {
  int32_t expert;
  float weight;
};
struct Arrival {
  uint32_t m;
  const uint8_t* targets;
  const uint8_t* row;
};

// Tokens of one dispatch message, each with its targets at the destination.
using RecordList = std::vector<std::pair<uint32_t, std::vector<RecordTarget>>>;
// The bytes of one dispatch message carrying `list` (records, padding, rows),
// and the message itself written at `at` (that many bytes), rows from `tokens`.
size_t record_message_bytes(const RecordList& list, size_t row_bytes, size_t* meta_bytes);
void write_record_message(const RecordList& list, const void* tokens, size_t row_bytes, uint8_t* at);

// Parses one dispatch message in the per-destination format (the record
// count; each record's target count and targets; padding to 16 bytes; the
// rows) into `out`, in record order.
Status parse_records(const cfxMoe& moe, const uint8_t* at, size_t bytes, int source, std::vector<Arrival>* out);

// An AlltoAllv of bytes whose whole traffic every rank knows: `bytes[s * n
// + d]` is what rank s sends rank d; blocks are packed in rank order on both
// sides. Knowing the matrix lets the tuner take the sparse or the one-sided
// AlltoAllv. Counts what this rank sent into h's statistics.
Status exchange_known(cfxMoeHandle* h, const Bytes& send, const std::vector<uint64_t>& bytes, Bytes* recv,
                      std::vector<size_t>* rdispls);

// The hierarchical dispatch (core/moe_hier.cpp). pack_by_host writes the
// first exchange's messages: to each destination host's proxy (this rank
// itself for its own host) every token once, with its targets on that host.
// host_tokens[host]: the tokens sent to that host.
void pack_by_host(const cfxMoe& moe, const void* tokens, size_t ntokens, const int32_t* topk_idx,
                  const float* topk_weights, Bytes* send, std::vector<size_t>* sc, std::vector<size_t>* sd,
                  std::vector<uint64_t>* host_tokens);
// What arrived at the proxies (recv, by source rank at rd[s], rc[s] bytes)
// fanned out to the ranks of each host: `arrivals[s]` are the rows source
// s sent this rank, in its token order; rows this rank proxied to itself
// point into `recv`, which must outlive them. Needs h->pair_matrix and
// record_matrix (every rank's per-destination traffic, from the counts).
Status fan_out_on_host(cfxMoeHandle* h, const Bytes& recv, const std::vector<size_t>& rc,
                       const std::vector<size_t>& rd, std::vector<std::vector<Arrival>>* arrivals);
// cfxMoeCombine with host partial sums (config.host_partial_sums): the rows
// go back to their proxies within each host, each proxy adds each token's
// weighted rows, and one partial per (token, host) crosses back.
Status host_partial_combine(cfxMoeHandle* h, const void* expert_out, void* tokens_out);

// The placed path (core/moe_placed.cpp), for communicators whose ranks all
// reach each other's memory.
Status placed_dispatch(cfxMoe* moe, const void* tokens, size_t ntokens, const int32_t* topk_idx,
                       const float* topk_weights, void* expert_tokens, size_t capacity_rows,
                       size_t tokens_per_expert[], cfxMoeHandle_t* handle_out);
Status placed_combine(cfxMoeHandle* h, const void* expert_out, const float* weights, bool use_handle_weights,
                      void* tokens_out, bool rows_only);
Status placed_replay(cfxMoeHandle* h, const void* tokens, void* expert_tokens, bool scale);

}  // namespace conflux::moe
