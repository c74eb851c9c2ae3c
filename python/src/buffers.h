// Reading Python buffer-protocol objects (numpy arrays, bytearray,
// memoryview, array.array, ...) as conflux buffers: pointer, element count
// and conflux datatype, with contiguity and writability checked up front so
// a wrong buffer fails with a clear message instead of corrupting memory.
#pragma once

#include <conflux/conflux.h>
#include <pybind11/pybind11.h>

#include <optional>
#include <string>

namespace conflux_py {

namespace py = pybind11;

struct BufferView {
  void* ptr = nullptr;
  size_t count = 0;  // elements of dtype
  cfxDataType_t dtype = cfxUint8;
};

// The conflux datatype for a buffer's struct-module format and item size,
// or std::nullopt when conflux has no such type (e.g. int16, complex).
std::optional<cfxDataType_t> datatype_for_format(const std::string& format, size_t itemsize);

const char* datatype_name(cfxDataType_t t);

// Acquires obj's buffer. `forced` overrides the format-derived datatype (the
// way to pass bfloat16 data held in a uint16 array); its size must equal the
// item size. Throws CfxError(cfxInvalidArgument) with `what` in the message.
py::buffer_info acquire(py::handle obj, bool writable, const char* what);
BufferView describe(const py::buffer_info& info, std::optional<cfxDataType_t> forced, const char* what);

}  // namespace conflux_py
