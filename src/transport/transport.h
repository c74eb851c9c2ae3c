// The transport interface: a Link joins this rank to one peer. The executor
// keeps, per link and direction, a FIFO of messages and asks the link to
// advance the one at the head; messages on a link complete in order, so no
// tags are needed to match them. Links never block: progress_* does what it
// can now and returns.
#pragma once

#include "core/coll.h"
#include "core/status.h"

#include <poll.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <atomic>
#include <string>

namespace conflux {

struct SendOp {
  const uint8_t* buf = nullptr;
  size_t bytes = 0;
  OpSig sig;
  // Progress state, owned by the link.
  size_t done = 0;
  int stage = 0;
  bool complete = false;
};

struct RecvOp {
  uint8_t* dst = nullptr;
  size_t bytes = 0;
  OpSig sig;  // expected; a different incoming signature is a mismatch error
  // When set, dst = reduce(reduce_with, incoming) instead of a copy.
  const uint8_t* reduce_with = nullptr;
  ReduceFn reduce = nullptr;
  size_t elem_size = 1;
  size_t done = 0;
  int stage = 0;
  bool complete = false;
};

class Link {
 public:
  virtual ~Link() = default;
  virtual const char* kind() const = 0;
  // Advance the message; set op.complete when all its bytes have moved. A
  // return of false in *progressed lets the executor decide to sleep.
  virtual Status progress_send(SendOp& op, bool* progressed) = 0;
  virtual Status progress_recv(RecvOp& op, bool* progressed) = 0;
  // A descriptor to poll while waiting (sockets), or -1 (shared memory).
  virtual int poll_fd() const { return -1; }
  // The poll() events to wait for on poll_fd(), given whether a receive and/or
  // a send is posted and waiting: sockets POLLIN/POLLOUT, a completion queue's
  // descriptor POLLIN for either.
  virtual short poll_events(bool recv_waiting, bool send_waiting) const {
    return static_cast<short>((recv_waiting ? POLLIN : 0) | (send_waiting ? POLLOUT : 0));
  }
  // The longest the executor may sleep on poll_fd() before polling again:
  // sockets signal every event, a provider's descriptor may miss some.
  virtual int max_sleep_ms() const { return 50; }
  // Cheap check that the peer is alive (called while waiting), and that it
  // has not sent a failure notice (see send_notice).
  virtual Status check_peer() { return Status::Ok(); }
  // Only whether the peer sent a failure notice (no liveness check: a peer
  // that finished and exited is no failure). For waits outside the executor.
  virtual Status check_notice() { return Status::Ok(); }
  // How a caller between operations learns of a notice: a word in this
  // process's memory that turns nonzero when one came (check_notice() then
  // reads it), or, with no word, whether check_notice() must be called
  // (false: notices are read only while waiting, as TCP reads them off the
  // socket).
  struct NoticeCheck {
    const std::atomic<uint32_t>* word = nullptr;
    bool call = false;
  };
  virtual NoticeCheck notice_check() const { return {}; }
  // Tells the peer, best effort and without waiting for it, that this rank's
  // communicator failed and why. The peer's check_peer() then fails with
  // that reason, so an error only one side can see (a mismatch found by a
  // receiver, a timeout, a dead third rank) reaches every rank, not as a
  // bare "connection closed" or a hang. Terminal: the link is not used again.
  virtual void send_notice(cfxResult_t code, const std::string& why) {
    (void)code;
    (void)why;
  }
  // The communicator failed: from now on the transport must not touch any
  // buffer of the abandoned call, whose owner may free it as soon as the
  // call returns. Links that only move bytes while progressed have nothing
  // to do; a provider holding posted operations must drop them. Terminal.
  virtual void quiesce() {}
  // The communicator is being destroyed and every call on it has returned.
  // begin_close() sends nothing new and lets what was sent go out (TCP: no
  // more heartbeats, then a FIN behind the queued bytes); finish_close()
  // waits, until `deadline`, for the peer to hold all of it, reading and
  // dropping what the peer still sends. A send that completed for its
  // caller may still be queued in the kernel, and closing a socket with
  // unread input (a heartbeat) resets the connection, which drops the
  // queue: the peer's receive then fails.
  virtual void begin_close() {}
  virtual void finish_close(std::chrono::steady_clock::time_point deadline) { (void)deadline; }
};

// A failure notice travels as (code, text) of at most this many bytes.
constexpr size_t kNoticeTextBytes = 480;

// The error this rank reports when `peer` sent a notice:
// "rank <peer>" + kNoticeRelayMarker + why.
constexpr const char* kNoticeRelayMarker = " gave up: ";
Status notice_error(int peer, int32_t code, const std::string& why);

// Compares the signature and length a sender announced with what this rank
// expects; the error names both calls and the peer.
Status check_incoming(const OpSig& expected, size_t expected_bytes, const OpSig& got, size_t got_bytes,
                      int peer);

}  // namespace conflux
