// The Comm class: construction, split, and every collective in a blocking
// form (returns the output buffer) and a nonblocking i-form (returns a
// Request), both built from one argument-checking "prepare" function each.
#include <pybind11/stl.h>

#include "bindings.h"
#include "buffers.h"
#include "call.h"
#include "errors.h"

namespace conflux_py {

namespace {

using OptType = std::optional<cfxDataType_t>;

struct Buf {
  py::buffer_info info;
  BufferView view;
};

Buf take(py::handle obj, bool writable, OptType dtype, const char* what) {
  Buf b{acquire(obj, writable, what), {}};
  b.view = describe(b.info, dtype, what);
  return b;
}

void same_type(const Buf& a, const Buf& b) {
  if (a.view.dtype != b.view.dtype)
    invalid_argument(std::string("dtype mismatch: sendbuf is ") + datatype_name(a.view.dtype) + ", recvbuf is " +
                     datatype_name(b.view.dtype));
}

void expect_count(size_t have, size_t want, const char* what) {
  if (have != want)
    invalid_argument(std::string(what) + " has " + std::to_string(have) + " elements, expected " + std::to_string(want));
}

size_t divide(size_t count, int n, const char* what) {
  if (count % static_cast<size_t>(n) != 0)
    invalid_argument(std::string(what) + " has " + std::to_string(count) + " elements, not a multiple of " +
                     std::to_string(n) + " ranks");
  return count / static_cast<size_t>(n);
}

// Send and receive buffers of a two-buffer call; recvbuf None means in place.
struct Pair {
  Buf send, recv;
  bool in_place = false;
};

Pair pair(py::handle sendbuf, py::handle recvbuf, OptType dtype) {
  if (recvbuf.is_none()) {
    Buf b = take(sendbuf, true, dtype, "buffer");
    Buf alias{py::buffer_info(), b.view};
    return Pair{std::move(b), std::move(alias), true};
  }
  Pair p{take(sendbuf, false, dtype, "sendbuf"), take(recvbuf, true, dtype, "recvbuf"), false};
  same_type(p.send, p.recv);
  return p;
}

Prepared finish(Call c, Pair p, py::handle result) {
  Prepared out;
  out.call = std::move(c);
  out.buffers.push_back(std::move(p.send.info));
  if (!p.in_place) out.buffers.push_back(std::move(p.recv.info));
  out.result = py::reinterpret_borrow<py::object>(result);
  return out;
}

Call base(Kind k, const Pair& p, size_t count, cfxRedOp_t op = cfxSum, int root = 0) {
  Call c;
  c.kind = k;
  c.send = p.send.view.ptr;
  c.recv = p.recv.view.ptr;
  c.count = count;
  c.dtype = p.send.view.dtype;
  c.op = op;
  c.root = root;
  return c;
}

py::handle out_of(py::handle sendbuf, py::handle recvbuf) { return recvbuf.is_none() ? sendbuf : recvbuf; }

Prepared prep_allreduce(PyComm& c, py::object s, py::object r, cfxRedOp_t op, OptType t) {
  Pair p = pair(s, r, t);
  expect_count(p.recv.view.count, p.send.view.count, "recvbuf");
  Call call = base(Kind::kAllReduce, p, p.send.view.count, op);
  return finish(std::move(call), std::move(p), out_of(s, r));
}

Prepared prep_broadcast(PyComm& c, py::object s, py::object r, int root, OptType t) {
  Pair p = pair(s, r, t);
  if (c.rank() == root) expect_count(p.send.view.count, p.recv.view.count, "sendbuf");
  Call call = base(Kind::kBroadcast, p, p.recv.view.count, cfxSum, root);
  return finish(std::move(call), std::move(p), out_of(s, r));
}

Prepared prep_reduce(PyComm& c, py::object s, py::object r, cfxRedOp_t op, int root, OptType t) {
  Pair p = pair(s, r, t);
  if (c.rank() == root) expect_count(p.recv.view.count, p.send.view.count, "recvbuf");
  Call call = base(Kind::kReduce, p, p.send.view.count, op, root);
  return finish(std::move(call), std::move(p), out_of(s, r));
}

Prepared prep_allgather(PyComm& c, py::object s, py::object r, OptType t) {
  Pair p = pair(s, r, t);
  if (p.in_place) invalid_argument("allgather needs a recvbuf (in place: pass a slice of recvbuf as sendbuf)");
  expect_count(p.recv.view.count, p.send.view.count * static_cast<size_t>(c.size()), "recvbuf");
  Call call = base(Kind::kAllGather, p, p.send.view.count);
  return finish(std::move(call), std::move(p), r);
}

Prepared prep_reduce_scatter(PyComm& c, py::object s, py::object r, cfxRedOp_t op, OptType t) {
  Pair p = pair(s, r, t);
  if (p.in_place) invalid_argument("reduce_scatter needs a recvbuf");
  expect_count(p.send.view.count, p.recv.view.count * static_cast<size_t>(c.size()), "sendbuf");
  Call call = base(Kind::kReduceScatter, p, p.recv.view.count, op);
  return finish(std::move(call), std::move(p), r);
}

Prepared prep_alltoall(PyComm& c, py::object s, py::object r, OptType t) {
  Pair p = pair(s, r, t);
  if (p.in_place) invalid_argument("alltoall needs a recvbuf distinct from sendbuf");
  expect_count(p.recv.view.count, p.send.view.count, "recvbuf");
  Call call = base(Kind::kAlltoAll, p, divide(p.send.view.count, c.size(), "sendbuf"));
  return finish(std::move(call), std::move(p), r);
}

std::vector<size_t> displacements(const std::optional<std::vector<size_t>>& given, const std::vector<size_t>& counts,
                                  const char* what) {
  if (given) {
    if (given->size() != counts.size()) invalid_argument(std::string(what) + " needs one entry per rank");
    return *given;
  }
  std::vector<size_t> d(counts.size());
  size_t at = 0;
  for (size_t i = 0; i < counts.size(); ++i) d[i] = at, at += counts[i];
  return d;
}

void fits(const std::vector<size_t>& counts, const std::vector<size_t>& displs, size_t have, const char* what) {
  for (size_t i = 0; i < counts.size(); ++i)
    if (displs[i] + counts[i] > have)
      invalid_argument(std::string(what) + " holds " + std::to_string(have) + " elements but rank " + std::to_string(i) +
                       "'s block ends at " + std::to_string(displs[i] + counts[i]));
}

Prepared prep_alltoallv(PyComm& c, py::object s, std::vector<size_t> sendcounts, py::object r,
                        std::vector<size_t> recvcounts, std::optional<std::vector<size_t>> sdispls,
                        std::optional<std::vector<size_t>> rdispls, OptType t) {
  Pair p = pair(s, r, t);
  if (p.in_place) invalid_argument("alltoallv needs a recvbuf distinct from sendbuf");
  size_t n = static_cast<size_t>(c.size());
  if (sendcounts.size() != n || recvcounts.size() != n) invalid_argument("sendcounts and recvcounts need one entry per rank");
  Call call = base(Kind::kAlltoAllv, p, 0);
  call.sdispls = displacements(sdispls, sendcounts, "sdispls");
  call.rdispls = displacements(rdispls, recvcounts, "rdispls");
  fits(sendcounts, call.sdispls, p.send.view.count, "sendbuf");
  fits(recvcounts, call.rdispls, p.recv.view.count, "recvbuf");
  call.sendcounts = std::move(sendcounts);
  call.recvcounts = std::move(recvcounts);
  return finish(std::move(call), std::move(p), r);
}

// Gather/scatter use the big buffer only at the root; elsewhere it may be None.
Prepared prep_gather(PyComm& c, py::object s, py::object r, int root, OptType t) {
  Buf send = take(s, false, t, "sendbuf");
  Prepared out;
  Call call;
  call.kind = Kind::kGather;
  call.send = send.view.ptr;
  call.count = send.view.count;
  call.dtype = send.view.dtype;
  call.root = root;
  if (c.rank() == root) {
    if (r.is_none()) invalid_argument("gather needs a recvbuf at the root");
    Buf recv = take(r, true, t, "recvbuf");
    same_type(send, recv);
    expect_count(recv.view.count, send.view.count * static_cast<size_t>(c.size()), "recvbuf");
    call.recv = recv.view.ptr;
    out.buffers.push_back(std::move(recv.info));
  }
  out.buffers.push_back(std::move(send.info));
  out.call = std::move(call);
  out.result = r;
  return out;
}

Prepared prep_scatter(PyComm& c, py::object s, py::object r, int root, OptType t) {
  Buf recv = take(r, true, t, "recvbuf");
  Prepared out;
  Call call;
  call.kind = Kind::kScatter;
  call.recv = recv.view.ptr;
  call.count = recv.view.count;
  call.dtype = recv.view.dtype;
  call.root = root;
  if (c.rank() == root) {
    if (s.is_none()) invalid_argument("scatter needs a sendbuf at the root");
    Buf send = take(s, false, t, "sendbuf");
    same_type(send, recv);
    expect_count(send.view.count, recv.view.count * static_cast<size_t>(c.size()), "sendbuf");
    call.send = send.view.ptr;
    out.buffers.push_back(std::move(send.info));
  }
  out.buffers.push_back(std::move(recv.info));
  out.call = std::move(call);
  out.result = r;
  return out;
}

Prepared prep_p2p(Kind k, py::object b, int peer, OptType t) {
  Buf buf = take(b, k == Kind::kRecv, t, "buffer");
  Prepared out;
  out.call.kind = k;
  if (k == Kind::kSend) out.call.send = buf.view.ptr; else out.call.recv = buf.view.ptr;
  out.call.count = buf.view.count;
  out.call.dtype = buf.view.dtype;
  out.call.root = peer;
  out.buffers.push_back(std::move(buf.info));
  out.result = b;
  return out;
}

Prepared prep_send(PyComm&, py::object b, int peer, OptType t) { return prep_p2p(Kind::kSend, b, peer, t); }
Prepared prep_recv(PyComm&, py::object b, int peer, OptType t) { return prep_p2p(Kind::kRecv, b, peer, t); }
Prepared prep_barrier(PyComm&) { Prepared p; p.call.kind = Kind::kBarrier; return p; }

// Binds `name` (blocking) and `i<name>` (nonblocking) from one prepare function.
template <typename... Args, typename... Extra>
void bind_pair(py::class_<PyComm>& cls, const char* name, Prepared (*prepare)(PyComm&, Args...), const std::string& doc,
               const Extra&... extra) {
  cls.def(name, [prepare](PyComm& c, Args... a) { return run_blocking(c.handle(), prepare(c, std::move(a)...)); },
          doc.c_str(), extra...);
  std::string iname = std::string("i") + name;
  std::string idoc = "Nonblocking " + std::string(name) +
                     ": same arguments, returns a Request at once (wait() returns what " + name +
                     " returns). Buffers are held until the request completes.";
  cls.def(iname.c_str(),
          [prepare](PyComm& c, Args... a) { return run_async(c.handle(), prepare(c, std::move(a)...)); },
          idoc.c_str(), extra...);
}

}  // namespace

void bind_collectives(py::class_<PyComm>& cls) {
  auto dt = py::arg("dtype") = py::none();
  bind_pair(cls, "allreduce", &prep_allreduce,
            "Reduce sendbuf across ranks with op into recvbuf on every rank (recvbuf None: in place). "
            "Returns the output buffer.",
            py::arg("sendbuf"), py::arg("recvbuf") = py::none(), py::arg("op") = cfxSum, dt);
  bind_pair(cls, "broadcast", &prep_broadcast,
            "Copy root's sendbuf into recvbuf on every rank (recvbuf None: in place in sendbuf).",
            py::arg("sendbuf"), py::arg("recvbuf") = py::none(), py::arg("root") = 0, dt);
  bind_pair(cls, "reduce", &prep_reduce,
            "Reduce sendbuf across ranks with op into recvbuf at root (recvbuf None: in place).",
            py::arg("sendbuf"), py::arg("recvbuf") = py::none(), py::arg("op") = cfxSum, py::arg("root") = 0, dt);
  bind_pair(cls, "allgather", &prep_allgather,
            "Concatenate every rank's sendbuf, in rank order, into recvbuf (size * len(sendbuf) elements).",
            py::arg("sendbuf"), py::arg("recvbuf"), dt);
  bind_pair(cls, "reduce_scatter", &prep_reduce_scatter,
            "Reduce sendbuf (size * len(recvbuf) elements) across ranks; rank r receives block r in recvbuf.",
            py::arg("sendbuf"), py::arg("recvbuf"), py::arg("op") = cfxSum, dt);
  bind_pair(cls, "alltoall", &prep_alltoall,
            "Block j of sendbuf (len/size elements) goes to rank j, landing in block r of its recvbuf.",
            py::arg("sendbuf"), py::arg("recvbuf"), dt);
  bind_pair(cls, "alltoallv", &prep_alltoallv,
            "All-to-all with per-rank element counts; displacements default to the prefix sums of the counts.",
            py::arg("sendbuf"), py::arg("sendcounts"), py::arg("recvbuf"), py::arg("recvcounts"),
            py::arg("sdispls") = py::none(), py::arg("rdispls") = py::none(), dt);
  bind_pair(cls, "gather", &prep_gather,
            "Concatenate every rank's sendbuf into recvbuf at root (recvbuf is ignored elsewhere and may be None).",
            py::arg("sendbuf"), py::arg("recvbuf") = py::none(), py::arg("root") = 0, dt);
  bind_pair(cls, "scatter", &prep_scatter,
            "Block r of root's sendbuf lands in rank r's recvbuf (sendbuf is ignored off the root and may be None).",
            py::arg("sendbuf"), py::arg("recvbuf"), py::arg("root") = 0, dt);
  bind_pair(cls, "send", &prep_send, "Send buf to rank peer (matched by a recv there, in call order).",
            py::arg("buf"), py::arg("peer"), dt);
  bind_pair(cls, "recv", &prep_recv, "Receive into buf from rank peer. Returns buf.", py::arg("buf"), py::arg("peer"), dt);
  bind_pair(cls, "barrier", &prep_barrier, "Return once every rank has entered the barrier.");
}

}  // namespace conflux_py
