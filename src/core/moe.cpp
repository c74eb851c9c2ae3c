// MoE dispatch and combine (cfxMoe*): see core/moe.h.
#include "core/moe.h"

#include "core/config.h"
#include "core/copy.h"
#include "core/half.h"
#include "core/log.h"
#include "core/moe_rows.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <memory>
#include <string>

using namespace conflux;
using namespace conflux::moe;

namespace conflux::moe {

uint64_t bad_word(BadKind kind, uint64_t value, uint64_t token) {
  return static_cast<uint64_t>(kind) << 56 | (value & 0xffffffffu) << 24 | (token & 0xffffffu);
}

float load(const void* base, size_t i, cfxDataType_t t) {
  switch (t) {
    case cfxFloat32: return static_cast<const float*>(base)[i];
    case cfxBfloat16: return bf16_to_float(static_cast<const uint16_t*>(base)[i]);
    default: return half_to_float(static_cast<const uint16_t*>(base)[i]);
  }
}

void store(void* base, size_t i, float v, cfxDataType_t t) {
  switch (t) {
    case cfxFloat32: static_cast<float*>(base)[i] = v; break;
    case cfxBfloat16: static_cast<uint16_t*>(base)[i] = float_to_bf16(v); break;
    default: static_cast<uint16_t*>(base)[i] = float_to_half(v); break;
  }
}

Status run_op(cfxMoe* moe, OpDesc op) {
  cfxComm* comm = moe->comm;
  const int64_t saved = comm->timeout_ms();
  if (moe->config.timeout_ms > 0) comm->set_timeout_ms(moe->config.timeout_ms);
  Status st = comm->run(op);
  if (moe->config.timeout_ms > 0) comm->set_timeout_ms(saved);
  return st;
}

Result<std::vector<uint64_t>> gather_words(cfxMoe* moe, const std::vector<uint64_t>& mine) {
  std::vector<uint64_t> all(mine.size() * static_cast<size_t>(moe->comm->nranks()));
  OpDesc op;
  op.coll = Coll::kAllGather;
  op.sendbuf = mine.data();
  op.recvbuf = all.data();
  op.count = mine.size();
  op.dtype = cfxUint64;
  CFX_RETURN_IF_ERROR(run_op(moe, std::move(op)));
  return all;
}

uint64_t expert_capacity(const cfxMoeConfig_t& c, uint64_t pairs) {
  if (c.capacity_factor <= 0) return UINT64_MAX;  // dropless
  return static_cast<uint64_t>(std::ceil(c.capacity_factor * static_cast<double>(pairs) / c.num_experts));
}

Status check_dispatch_words(const cfxMoe& moe, const std::vector<uint64_t>& all, size_t stride, size_t rows_at,
                            std::vector<size_t>* kept) {
  const cfxMoeConfig_t& c = moe.config;
  const size_t n = static_cast<size_t>(moe.comm->nranks()), E = static_cast<size_t>(c.num_experts);
  for (size_t s = 0; s < n; ++s) {
    const uint64_t p = all[s * stride];
    const uint64_t kind = p >> 56, value = (p >> 24) & 0xffffffffu, token = p & 0xffffffu;
    if (kind == kExpertOutOfRange)
      return invalid_argument("cfxMoeDispatch: rank " + std::to_string(s) + "'s token " + std::to_string(token) +
                              " routes to expert " + std::to_string(static_cast<int32_t>(value)) +
                              ", out of range [0, " + std::to_string(E) + ")");
    if (kind == kTooManyTokens)
      return invalid_argument("cfxMoeDispatch: rank " + std::to_string(s) + " dispatches " + std::to_string(token) +
                              " tokens, more than max_tokens_per_rank " + std::to_string(value));
  }
  uint64_t pairs = 0;
  std::vector<uint64_t> per_expert(E, 0);
  for (size_t s = 0; s < n; ++s)
    for (size_t e = 0; e < E; ++e) per_expert[e] += all[s * stride + rows_at + e];
  for (uint64_t v : per_expert) pairs += v;
  const uint64_t cap = expert_capacity(c, pairs);
  kept->assign(E, 0);
  for (size_t e = 0; e < E; ++e) (*kept)[e] = std::min(per_expert[e], cap);
  for (size_t q = 0; q < n; ++q) {
    size_t rows_q = 0;
    for (size_t e = 0; e < E; ++e)
      if (moe.expert_rank[e] == static_cast<int>(q)) rows_q += aligned((*kept)[e], c.expert_alignment);
    const uint64_t capacity = all[q * stride + 1];  // UINT64_MAX: the library keeps the rows itself
    if (rows_q > capacity)
      return invalid_usage("cfxMoeDispatch: rank " + std::to_string(q) + "'s experts receive " + std::to_string(rows_q) +
                           " rows but its expert_capacity_rows is " + std::to_string(capacity) +
                           (c.capacity_factor > 0 ? "" : " (dropless)"));
  }
  return Status::Ok();
}

void sum_rows(const cfxMoeHandle& h, const uint8_t* const* rows, const float* weights, bool use_handle_weights,
              void* tokens_out) {
  const cfxMoeConfig_t& c = h.moe->config;
  const size_t k = static_cast<size_t>(c.top_k), hidden = c.hidden, row = h.moe->row_bytes;
  std::vector<float> acc(hidden);
  const MoeAccumulateFn accumulate = moe_accumulate_for(c.datatype);
  const MoeStoreFn store_out = moe_store_for(c.datatype);
  for (size_t t = 0; t < h.ntokens; ++t) {
    std::fill(acc.begin(), acc.end(), 0.0f);
    for (size_t j = 0; j < k; ++j) {
      const size_t p = t * k + j;
      if (rows[p] == nullptr) continue;
      const float w = use_handle_weights ? h.pair_weight[p] : (weights != nullptr ? weights[p] : 1.0f);
      accumulate(acc.data(), rows[p], w, hidden);
    }
    store_out(static_cast<uint8_t*>(tokens_out) + t * row, acc.data(), hidden);
  }
}

size_t record_message_bytes(const RecordList& list, size_t row_bytes, size_t* meta_bytes) {
  size_t meta = 4;
  for (const auto& rec : list) meta += 4 + rec.second.size() * sizeof(RecordTarget);
  *meta_bytes = (meta + 15) / 16 * 16;
  return *meta_bytes + list.size() * row_bytes;
}

void write_record_message(const RecordList& list, const void* tokens, size_t row_bytes, uint8_t* at) {
  size_t meta = 0;
  record_message_bytes(list, row_bytes, &meta);
  uint8_t* rows = at + meta;
  std::memset(at, 0, meta);  // the padding too
  const uint32_t nrec = static_cast<uint32_t>(list.size());
  std::memcpy(at, &nrec, 4);
  at += 4;
  for (const auto& [t, targets] : list) {
    const uint32_t m = static_cast<uint32_t>(targets.size());
    std::memcpy(at, &m, 4);
    std::memcpy(at + 4, targets.data(), targets.size() * sizeof(RecordTarget));
    at += 4 + targets.size() * sizeof(RecordTarget);
    copy_bytes(rows, static_cast<const uint8_t*>(tokens) + t * row_bytes, row_bytes);
    rows += row_bytes;
  }
}

Status parse_records(const cfxMoe& moe, const uint8_t* at, size_t bytes, int source, std::vector<Arrival>* out) {
  auto corrupt = [&] {
    return internal_error("cfxMoeDispatch: a corrupt record stream from rank " + std::to_string(source));
  };
  if (bytes == 0) return Status::Ok();
  if (bytes < 4) return corrupt();
  uint32_t nrec = 0;
  std::memcpy(&nrec, at, 4);
  const size_t first = out->size();
  size_t meta = 4;
  for (uint32_t r = 0; r < nrec; ++r) {
    if (meta + 4 > bytes) return corrupt();
    uint32_t m = 0;
    std::memcpy(&m, at + meta, 4);
    out->push_back({m, at + meta + 4, nullptr});
    meta += 4 + m * sizeof(RecordTarget);
  }
  meta = (meta + 15) / 16 * 16;
  if (meta + nrec * moe.row_bytes != bytes) return corrupt();
  for (uint32_t r = 0; r < nrec; ++r) (*out)[first + r].row = at + meta + r * moe.row_bytes;
  return Status::Ok();
}

Status exchange_known(cfxMoeHandle* h, const Bytes& send, const std::vector<uint64_t>& bytes, Bytes* recv,
                      std::vector<size_t>* rdispls) {
  cfxMoe* moe = h->moe;
  const size_t n = static_cast<size_t>(moe->comm->nranks()), me = static_cast<size_t>(moe->comm->rank());
  OpDesc op;
  op.all_sendcounts.assign(bytes.begin(), bytes.end());
  op.all_sdispls.resize(n * n);
  op.all_rdispls.resize(n * n);
  for (size_t s = 0; s < n; ++s) {
    size_t off = 0;
    for (size_t d = 0; d < n; ++d) op.all_sdispls[s * n + d] = off, off += bytes[s * n + d];
  }
  for (size_t d = 0; d < n; ++d) {
    size_t off = 0;
    for (size_t s = 0; s < n; ++s) op.all_rdispls[d * n + s] = off, off += bytes[s * n + d];
  }
  op.coll = Coll::kAlltoAllv;
  op.dtype = cfxUint8;
  op.sendcounts.resize(n);
  op.recvcounts.resize(n);
  op.sdispls.resize(n);
  op.rdispls.resize(n);
  size_t so = 0, ro = 0;
  for (size_t p = 0; p < n; ++p) {
    op.sendcounts[p] = bytes[me * n + p], op.sdispls[p] = so, so += op.sendcounts[p];
    op.recvcounts[p] = bytes[p * n + me], op.rdispls[p] = ro, ro += op.recvcounts[p];
  }
  fit(recv, ro);
  *rdispls = op.rdispls;
  op.sendbuf = send.data();
  op.recvbuf = recv->data();
  for (size_t p = 0; p < n; ++p) {
    if (p == me) continue;
    h->wire_bytes += op.sendcounts[p];
    if (moe->host_of[p] != moe->host_of[me]) h->network_bytes += op.sendcounts[p];
  }
  h->received_bytes += ro;
  h->committed_bytes += ro;  // sized to what arrives
  return run_op(moe, std::move(op));
}

void take_owned_rows(cfxMoe* moe, cfxMoeHandle* h, size_t rows) {
  // Reserving the worst case costs address space only, in every process on
  // the host that maps the region; past this much, grow as needed instead.
  constexpr size_t kMostReserved = size_t{64} << 30;
  if (!moe->spare_rows.empty()) {
    h->owned_rows = std::move(moe->spare_rows.back());
    moe->spare_rows.pop_back();
  }
  const size_t row = moe->row_bytes;
  if (moe->worst_expert_rows <= kMostReserved / row)
    h->owned_rows.reserve(std::max<size_t>(moe->worst_expert_rows, 1) * row);
  h->owned_rows.resize(std::max<size_t>(rows, 1) * row);
}

}  // namespace conflux::moe

