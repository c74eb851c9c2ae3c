// The C API: argument checks, then the communicator. Every entry point
// catches everything: no exception crosses into C.
#include "bootstrap/auth.h"
#include "bootstrap/bootstrap.h"
#include "bootstrap/interfaces.h"
#include "bootstrap/launch_env.h"
#include "core/comm.h"
#include "core/config.h"
#include "core/log.h"
#include "core/shared_mem.h"

#include <algorithm>
#include <chrono>
#include <thread>
#include <cstring>
#include <map>

using namespace conflux;

namespace {

thread_local std::string t_last_error;
thread_local int t_group_depth = 0;
thread_local std::vector<std::pair<cfxComm*, OpDesc>> t_group_ops;

cfxResult_t fail(cfxComm* comm, const Status& st) {
  t_last_error = st.message();
  if (comm != nullptr) comm->set_last_error(st.message());
  return st.code();
}

template <typename F>
cfxResult_t guarded(cfxComm* comm, F&& body) {
  try {
    Status st = body();
    if (!st.ok()) return fail(comm, st);
    return cfxSuccess;
  } catch (const std::bad_alloc&) {
    return fail(comm, Status(cfxSystemError, "out of memory"));
  } catch (const std::exception& e) {
    return fail(comm, internal_error(std::string("unexpected exception: ") + e.what()));
  } catch (...) {
    return fail(comm, internal_error("unexpected exception"));
  }
}

bool overlap(const void* a, size_t abytes, const void* b, size_t bbytes) {
  auto x = reinterpret_cast<uintptr_t>(a), y = reinterpret_cast<uintptr_t>(b);
  return abytes > 0 && bbytes > 0 && x < y + bbytes && y < x + abytes;
}

// Checks shared by every operation, then the collective-specific ones. The
// returned error names the call so the user need not guess which failed.
Status validate(cfxComm* comm, const OpDesc& op) {
  auto bad = [&](const std::string& why) {
    const char* call = op.coll == Coll::kRecv ? "recv" : op.coll == Coll::kSend ? "send" : coll_name(op.coll);
    return invalid_argument(std::string(call) + ": " + why);
  };
  if (comm == nullptr) return bad("communicator is NULL");
  const int n = comm->nranks();
  const int rank = comm->rank();
  if (op.coll == Coll::kBarrier) return Status::Ok();
  size_t elem = datatype_size(op.dtype);
  if (elem == 0) return bad("invalid datatype " + std::to_string(static_cast<int>(op.dtype)));
  bool reducing = op.coll == Coll::kAllReduce || op.coll == Coll::kReduce || op.coll == Coll::kReduceScatter;
  if (reducing && (op.op < 0 || op.op >= cfxNumOps))
    return bad("invalid reduction op " + std::to_string(static_cast<int>(op.op)));
  bool rooted = op.coll == Coll::kBroadcast || op.coll == Coll::kReduce || op.coll == Coll::kGather ||
                op.coll == Coll::kScatter;
  if (rooted && (op.root < 0 || op.root >= n))
    return bad("root " + std::to_string(op.root) + " out of range [0, " + std::to_string(n) + ")");
  if (op.is_p2p() && (op.peer < 0 || op.peer >= n))
    return bad("peer " + std::to_string(op.peer) + " out of range [0, " + std::to_string(n) + ")");
  if (op.count > SIZE_MAX / elem / static_cast<size_t>(n)) return bad("count " + std::to_string(op.count) + " too large");
  const size_t bytes = op.count * elem;
  const size_t all = bytes * static_cast<size_t>(n);
  // Bytes each buffer must hold on this rank (0 where the buffer is unused).
  size_t send_bytes = 0, recv_bytes = 0;
  bool is_root = op.root == rank;
  switch (op.coll) {
    case Coll::kAllReduce: send_bytes = recv_bytes = bytes; break;
    case Coll::kBroadcast: send_bytes = is_root ? bytes : 0; recv_bytes = bytes; break;
    case Coll::kReduce: send_bytes = bytes; recv_bytes = is_root ? bytes : 0; break;
    case Coll::kAllGather: send_bytes = bytes; recv_bytes = all; break;
    case Coll::kReduceScatter: send_bytes = all; recv_bytes = bytes; break;
    case Coll::kAlltoAll: send_bytes = recv_bytes = all; break;
    case Coll::kGather: send_bytes = bytes; recv_bytes = is_root ? all : 0; break;
    case Coll::kScatter: send_bytes = is_root ? all : 0; recv_bytes = bytes; break;
    case Coll::kSend: send_bytes = bytes; break;
    case Coll::kRecv: recv_bytes = bytes; break;
    case Coll::kAlltoAllv: {
      if (op.dynamic) {
        if (op.sendcounts.size() != static_cast<size_t>(n) || op.recvcounts_out == nullptr || op.rdispls_out == nullptr)
          return bad("sendcounts, sdispls, recvcounts and rdispls must not be NULL");
        for (int r = 0; r < n; ++r) {
          if (op.sendcounts[r] > SIZE_MAX / elem / 2 || op.sdispls[r] > SIZE_MAX / elem / 2)
            return bad("count or displacement too large for peer " + std::to_string(r));
          send_bytes = std::max(send_bytes, (op.sdispls[r] + op.sendcounts[r]) * elem);
        }
        recv_bytes = op.count * elem;
        if (send_bytes > 0 && recv_bytes > 0 && overlap(op.sendbuf, send_bytes, op.recvbuf, recv_bytes))
          return bad("sendbuff and recvbuff overlap (the dynamic form has no in-place layout)");
        break;
      }
      if (op.sendcounts.size() != static_cast<size_t>(n) || op.recvcounts.size() != static_cast<size_t>(n))
        return bad("count and displacement arrays must not be NULL");
      for (int r = 0; r < n; ++r) {
        if (op.sendcounts[r] > SIZE_MAX / elem / 2 || op.sdispls[r] > SIZE_MAX / elem / 2 ||
            op.recvcounts[r] > SIZE_MAX / elem / 2 || op.rdispls[r] > SIZE_MAX / elem / 2)
          return bad("count or displacement too large for peer " + std::to_string(r));
        send_bytes = std::max(send_bytes, (op.sdispls[r] + op.sendcounts[r]) * elem);
        recv_bytes = std::max(recv_bytes, (op.rdispls[r] + op.recvcounts[r]) * elem);
      }
      break;
    }
    default: break;
  }
  if (send_bytes > 0 && op.sendbuf == nullptr) return bad("sendbuff is NULL with count " + std::to_string(op.count));
  if (recv_bytes > 0 && op.recvbuf == nullptr) return bad("recvbuff is NULL with count " + std::to_string(op.count));
  // Buffers may be identical (in place, at the offset NCCL defines) or
  // disjoint; any other overlap would corrupt the input mid-operation.
  if (send_bytes > 0 && recv_bytes > 0 && overlap(op.sendbuf, send_bytes, op.recvbuf, recv_bytes)) {
    auto* s = static_cast<const uint8_t*>(op.sendbuf);
    auto* r = static_cast<const uint8_t*>(op.recvbuf);
    bool ok = false;
    switch (op.coll) {
      case Coll::kAllGather: ok = s == r + static_cast<size_t>(rank) * bytes; break;
      case Coll::kReduceScatter: ok = r == s + static_cast<size_t>(rank) * bytes; break;
      case Coll::kGather: ok = s == r + static_cast<size_t>(rank) * bytes; break;
      case Coll::kScatter: ok = r == s + static_cast<size_t>(rank) * bytes; break;
      default: ok = s == r; break;
    }
    if (!ok) return bad("sendbuff and recvbuff overlap but are not in place (see the in-place rules)");
  }
  return Status::Ok();
}

// Marks a call in flight on a communicator for its whole duration, error
// reporting included, so a concurrent cfxCommAbort never frees it under us.
class CallGuard {
 public:
  explicit CallGuard(cfxComm* comm) : comm_(comm) {
    if (comm_ != nullptr) comm_->enter_call();
  }
  ~CallGuard() {
    if (comm_ != nullptr) comm_->leave_call();
  }
  CallGuard(const CallGuard&) = delete;
  CallGuard& operator=(const CallGuard&) = delete;

