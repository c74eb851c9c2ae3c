// A Link over one TCP connection. Each message is framed by a checked header
// (magic, length, signature) and padded to whole cache lines (kFrameAlign
// below says why); payload goes straight into the destination
// unless it must be reduced, then through a bounce buffer in pieces.
// Reads between large payloads go through a small read-ahead buffer, so a
// small message's header and payload (and whatever follows them) arrive in
// one system call instead of two.
//
// Liveness: a process thread sends every link a small heartbeat frame
// (magic "CFXB", no payload) every 500 ms while the link's send side is
// between frames, so framing stays FIFO; the receiver skips them. A peer that
// is SIGSTOPped, hung in the kernel or cut off keeps its socket open but goes
// quiet: check_peer() reports it once nothing at all (data or heartbeat)
// has arrived for CONFLUX_HEARTBEAT_TIMEOUT seconds (default 10, 0 = never)
// while this rank waits. A peer that exits closes the socket and is reported
// at once. A data frame waiting unread means the peer is ahead, not silent.
//
// A failure notice (send_notice) is a frame of its own (magic "CFXN", the
// code in `reserved`, the reason as payload), seen by check_peer() or by a
// receive waiting for the next frame.
#pragma once

#include "bootstrap/socket.h"
#include "transport/transport.h"

#include <mutex>
#include <vector>

namespace conflux {

class TcpLink final : public Link {
 public:
  TcpLink(Socket socket, int peer, size_t bounce_bytes);
  const char* kind() const override { return "tcp"; }
  Status progress_send(SendOp& op, bool* progressed) override;
  Status progress_recv(RecvOp& op, bool* progressed) override;
  int poll_fd() const override { return socket_.fd(); }
  Status check_peer() override;
  void send_notice(cfxResult_t code, const std::string& why) override;
  void begin_close() override;
  void finish_close(Clock::time_point deadline) override;
  ~TcpLink() override;

  // Heartbeat thread: queue a heartbeat if the send side is between frames.
  void send_heartbeat();
  // Fuzzers drive links deterministically: no heartbeat thread.
  static void set_heartbeats_enabled(bool on);

 private:
  struct Header {
    uint32_t magic;
    uint32_t reserved;
    uint64_t bytes;
    OpSig sig;
  };
  // Frames are whole multiples of kFrameAlign bytes: the header, a lead of
  // padding, the payload, a tail of padding. On send the kernel copies the
  // bytes into its socket buffer at the running offset of the sending
  // thread's page fragment, which whole-line frames keep line-aligned; the
  // lead (carried in the header's `reserved`) then puts a payload of
  // kLeadFrom bytes or more at the same offset within a line as its source.
  // A kernel copy whose destination sits a few bytes past its source
  // modulo 4 KiB is slow (loads wait on the stores they seem to alias;
  // core/copy.h has the user-space side of it): with the payload straight
  // after the 40-byte header, 2 ranks exchanging 2 MiB over loopback took
  // 1.5-2.1x longer.
  static constexpr size_t kFrameAlign = 64;
  static constexpr size_t kLeadFrom = 4096;
  static uint32_t frame_lead(const void* src, size_t bytes);
  static size_t frame_bytes(size_t lead, size_t payload);  // header to tail
  Status peer_failed(const char* what, int err) const;
  bool flush_heartbeat();  // false on a hard socket error; needs send_mu_
  Status drain_heartbeats();
  // The header just read announced a notice: read its text, return the error.
  Status read_notice(const Header& h);
  // Read-ahead: bytes received but not yet consumed are [ahead_pos_, ahead_end_).
  size_t ahead() const { return ahead_end_ - ahead_pos_; }
  size_t take_ahead(uint8_t* dst, size_t want);
  size_t drop_ahead(size_t want);  // consumes up to `want` read-ahead bytes unseen
  // One nonblocking recv (into dst, or into the read-ahead buffer): its
  // result (0: the peer closed; -1 with errno); data marks the peer heard.
  ssize_t read_into(uint8_t* dst, size_t want);
  ssize_t read_ahead(size_t most);  // at most `most` bytes
  // Drops the padding still owed (recv_skip_: a payload's lead, a frame's
  // tail), from the read-ahead buffer first and then from the socket, never
  // reading past it. 1 when none is left, else the read's result (0: the
  // peer closed; -1: see errno).
  ssize_t skip_padding();

  std::mutex send_mu_;  // progress_send vs the heartbeat thread
  bool send_in_frame_ = false;
  Header heartbeat_{};
  size_t heartbeat_done_ = sizeof(Header);  // == sizeof(Header): none pending
  bool recv_in_frame_ = false;
  bool notice_read_ = false;  // the peer's notice (why it gave up) has been read
  Clock::time_point last_heard_ = Clock::now();
  int last_pending_ = 0;  // bytes waiting unread at the last check

  Socket socket_;
  int peer_;
  Header send_header_{};
  Header recv_header_{};
  size_t recv_header_done_ = 0;
  size_t recv_skip_ = 0;
  std::vector<uint8_t> bounce_;
  size_t bounce_fill_ = 0;
  std::vector<uint8_t> ahead_;
  size_t ahead_pos_ = 0, ahead_end_ = 0;
};

}  // namespace conflux
