// The _conflux extension: enums, module functions, Comm and Request.
// conflux/__init__.py re-exports it with the pure-Python parts.
#include <pybind11/stl.h>

#include <cstring>

#include "bindings.h"
#include "errors.h"

namespace py = pybind11;
using namespace conflux_py;

namespace {

py::bytes get_unique_id() {
  cfxUniqueId id;
  check(cfxGetUniqueId(&id), nullptr, "cfxGetUniqueId");
  return py::bytes(id.internal, sizeof(id.internal));
}

std::unique_ptr<PyComm> comm_from_id(int nranks, const py::bytes& uid, int rank) {
  std::string raw = uid;
  if (raw.size() != CFX_UNIQUE_ID_BYTES)
    invalid_argument("unique id must be " + std::to_string(CFX_UNIQUE_ID_BYTES) + " bytes from get_unique_id(), got " +
                     std::to_string(raw.size()));
  cfxUniqueId id;
  std::memcpy(id.internal, raw.data(), sizeof(id.internal));
  cfxComm_t comm = nullptr;
  cfxResult_t rc;
  {
    py::gil_scoped_release nogil;  // waits for every rank to arrive
    rc = cfxCommInitRank(&comm, nranks, id, rank);
  }
  check(rc, nullptr, "cfxCommInitRank");
  return std::make_unique<PyComm>(std::make_shared<CommHandle>(comm));
}

std::unique_ptr<PyComm> comm_from_env() {
  cfxComm_t comm = nullptr;
  cfxResult_t rc;
  {
    py::gil_scoped_release nogil;
    rc = cfxCommInitFromEnv(&comm);
  }
  check(rc, nullptr, "cfxCommInitFromEnv");
  return std::make_unique<PyComm>(std::make_shared<CommHandle>(comm));
}

py::object split(PyComm& c, int color, int key) {
  cfxComm_t out = nullptr;
  cfxResult_t rc;
  {
    py::gil_scoped_release nogil;
    rc = cfxCommSplit(c.handle()->comm, color, key, &out);
  }
  check(rc, c.handle()->comm, "cfxCommSplit");
  if (out == nullptr) return py::none();
  return py::cast(std::make_unique<PyComm>(std::make_shared<CommHandle>(out)));
}

cfxComm_t live(PyComm& c) {
  if (c.handle()->comm == nullptr) throw CfxError(cfxInvalidUsage, "communicator was destroyed");
  return c.handle()->comm;
}

void destroy(PyComm& c) {
  cfxComm_t comm = c.handle()->comm;
  if (comm == nullptr) return;
  c.handle()->comm = nullptr;
  cfxResult_t rc;
  {
    py::gil_scoped_release nogil;
    rc = cfxCommDestroy(comm);
  }
  check(rc, nullptr, "cfxCommDestroy");
}

}  // namespace

