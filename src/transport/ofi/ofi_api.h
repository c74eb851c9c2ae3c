// libfabric's exported entry points, loaded when the libfabric transport is
// first used instead of linked into libconflux.
//
// Debian's libfabric links libinfinipath (for its PSM provider), whose
// constructor installs its own SIGSEGV, SIGABRT, SIGBUS and SIGILL handlers
// in every process that loads it. Linked, that was every program using
// conflux, libfabric or not; a crash then printed PSM's backtrace, and after
// heap corruption its handler could hang instead of letting the process die
// (seen in the kill test). Loaded on demand, programs that never use
// libfabric are untouched, and the signal handlers a process had are put
// back right after the load.
//
// Everything else in libfabric's API (fi_domain, fi_tsend, fi_cq_read, ...)
// is an inline call through the objects these return.
#pragma once

#include "core/status.h"

#include <rdma/fabric.h>
#include <rdma/fi_errno.h>

namespace conflux {

struct OfiApi {
  decltype(&fi_getinfo) getinfo = nullptr;
  decltype(&fi_freeinfo) freeinfo = nullptr;
  decltype(&fi_dupinfo) dupinfo = nullptr;  // dupinfo(nullptr) is fi_allocinfo()
  decltype(&fi_fabric) fabric = nullptr;
  decltype(&fi_strerror) strerror = nullptr;
};

// Loads libfabric.so.1 once; an error naming dlopen's reason when it cannot.
Result<const OfiApi*> ofi_api();

}  // namespace conflux
