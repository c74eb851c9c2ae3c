#include "errors.h"

#include <pybind11/pybind11.h>

namespace py = pybind11;

namespace conflux_py {

void check(cfxResult_t rc, cfxComm_t comm, const char* call) {
  if (rc == cfxSuccess) return;
  std::string detail = cfxGetLastError(comm);
  if (detail.empty()) detail = cfxGetErrorString(rc);
  throw CfxError(rc, std::string(call) + ": " + detail);
}

void invalid_argument(const std::string& msg) { throw CfxError(cfxInvalidArgument, msg); }

void register_error_translator() {
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const CfxError& e) {
      // The class lives in Python so it can carry attributes and a docstring;
      // conflux/__init__.py imports it before this extension, so it is loaded.
      py::object cls = py::module_::import("conflux._errors").attr("Error");
      py::object instance = cls(e.what(), static_cast<int>(e.code));
      PyErr_SetObject(cls.ptr(), instance.ptr());
    }
  });
}

}  // namespace conflux_py
