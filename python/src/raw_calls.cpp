// Address-level entry point for the PyTorch backend: tensors (including
// bfloat16, which has no buffer-protocol format) are passed as data_ptr()
// addresses. The caller keeps the tensors alive; `keepalive` is stored in
// the Request only as a second guard.
#include <pybind11/stl.h>

#include "bindings.h"
#include "errors.h"

namespace conflux_py {

namespace {

Kind kind_from_name(const std::string& name) {
  for (int k = 0; k <= static_cast<int>(Kind::kBarrier); ++k)
    if (name == call_name(static_cast<Kind>(k))) return static_cast<Kind>(k);
  invalid_argument("unknown call '" + name + "'");
}

std::unique_ptr<Request> raw_call(PyComm& c, const std::string& name, uintptr_t send, uintptr_t recv, size_t count,
                                  cfxDataType_t dtype, cfxRedOp_t op, int root, std::vector<size_t> sendcounts,
                                  std::vector<size_t> sdispls, std::vector<size_t> recvcounts,
                                  std::vector<size_t> rdispls, py::object keepalive) {
  Prepared p;
  p.call.kind = kind_from_name(name);
  p.call.send = reinterpret_cast<const void*>(send);
  p.call.recv = reinterpret_cast<void*>(recv);
  p.call.count = count;
  p.call.dtype = dtype;
  p.call.op = op;
  p.call.root = root;
  p.call.sendcounts = std::move(sendcounts);
  p.call.sdispls = std::move(sdispls);
  p.call.recvcounts = std::move(recvcounts);
  p.call.rdispls = std::move(rdispls);
  p.result = std::move(keepalive);
  return run_async(c.handle(), std::move(p));
}

}  // namespace

void bind_raw_calls(py::class_<PyComm>& cls) {
  cls.def("_raw_call", &raw_call,
          "Internal (used by conflux.torch): issue a nonblocking call on raw addresses. "
          "root is the peer for send/recv. Returns a Request whose wait() returns keepalive.",
          py::arg("name"), py::arg("send"), py::arg("recv"), py::arg("count"), py::arg("dtype"),
          py::arg("op") = cfxSum, py::arg("root") = 0, py::arg("sendcounts") = std::vector<size_t>{},
          py::arg("sdispls") = std::vector<size_t>{}, py::arg("recvcounts") = std::vector<size_t>{},
          py::arg("rdispls") = std::vector<size_t>{}, py::arg("keepalive") = py::none());
}

}  // namespace conflux_py
