// The hierarchical MoE dispatch: a token crosses the network once per
// destination host, not once per destination rank (see core/moe.h).
//
// Exchange 1 (the dynamic AlltoAllv that also carries every rank's counts):
// each rank sends each destination host's proxy every token that has an
// expert there, once, with all its targets on that host. A rank's proxy on
// host H is the rank of H with the same index on its host (modulo H's size,
// for uneven hosts); on its own host a rank is its own proxy, so tokens for
// its host's experts go through exchange 2 alone.
//
// Exchange 2 (within each host; its sizes every rank computes from the
// counts exchange 1 gathered): each proxy gives each rank of its host the
// tokens with experts there, with the source rank and those targets only.
// Each source reaches a rank through one proxy, in its token order, so the
// expert blocks fill in (source rank, token) order as on the flat path. A
// proxy's own experts take their rows straight from what exchange 1 brought.
//
// A combine with host partial sums runs the same route backwards: each
// expert rank returns its rows to the proxies they came through (within the
// host), each proxy adds every token's weighted rows in j order, and one
// partial per (token, host) crosses back to the token's rank.
#include "core/moe.h"

#include "core/copy.h"
#include "core/moe_rows.h"

#include <algorithm>
#include <cstring>
#include <string>

namespace conflux::moe {
namespace {

// The rank that forwards `source`'s tokens to the ranks of `host`.
int proxy_of(const cfxMoe& moe, int source, int host) {
  if (moe.host_of[static_cast<size_t>(source)] == host) return source;
  const std::vector<int>& ranks = moe.host_ranks[static_cast<size_t>(host)];
  return ranks[static_cast<size_t>(moe.index_on_host[static_cast<size_t>(source)]) % ranks.size()];
}

size_t padded(size_t bytes) { return (bytes + 15) / 16 * 16; }

// Exchange 2's message from a proxy to one rank: the entry count, each
// entry's source rank, target count and targets, padding, then the rows.
constexpr size_t kEntryHeader = 8;

// Exchange 2's bytes for every (proxy, destination) pair, from every rank's
// per-destination records and pairs.
std::vector<uint64_t> fan_out_bytes(const cfxMoeHandle& h) {
  const cfxMoe& moe = *h.moe;
  const size_t n = moe.host_of.size();
  std::vector<uint64_t> entries(n * n, 0), pairs(n * n, 0), bytes(n * n, 0);
  for (size_t s = 0; s < n; ++s)
    for (size_t d = 0; d < n; ++d) {
      if (h.record_matrix[s * n + d] == 0) continue;
      const size_t p = static_cast<size_t>(proxy_of(moe, static_cast<int>(s), moe.host_of[d]));
      entries[p * n + d] += h.record_matrix[s * n + d];
      pairs[p * n + d] += h.pair_matrix[s * n + d];
    }
  for (size_t q = 0; q < n * n; ++q)
    if (entries[q] > 0)
      bytes[q] = padded(4 + entries[q] * kEntryHeader + pairs[q] * sizeof(RecordTarget)) + entries[q] * moe.row_bytes;
  return bytes;
}

}  // namespace

void pack_by_host(const cfxMoe& moe, const void* tokens, size_t ntokens, const int32_t* topk_idx,
                  const float* topk_weights, Bytes* send, std::vector<size_t>* sc, std::vector<size_t>* sd,
                  std::vector<uint64_t>* host_tokens) {
  const size_t n = moe.host_of.size(), nhosts = moe.host_ranks.size(), k = static_cast<size_t>(moe.config.top_k),
               row = moe.row_bytes;
  const int me = moe.comm->rank();
  // Per destination host: each token with an expert there, and its targets there in j order.
  std::vector<RecordList> by_host(nhosts);
  for (size_t t = 0; t < ntokens; ++t)
    for (size_t j = 0; j < k; ++j) {
      const int32_t e = topk_idx[t * k + j];
      const size_t host = static_cast<size_t>(moe.host_of[static_cast<size_t>(moe.expert_rank[static_cast<size_t>(e)])]);
      auto& list = by_host[host];
      if (list.empty() || list.back().first != t) list.emplace_back(static_cast<uint32_t>(t), std::vector<RecordTarget>{});
      list.back().second.push_back({e, topk_weights[t * k + j]});
    }
  host_tokens->resize(nhosts);
  for (size_t host = 0; host < nhosts; ++host) (*host_tokens)[host] = by_host[host].size();
  std::vector<int> host_at(n, -1);  // the host whose proxy each rank is for this rank
  for (size_t host = 0; host < nhosts; ++host) host_at[static_cast<size_t>(proxy_of(moe, me, static_cast<int>(host)))] = static_cast<int>(host);
  size_t total = 0, meta = 0;
  for (size_t p = 0; p < n; ++p) {
    (*sd)[p] = total;
    (*sc)[p] = 0;
    if (host_at[p] < 0 || by_host[static_cast<size_t>(host_at[p])].empty()) continue;
    total += ((*sc)[p] = record_message_bytes(by_host[static_cast<size_t>(host_at[p])], row, &meta));
  }
  fit(send, total);
  for (size_t p = 0; p < n; ++p)
    if ((*sc)[p] > 0) write_record_message(by_host[static_cast<size_t>(host_at[p])], tokens, row, send->data() + (*sd)[p]);
}

Status fan_out_on_host(cfxMoeHandle* h, const Bytes& recv, const std::vector<size_t>& rc,
                       const std::vector<size_t>& rd, std::vector<std::vector<Arrival>>* arrivals) {
  cfxMoe* moe = h->moe;
  const size_t n = moe->host_of.size(), row = moe->row_bytes;
  const int me = moe->comm->rank();
  // What this rank received as a proxy, by source; where each target went is
  // kept for a combine with host partial sums.
  std::vector<std::vector<Arrival>> proxied(n);
  std::vector<std::vector<size_t>> first(n);  // by source: each record's first target in proxy_targets
  h->proxy_records.assign(n, {});
  h->proxy_targets.assign(n, {});
  for (size_t s = 0; s < n; ++s) {
    CFX_RETURN_IF_ERROR(parse_records(*moe, recv.data() + rd[s], rc[s], static_cast<int>(s), &proxied[s]));
    for (const Arrival& a : proxied[s]) {
      first[s].push_back(h->proxy_targets[s].size());
      h->proxy_records[s].push_back(a.m);
      h->proxy_targets[s].resize(h->proxy_targets[s].size() + a.m);
    }
  }
  // A proxy's rows for its own experts stay where they arrived: they are
  // not packed and sent to itself (two copies of up to half of what a proxy
  // receives), only their targets here are kept. Every rank drops the same
  // diagonal, so the traffic every rank knows stays one matrix.
  std::vector<uint64_t> bytes = fan_out_bytes(*h);
  for (size_t q = 0; q < n; ++q) bytes[q * n + q] = 0;
  size_t total = 0, targets = 0;
  for (size_t d = 0; d < n; ++d) total += bytes[static_cast<size_t>(me) * n + d];
  for (size_t s = 0; s < n; ++s) targets += h->proxy_targets[s].size();
  Bytes& send = moe->send_scratch;
  fit(&send, total);
  Bytes& own = moe->own_targets;
  fit(&own, targets * sizeof(RecordTarget));  // never outgrown here: no pointer into it moves
  uint8_t* own_at = own.data();
  uint8_t* at = send.data();
  std::vector<RecordTarget> mine;
  for (size_t d = 0; d < n; ++d) {
    const bool self = d == static_cast<size_t>(me);
    const size_t want = bytes[static_cast<size_t>(me) * n + d];
    if (want == 0 && !self) continue;
    // Entries first, rows after the padded entries; both in (source, token) order.
    std::vector<const uint8_t*> rows;
    uint8_t* entry = at + 4;
    uint32_t returned = 0;  // rows rank d returns to this proxy, in this message's order
    for (size_t s = 0; s < n; ++s)
      for (size_t r = 0; r < proxied[s].size(); ++r) {
        const Arrival& a = proxied[s][r];
        mine.clear();
        for (uint32_t q = 0; q < a.m; ++q) {
          RecordTarget tg;
          std::memcpy(&tg, a.targets + q * sizeof tg, sizeof tg);
          if (tg.expert < 0 || tg.expert >= moe->config.num_experts)
            return internal_error("cfxMoeDispatch: rank " + std::to_string(s) + " sent a row for expert " +
                                  std::to_string(tg.expert) + " through rank " + std::to_string(me));
          if (moe->expert_rank[static_cast<size_t>(tg.expert)] != static_cast<int>(d)) continue;
          mine.push_back(tg);
          h->proxy_targets[s][first[s][r] + q] = {static_cast<int32_t>(d), returned++, tg.weight};
        }
        if (mine.empty()) continue;
        if (self) {
          std::memcpy(own_at, mine.data(), mine.size() * sizeof(RecordTarget));
          (*arrivals)[s].push_back(Arrival{static_cast<uint32_t>(mine.size()), own_at, a.row});
          own_at += mine.size() * sizeof(RecordTarget);
          continue;
        }
        const uint32_t header[2] = {static_cast<uint32_t>(s), static_cast<uint32_t>(mine.size())};
        const size_t entry_bytes = kEntryHeader + mine.size() * sizeof(RecordTarget);
        if (static_cast<size_t>(entry + entry_bytes - at) > want)
          return internal_error("cfxMoeDispatch: rank " + std::to_string(me) + "'s rows for rank " +
                                std::to_string(d) + " do not match the counts every rank gathered");
        std::memcpy(entry, header, sizeof header);
        std::memcpy(entry + kEntryHeader, mine.data(), mine.size() * sizeof(RecordTarget));
        entry += entry_bytes;
        rows.push_back(a.row);
      }
    if (self) continue;
    const size_t meta = padded(static_cast<size_t>(entry - at));
    if (meta + rows.size() * row != want)
      return internal_error("cfxMoeDispatch: rank " + std::to_string(me) + "'s rows for rank " + std::to_string(d) +
                            " do not match the counts every rank gathered");
    const uint32_t nent = static_cast<uint32_t>(rows.size());
    std::memcpy(at, &nent, 4);
    std::memset(entry, 0, static_cast<size_t>(at + meta - entry));
    for (size_t r = 0; r < rows.size(); ++r) copy_bytes(at + meta + r * row, rows[r], row);
    at += want;
  }
  Bytes& got = moe->forward_scratch;
  std::vector<size_t> from;
  CFX_RETURN_IF_ERROR(exchange_known(h, send, bytes, &got, &from));
  for (size_t p = 0; p < n; ++p) {
    const size_t size = bytes[p * n + static_cast<size_t>(me)];
    if (size == 0) continue;
    const uint8_t* base = got.data() + from[p];
    auto corrupt = [&] { return internal_error("cfxMoeDispatch: a corrupt forwarded stream from rank " + std::to_string(p)); };
    uint32_t nent = 0;
    std::memcpy(&nent, base, 4);
    size_t off = 4;
    std::vector<std::pair<uint32_t, Arrival>> entries;
    for (uint32_t e = 0; e < nent; ++e) {
      uint32_t header[2];
      if (off + kEntryHeader > size) return corrupt();
      std::memcpy(header, base + off, sizeof header);
      if (header[0] >= n) return corrupt();
      entries.push_back({header[0], Arrival{header[1], base + off + kEntryHeader, nullptr}});
      off += kEntryHeader + header[1] * sizeof(RecordTarget);
    }
    off = padded(off);
    if (off + nent * row != size) return corrupt();
    for (uint32_t e = 0; e < nent; ++e) {
      entries[e].second.row = base + off + e * row;
      (*arrivals)[entries[e].first].push_back(entries[e].second);
    }
  }
  return Status::Ok();
}

Status host_partial_combine(cfxMoeHandle* h, const void* expert_out, void* tokens_out) {
  cfxMoe* moe = h->moe;
  const cfxMoeConfig_t& c = moe->config;
  const size_t n = moe->host_of.size(), hosts = moe->host_ranks.size(), row = moe->row_bytes,
               k = static_cast<size_t>(c.top_k), hidden = c.hidden, me = static_cast<size_t>(moe->comm->rank()),
               my_host = static_cast<size_t>(moe->host_of[me]);
  const bool as_float = c.host_partial_sums == 1;
  const size_t partial = as_float ? hidden * sizeof(float) : row;
  // 1. Within each host: every expert rank's rows back to the proxies they
  //    came through, in the order each proxy sent them.
  //    A rank that is its own proxy reads those rows where they lie
  //    instead of copying them to itself twice.
  std::vector<uint64_t> up(n * n, 0);
  for (size_t s = 0; s < n; ++s)
    for (size_t d = 0; d < n; ++d) {
      const size_t p = static_cast<size_t>(proxy_of(*moe, static_cast<int>(s), moe->host_of[d]));
      if (h->pair_matrix[s * n + d] > 0 && p != d) up[d * n + p] += h->pair_matrix[s * n + d] * row;
    }
  Bytes& rows_up = moe->send_scratch;
  const std::vector<uint8_t> zeros(row, 0);  // a dropped row contributes nothing
  std::vector<const uint8_t*> own_rows;      // the rows this rank returns to itself, in order
  size_t total = 0;
  for (size_t d = 0; d < n; ++d) total += up[me * n + d];
  fit(&rows_up, total);
  uint8_t* at = rows_up.data();
  for (size_t p = 0; p < n; ++p)
    for (size_t s = 0; s < n; ++s) {
      if (static_cast<size_t>(proxy_of(*moe, static_cast<int>(s), static_cast<int>(my_host))) != p) continue;
      for (const cfxMoeHandle::Target& tg : h->targets[s]) {
        const uint8_t* src = tg.row >= 0 ? static_cast<const uint8_t*>(expert_out) + tg.row * row : zeros.data();
        if (p == me) {
          own_rows.push_back(src);
        } else {
          copy_bytes(at, src, row);
          at += row;
        }
      }
    }
  Bytes& got = moe->recv_scratch;
  std::vector<size_t> from;
  CFX_RETURN_IF_ERROR(exchange_known(h, rows_up, up, &got, &from));
  // 2. As a proxy: each token's weighted rows from this host, added in j
  //    order, one partial per token for its source rank.
  std::vector<uint64_t> down(n * n, 0);
  for (size_t s = 0; s < n; ++s)
    for (size_t q = 0; q < hosts; ++q)
      down[static_cast<size_t>(proxy_of(*moe, static_cast<int>(s), static_cast<int>(q))) * n + s] =
          h->host_records[s * hosts + q] * partial;
  Bytes& sums = moe->forward_scratch;
  total = 0;
  for (size_t s = 0; s < n; ++s) total += down[me * n + s];
  fit(&sums, total);
  const MoeAccumulateFn accumulate = moe_accumulate_for(c.datatype);
  const MoeStoreFn store_out = moe_store_for(c.datatype);
  std::vector<float> acc(hidden);
  at = sums.data();
  for (size_t s = 0; s < n; ++s) {
    if (h->proxy_records[s].size() * partial != down[me * n + s])
      return internal_error("cfxMoeCombine: rank " + std::to_string(me) + " proxied " +
                            std::to_string(h->proxy_records[s].size()) + " tokens of rank " + std::to_string(s) +
                            ", not what every rank counted");
    size_t next = 0;
    for (uint32_t m : h->proxy_records[s]) {
      std::fill(acc.begin(), acc.end(), 0.0f);
      for (uint32_t q = 0; q < m; ++q) {
        const cfxMoeHandle::ProxyTarget& pt = h->proxy_targets[s][next++];
        if (static_cast<size_t>(pt.rank) == me && pt.pos >= own_rows.size())
          return internal_error("cfxMoeCombine: rank " + std::to_string(me) + " keeps fewer rows than it proxied");
        const uint8_t* src = static_cast<size_t>(pt.rank) == me
                                 ? own_rows[pt.pos]
                                 : got.data() + from[static_cast<size_t>(pt.rank)] + pt.pos * row;
        accumulate(acc.data(), src, pt.weight, hidden);
      }
      if (as_float) std::memcpy(at, acc.data(), partial);
      else store_out(at, acc.data(), hidden);
      at += partial;
    }
  }
  Bytes& back = moe->send_scratch;
  CFX_RETURN_IF_ERROR(exchange_known(h, sums, down, &back, &from));
  // 3. The token's rank adds its hosts' partials, in host order.
  const MoeAccumulateFn add_partial = moe_accumulate_for(as_float ? cfxFloat32 : c.datatype);
  std::vector<const uint8_t*> next_of(hosts);
  for (size_t q = 0; q < hosts; ++q)
    next_of[q] = back.data() + from[static_cast<size_t>(proxy_of(*moe, static_cast<int>(me), static_cast<int>(q)))];
  std::vector<char> on_host(hosts);
  for (size_t t = 0; t < h->ntokens; ++t) {
    std::fill(on_host.begin(), on_host.end(), 0);
    for (size_t j = 0; j < k; ++j) {
      const int32_t d = h->pair_rank[t * k + j];
      if (d >= 0) on_host[static_cast<size_t>(moe->host_of[static_cast<size_t>(d)])] = 1;
    }
    std::fill(acc.begin(), acc.end(), 0.0f);
    for (size_t q = 0; q < hosts; ++q) {
      if (!on_host[q]) continue;
      add_partial(acc.data(), next_of[q], 1.0f, hidden);
      next_of[q] += partial;
    }
    store_out(static_cast<uint8_t*>(tokens_out) + t * row, acc.data(), hidden);
  }
  return Status::Ok();
}

}  // namespace conflux::moe
