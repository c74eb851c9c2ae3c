// Turning conflux result codes into Python exceptions.
//
// Every failure the module reports -- from the library or from the binding's
// own argument checks -- surfaces as conflux.Error (defined in Python, in
// conflux/_errors.py) carrying the cfxResult_t code and the library's
// cfxGetLastError text, so Python callers handle one exception type.
#pragma once

#include <conflux/conflux.h>

#include <stdexcept>
#include <string>

namespace conflux_py {

// Thrown by the C++ side; translated into conflux.Error at the boundary.
struct CfxError : std::runtime_error {
  CfxError(cfxResult_t c, const std::string& msg) : std::runtime_error(msg), code(c) {}
  cfxResult_t code;
};

// Throws CfxError for rc != cfxSuccess, with the communicator's last error
// (or the calling thread's, when comm is NULL) as the message.
void check(cfxResult_t rc, cfxComm_t comm, const char* call);

// An argument the binding rejects before calling the library.
[[noreturn]] void invalid_argument(const std::string& msg);

// Installs the pybind11 translator from CfxError to conflux.Error.
void register_error_translator();

}  // namespace conflux_py
