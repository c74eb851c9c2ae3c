// The Python-visible communicator and the functions that bind each part of
// the module (split across files to keep each one small).
#pragma once

#include <pybind11/pybind11.h>

#include "call.h"

namespace conflux_py {

namespace py = pybind11;

class PyComm {
 public:
  explicit PyComm(CommPtr h) : h_(std::move(h)) {}
  const CommPtr& handle() const { return h_; }
  int rank() const { return h_->rank; }
  int size() const { return h_->nranks; }

 private:
  CommPtr h_;
};

void bind_collectives(py::class_<PyComm>& cls);
void bind_raw_calls(py::class_<PyComm>& cls);
void bind_moe(py::module_& m);

}  // namespace conflux_py
