// cfxMemAlloc: user buffers in shared memory (a memfd per allocation), so
// ranks on one host can map each other's buffers and read them with plain
// loads: the intra-host collectives then skip process_vm_readv and reduce
// straight from the peers' memory (as ncclMemAlloc does for NVLink). Any
// other buffer keeps working through the single-copy path.
#pragma once

#include "core/status.h"

#include <cstddef>
#include <cstdint>

namespace conflux {

// What a peer needs to map a region: the descriptor number in the owner
// (peers take it with pidfd_getfd or /proc/<pid>/fd), the owner's mapping
// address and size, and an id unique in the owner's lifetime (0: no region).
struct SharedRegionRef {
  uint64_t id = 0;
  uint64_t base = 0;
  uint64_t size = 0;
  int32_t fd = -1;
  int32_t reserved = 0;
};

Result<void*> shared_mem_alloc(size_t bytes);
Status shared_mem_free(void* ptr);
// The cfxMemAlloc region holding ptr, or an empty ref (id 0).
SharedRegionRef shared_region_of(const void* ptr);

}  // namespace conflux
