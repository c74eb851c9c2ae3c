// The MoE layer's placed path (see core/moe.h): on a communicator whose
// ranks all reach each other's memory, only the counts are exchanged. From
// every rank's rows per expert, each rank computes where each of its
// (token, expert) rows lands in its expert's block: after the rows of
// lower ranks, in token order, as the message path fills them. Dispatch
// then writes each row once, from the caller's tokens straight into the
// expert's block (algo::placed_writes); combine reads each expert row once,
// from the expert's output into the token's rank (algo::placed_reads),
// where rows of local experts are used in place. The message path copies
// every row four or five times: packed, through the transport's buffers,
// unpacked, and back.
#include "algo/algorithms.h"
#include "core/copy.h"
#include "core/log.h"
#include "core/moe.h"

#include <algorithm>
#include <cstring>
#include <memory>
#include <string>

namespace conflux::moe {

namespace {

// Builds into the storage of a schedule an earlier call left, where there is one.
std::shared_ptr<const algo::Schedule> build(cfxMoe& moe, const std::vector<algo::Placement>& placements, bool writes) {
  algo::CollArgs a;
  a.coll = Coll::kAlltoAllv;
  a.nranks = moe.comm->nranks();
  a.rank = moe.comm->rank();
  a.elem = moe.row_bytes;
  a.placements = placements.data();
  a.placement_count = placements.size();
  algo::Schedule reuse;
  if (!moe.spare_schedules.empty()) {
    reuse = std::move(moe.spare_schedules.back());
    moe.spare_schedules.pop_back();
  }
  // Not const: keep_schedule takes the storage back through this pointer.
  return std::make_shared<algo::Schedule>(algo::placed_exchange(a, writes, std::move(reuse)));
}

// Runs a placed exchange between `send` (send_rows rows of this rank that
// peers may reach) and `recv` (recv_rows rows).
Status run_placed(cfxMoe* moe, std::shared_ptr<const algo::Schedule> schedule, const void* send, size_t send_rows,
                  void* recv, size_t recv_rows) {
  OpDesc op;
  op.coll = Coll::kAlltoAllv;
  op.stage = 3;  // signed apart from the dynamic AlltoAllv's two stages
  op.dtype = cfxUint8;
  op.sendbuf = send;
  op.recvbuf = recv;
  op.schedule = std::move(schedule);
  op.schedule_send_bytes = send_rows * moe->row_bytes;
  op.schedule_recv_bytes = recv_rows * moe->row_bytes;
  return run_op(moe, std::move(op));
}

// Where this rank's pairs land: for pair p (token p / k), a placement of
// source row `src_of(p)` into its expert's block; dropped pairs have none.
template <typename SrcOf>
std::vector<algo::Placement> dispatch_placements(const cfxMoeHandle& h, int me, SrcOf src_of) {
  std::vector<algo::Placement> out;
  out.reserve(h.pair_row.size());
  for (size_t p = 0; p < h.pair_row.size(); ++p)
    if (h.pair_row[p] >= 0)
      out.push_back({me, h.pair_rank[p], src_of(p), static_cast<size_t>(h.pair_row[p]), 1});
  return out;
}

}  // namespace

void keep_schedule(cfxMoe* moe, std::shared_ptr<const algo::Schedule>* schedule) {
  constexpr size_t kSpares = 4;  // a dispatch's and a combine's, and room for a replay's
  if (*schedule != nullptr && schedule->use_count() == 1 && moe->spare_schedules.size() < kSpares)
    moe->spare_schedules.push_back(std::move(*std::const_pointer_cast<algo::Schedule>(*schedule)));
  schedule->reset();
}

Status placed_dispatch(cfxMoe* moe, const void* tokens, size_t ntokens, const int32_t* topk_idx,
                       const float* topk_weights, void* expert_tokens, size_t capacity_rows,
                       size_t tokens_per_expert[], cfxMoeHandle_t* handle_out) {
  cfxComm* comm = moe->comm;
  const cfxMoeConfig_t& c = moe->config;
  const size_t n = static_cast<size_t>(comm->nranks()), k = static_cast<size_t>(c.top_k),
               E = static_cast<size_t>(c.num_experts), row = moe->row_bytes;
  const int me = comm->rank();
  auto h = std::make_unique<cfxMoeHandle>();
  h->moe = moe;
  h->ntokens = ntokens;
  h->pair_rank.assign(ntokens * k, -1);
  h->pair_row.assign(ntokens * k, -1);
  h->pair_slot.assign(ntokens * k, 0);
  h->pair_weight.assign(topk_weights, topk_weights + ntokens * k);

  // This rank's words: its problem, its capacity, its rows per expert.
  const size_t stride = 2 + E;
  std::vector<uint64_t> mine(stride, 0);
  uint64_t& problem = mine[0];
  if (ntokens > c.max_tokens_per_rank) problem = bad_word(kTooManyTokens, c.max_tokens_per_rank, ntokens);
  for (size_t p = 0; p < ntokens * k && problem == kNoProblem; ++p) {
    const int32_t e = topk_idx[p];
    if (e < 0 || static_cast<size_t>(e) >= E) {
      problem = bad_word(kExpertOutOfRange, static_cast<uint32_t>(e), p / k);
      break;
    }
    h->pair_rank[p] = moe->expert_rank[static_cast<size_t>(e)];
    ++mine[2 + static_cast<size_t>(e)];
  }
  if (problem != kNoProblem) std::fill(mine.begin() + 2, mine.end(), 0);
  const bool owned = expert_tokens == nullptr;
  mine[1] = owned ? UINT64_MAX : capacity_rows;
  Result<std::vector<uint64_t>> gathered = gather_words(moe, mine);
  if (!gathered.ok()) return Status(gathered.status()).prepend("cfxMoeDispatch: ");
  const std::vector<uint64_t>& all = gathered.value();
  std::vector<size_t> kept;
  CFX_RETURN_IF_ERROR(check_dispatch_words(*moe, all, stride, 2, &kept));

  // Every expert's block on its rank (experts ascending), and where this
  // rank's rows start in it: after the rows of the ranks below.
  std::vector<size_t> block_start(E), rank_rows(n, 0), next(E, 0);
  size_t dropped_here = 0;
  for (size_t e = 0; e < E; ++e) {
    const size_t q = static_cast<size_t>(moe->expert_rank[e]);
    block_start[e] = rank_rows[q];
    rank_rows[q] += aligned(kept[e], c.expert_alignment);
    uint64_t total = 0;
    for (size_t s = 0; s < n; ++s) {
      if (s < static_cast<size_t>(me)) next[e] += all[s * stride + 2 + e];
      total += all[s * stride + 2 + e];
    }
    if (static_cast<int>(q) == me) dropped_here += total - kept[e];
  }
  for (size_t p = 0; p < ntokens * k; ++p) {
    const size_t e = static_cast<size_t>(topk_idx[p]);
    const size_t pos = next[e]++;
    if (pos >= kept[e]) continue;  // over the expert's capacity: dropped
    h->pair_row[p] = static_cast<int64_t>(block_start[e] + pos);
    if (h->pair_rank[p] != me) h->pair_slot[p] = static_cast<uint32_t>(h->remote_pairs++);
  }

  const size_t nlocal = moe->local_experts.size();
  h->tokens_per_expert.resize(nlocal);
  h->block_offset.resize(nlocal);
  for (size_t i = 0; i < nlocal; ++i) {
    const size_t e = static_cast<size_t>(moe->local_experts[i]);
    h->tokens_per_expert[i] = kept[e];
    h->block_offset[i] = block_start[e];
  }
  h->expert_rows = rank_rows[static_cast<size_t>(me)];
  h->dropped = dropped_here;
  if (owned) {
    take_owned_rows(moe, h.get(), h->expert_rows);  // alignment gaps stay unwritten
    expert_tokens = h->owned_rows.data();
  }

  h->dispatch_schedule = build(*moe, dispatch_placements(*h, me, [k](size_t p) { return p / k; }), true);
  CFX_RETURN_IF_ERROR(run_placed(moe, h->dispatch_schedule, tokens, ntokens, expert_tokens, h->expert_rows));

  if (tokens_per_expert != nullptr)
    for (size_t i = 0; i < nlocal; ++i) tokens_per_expert[i] = h->tokens_per_expert[i];
  size_t received = 0;
  for (size_t i = 0; i < nlocal; ++i) received += h->tokens_per_expert[i];
  h->wire_bytes += h->remote_pairs * row;
  h->received_bytes += received * row;
  h->committed_bytes += received * row;  // rows land in the output itself: no receive buffer
  if (h->dropped > 0)
    CFX_INFO(kColl, "cfxMoeDispatch: rank %d dropped %zu token-expert pairs over capacity", me, h->dropped);
  *handle_out = h.release();
  return Status::Ok();
}

Status placed_combine(cfxMoeHandle* h, const void* expert_out, const float* weights, bool use_handle_weights,
                      void* tokens_out, bool rows_only) {
  cfxMoe* moe = h->moe;
  const size_t row = moe->row_bytes;
  const int me = moe->comm->rank();
  if (h->expert_rows > 0 && expert_out == nullptr) return invalid_argument("cfxMoeCombine: expert_out is NULL");
  if (h->ntokens > 0 && tokens_out == nullptr) return invalid_argument("cfxMoeCombine: tokens_out is NULL");
  const auto* experts = static_cast<const uint8_t*>(expert_out);
  if (rows_only) {
    // Each pair's row straight into its place in the output.
    std::vector<algo::Placement> placements;
    for (size_t p = 0; p < h->pair_row.size(); ++p) {
      uint8_t* dst = static_cast<uint8_t*>(tokens_out) + p * row;
      if (h->pair_row[p] < 0) std::memset(dst, 0, row);
      else if (h->pair_rank[p] == me) copy_bytes(dst, experts + h->pair_row[p] * row, row);
      else placements.push_back({h->pair_rank[p], me, static_cast<size_t>(h->pair_row[p]), p, 1});
    }
    std::shared_ptr<const algo::Schedule> schedule = build(*moe, placements, false);
    const Status st = run_placed(moe, schedule, expert_out, h->expert_rows, tokens_out, h->pair_row.size());
    keep_schedule(moe, &schedule);
    CFX_RETURN_IF_ERROR(st);
    h->wire_bytes += placements.size() * row;
    return Status::Ok();
  }
  if (h->combine_schedule == nullptr) {
    std::vector<algo::Placement> placements;
    placements.reserve(h->remote_pairs);
    for (size_t p = 0; p < h->pair_row.size(); ++p)
      if (h->pair_row[p] >= 0 && h->pair_rank[p] != me)
        placements.push_back({h->pair_rank[p], me, static_cast<size_t>(h->pair_row[p]), h->pair_slot[p], 1});
    h->combine_schedule = build(*moe, placements, false);
  }
  Bytes& recv = moe->recv_scratch;
  fit(&recv, std::max<size_t>(h->remote_pairs, 1) * row);
  CFX_RETURN_IF_ERROR(run_placed(moe, h->combine_schedule, expert_out, h->expert_rows, recv.data(), h->remote_pairs));
  h->wire_bytes += h->remote_pairs * row;
  h->received_bytes += h->remote_pairs * row;
  h->committed_bytes += h->remote_pairs * row;
  std::vector<const uint8_t*> rows(h->pair_row.size(), nullptr);  // dropped pairs stay nullptr
  for (size_t p = 0; p < rows.size(); ++p)
    if (h->pair_row[p] >= 0)
      rows[p] = h->pair_rank[p] == me ? experts + h->pair_row[p] * row : recv.data() + size_t{h->pair_slot[p]} * row;
  sum_rows(*h, rows.data(), weights, use_handle_weights, tokens_out);
  return Status::Ok();
}

Status placed_replay(cfxMoeHandle* h, const void* tokens, void* expert_tokens, bool scale) {
  cfxMoe* moe = h->moe;
  const cfxMoeConfig_t& c = moe->config;
  const size_t k = static_cast<size_t>(c.top_k), row = moe->row_bytes;
  const int me = moe->comm->rank();
  if (expert_tokens == nullptr) expert_tokens = h->owned_rows.empty() ? nullptr : h->owned_rows.data();
  if (h->expert_rows > 0 && expert_tokens == nullptr)
    return invalid_argument("cfxMoeDispatchReplay: expert_tokens is NULL");
  if (!scale) {
    CFX_RETURN_IF_ERROR(run_placed(moe, h->dispatch_schedule, tokens, h->ntokens, expert_tokens, h->expert_rows));
  } else {
    // Each pair's row scaled by its weight, then placed like dispatch's.
    Bytes& scaled = moe->send_scratch;
    fit(&scaled, std::max<size_t>(h->pair_row.size(), 1) * row);
    for (size_t p = 0; p < h->pair_row.size(); ++p) {
      if (h->pair_row[p] < 0) continue;
      const void* src = static_cast<const uint8_t*>(tokens) + (p / k) * row;
      uint8_t* dst = scaled.data() + p * row;
      for (size_t i = 0; i < c.hidden; ++i) store(dst, i, h->pair_weight[p] * load(src, i, c.datatype), c.datatype);
    }
    std::shared_ptr<const algo::Schedule> schedule =
        build(*moe, dispatch_placements(*h, me, [](size_t p) { return p; }), true);
    const Status st = run_placed(moe, schedule, scaled.data(), h->pair_row.size(), expert_tokens, h->expert_rows);
    keep_schedule(moe, &schedule);
    CFX_RETURN_IF_ERROR(st);
  }
  h->wire_bytes += h->remote_pairs * row;
  return Status::Ok();
}

}  // namespace conflux::moe
