#include "support/reference.h"

#include "core/half.h"

#include <algorithm>
#include <cmath>
#include <new>
#include <type_traits>
#include <cstring>
#include <memory>

namespace conflux::test {

std::string CollCase::str() const {
  return std::string(coll_name(coll)) + " " + datatype_name(dtype) + " " + redop_name(op) + " count=" +
         std::to_string(count) + " root=" + std::to_string(root) + (in_place ? " in-place" : " out-of-place");
}

namespace {

bool g_shared_buffers = false;
bool g_registered = false;
std::function<void(cfxComm_t, int, const CollCase&)> g_before_case;

// A buffer registered with the communicator for one case.
class Registered {
 public:
  Registered(cfxComm_t comm, void* p, size_t bytes) : comm_(comm) {
    if (bytes > 0 && cfxCommRegister(comm, p, bytes, &handle_) != cfxSuccess) {
      error_ = cfxGetLastError(comm);
      handle_ = nullptr;
    }
  }
  ~Registered() {
    if (handle_ != nullptr) cfxCommDeregister(comm_, handle_);
  }
  Registered(const Registered&) = delete;
  Registered& operator=(const Registered&) = delete;
  const std::string& error() const { return error_; }

 private:
  cfxComm_t comm_;
  void* handle_ = nullptr;
  std::string error_;
};

// Test buffers from cfxMemAlloc when use_shared_buffers(true) was in force
// at the vector's construction, else the heap.
template <typename T>
struct TestAlloc {
  using value_type = T;
  using propagate_on_container_swap = std::true_type;
  bool shared = g_shared_buffers;
  TestAlloc() = default;
  template <typename U>
  TestAlloc(const TestAlloc<U>& o) : shared(o.shared) {}
  T* allocate(size_t n) {
    if (!shared) return static_cast<T*>(::operator new(n * sizeof(T)));
    void* p = nullptr;
    if (cfxMemAlloc(&p, std::max<size_t>(1, n * sizeof(T))) != cfxSuccess) throw std::bad_alloc();
    return static_cast<T*>(p);
  }
  void deallocate(T* p, size_t) {
    if (shared)
      (void)cfxMemFree(p);
    else
      ::operator delete(p);
  }
  bool operator==(const TestAlloc& o) const { return shared == o.shared; }
};
using Bytes = std::vector<uint8_t, TestAlloc<uint8_t>>;

bool same(double got, double want, cfxDataType_t t) {
  if (std::isnan(want)) return std::isnan(got);
  if (t == cfxFloat16 || t == cfxBfloat16 || t == cfxFloat32) {
    std::vector<uint8_t> tmp(8);
    store(tmp.data(), 0, t, want);
    return load(tmp.data(), 0, t) == got;
  }
  return got == want;
}

struct Checker {
  const CollCase& c;
  int rank;
  std::string errors;
  int shown = 0;
  void expect(const void* buf, size_t i, double want, const char* where) {
    double got = load(buf, i, c.dtype);
    if (same(got, want, c.dtype)) return;
    if (shown++ < 4)
      errors += std::string(where) + "[" + std::to_string(i) + "] = " + std::to_string(got) + ", expected " +
                std::to_string(want) + "; ";
  }
};

}  // namespace

void use_shared_buffers(bool on) { g_shared_buffers = on; }
void use_registered_buffers(bool on) { g_registered = on; }
void set_before_each_case(std::function<void(cfxComm_t, int, const CollCase&)> hook) { g_before_case = std::move(hook); }

std::string run_and_check(cfxComm_t comm, int rank, int n, const CollCase& c) {
  const size_t elem = cfxTypeSize(c.dtype);
  const size_t count = c.count;
  const size_t nn = static_cast<size_t>(n);
  size_t send_elems = count, recv_elems = count;
  switch (c.coll) {
    case Coll::kAllGather: recv_elems = count * nn; break;
    case Coll::kReduceScatter: send_elems = count * nn; break;
    case Coll::kAlltoAll: send_elems = recv_elems = count * nn; break;
    case Coll::kGather: recv_elems = count * nn; break;
    case Coll::kScatter: send_elems = count * nn; break;
    default: break;
  }
  // Guard bytes after each buffer catch writes past the end.
  constexpr size_t kGuard = 64;
  Bytes recv(recv_elems * elem + kGuard, 0xA5), send(send_elems * elem + kGuard, 0x5A);
  // Send contents: element i of the input this rank contributes.
  auto input_index = [&](size_t i) { return i; };
  for (size_t i = 0; i < send_elems; ++i) store(send.data(), i, c.dtype, input_value(rank, input_index(i), c.op));
  void* sendp = send.data();
  void* recvp = recv.data();
  if (c.in_place) {
    // Place the input where NCCL's in-place rules expect it inside recvbuf.
    switch (c.coll) {
      case Coll::kAllGather:
      case Coll::kGather:
        std::memcpy(recv.data() + static_cast<size_t>(rank) * count * elem, send.data(), count * elem);
        sendp = recv.data() + static_cast<size_t>(rank) * count * elem;
        break;
      case Coll::kReduceScatter:
      case Coll::kScatter: {
        // recvbuf lives inside sendbuf at this rank's block.
        Bytes big(send_elems * elem + kGuard, 0x5A);
        std::memcpy(big.data(), send.data(), send_elems * elem);
        send.swap(big);
        sendp = send.data();
        recvp = send.data() + static_cast<size_t>(rank) * count * elem;
        break;
      }
      default:
        std::memcpy(recv.data(), send.data(), send_elems * elem);
        sendp = recvp = recv.data();
        break;
    }
  }
  std::vector<std::unique_ptr<Registered>> registered;
  if (g_registered && g_shared_buffers)
    for (Bytes* b : {&send, &recv}) {
      registered.push_back(std::make_unique<Registered>(comm, b->data(), b->size()));
      if (!registered.back()->error().empty()) return c.str() + ": cfxCommRegister: " + registered.back()->error();
    }
  if (g_before_case) g_before_case(comm, n, c);
  cfxResult_t r = cfxSuccess;
  switch (c.coll) {
    case Coll::kAllReduce: r = cfxAllReduce(sendp, recvp, count, c.dtype, c.op, comm); break;
    case Coll::kBroadcast: r = cfxBroadcast(sendp, recvp, count, c.dtype, c.root, comm); break;
    case Coll::kReduce: r = cfxReduce(sendp, recvp, count, c.dtype, c.op, c.root, comm); break;
    case Coll::kAllGather: r = cfxAllGather(sendp, recvp, count, c.dtype, comm); break;
    case Coll::kReduceScatter: r = cfxReduceScatter(sendp, recvp, count, c.dtype, c.op, comm); break;
    case Coll::kAlltoAll: r = cfxAlltoAll(sendp, recvp, count, c.dtype, comm); break;
    case Coll::kGather: r = cfxGather(sendp, recvp, count, c.dtype, c.root, comm); break;
    case Coll::kScatter: r = cfxScatter(sendp, recvp, count, c.dtype, c.root, comm); break;
    default: return "unsupported collective in test";
  }
  if (r != cfxSuccess) return c.str() + ": returned " + cfxGetErrorString(r) + ": " + cfxGetLastError(comm);
  Checker ck{c, rank, "", 0};
  const uint8_t* out = static_cast<const uint8_t*>(recvp);
  size_t out_bytes = 0;
  auto block_input = [&](int from, size_t i) { return input_value(from, i, c.op); };
  switch (c.coll) {
    case Coll::kAllReduce:
      for (size_t i = 0; i < count; ++i) ck.expect(out, i, reduced_value(n, i, c.op, c.dtype), "recv");
      out_bytes = count * elem;
      break;
    case Coll::kReduce:
      if (rank == c.root)
        for (size_t i = 0; i < count; ++i) ck.expect(out, i, reduced_value(n, i, c.op, c.dtype), "recv");
      out_bytes = rank == c.root ? count * elem : 0;
      break;
    case Coll::kBroadcast:
      for (size_t i = 0; i < count; ++i) ck.expect(out, i, block_input(c.root, i), "recv");
      out_bytes = count * elem;
      break;
    case Coll::kAllGather:
      for (int from = 0; from < n; ++from)
        for (size_t i = 0; i < count; ++i) ck.expect(out, from * count + i, block_input(from, i), "recv");
      out_bytes = count * nn * elem;
      break;
    case Coll::kReduceScatter:
      for (size_t i = 0; i < count; ++i)
        ck.expect(out, i, reduced_value(n, rank * count + i, c.op, c.dtype), "recv");
      out_bytes = count * elem;
      break;
    case Coll::kAlltoAll:
      // Rank `from` sent us its block number `rank`: inputs rank*count+i.
      for (int from = 0; from < n; ++from)
        for (size_t i = 0; i < count; ++i) ck.expect(out, from * count + i, block_input(from, rank * count + i), "recv");
      out_bytes = count * nn * elem;
      break;
    case Coll::kGather:
      if (rank == c.root)
        for (int from = 0; from < n; ++from)
          for (size_t i = 0; i < count; ++i) ck.expect(out, from * count + i, block_input(from, i), "recv");
      out_bytes = rank == c.root ? count * nn * elem : 0;
      break;
    case Coll::kScatter:
      for (size_t i = 0; i < count; ++i) ck.expect(out, i, block_input(c.root, rank * count + i), "recv");
      out_bytes = count * elem;
      break;
    default: break;
  }
  // Nothing written past the output (out-of-place recv buffer guard).
  if (!c.in_place) {
    for (size_t g = recv_elems * elem; g < recv.size(); ++g)
      if (recv[g] != 0xA5) {
        ck.errors += "wrote past the end of recvbuff; ";
        break;
      }
    // Rank-local outputs we did not expect to be written stay untouched.
    if (out_bytes == 0 && recv_elems > 0 && recv[0] != 0xA5) ck.errors += "wrote into an unused recvbuff; ";
    for (size_t i = 0; i < send_elems && ck.shown < 4; ++i)
      if (load(send.data(), i, c.dtype) != load(send.data(), i, c.dtype) ||
          !same(load(send.data(), i, c.dtype), input_value(rank, i, c.op), c.dtype)) {
        ck.errors += "modified sendbuff; ";
        break;
      }
  }
  if (ck.errors.empty()) return "";
  return c.str() + ": " + ck.errors;
}

std::string run_small_matrix(cfxComm_t comm, int rank, int n, std::span<const cfxDataType_t> reduce_types,
                             std::span<const cfxRedOp_t> ops, std::span<const cfxDataType_t> move_types) {
  const std::vector<size_t> counts = {0, 1, 7, 13, 1031, static_cast<size_t>(n) * 5 + 3};
  std::string errors;
  auto check = [&](const CollCase& c) {
    if (errors.size() > 4000) return;
    std::string e = run_and_check(comm, rank, n, c);
    if (!e.empty()) errors += e + "\n";
  };
  for (Coll coll : {Coll::kAllReduce, Coll::kReduce, Coll::kReduceScatter})
    for (cfxDataType_t t : reduce_types)
      for (cfxRedOp_t op : ops)
        for (size_t count : counts)
          for (bool in_place : {false, true})
            check({coll, t, op, count, static_cast<int>((count + static_cast<size_t>(op)) % n), in_place});
  for (Coll coll : {Coll::kBroadcast, Coll::kAllGather, Coll::kAlltoAll, Coll::kGather, Coll::kScatter})
    for (cfxDataType_t t : move_types)
      for (size_t count : counts)
        for (bool in_place : {false, true}) check({coll, t, cfxSum, count, static_cast<int>(count % n), in_place});
  return errors;
}

}  // namespace conflux::test