 private:
  cfxComm* comm_;
};

cfxResult_t issue(cfxComm* comm, OpDesc op) {
  CallGuard in_call(comm);
  return guarded(comm, [&]() -> Status {
    CFX_RETURN_IF_ERROR(validate(comm, op));
    if (t_group_depth > 0) {
      t_group_ops.emplace_back(comm, std::move(op));
      return Status::Ok();
    }
    return comm->run(op);
  });
}

cfxResult_t issue_async(cfxComm* comm, OpDesc op, cfxRequest_t* request) {
  CallGuard in_call(comm);
  return guarded(comm, [&]() -> Status {
    if (request == nullptr) return invalid_argument("request pointer is NULL");
    *request = nullptr;
    CFX_RETURN_IF_ERROR(validate(comm, op));
    if (t_group_depth > 0) return invalid_usage("nonblocking calls cannot be part of a group");
    std::vector<OpDesc> ops;
    ops.push_back(std::move(op));
    *request = comm->submit(std::move(ops));
    return Status::Ok();
  });
}

OpDesc make(Coll c, const void* s, void* r, size_t count, cfxDataType_t t, cfxRedOp_t op = cfxSum, int root = 0) {
  OpDesc d;
  d.coll = c;
  d.sendbuf = s;
  d.recvbuf = r;
  d.count = count;
  d.dtype = t;
  d.op = op;
  d.root = root;
  return d;
}

OpDesc make_alltoallv(const void* s, const size_t* sc, const size_t* sd, void* r, const size_t* rc,
                      const size_t* rd, cfxDataType_t t, cfxComm* comm) {
  OpDesc d = make(Coll::kAlltoAllv, s, r, 0, t);
  if (comm != nullptr && sc != nullptr && sd != nullptr && rc != nullptr && rd != nullptr) {
    size_t n = static_cast<size_t>(comm->nranks());
    d.sendcounts.assign(sc, sc + n);
    d.sdispls.assign(sd, sd + n);
    d.recvcounts.assign(rc, rc + n);
    d.rdispls.assign(rd, rd + n);
  }
  return d;
}

OpDesc make_dynamic_alltoallv(const void* s, const size_t* sc, const size_t* sd, void* r, size_t capacity,
                              size_t* rc, size_t* rd, cfxDataType_t t, cfxComm* comm) {
  OpDesc d = make(Coll::kAlltoAllv, s, r, capacity, t);
  d.dynamic = true;
  d.recvcounts_out = rc;
  d.rdispls_out = rd;
  if (comm != nullptr && sc != nullptr && sd != nullptr) {
    size_t n = static_cast<size_t>(comm->nranks());
    d.sendcounts.assign(sc, sc + n);
    d.sdispls.assign(sd, sd + n);
  }
  return d;
}

OpDesc make_p2p(Coll c, const void* s, void* r, size_t count, cfxDataType_t t, int peer) {
  OpDesc d = make(c, s, r, count, t);
  d.peer = peer;
  return d;
}

Status init_comm(cfxComm_t* out, int nranks, int rank, const UniqueIdData& id) {
  CFX_ASSIGN_OR_RETURN(std::unique_ptr<cfxComm> comm, cfxComm::create(nranks, rank, id));
  *out = comm.release();
  return Status::Ok();
}

}  // namespace

