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
  // `staging_extent` (the same on every rank; 0: unknown) is how much of
  // the half the call uses: a transport may place a small one elsewhere
  // (the shm transport: beside the flag), for this rank and its peers alike.
  // `sig` is published too (beside this rank's flag, so a peer's first
  // look at the flag brings it): check_call() compares a peer's with it.
  // With `expose` false, no peer reaches this rank's buffers in this call
  // and they are not published.
  virtual int begin_call(uint64_t epoch, const OpSig& sig, const uint8_t* send, size_t send_bytes, uint8_t* recv,
                         size_t recv_bytes, bool staging, size_t staging_extent, bool expose) = 0;
  // Starts call `epoch` that moves nothing one-sided (a point-to-point
  // schedule): shows the call and its signature in this rank's flag, with
  // no signal, so a peer waiting in a one-sided schedule of the same epoch
  // sees that this rank is in another call instead of waiting for a signal
  // that never comes.
  virtual void announce_call(uint64_t epoch, const OpSig& sig) = 0;
  // Whether a peer whose flag (`seen`, as flag() returned it) shows this
  // rank's epoch is in the same call as this rank (a mismatch error naming
  // both calls otherwise): checked once it has signalled, and while
  // waiting for a signal, since a peer in a point-to-point call of the
  // epoch never signals. A peer whose flag is in an earlier call, or a
  // later one (it passed this one), is not checked.
  virtual Status check_call(int peer, uint64_t seen) const = 0;
  // This rank's staging half in the current call; nullptr when there is none.
  virtual uint8_t* staging(int half) const = 0;
  virtual size_t staging_bytes() const = 0;

  // `bytes` of buffer `buf` (algo::BufIndex: send, receive or staging) of
  // `peer`, from `offset`, in the current call. view() gives a pointer
  // this process can load from and store to, or nullptr when the peer's
  // buffer is not mapped here (read and write then go through the kernel).
  virtual uint8_t* view(int peer, int buf, size_t offset, size_t bytes) = 0;
  virtual Status read(int peer, int buf, size_t offset, void* to, size_t bytes) = 0;
  virtual Status write(int peer, int buf, size_t offset, const void* from, size_t bytes) = 0;
  // Many reads (or writes) of one buffer of one peer at once: a transport
  // that goes through the kernel moves them in one system call each few
  // hundred pieces instead of one per piece. `local` is where a read lands
  // or where a write comes from.
  struct Piece {
    size_t offset;
    uint8_t* local;
    size_t bytes;
  };
  virtual Status transfer(int peer, int buf, bool to_peer, const Piece* pieces, size_t count) {
    for (size_t i = 0; i < count; ++i) {
      const Piece& p = pieces[i];
      CFX_RETURN_IF_ERROR(to_peer ? write(peer, buf, p.offset, p.local, p.bytes)
                                  : read(peer, buf, p.offset, p.local, p.bytes));
    }
    return Status::Ok();
  }

  // Raises this rank's flag to its `signals`-th signal of the current call
  // and wakes the peers that sleep.
  virtual void signal(uint32_t signals) = 0;
  // The peer's flag now (flag_epoch/flag_signals read it). A transport
  // may take what the peer staged beside the flag in the same look (the
  // shm transport does for small calls), so that reading it later touches
  // no line the peer may be writing for its next call.
  virtual uint64_t flag(int peer) = 0;
};

// A flag packs the call's epoch (32 bits), a 24-bit hash of the call's
// signature, and the signals made in that call (8 bits), so one atomic
// store tells a peer both how far this rank got and which call it is in.
// It only grows: the epoch is on top and grows from call to call.
inline constexpr uint32_t kMaxSignalsPerCall = 255;
inline uint64_t flag_value(uint64_t epoch, uint32_t call_hash, uint32_t signals) {
  return (epoch & 0xffffffffull) << 32 | static_cast<uint64_t>(call_hash & 0xffffffu) << 8 | (signals & 0xffu);
}
inline uint64_t flag_epoch(uint64_t flag) { return flag >> 32; }
inline uint32_t flag_call_hash(uint64_t flag) { return static_cast<uint32_t>(flag >> 8) & 0xffffffu; }
inline uint32_t flag_signals(uint64_t flag) { return static_cast<uint32_t>(flag & 0xffu); }
// Whether `flag` shows the `signals`-th signal of call `epoch` (or a later call).
inline bool flag_reached(uint64_t flag, uint64_t epoch, uint32_t signals) {
  const uint64_t e = flag_epoch(flag), want = epoch & 0xffffffffull;
  return e > want || (e == want && flag_signals(flag) >= signals);
}

}  // namespace conflux
