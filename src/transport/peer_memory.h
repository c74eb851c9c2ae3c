// What the executor's one-sided steps need from the transport: this rank's
// buffers published for the call, the peers' buffers reached by buffer
// index (mapped, or through the kernel), the staging areas, and flags. The
// shm transport implements it for the ranks of this host; how a peer's
// memory is reached is its business.
#pragma once

#include "core/coll.h"
#include "core/status.h"

#include <cstddef>
#include <cstdint>

namespace conflux {

class PeerMemory {
 public:
  virtual ~PeerMemory() = default;

  // Whether one-sided steps can reach `peer` (same host, segment mapped).
  virtual bool reaches(int peer) const = 0;
  // Starts one-sided call `epoch` (agreed by every rank; grows from call to
  // call): publishes this rank's send and receive buffers (`bytes` each,
  // how far peers may reach into them) before its first signal. With
  // `staging`, the call uses the staging areas: returns which half (the
  // same on every rank, as every rank counts the calls that use them).
  // `sig` is published too: check_call() compares a peer's with it.
  virtual int begin_call(uint64_t epoch, const OpSig& sig, const uint8_t* send, size_t send_bytes, uint8_t* recv,
                         size_t recv_bytes, bool staging) = 0;
  // Once the peer has signalled in this call: whether it is in the same
  // call as this rank (a mismatch error naming both calls otherwise). A peer
  // already in a later call has passed this one and is not checked.
  virtual Status check_call(int peer) const = 0;
  // This rank's staging half; nullptr when there is none.
  virtual uint8_t* staging(int half) const = 0;
  virtual size_t staging_bytes() const = 0;

  // `bytes` of buffer `buf` (algo::BufIndex: send, receive or staging) of
  // `peer`, from `offset`, in the current call. view() gives a pointer
  // this process can load from and store to, or nullptr when the peer's
  // buffer is not mapped here (read and write then go through the kernel).
  virtual uint8_t* view(int peer, int buf, size_t offset, size_t bytes) = 0;
  virtual Status read(int peer, int buf, size_t offset, void* to, size_t bytes) = 0;
  virtual Status write(int peer, int buf, size_t offset, const void* from, size_t bytes) = 0;

  // Raises this rank's flag to `value` and wakes the peers that sleep.
  virtual void signal(uint64_t value) = 0;
  // The peer's flag now.
  virtual uint64_t flag(int peer) const = 0;
};

// A flag value: the call's epoch and how many signals of that call came before.
inline uint64_t flag_value(uint64_t epoch, uint32_t signals) { return epoch << 16 | signals; }

}  // namespace conflux