extern "C" {

cfxResult_t cfxGetVersion(int* version) {
  if (version == nullptr) return fail(nullptr, invalid_argument("cfxGetVersion: version is NULL"));
  *version = CFX_VERSION_CODE;
  return cfxSuccess;
}

size_t cfxTypeSize(cfxDataType_t datatype) { return datatype_size(datatype); }

cfxResult_t cfxMemAlloc(void** ptr, size_t size) {
  if (ptr == nullptr) return fail(nullptr, invalid_argument("cfxMemAlloc: ptr is NULL"));
  *ptr = nullptr;
  Result<void*> p = shared_mem_alloc(size);
  if (!p.ok()) return fail(nullptr, p.status());
  *ptr = p.value();
  return cfxSuccess;
}

cfxResult_t cfxMemFree(void* ptr) {
  Status st = shared_mem_free(ptr);
  return st.ok() ? cfxSuccess : fail(nullptr, st);
}

cfxResult_t cfxCommRegister(const cfxComm_t comm, void* buff, size_t size, void** handle) {
  if (comm == nullptr) return fail(nullptr, invalid_argument("cfxCommRegister: communicator is NULL"));
  return guarded(comm, [&] { return comm->register_buffer(buff, size, handle); });
}

cfxResult_t cfxCommDeregister(const cfxComm_t comm, void* handle) {
  if (comm == nullptr) return fail(nullptr, invalid_argument("cfxCommDeregister: communicator is NULL"));
  return guarded(comm, [&] { return comm->deregister_buffer(handle); });
}

const char* cfxGetErrorString(cfxResult_t result) {
  switch (result) {
    case cfxSuccess: return "no error";
    case cfxSystemError: return "system error (an OS call failed)";
    case cfxInternalError: return "internal error (a bug in conflux)";
    case cfxInvalidArgument: return "invalid argument";
    case cfxInvalidUsage: return "invalid usage";
    case cfxRemoteError: return "remote error (a peer failed or sent bad data)";
    case cfxTimeout: return "timeout";
    case cfxInProgress: return "operation in progress";
    case cfxAborted: return "communicator aborted";
    default: return "unknown result code";
  }
}

const char* cfxGetLastError(cfxComm_t comm) {
  thread_local std::string copy;
  copy = comm != nullptr ? comm->last_error() : t_last_error;
  return copy.c_str();
}

cfxResult_t cfxGetUniqueId(cfxUniqueId* id) {
  return guarded(nullptr, [&]() -> Status {
    if (id == nullptr) return invalid_argument("cfxGetUniqueId: id is NULL");
    const Config& cfg = config();
    SockAddr toward;
    bool have_hint = false;
    if (!cfg.master_addr.empty()) {
      auto hint = SockAddr::resolve(cfg.master_addr, 0);
      if (hint.ok()) toward = hint.value(), have_hint = true;
    }
    CFX_ASSIGN_OR_RETURN(NetInterface nic, choose_interface(cfg.socket_ifname, have_hint ? &toward : nullptr));
    uint64_t comm_id = 0;
    random_bytes(&comm_id, sizeof comm_id);
    CFX_ASSIGN_OR_RETURN(UniqueIdData data, start_bootstrap_root(nic.addr, random_secret(), comm_id, cfg.init_timeout_ms));
    *id = encode_unique_id(data);
    return Status::Ok();
  });
}

cfxResult_t cfxCommInitRank(cfxComm_t* comm, int nranks, cfxUniqueId id, int rank) {
  return guarded(nullptr, [&]() -> Status {
    if (comm == nullptr) return invalid_argument("cfxCommInitRank: comm is NULL");
    *comm = nullptr;
    if (nranks < 1) return invalid_argument("cfxCommInitRank: nranks " + std::to_string(nranks) + " < 1");
    if (rank < 0 || rank >= nranks)
      return invalid_argument("cfxCommInitRank: rank " + std::to_string(rank) + " out of range [0, " +
                              std::to_string(nranks) + ")");
    CFX_ASSIGN_OR_RETURN(UniqueIdData data, decode_unique_id(id));
    return init_comm(comm, nranks, rank, data);
  });
}

cfxResult_t cfxCommInitFromEnv(cfxComm_t* comm) {
  return guarded(nullptr, [&]() -> Status {
    if (comm == nullptr) return invalid_argument("cfxCommInitFromEnv: comm is NULL");
    *comm = nullptr;
    CFX_ASSIGN_OR_RETURN(LaunchEnv env, read_launch_env());
    CFX_ASSIGN_OR_RETURN(UniqueIdData data, unique_id_from_env(env));
    CFX_INFO(kInit, "launched by %s: rank %d of %d, rendezvous %s", env.launcher.c_str(), env.rank, env.nranks,
             env.root.c_str());
    if (env.rank == 0) {
      // Rank 0 hosts the rendezvous at the agreed address.
      auto started = start_bootstrap_root(data.root, data.secret, data.comm_id, config().init_timeout_ms);
      if (!started.ok())
        return Status(started.status()).prepend("rank 0 could not host the rendezvous at " + env.root + ": ");
    }
    return init_comm(comm, env.nranks, env.rank, data);
  });
}

cfxResult_t cfxCommSplit(cfxComm_t comm, int color, int key, cfxComm_t* newcomm) {
  CallGuard in_call(comm);
  return guarded(comm, [&]() -> Status {
    if (comm == nullptr || newcomm == nullptr) return invalid_argument("cfxCommSplit: comm or newcomm is NULL");
    if (color < CFX_SPLIT_NOCOLOR) return invalid_argument("cfxCommSplit: color must be >= 0 or CFX_SPLIT_NOCOLOR");
    *newcomm = nullptr;
    const int n = comm->nranks();
    // Round 1: everyone's (color, key). Round 2: each colour's leader (its
    // first member by key, then rank) publishes a fresh unique id.
    std::vector<int32_t> mine{color, key}, all(2 * static_cast<size_t>(n));
    std::vector<OpDesc> ops{make(Coll::kAllGather, mine.data(), all.data(), 2, cfxInt32)};
    CFX_RETURN_IF_ERROR(comm->run(ops).prepend("cfxCommSplit: "));
    std::vector<int> members;
    for (int r = 0; r < n; ++r)
      if (all[2 * r] == color && color != CFX_SPLIT_NOCOLOR) members.push_back(r);
    std::stable_sort(members.begin(), members.end(), [&](int a, int b) { return all[2 * a + 1] < all[2 * b + 1]; });
    bool leader = !members.empty() && members.front() == comm->rank();
    cfxUniqueId my_id{};
    if (leader) {
      const Config& cfg = config();
      CFX_ASSIGN_OR_RETURN(NetInterface nic, choose_interface(cfg.socket_ifname, &comm->id().root));
      uint64_t comm_id = 0;
      random_bytes(&comm_id, sizeof comm_id);
      CFX_ASSIGN_OR_RETURN(UniqueIdData data, start_bootstrap_root(nic.addr, random_secret(), comm_id, cfg.init_timeout_ms));
      my_id = encode_unique_id(data);
    }
    std::vector<cfxUniqueId> ids(static_cast<size_t>(n));
    ops = {make(Coll::kAllGather, &my_id, ids.data(), sizeof(cfxUniqueId), cfxUint8)};
    CFX_RETURN_IF_ERROR(comm->run(ops).prepend("cfxCommSplit: "));
    if (color == CFX_SPLIT_NOCOLOR) return Status::Ok();
    int new_rank = static_cast<int>(std::find(members.begin(), members.end(), comm->rank()) - members.begin());
    CFX_ASSIGN_OR_RETURN(UniqueIdData data, decode_unique_id(ids[members.front()]));
    return init_comm(newcomm, static_cast<int>(members.size()), new_rank, data).prepend("cfxCommSplit: ");
  });
}

cfxResult_t cfxCommDestroy(cfxComm_t comm) {
  if (comm == nullptr) return fail(nullptr, invalid_argument("cfxCommDestroy: comm is NULL"));
  delete comm;
  return cfxSuccess;
}

cfxResult_t cfxCommAbort(cfxComm_t comm) {
  if (comm == nullptr) return fail(nullptr, invalid_argument("cfxCommAbort: comm is NULL"));
  comm->abort();
  // Blocked calls notice the flag within one sleep (<= 50 ms) and return
  // cfxAborted; only then is the communicator freed.
  auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (comm->calls_in_flight() > 0 && std::chrono::steady_clock::now() < until)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  delete comm;  // also waits for the progress thread
  return cfxSuccess;
}

cfxResult_t cfxCommCount(const cfxComm_t comm, int* count) {
  if (comm == nullptr || count == nullptr) return fail(comm, invalid_argument("cfxCommCount: NULL argument"));
  *count = comm->nranks();
  return cfxSuccess;
}

cfxResult_t cfxCommUserRank(const cfxComm_t comm, int* rank) {
  if (comm == nullptr || rank == nullptr) return fail(comm, invalid_argument("cfxCommUserRank: NULL argument"));
  *rank = comm->rank();
  return cfxSuccess;
}

cfxResult_t cfxCommGetAsyncError(cfxComm_t comm, cfxResult_t* asyncError) {
  if (comm == nullptr || asyncError == nullptr)
    return fail(comm, invalid_argument("cfxCommGetAsyncError: NULL argument"));
  *asyncError = comm->async_error();
  return cfxSuccess;
}

cfxResult_t cfxCommSetTimeout(cfxComm_t comm, int64_t timeout_ms) {
  if (comm == nullptr || timeout_ms < 0) return fail(comm, invalid_argument("cfxCommSetTimeout: bad argument"));
  comm->set_timeout_ms(timeout_ms);
  return cfxSuccess;
}

cfxResult_t cfxAllReduce(const void* s, void* r, size_t count, cfxDataType_t t, cfxRedOp_t op, cfxComm_t comm) {
  return issue(comm, make(Coll::kAllReduce, s, r, count, t, op));
}
cfxResult_t cfxBroadcast(const void* s, void* r, size_t count, cfxDataType_t t, int root, cfxComm_t comm) {
  return issue(comm, make(Coll::kBroadcast, s, r, count, t, cfxSum, root));
}
cfxResult_t cfxReduce(const void* s, void* r, size_t count, cfxDataType_t t, cfxRedOp_t op, int root, cfxComm_t comm) {
  return issue(comm, make(Coll::kReduce, s, r, count, t, op, root));
}
cfxResult_t cfxAllGather(const void* s, void* r, size_t count, cfxDataType_t t, cfxComm_t comm) {
  return issue(comm, make(Coll::kAllGather, s, r, count, t));
}
cfxResult_t cfxReduceScatter(const void* s, void* r, size_t count, cfxDataType_t t, cfxRedOp_t op, cfxComm_t comm) {
  return issue(comm, make(Coll::kReduceScatter, s, r, count, t, op));
}
cfxResult_t cfxAlltoAll(const void* s, void* r, size_t count, cfxDataType_t t, cfxComm_t comm) {
  return issue(comm, make(Coll::kAlltoAll, s, r, count, t));
}
cfxResult_t cfxAlltoAllv(const void* s, const size_t sc[], const size_t sd[], void* r, const size_t rc[],
                         const size_t rd[], cfxDataType_t t, cfxComm_t comm) {
  return issue(comm, make_alltoallv(s, sc, sd, r, rc, rd, t, comm));
}
cfxResult_t cfxAlltoAllvDynamic(const void* s, const size_t sc[], const size_t sd[], void* r, size_t capacity,
                                size_t rc[], size_t rd[], cfxDataType_t t, cfxComm_t comm) {
  return issue(comm, make_dynamic_alltoallv(s, sc, sd, r, capacity, rc, rd, t, comm));
}
cfxResult_t cfxGather(const void* s, void* r, size_t count, cfxDataType_t t, int root, cfxComm_t comm) {
  return issue(comm, make(Coll::kGather, s, r, count, t, cfxSum, root));
}
cfxResult_t cfxScatter(const void* s, void* r, size_t count, cfxDataType_t t, int root, cfxComm_t comm) {
  return issue(comm, make(Coll::kScatter, s, r, count, t, cfxSum, root));
}
cfxResult_t cfxSend(const void* s, size_t count, cfxDataType_t t, int peer, cfxComm_t comm) {
  return issue(comm, make_p2p(Coll::kSend, s, nullptr, count, t, peer));
}
cfxResult_t cfxRecv(void* r, size_t count, cfxDataType_t t, int peer, cfxComm_t comm) {
  return issue(comm, make_p2p(Coll::kRecv, nullptr, r, count, t, peer));
}
cfxResult_t cfxBarrier(cfxComm_t comm) { return issue(comm, make(Coll::kBarrier, nullptr, nullptr, 0, cfxUint8)); }

cfxResult_t cfxGroupStart(void) {
  ++t_group_depth;
  return cfxSuccess;
}

cfxResult_t cfxGroupEnd(void) {
  if (t_group_depth == 0) return fail(nullptr, invalid_usage("cfxGroupEnd without cfxGroupStart"));
  if (--t_group_depth > 0) return cfxSuccess;
  auto ops = std::move(t_group_ops);
  t_group_ops.clear();
  // Per communicator, in order of first use; each runs its ops in call order.
  std::vector<cfxComm*> order;
  std::map<cfxComm*, std::vector<OpDesc>> by_comm;
  for (auto& [comm, op] : ops) {
    if (by_comm.find(comm) == by_comm.end()) order.push_back(comm);
    by_comm[comm].push_back(std::move(op));
  }
  cfxResult_t result = cfxSuccess;
  for (cfxComm* comm : order) {
    CallGuard in_call(comm);
    cfxResult_t r = guarded(comm, [&] { return comm->run(by_comm[comm]); });
    if (result == cfxSuccess) result = r;
  }
  return result;
}

cfxResult_t cfxIallReduce(const void* s, void* r, size_t count, cfxDataType_t t, cfxRedOp_t op, cfxComm_t comm,
                          cfxRequest_t* req) {
  return issue_async(comm, make(Coll::kAllReduce, s, r, count, t, op), req);
}
cfxResult_t cfxIbroadcast(const void* s, void* r, size_t count, cfxDataType_t t, int root, cfxComm_t comm,
                          cfxRequest_t* req) {
  return issue_async(comm, make(Coll::kBroadcast, s, r, count, t, cfxSum, root), req);
}
cfxResult_t cfxIreduce(const void* s, void* r, size_t count, cfxDataType_t t, cfxRedOp_t op, int root, cfxComm_t comm,
                       cfxRequest_t* req) {
  return issue_async(comm, make(Coll::kReduce, s, r, count, t, op, root), req);
}
cfxResult_t cfxIallGather(const void* s, void* r, size_t count, cfxDataType_t t, cfxComm_t comm, cfxRequest_t* req) {
  return issue_async(comm, make(Coll::kAllGather, s, r, count, t), req);
}
cfxResult_t cfxIreduceScatter(const void* s, void* r, size_t count, cfxDataType_t t, cfxRedOp_t op, cfxComm_t comm,
                              cfxRequest_t* req) {
  return issue_async(comm, make(Coll::kReduceScatter, s, r, count, t, op), req);
}
cfxResult_t cfxIalltoAll(const void* s, void* r, size_t count, cfxDataType_t t, cfxComm_t comm, cfxRequest_t* req) {
  return issue_async(comm, make(Coll::kAlltoAll, s, r, count, t), req);
}
cfxResult_t cfxIalltoAllv(const void* s, const size_t sc[], const size_t sd[], void* r, const size_t rc[],
                          const size_t rd[], cfxDataType_t t, cfxComm_t comm, cfxRequest_t* req) {
  return issue_async(comm, make_alltoallv(s, sc, sd, r, rc, rd, t, comm), req);
}
cfxResult_t cfxIalltoAllvDynamic(const void* s, const size_t sc[], const size_t sd[], void* r, size_t capacity,
                                 size_t rc[], size_t rd[], cfxDataType_t t, cfxComm_t comm, cfxRequest_t* request) {
  return issue_async(comm, make_dynamic_alltoallv(s, sc, sd, r, capacity, rc, rd, t, comm), request);
}
cfxResult_t cfxIgather(const void* s, void* r, size_t count, cfxDataType_t t, int root, cfxComm_t comm,
                       cfxRequest_t* req) {
  return issue_async(comm, make(Coll::kGather, s, r, count, t, cfxSum, root), req);
}
cfxResult_t cfxIscatter(const void* s, void* r, size_t count, cfxDataType_t t, int root, cfxComm_t comm,
                        cfxRequest_t* req) {
  return issue_async(comm, make(Coll::kScatter, s, r, count, t, cfxSum, root), req);
}
cfxResult_t cfxIsend(const void* s, size_t count, cfxDataType_t t, int peer, cfxComm_t comm, cfxRequest_t* req) {
  return issue_async(comm, make_p2p(Coll::kSend, s, nullptr, count, t, peer), req);
}
cfxResult_t cfxIrecv(void* r, size_t count, cfxDataType_t t, int peer, cfxComm_t comm, cfxRequest_t* req) {
  return issue_async(comm, make_p2p(Coll::kRecv, nullptr, r, count, t, peer), req);
}
cfxResult_t cfxIbarrier(cfxComm_t comm, cfxRequest_t* req) {
  return issue_async(comm, make(Coll::kBarrier, nullptr, nullptr, 0, cfxUint8), req);
}

cfxResult_t cfxTest(cfxRequest_t request, int* done) {
  if (request == nullptr || done == nullptr) return fail(nullptr, invalid_argument("cfxTest: NULL argument"));
  std::lock_guard lock(request->mutex);
  *done = request->done ? 1 : 0;
  if (request->done && !request->status.ok()) return fail(nullptr, request->status);
  return cfxSuccess;
}

cfxResult_t cfxWait(cfxRequest_t request) {
  if (request == nullptr) return fail(nullptr, invalid_argument("cfxWait: request is NULL"));
  std::unique_lock lock(request->mutex);
  request->cv.wait(lock, [&] { return request->done; });
  if (!request->status.ok()) return fail(nullptr, request->status);
  return cfxSuccess;
}

cfxResult_t cfxRequestFree(cfxRequest_t request) {
  if (request == nullptr) return cfxSuccess;
  {
    std::unique_lock lock(request->mutex);
    request->cv.wait(lock, [&] { return request->done; });
  }
  delete request;
  return cfxSuccess;
}

}  // extern "C"