namespace {

// Each token a rank sends one destination rank, with its targets there.
using RankRecords = RecordList;

// cfxMoe::worst_expert_rows: what check_dispatch_words could let through
// to this rank, at most.
size_t worst_expert_rows(const cfxMoe& moe) {
  const cfxMoeConfig_t& c = moe.config;
  const uint64_t n = static_cast<uint64_t>(moe.comm->nranks());
  const uint64_t pairs = n * c.max_tokens_per_rank * static_cast<uint64_t>(c.top_k);
  const uint64_t per_expert = conflux::moe::aligned(std::min(pairs, conflux::moe::expert_capacity(c, pairs)),
                                                    c.expert_alignment);
  const uint64_t nlocal = moe.local_experts.size();
  const uint64_t padding = c.expert_alignment > 1 ? nlocal * (c.expert_alignment - 1) : 0;
  return static_cast<size_t>(std::min(nlocal * per_expert, pairs + padding));
}

Status check_config(const cfxMoeConfig_t* c, int nranks) {
  auto bad = [](const std::string& why) { return invalid_argument("cfxMoeCreate: " + why); };
  if (c == nullptr) return bad("config is NULL");
  if (c->size < offsetof(cfxMoeConfig_t, capacity_factor) + sizeof c->capacity_factor)
    return bad("config.size is " + std::to_string(c->size) + ": set it to sizeof(cfxMoeConfig_t)");
  if (c->num_experts < 1) return bad("num_experts must be at least 1");
  if (c->top_k < 1 || c->top_k > c->num_experts)
    return bad("top_k " + std::to_string(c->top_k) + " must be in [1, num_experts]");
  if (c->hidden == 0) return bad("hidden is 0");
  if (c->datatype != cfxFloat32 && c->datatype != cfxBfloat16 && c->datatype != cfxFloat16)
    return bad("datatype must be float32, bfloat16 or float16");
  if (!(c->capacity_factor >= 0) || !std::isfinite(c->capacity_factor)) return bad("capacity_factor must be >= 0");
  if (c->size >= offsetof(cfxMoeConfig_t, host_partial_sums) + sizeof c->host_partial_sums &&
      (c->host_partial_sums < 0 || c->host_partial_sums > 2))
    return bad("host_partial_sums " + std::to_string(c->host_partial_sums) + " must be 0, 1 or 2");
  if (c->expert_to_rank == nullptr && (c->num_experts < nranks || c->num_experts % nranks != 0))
    return bad("blocked placement needs num_experts (" + std::to_string(c->num_experts) +
               ") to be a multiple of the ranks (" + std::to_string(nranks) + "); pass expert_to_rank");
  if (c->expert_to_rank != nullptr)
    for (int e = 0; e < c->num_experts; ++e)
      if (c->expert_to_rank[e] < 0 || c->expert_to_rank[e] >= nranks)
        return bad("expert_to_rank[" + std::to_string(e) + "] = " + std::to_string(c->expert_to_rank[e]) +
                   " is not a rank");
  return Status::Ok();
}

void find_hosts(cfxMoe* moe) {
  const std::vector<RankInfo>& peers = moe->comm->peers();
  const size_t n = static_cast<size_t>(moe->comm->nranks());
  moe->host_of.assign(n, 0);
  moe->index_on_host.assign(n, 0);
  moe->host_ranks.clear();
  std::vector<uint64_t> hashes;
  for (size_t r = 0; r < n; ++r) {
    const uint64_t hash = peers.size() == n ? peers[r].host_hash : 0;
    const size_t h = static_cast<size_t>(std::find(hashes.begin(), hashes.end(), hash) - hashes.begin());
    if (h == hashes.size()) hashes.push_back(hash), moe->host_ranks.emplace_back();
    moe->host_of[r] = static_cast<int>(h);
    moe->index_on_host[r] = static_cast<int>(moe->host_ranks[h].size());
    moe->host_ranks[h].push_back(static_cast<int>(r));
  }
}

// Everything a rank's config says, as words every rank compares.
std::vector<uint64_t> fingerprint(const cfxMoe& m) {
  uint64_t map = 1469598103934665603ull;  // FNV-1a over the placement
  for (int r : m.expert_rank) map = (map ^ static_cast<uint64_t>(r)) * 1099511628211ull;
  const cfxMoeConfig_t& c = m.config;
  return {static_cast<uint64_t>(c.num_experts), static_cast<uint64_t>(c.top_k), c.hidden,
          static_cast<uint64_t>(c.datatype), c.max_tokens_per_rank, std::bit_cast<uint64_t>(c.capacity_factor),
          c.expert_alignment, map, m.placed ? 1u : 0u, m.hier ? 1u : 0u,
          static_cast<uint64_t>(c.host_partial_sums)};
}

const char* kFieldNames[] = {"num_experts",      "top_k",          "hidden",
                             "datatype",         "max_tokens_per_rank", "capacity_factor",
                             "expert_alignment", "expert_to_rank", "row exchange (1: placed; CONFLUX_MOE_PLACED)",
                             "dispatch route (1: through a proxy per host; CONFLUX_MOE_HIER)", "host_partial_sums"};

Status create(cfxMoe_t* out, const cfxMoeConfig_t* config, cfxComm* comm) {
  if (out == nullptr) return invalid_argument("cfxMoeCreate: moe is NULL");
  *out = nullptr;
  if (comm == nullptr) return invalid_argument("cfxMoeCreate: communicator is NULL");
  const int n = comm->nranks();
  CFX_RETURN_IF_ERROR(check_config(config, n));
  auto moe = std::make_unique<cfxMoe>();
  moe->comm = comm;
  std::memcpy(&moe->config, config, std::min(config->size, sizeof(cfxMoeConfig_t)));
  moe->config.size = sizeof(cfxMoeConfig_t);
  moe->config.expert_to_rank = nullptr;  // copied below; the caller's array need not outlive the call
  const int E = config->num_experts;
  moe->expert_rank.resize(static_cast<size_t>(E));
  for (int e = 0; e < E; ++e)
    moe->expert_rank[e] = config->expert_to_rank != nullptr ? config->expert_to_rank[e] : e / (E / n);
  moe->local_index.assign(static_cast<size_t>(E), -1);
  for (int e = 0; e < E; ++e)
    if (moe->expert_rank[e] == comm->rank()) {
      moe->local_index[e] = static_cast<int>(moe->local_experts.size());
      moe->local_experts.push_back(e);
    }
  // Rows are copied once, one-sided, where every rank reaches the others' memory.
  moe->placed = comm->one_sided_to_all() && conflux::config().moe_placed && conflux::config().shm_collectives;
  find_hosts(moe.get());
  // Through proxies wherever the ranks span hosts.
  moe->hier = !moe->placed && moe->host_ranks.size() > 1 && conflux::config().moe_hier;
  moe->elem = datatype_size(config->datatype);
  moe->row_bytes = moe->elem * config->hidden;
  moe->worst_expert_rows = worst_expert_rows(*moe);
  // Every rank's configuration, compared with every other's: a rank that
  // differs is named on every rank.
  const std::vector<uint64_t> mine = fingerprint(*moe);
  Result<std::vector<uint64_t>> gathered = gather_words(moe.get(), mine);
  if (!gathered.ok()) return Status(gathered.status()).prepend("cfxMoeCreate: ");
  const std::vector<uint64_t>& all = gathered.value();
  for (int r = 1; r < n; ++r)
    for (size_t k = 0; k < mine.size(); ++k)
      if (all[r * mine.size() + k] != all[k])
        return invalid_usage("cfxMoeCreate: rank " + std::to_string(r) + "'s " + kFieldNames[k] +
                             " differs from rank 0's (" + std::to_string(all[r * mine.size() + k]) + " against " +
                             std::to_string(all[k]) + ")");
  *out = moe.release();
  return Status::Ok();
}

// The flat dispatch's messages: to each destination rank its records
// (write_record_message's format), packed in rank order.
void pack_by_rank(const cfxMoe& moe, const void* tokens, const std::vector<RankRecords>& out, Bytes* send,
                  std::vector<size_t>* sc, std::vector<size_t>* sd) {
  const size_t n = out.size();
  size_t total = 0, meta = 0;
  for (size_t d = 0; d < n; ++d) {
    (*sd)[d] = total;
    total += ((*sc)[d] = record_message_bytes(out[d], moe.row_bytes, &meta));
  }
  fit(send, total);
  for (size_t d = 0; d < n; ++d) write_record_message(out[d], tokens, moe.row_bytes, send->data() + (*sd)[d]);
}

Status dispatch(cfxMoe* moe, const void* tokens, size_t ntokens, const int32_t* topk_idx, const float* topk_weights,
                void* expert_tokens, size_t capacity_rows, size_t tokens_per_expert[], cfxMoeHandle_t* handle_out) {
  auto bad = [](const std::string& why) { return invalid_argument("cfxMoeDispatch: " + why); };
  if (moe == nullptr || handle_out == nullptr) return bad("moe or handle is NULL");
  *handle_out = nullptr;
  if (ntokens > 0 && (tokens == nullptr || topk_idx == nullptr || topk_weights == nullptr))
    return bad("tokens, topk_idx or topk_weights is NULL");
  if (!moe->local_experts.empty() && tokens_per_expert == nullptr && expert_tokens != nullptr)
    return bad("tokens_per_expert is NULL");
  if (moe->placed)
    return placed_dispatch(moe, tokens, ntokens, topk_idx, topk_weights, expert_tokens, capacity_rows,
                           tokens_per_expert, handle_out);
  cfxComm* comm = moe->comm;
  const cfxMoeConfig_t& c = moe->config;
  const size_t n = static_cast<size_t>(comm->nranks()), k = static_cast<size_t>(c.top_k),
               E = static_cast<size_t>(c.num_experts), row = moe->row_bytes;
  auto h = std::make_unique<cfxMoeHandle>();
  h->moe = moe;
  h->ntokens = ntokens;
  h->pair_rank.assign(ntokens * k, -1);
  h->pair_slot.assign(ntokens * k, 0);
  h->pair_weight.assign(topk_weights, topk_weights + ntokens * k);
  h->sent.assign(n, {});
  h->returned_rows.assign(n, 0);
  // Routing: each token once per destination rank, with its experts there.
  uint64_t problem = kNoProblem;
  if (ntokens > c.max_tokens_per_rank) problem = bad_word(kTooManyTokens, c.max_tokens_per_rank, ntokens);
  std::vector<uint64_t> rows_for(E, 0);
  std::vector<RankRecords> out(n);
  for (size_t t = 0; t < ntokens && problem == kNoProblem; ++t) {
    for (size_t j = 0; j < k; ++j) {
      const int32_t e = topk_idx[t * k + j];
      if (e < 0 || static_cast<size_t>(e) >= E) {
        problem = bad_word(kExpertOutOfRange, static_cast<uint32_t>(e), t);
        break;
      }
      const int dst = moe->expert_rank[static_cast<size_t>(e)];
      auto& list = out[static_cast<size_t>(dst)];
      if (list.empty() || list.back().first != t) list.emplace_back(static_cast<uint32_t>(t), std::vector<RecordTarget>{});
      list.back().second.push_back({e, topk_weights[t * k + j]});
      h->pair_rank[t * k + j] = dst;
      h->pair_slot[t * k + j] = static_cast<uint32_t>(h->returned_rows[static_cast<size_t>(dst)]++);
      ++rows_for[static_cast<size_t>(e)];
    }
  }
  if (problem != kNoProblem) {  // send nothing; the problem travels with the counts
    for (auto& list : out) list.clear();
    std::fill(rows_for.begin(), rows_for.end(), 0);
  }
  std::vector<size_t> sc(n), sd(n);
  std::vector<uint64_t> host_tokens;
  Bytes& send = moe->send_scratch;
  if (moe->hier) {
    pack_by_host(*moe, tokens, problem == kNoProblem ? ntokens : 0, topk_idx, topk_weights, &send, &sc, &sd,
                 &host_tokens);
  } else {
    pack_by_rank(*moe, tokens, out, &send, &sc, &sd);
  }
  for (size_t d = 0; d < n; ++d) h->sent[d].reserve(out[d].size());
  for (size_t d = 0; d < n; ++d)
    for (auto& rec : out[d]) h->sent[d].push_back(rec.first);
  // Every rank's words: its problem, its expert_capacity_rows, its rows per expert.
  DynamicExchange x;
  x.extra.reserve(2 + 2 * n + E);
  x.extra.push_back(problem);
  const bool owned = expert_tokens == nullptr;
  x.extra.push_back(owned ? UINT64_MAX : capacity_rows);
  // Pairs and records per destination: what combine and a replay will move,
  // so every rank knows their traffic too.
  for (size_t d = 0; d < n; ++d) x.extra.push_back(problem == kNoProblem ? h->returned_rows[d] : 0);
  for (size_t d = 0; d < n; ++d) x.extra.push_back(problem == kNoProblem ? out[d].size() : 0);
  x.extra.insert(x.extra.end(), rows_for.begin(), rows_for.end());
  x.extra.insert(x.extra.end(), host_tokens.begin(), host_tokens.end());  // hierarchical: tokens per host
  Bytes& recv = moe->recv_scratch;
  std::vector<size_t> kept;
  const size_t nextra = x.extra.size();
  const int me = comm->rank();
  x.decide = [&](const std::vector<uint64_t>& all, size_t recv_bytes) -> Result<void*> {
    CFX_RETURN_IF_ERROR(check_dispatch_words(*moe, all, nextra, 2 + 2 * n, &kept));
    h->pair_matrix.resize(n * n);
    h->record_matrix.resize(n * n);
    for (size_t s = 0; s < n; ++s)
      for (size_t d = 0; d < n; ++d) {
        h->pair_matrix[s * n + d] = all[s * nextra + 2 + d];
        h->record_matrix[s * n + d] = all[s * nextra + 2 + n + d];
      }
    const size_t hosts = host_tokens.size();
    h->host_records.resize(n * hosts);
    for (size_t s = 0; s < n; ++s)
      for (size_t q = 0; q < hosts; ++q) h->host_records[s * hosts + q] = all[s * nextra + 2 + 2 * n + E + q];
    fit(&recv, recv_bytes);
    return static_cast<void*>(recv.data());
  };
  OpDesc op;
  op.coll = Coll::kAlltoAllv;
  op.dynamic = true;
  op.dtype = cfxUint8;
  op.sendbuf = send.data();
  op.sendcounts = sc;
  op.sdispls = sd;
  op.exchange = &x;
  std::vector<size_t> rc(n), rd(n);
  op.recvcounts_out = rc.data();
  op.rdispls_out = rd.data();
  CFX_RETURN_IF_ERROR(run_op(moe, std::move(op)));
  for (size_t d = 0; d < n; ++d) {
    if (static_cast<int>(d) == me) continue;
    h->wire_bytes += sc[d];
    if (moe->host_of[d] != moe->host_of[static_cast<size_t>(me)]) h->network_bytes += sc[d];
  }
  h->received_bytes += recv.size();
  h->committed_bytes += recv.size();
  // The rows each source rank sent this rank, in its token order: as they
  // arrived, or from this host's proxies.
  std::vector<std::vector<Arrival>> arrivals(n);
  if (moe->hier) {
    CFX_RETURN_IF_ERROR(fan_out_on_host(h.get(), recv, rc, rd, &arrivals));
  } else {
    for (size_t s = 0; s < n; ++s)
      CFX_RETURN_IF_ERROR(parse_records(*moe, recv.data() + rd[s], rc[s], static_cast<int>(s), &arrivals[s]));
  }
  // This rank's expert blocks, then the rows into them, in (source rank,
  // token) order.
  const size_t nlocal = moe->local_experts.size();
  h->tokens_per_expert.resize(nlocal);
  h->block_offset.resize(nlocal);
  size_t at = 0;
  for (size_t i = 0; i < nlocal; ++i) {
    h->tokens_per_expert[i] = kept[static_cast<size_t>(moe->local_experts[i])];
    h->block_offset[i] = at;
    at += aligned(h->tokens_per_expert[i], c.expert_alignment);
  }
  h->expert_rows = at;
  if (owned) {
    take_owned_rows(moe, h.get(), at);  // alignment gaps stay unwritten, as in a caller's buffer
    expert_tokens = h->owned_rows.data();
  }
  std::vector<size_t> filled(nlocal, 0);
  h->targets.assign(n, {});
  h->records.assign(n, {});
  for (size_t s = 0; s < n; ++s) {
    const std::vector<Arrival>& recs = arrivals[s];
    for (const Arrival& r : recs) {
      const uint32_t m = r.m;
      h->records[s].push_back(m);
      for (uint32_t q = 0; q < m; ++q) {
        RecordTarget tg;
        std::memcpy(&tg, r.targets + q * sizeof(RecordTarget), sizeof tg);
        const int li = moe->local_index[static_cast<size_t>(tg.expert)];
        if (li < 0) return internal_error("cfxMoeDispatch: rank " + std::to_string(s) + " sent a row for expert " +
                                          std::to_string(tg.expert) + ", which rank " + std::to_string(me) + " lacks");
        const size_t pos = filled[static_cast<size_t>(li)]++;
        if (pos >= h->tokens_per_expert[static_cast<size_t>(li)]) {
          h->targets[s].push_back({-1, tg.weight});
          ++h->dropped;
          continue;
        }
        const size_t dst_row = h->block_offset[static_cast<size_t>(li)] + pos;
        copy_bytes(static_cast<uint8_t*>(expert_tokens) + dst_row * row, r.row, row);
        h->targets[s].push_back({static_cast<int64_t>(dst_row), tg.weight});
      }
    }
  }
  if (tokens_per_expert != nullptr)
    for (size_t i = 0; i < nlocal; ++i) tokens_per_expert[i] = h->tokens_per_expert[i];
  if (h->dropped > 0)
    CFX_INFO(kColl, "cfxMoeDispatch: rank %d dropped %zu token-expert pairs over capacity", me, h->dropped);
  *handle_out = h.release();
  return Status::Ok();
}

// Combine's exchange: each (token, expert) row back to its token's rank,
// in the order that rank sent them (a dropped one as zeros).
Status return_rows(cfxMoeHandle* h, const void* expert_out, Bytes* recv, std::vector<size_t>* rd) {
  cfxMoe* moe = h->moe;
  const size_t n = h->targets.size(), row = moe->row_bytes;
  size_t total = 0;
  for (size_t s = 0; s < n; ++s) total += h->targets[s].size() * row;
  Bytes& send = moe->send_scratch;
  fit(&send, total);
  size_t at = 0;
  for (size_t s = 0; s < n; ++s)
    for (const cfxMoeHandle::Target& tg : h->targets[s]) {
      if (tg.row >= 0) copy_bytes(send.data() + at, static_cast<const uint8_t*>(expert_out) + tg.row * row, row);
      else std::memset(send.data() + at, 0, row);  // dropped: contributes nothing
      at += row;
    }
  // Rows go back the other way: what d returns to s is what s sent d.
  std::vector<uint64_t> back(n * n);
  for (size_t s = 0; s < n; ++s)
    for (size_t d = 0; d < n; ++d) back[d * n + s] = h->pair_matrix[s * n + d] * row;
  return exchange_known(h, send, back, recv, rd);
}

Status combine(cfxMoeHandle* h, const void* expert_out, const float* weights, bool use_handle_weights,
               void* tokens_out, bool rows_only) {
  if (h->moe->placed) return placed_combine(h, expert_out, weights, use_handle_weights, tokens_out, rows_only);
  if (h->moe->hier && h->moe->config.host_partial_sums != 0 && use_handle_weights && !rows_only)
    return host_partial_combine(h, expert_out, tokens_out);
  cfxMoe* moe = h->moe;
  const cfxMoeConfig_t& c = moe->config;
  const size_t k = static_cast<size_t>(c.top_k), row = moe->row_bytes;
  Bytes& recv = moe->recv_scratch;
  std::vector<size_t> rd;
  CFX_RETURN_IF_ERROR(return_rows(h, expert_out, &recv, &rd));
  std::vector<const uint8_t*> rows(h->ntokens * k);
  for (size_t p = 0; p < rows.size(); ++p) {
    const int32_t q = h->pair_rank[p];
    rows[p] = q >= 0 ? recv.data() + rd[static_cast<size_t>(q)] + h->pair_slot[p] * row : nullptr;
  }
  if (rows_only) {
    for (size_t p = 0; p < rows.size(); ++p) {
      uint8_t* dst = static_cast<uint8_t*>(tokens_out) + p * row;
      if (rows[p] != nullptr) copy_bytes(dst, rows[p], row);
      else std::memset(dst, 0, row);
    }
    return Status::Ok();
  }
  sum_rows(*h, rows.data(), weights, use_handle_weights, tokens_out);
  return Status::Ok();
}

Status replay(cfxMoeHandle* h, const void* tokens, void* expert_tokens, bool scale) {
  if (h->moe->placed) return placed_replay(h, tokens, expert_tokens, scale);
  cfxMoe* moe = h->moe;
  const cfxMoeConfig_t& c = moe->config;
  const size_t n = h->sent.size(), row = moe->row_bytes;
  size_t total = 0;
  for (size_t d = 0; d < n; ++d) total += h->sent[d].size() * row;
  Bytes& send = moe->send_scratch;
  fit(&send, total);
  size_t at = 0;
  for (size_t d = 0; d < n; ++d)
    for (uint32_t t : h->sent[d]) {
      copy_bytes(send.data() + at, static_cast<const uint8_t*>(tokens) + t * row, row);
      at += row;
    }
  // A replay goes to each destination rank directly (the traffic of the
  // flat dispatch, without its records).
  std::vector<uint64_t> bytes(h->record_matrix.size());
  for (size_t q = 0; q < bytes.size(); ++q) bytes[q] = h->record_matrix[q] * row;
  Bytes& recv = moe->recv_scratch;
  std::vector<size_t> rd;
  CFX_RETURN_IF_ERROR(exchange_known(h, send, bytes, &recv, &rd));
  for (size_t s = 0; s < n; ++s) {
    size_t next_target = 0;
    for (size_t r = 0; r < h->records[s].size(); ++r) {
      const uint8_t* src = recv.data() + rd[s] + r * row;
      for (uint32_t q = 0; q < h->records[s][r]; ++q) {
        const cfxMoeHandle::Target& tg = h->targets[s][next_target++];
        if (tg.row < 0) continue;
        uint8_t* dst = static_cast<uint8_t*>(expert_tokens) + tg.row * row;
        if (!scale) {
          copy_bytes(dst, src, row);
          continue;
        }
        for (size_t i = 0; i < c.hidden; ++i) store(dst, i, tg.weight * load(src, i, c.datatype), c.datatype);
      }
    }
  }
  return Status::Ok();
}

template <typename F>
cfxResult_t moe_call(cfxMoe* moe, F&& body) {
  cfxComm* comm = moe != nullptr ? moe->comm : nullptr;
  try {
    Status st = body();
    if (st.ok()) return cfxSuccess;
    if (comm != nullptr) comm->set_last_error(st.message());
    CFX_WARN(kColl, "%s", st.message().c_str());
    return st.code();
  } catch (const std::bad_alloc&) {
    if (comm != nullptr) comm->set_last_error("out of memory");
    return cfxSystemError;
  } catch (...) {
    if (comm != nullptr) comm->set_last_error("unexpected exception in the MoE layer");
    return cfxInternalError;
  }
}

}  // namespace

