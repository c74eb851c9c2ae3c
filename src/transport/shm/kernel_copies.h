// Copies between this process and a peer process's ordinary memory through
// the kernel (process_vm_readv/writev, Cross Memory Attach), batched and
// kept off the CPU's slow copy distance.
//
// Batches: one process_vm_readv/writev costs about as much as a 4 KiB copy,
// so pieces go IOV_MAX (1024) to a call; a call per row would double the
// time of a row-by-row exchange.
//
// Distance: the kernel copies with `rep movsb`, which on the AMD EPYC
// machines measured here runs at 1.3-1.6 GB/s instead of 4.7-8.8 when the
// destination lies 1-31 bytes past the source modulo 4 KiB (process_vm_readv
// between two processes, 16 KiB-4 MiB; 32-63 bytes past ran at full speed;
// bench/peers/cma_distance.c). A piece of 1 KiB or more at such a distance
// goes through a bounce buffer placed at the remote bytes' offset within a
// line instead, and the bounce is copied on with copy_bytes: 3.6-6.2 GB/s
// for the extra copy.
#pragma once

#include "core/page_buffer.h"
#include "core/status.h"

#include <sys/uio.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace conflux {

class KernelCopies {
 public:
  KernelCopies();
  KernelCopies(const KernelCopies&) = delete;
  KernelCopies& operator=(const KernelCopies&) = delete;

  // Begins a transfer with rank `peer`, process `pid`: reads from it, or
  // writes to it when `to_peer`.
  void begin(int peer, int pid, bool to_peer);
  // Copies `bytes` between `local` and the peer's address `remote`: now, or
  // by finish() at the latest.
  Status add(uint8_t* local, uint64_t remote, size_t bytes);
  // Copies everything added since begin().
  Status finish();

  // Bytes that went through the bounce since construction.
  size_t bounced_bytes() const { return bounced_total_; }

  // One kernel copy of a single range, retried where the kernel moved part
  // of it; errors name the peer.
  static Status copy_range(int peer, int pid, uint64_t remote, void* local, size_t bytes, bool to_peer);

  // Pieces at least this large at a slow distance go through the bounce.
  static constexpr size_t kBounceFrom = 1024;
  // The bounce's size, whole pages: a piece of it and its copy stay in a
  // core's L2 (4 MiB read in 32/64/128/256 KiB pieces: 4.0/4.7/5.2/5.2 GB/s).
  static constexpr size_t kBounceBytes = 128 << 10;

 private:
  static constexpr size_t kBatch = 1024;
  struct Batch {
    iovec local[kBatch];
    iovec remote[kBatch];
    size_t count = 0;
    size_t bytes = 0;
  };
  // A read's bounced piece, copied to where it belongs after the batch.
  struct CopyOut {
    uint8_t* to;
    const uint8_t* from;
    size_t bytes;
  };
  static bool slow_distance(const void* dst, const void* src, size_t bytes);
  void push(Batch& b, void* local, uint64_t remote, size_t bytes);
  Status flush(Batch& b);
  Status flush_bounced();
  // Adds (part of) a piece at a slow distance through the bounce.
  Status add_bounced(uint8_t* local, uint64_t remote, size_t bytes);

  int peer_ = -1;
  int pid_ = -1;
  bool to_peer_ = false;
  std::unique_ptr<Batch> direct_, bounced_;
  std::vector<CopyOut> copy_out_;
  PageBuffer bounce_;
  size_t bounce_used_ = 0;
  size_t bounced_total_ = 0;
};

}  // namespace conflux
