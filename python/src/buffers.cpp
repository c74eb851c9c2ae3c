#include "buffers.h"

#include "errors.h"

namespace conflux_py {

std::optional<cfxDataType_t> datatype_for_format(const std::string& format, size_t itemsize) {
  std::string f = format;
  // Native, standard-size native-order and little-endian prefixes all mean
  // host order on the x86/arm64 hosts conflux runs on; big-endian does not.
  if (!f.empty() && (f[0] == '@' || f[0] == '=' || f[0] == '<')) f.erase(0, 1);
  if (f.size() != 1) return std::nullopt;
  switch (f[0]) {
    case 'b': return cfxInt8;
    case 'B': return cfxUint8;
    case 'e': return cfxFloat16;
    case 'f': return cfxFloat32;
    case 'd': return cfxFloat64;
    case 'i': case 'l': case 'q':  // C int/long/long long: decided by size
      if (itemsize == 4) return cfxInt32;
      if (itemsize == 8) return cfxInt64;
      return std::nullopt;
    case 'I': case 'L': case 'Q':
      if (itemsize == 4) return cfxUint32;
      if (itemsize == 8) return cfxUint64;
      return std::nullopt;
    default: return std::nullopt;
  }
}

const char* datatype_name(cfxDataType_t t) {
  static const char* names[] = {"int8",  "uint8",   "int32",   "uint32",  "int64",
                                "uint64", "float16", "float32", "float64", "bfloat16"};
  int i = static_cast<int>(t);
  return i >= 0 && i < cfxNumTypes ? names[i] : "invalid";
}

py::buffer_info acquire(py::handle obj, bool writable, const char* what) {
  if (!PyObject_CheckBuffer(obj.ptr()))
    invalid_argument(std::string(what) + " of type " + std::string(py::str(obj.get_type().attr("__name__"))) +
                     " does not support the buffer protocol");
  auto* view = new Py_buffer();
  int flags = PyBUF_STRIDES | PyBUF_FORMAT | (writable ? PyBUF_WRITABLE : 0);
  if (PyObject_GetBuffer(obj.ptr(), view, flags) != 0) {
    delete view;
    PyErr_Clear();
    invalid_argument(std::string(what) + (writable ? " is not a writable buffer" : " is not a readable buffer"));
  }
  return py::buffer_info(view, /*ownview=*/true);
}

BufferView describe(const py::buffer_info& info, std::optional<cfxDataType_t> forced, const char* what) {
  const size_t itemsize = static_cast<size_t>(info.itemsize);
  // C-contiguous: each stride equals the bytes of the dimensions inside it
  // (dimensions of extent 1 may carry any stride).
  size_t expect = itemsize;
  for (ssize_t d = info.ndim - 1; d >= 0; --d) {
    if (info.shape[d] != 1 && static_cast<size_t>(info.strides[d]) != expect)
      invalid_argument(std::string(what) + " is not C-contiguous (use numpy.ascontiguousarray)");
    expect *= static_cast<size_t>(info.shape[d]);
  }
  BufferView v;
  v.ptr = info.ptr;
  v.count = static_cast<size_t>(info.size);
  if (forced) {
    if (cfxTypeSize(*forced) != itemsize)
      invalid_argument(std::string(what) + " has " + std::to_string(itemsize) + "-byte items but dtype " +
                       datatype_name(*forced) + " needs " + std::to_string(cfxTypeSize(*forced)));
    v.dtype = *forced;
    return v;
  }
  auto t = datatype_for_format(info.format, itemsize);
  if (!t)
    invalid_argument(std::string(what) + " has element format '" + info.format +
                     "' which conflux does not support (int8/uint8/int32/uint32/int64/uint64/float16/"
                     "float32/float64; pass dtype= for bfloat16)");
  v.dtype = *t;
  return v;
}

}  // namespace conflux_py