extern "C" {

cfxResult_t cfxMoeCreate(cfxMoe_t* moe, const cfxMoeConfig_t* config, cfxComm_t comm) {
  try {
    Status st = create(moe, config, comm);
    if (!st.ok() && comm != nullptr) comm->set_last_error(st.message());
    return st.code();
  } catch (...) {
    return cfxInternalError;
  }
}

cfxResult_t cfxMoeDispatch(cfxMoe_t moe, const void* tokens, size_t ntokens, const int32_t* topk_idx,
                           const float* topk_weights, void* expert_tokens, size_t expert_capacity_rows,
                           size_t tokens_per_expert[], cfxMoeHandle_t* handle) {
  if (moe == nullptr) return cfxInvalidArgument;
  return moe_call(moe, [&] {
    return dispatch(moe, tokens, ntokens, topk_idx, topk_weights, expert_tokens, expert_capacity_rows,
                    tokens_per_expert, handle);
  });
}

cfxResult_t cfxMoeCombine(cfxMoe_t moe, cfxMoeHandle_t handle, const void* expert_out, void* tokens_out) {
  if (moe == nullptr || handle == nullptr || handle->moe != moe) return cfxInvalidArgument;
  return moe_call(moe, [&] { return combine(handle, expert_out, nullptr, true, tokens_out, false); });
}

cfxResult_t cfxMoeCombineWeighted(cfxMoe_t moe, cfxMoeHandle_t handle, const void* expert_out, const float* weights,
                                  void* tokens_out) {
  if (moe == nullptr || handle == nullptr || handle->moe != moe) return cfxInvalidArgument;
  return moe_call(moe, [&] { return combine(handle, expert_out, weights, false, tokens_out, false); });
}

cfxResult_t cfxMoeGatherRows(cfxMoe_t moe, cfxMoeHandle_t handle, const void* expert_out, void* rows_out) {
  if (moe == nullptr || handle == nullptr || handle->moe != moe) return cfxInvalidArgument;
  return moe_call(moe, [&] { return combine(handle, expert_out, nullptr, false, rows_out, true); });
}

cfxResult_t cfxMoeDispatchReplay(cfxMoe_t moe, cfxMoeHandle_t handle, const void* tokens, void* expert_tokens,
                                 int scale_by_weights) {
  if (moe == nullptr || handle == nullptr || handle->moe != moe) return cfxInvalidArgument;
  return moe_call(moe, [&] { return replay(handle, tokens, expert_tokens, scale_by_weights != 0); });
}

cfxResult_t cfxMoeLocalExperts(cfxMoe_t moe, int experts[], int* count) {
  if (moe == nullptr || count == nullptr) return cfxInvalidArgument;
  *count = static_cast<int>(moe->local_experts.size());
  if (experts != nullptr) std::copy(moe->local_experts.begin(), moe->local_experts.end(), experts);
  return cfxSuccess;
}

cfxResult_t cfxMoeBlockOffsets(cfxMoeHandle_t handle, size_t offsets[]) {
  if (handle == nullptr || offsets == nullptr) return cfxInvalidArgument;
  std::copy(handle->block_offset.begin(), handle->block_offset.end(), offsets);
  return cfxSuccess;
}

cfxResult_t cfxMoeExpertTokens(cfxMoeHandle_t handle, void** expert_tokens, size_t* rows) {
  if (handle == nullptr || expert_tokens == nullptr || rows == nullptr) return cfxInvalidArgument;
  *expert_tokens = handle->owned_rows.empty() ? nullptr : handle->owned_rows.data();
  *rows = handle->expert_rows;
  return cfxSuccess;
}

cfxResult_t cfxMoeStats(cfxMoeHandle_t handle, size_t* wire_bytes, size_t* received_bytes, size_t* committed_bytes) {
  if (handle == nullptr) return cfxInvalidArgument;
  if (wire_bytes != nullptr) *wire_bytes = handle->wire_bytes;
  if (received_bytes != nullptr) *received_bytes = handle->received_bytes;
  if (committed_bytes != nullptr) *committed_bytes = handle->committed_bytes;
  return cfxSuccess;
}

cfxResult_t cfxMoeNetworkBytes(cfxMoeHandle_t handle, size_t* network_bytes) {
  if (handle == nullptr || network_bytes == nullptr) return cfxInvalidArgument;
  *network_bytes = handle->network_bytes;
  return cfxSuccess;
}

cfxResult_t cfxMoeDropped(cfxMoeHandle_t handle, size_t* dropped) {
  if (handle == nullptr || dropped == nullptr) return cfxInvalidArgument;
  *dropped = handle->dropped;
  return cfxSuccess;
}

cfxResult_t cfxMoeHandleFree(cfxMoeHandle_t handle) {
  if (handle == nullptr) return cfxSuccess;
  if (!handle->owned_rows.empty() && handle->moe->spare_rows.size() < 4)
    handle->moe->spare_rows.push_back(std::move(handle->owned_rows));
  conflux::moe::keep_schedule(handle->moe, &handle->dispatch_schedule);
  conflux::moe::keep_schedule(handle->moe, &handle->combine_schedule);
  delete handle;
  return cfxSuccess;
}

cfxResult_t cfxMoeDestroy(cfxMoe_t moe) {
  delete moe;
  return cfxSuccess;
}

}  // extern "C"