PYBIND11_MODULE(_conflux, m) {
  m.doc() = "conflux: topology-aware collectives for host memory (C++ core of the conflux package)";
  register_error_translator();

  py::enum_<cfxRedOp_t>(m, "RedOp", "Reduction operations")
      .value("SUM", cfxSum).value("PROD", cfxProd).value("MAX", cfxMax).value("MIN", cfxMin).value("AVG", cfxAvg)
      .export_values();
  py::enum_<cfxDataType_t>(m, "DataType", "Element types (bfloat16 has no numpy type: pass dtype=BFLOAT16)")
      .value("INT8", cfxInt8).value("UINT8", cfxUint8).value("INT32", cfxInt32).value("UINT32", cfxUint32)
      .value("INT64", cfxInt64).value("UINT64", cfxUint64).value("FLOAT16", cfxFloat16).value("FLOAT32", cfxFloat32)
      .value("FLOAT64", cfxFloat64).value("BFLOAT16", cfxBfloat16).export_values();
  py::enum_<cfxResult_t>(m, "Result", "Result codes carried by conflux.Error.code")
      .value("SUCCESS", cfxSuccess).value("SYSTEM_ERROR", cfxSystemError).value("INTERNAL_ERROR", cfxInternalError)
      .value("INVALID_ARGUMENT", cfxInvalidArgument).value("INVALID_USAGE", cfxInvalidUsage)
      .value("REMOTE_ERROR", cfxRemoteError).value("TIMEOUT", cfxTimeout).value("IN_PROGRESS", cfxInProgress)
      .value("ABORTED", cfxAborted);

  m.def("get_unique_id", &get_unique_id,
        "Create a rendezvous id (bytes) on one rank; share it with the others and pass it to Comm().");
  m.def("version", [] { int v = 0; check(cfxGetVersion(&v), nullptr, "cfxGetVersion"); return v; },
        "Library version as major*10000 + minor*100 + patch.");
  m.def("type_size", &cfxTypeSize, "Bytes per element of a DataType.", py::arg("dtype"));
  m.def("error_string", [](cfxResult_t r) { return std::string(cfxGetErrorString(r)); },
        "Short description of a result code.", py::arg("code"));
  m.def("group_start", [] { check(cfxGroupStart(), nullptr, "cfxGroupStart"); },
        "Start a group: blocking calls until group_end() are issued together (send/recv rings do not deadlock).");
  m.def("group_end", [] {
        cfxResult_t rc;
        { py::gil_scoped_release nogil; rc = cfxGroupEnd(); }
        check(rc, nullptr, "cfxGroupEnd"); },
        "Issue the calls made since group_start() and wait for them.");

  py::class_<Request>(m, "Request", "A nonblocking operation in flight.")
      .def("wait", &Request::wait, "Block until done; returns the output buffer or raises conflux.Error.")
      .def("test", &Request::test, "True once done (raises conflux.Error if it failed), False while running.")
      .def_property_readonly("done", &Request::done, "Whether wait() or test() has seen completion.");

  py::class_<PyComm> comm(m, "Comm", "A communicator: a group of ranks that run collectives together.");
  comm.def(py::init(&comm_from_id),
           "Join a communicator of nranks ranks as `rank`, using the id from get_unique_id() on one rank. "
           "Blocks until all ranks have joined.",
           py::arg("nranks"), py::arg("uid"), py::arg("rank"))
      .def_static("from_env", &comm_from_env,
                  "Join using the launcher's environment (torchrun, Open MPI, MPICH, Slurm, `conflux run`).")
      .def_property_readonly("rank", &PyComm::rank, "This process's rank in the communicator.")
      .def_property_readonly("size", &PyComm::size, "Number of ranks.")
      .def("split", &split,
           "Split into sub-communicators by color, ranked by key (then old rank). Collective. "
           "Returns None for color == -1 (CFX_SPLIT_NOCOLOR).",
           py::arg("color"), py::arg("key") = 0)
      .def("set_timeout",
           [](PyComm& c, double seconds) {
             check(cfxCommSetTimeout(live(c), static_cast<int64_t>(seconds * 1000.0)), live(c), "cfxCommSetTimeout");
           },
           "Deadline for each operation in seconds (0: none).", py::arg("seconds"))
      .def("get_async_error",
           [](PyComm& c) {
             cfxResult_t r = cfxSuccess;
             check(cfxCommGetAsyncError(live(c), &r), live(c), "cfxCommGetAsyncError");
             return r;
           },
           "The first error seen outside a call's own result (Result.SUCCESS if none).")
      .def("abort",
           [](PyComm& c) {
             // cfxCommAbort frees the communicator (as ncclCommAbort does):
             // forget it first so nothing destroys it a second time.
             cfxComm_t doomed = live(c);
             c.handle()->comm = nullptr;
             cfxResult_t rc;
             {
               py::gil_scoped_release nogil;
               rc = cfxCommAbort(doomed);
             }
             check(rc, nullptr, "cfxCommAbort");
           },
           "Abort: operations in flight fail with ABORTED, then the communicator is released "
           "(only destroy-like use of it remains valid).")
      .def("destroy", &destroy, "Release the communicator now (also done when it is garbage collected).")
      .def("__enter__", [](py::object self) { return self; })
      .def("__exit__", [](PyComm& c, py::args) { destroy(c); })
      .def("__repr__", [](PyComm& c) {
        return "<conflux.Comm rank " + std::to_string(c.rank()) + " of " + std::to_string(c.size()) + ">";
      });
  bind_collectives(comm);
  bind_raw_calls(comm);
  bind_moe(m);
}
