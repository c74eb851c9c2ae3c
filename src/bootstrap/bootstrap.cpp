#include "bootstrap/bootstrap.h"

#include "core/log.h"

#include <algorithm>
#include <cstring>
#include <memory>
#include <mutex>
#include <thread>

namespace conflux {

Result<int> admit_hello(const RankHello& hello, RootAdmission& state, RankInfo* info_out) {
  if (hello.magic != kRankHelloMagic || hello.info_size != sizeof(RankInfo))
    return remote_error("malformed hello (different conflux build?)");
  if (state.nranks < 0) {
    if (hello.nranks < 1) return invalid_argument("nranks must be >= 1");
    state.nranks = hello.nranks;
    state.joined.assign(static_cast<size_t>(hello.nranks), false);
  }
  const int nranks = state.nranks;
  if (hello.nranks != nranks)
    return invalid_usage("rank " + std::to_string(hello.rank) + " says nranks=" + std::to_string(hello.nranks) +
                         " but rank(s) before it said " + std::to_string(nranks));
  if (hello.rank < 0 || hello.rank >= nranks)
    return invalid_usage("rank " + std::to_string(hello.rank) + " out of range for nranks=" + std::to_string(nranks));
  if (state.joined[hello.rank]) return invalid_usage("rank " + std::to_string(hello.rank) + " joined twice");
  // Every rank trusts this table: refuse entries that would make a reader
  // run past a field (unterminated names, lengths beyond their arrays).
  const RankInfo& in = hello.info;
  if (in.rank != hello.rank || in.listen_len > sizeof in.listen_addr || in.ofi_name_len > sizeof in.ofi_name ||
      in.hostname[sizeof in.hostname - 1] != '\0' || in.nic[sizeof in.nic - 1] != '\0' ||
      in.shm_name[sizeof in.shm_name - 1] != '\0' || in.topo_nic[sizeof in.topo_nic - 1] != '\0')
    return remote_error("rank " + std::to_string(hello.rank) + " sent a malformed rank info");
  state.joined[hello.rank] = true;
  *info_out = in;
  return hello.rank;
}

namespace {

// A connection that has not finished its handshake within this time is
// dropped. Each handshake runs in its own short-lived thread, so a stalled
// or hostile client holds up nobody but itself, and a legitimate rank that
// is descheduled for a while on a loaded machine is still admitted.
constexpr int64_t kHandshakeMs = 10000;

struct RootReply {
  int32_t code = cfxSuccess;
  int32_t nranks = 0;
  char message[200] = {};
};

Status send_reply_error(const Socket& s, cfxResult_t code, const std::string& message) {
  RootReply r;
  r.code = code;
  std::snprintf(r.message, sizeof r.message, "%s", message.c_str());
  return s.send_all(&r, sizeof r, deadline_after_ms(kHandshakeMs));
}

// Connections that proved the secret and sent a hello, waiting for the root
// thread to admit them.
struct HandshakeQueue {
  std::mutex mutex;
  std::vector<std::pair<Socket, std::unique_ptr<RankHello>>> ready;
};

void handshake(std::shared_ptr<HandshakeQueue> queue, Socket s, SockAddr peer, Secret secret) {
  Deadline hs = deadline_after_ms(kHandshakeMs);
  Status st = authenticate_as_server(s, secret, ConnKind::kRoot, hs);
  auto hello = std::make_unique<RankHello>();
  if (st.ok()) st = s.recv_all(hello.get(), sizeof *hello, hs);
  if (!st.ok()) {
    CFX_WARN(kBoot, "bootstrap root: dropped connection from %s: %s", peer.str().c_str(), st.message().c_str());
    return;
  }
  std::lock_guard lock(queue->mutex);
  queue->ready.emplace_back(std::move(s), std::move(hello));
}

void run_root(std::shared_ptr<Socket> listener, Secret secret, int64_t timeout_ms) {
  Deadline deadline = deadline_after_ms(timeout_ms);
  auto queue = std::make_shared<HandshakeQueue>();
  std::vector<Socket> conns;
  std::vector<RankInfo> table;
  RootAdmission admission;
  int nranks = -1;
  int arrived = 0;
  while (nranks < 0 || arrived < nranks) {
    if (Clock::now() >= deadline) {
      std::string missing;
      for (int r = 0; r < nranks; ++r)
        if (!conns[r].valid()) missing += (missing.empty() ? "" : ",") + std::to_string(r);
      CFX_WARN(kBoot, "bootstrap root: %d of %d ranks arrived before the deadline; missing ranks: %s",
               arrived, nranks, missing.empty() ? "(unknown)" : missing.c_str());
      for (auto& c : conns)
        if (c.valid()) (void)send_reply_error(c, cfxTimeout, "rendezvous timed out; missing ranks: " + missing);
      return;
    }
    // Accept for a short while, then admit whoever finished a handshake.
    SockAddr peer;
    auto accepted = listener->accept_one(std::min(deadline, deadline_after_ms(20)), &peer);
    if (accepted.ok()) std::thread(handshake, queue, std::move(accepted).value(), peer, secret).detach();
    std::vector<std::pair<Socket, std::unique_ptr<RankHello>>> ready;
    {
      std::lock_guard lock(queue->mutex);
      ready.swap(queue->ready);
    }
    for (auto& [s, hello] : ready) {
      RankInfo info;
      Result<int> admitted = admit_hello(*hello, admission, &info);
      if (nranks < 0 && admission.nranks > 0) {
        nranks = admission.nranks;
        conns.resize(nranks);
        table.resize(nranks);
      }
      if (!admitted.ok()) {
        CFX_WARN(kBoot, "bootstrap root: refused rank %d: %s", hello->rank, admitted.status().message().c_str());
        (void)send_reply_error(s, admitted.status().code(), admitted.status().message());
        continue;
      }
      table[*admitted] = info;
      conns[*admitted] = std::move(s);
      ++arrived;
    }
  }
  RootReply ok;
  ok.nranks = nranks;
  for (int r = 0; r < nranks; ++r) {
    Deadline d = deadline_after_ms(kHandshakeMs);
    Status st = conns[r].send_all(&ok, sizeof ok, d);
    if (st.ok()) st = conns[r].send_all(table.data(), table.size() * sizeof(RankInfo), d);
    if (!st.ok()) CFX_WARN(kBoot, "bootstrap root: could not send the table to rank %d: %s", r, st.message().c_str());
  }
  CFX_INFO(kBoot, "bootstrap root: %d ranks joined", nranks);
}

}  // namespace

Result<UniqueIdData> start_bootstrap_root(const SockAddr& bind_addr, const Secret& secret,
                                          uint64_t comm_id, int64_t timeout_ms) {
  CFX_ASSIGN_OR_RETURN(Socket listener, Socket::listen_on(bind_addr));
  CFX_ASSIGN_OR_RETURN(SockAddr actual, listener.local_addr());
  UniqueIdData id;
  id.root = actual;
  id.secret = secret;
  id.comm_id = comm_id;
  auto shared = std::make_shared<Socket>(std::move(listener));
  std::thread(run_root, shared, secret, timeout_ms).detach();
  CFX_INFO(kBoot, "bootstrap root listening on %s", actual.str().c_str());
  return id;
}

Result<std::vector<RankInfo>> bootstrap_exchange(const UniqueIdData& id, int rank, int nranks,
                                                 const RankInfo& mine, Deadline deadline) {
  auto where = [&] { return "rendezvous with root " + id.root.str() + ": "; };
  auto connected = Socket::connect_to(id.root, deadline);
  if (!connected.ok()) return Status(connected.status()).prepend(where());
  Socket s = std::move(connected).value();
  Status st = authenticate_as_client(s, id.secret, ConnKind::kRoot, deadline);
  if (!st.ok()) return st.prepend(where());
  auto hello = std::make_unique<RankHello>();
  hello->rank = rank;
  hello->nranks = nranks;
  hello->info = mine;
  CFX_RETURN_IF_ERROR(s.send_all(hello.get(), sizeof *hello, deadline).prepend(where()));
  RootReply reply;
  st = s.recv_all(&reply, sizeof reply, deadline);
  if (st.code() == cfxTimeout) return timeout_error(where() + "not every rank arrived before the deadline");
  if (!st.ok()) return st.prepend(where());
  if (reply.code != cfxSuccess) {
    reply.message[sizeof reply.message - 1] = '\0';
    return Status(static_cast<cfxResult_t>(reply.code), where() + reply.message);
  }
  if (reply.nranks != nranks) return internal_error(where() + "table size differs from nranks");
  std::vector<RankInfo> table(nranks);
  CFX_RETURN_IF_ERROR(s.recv_all(table.data(), table.size() * sizeof(RankInfo), deadline).prepend(where()));
  for (int r = 0; r < nranks; ++r)
    if (table[r].rank != r) return remote_error(where() + "table entry " + std::to_string(r) + " is corrupt");
  return table;
}

}  // namespace conflux
