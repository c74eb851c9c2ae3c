// A Link to one peer over a shared libfabric endpoint (OfiFabric). Each
// message is a small header (magic, length, OpSig) followed by the payload in
// pieces below the provider's max_msg_size, all as tagged messages whose tag
// holds communicator bits, the sender's rank and a per-link sequence number,
// so messages of different links and calls can never match each other. The
// receiver posts receives into user memory only after the header's signature
// matched; reductions go through a bounce buffer, a few pieces in flight.
// Messages up to kInline bytes travel inside the header message instead
// (one provider message, not two: that halves small-message latency), and
// are copied out once the signature matched.
#pragma once

#include "transport/ofi/ofi_fabric.h"
#include "transport/transport.h"

#include <poll.h>

#include <chrono>
#include <memory>
#include <vector>

namespace conflux {

struct OfiPeer {
  int rank = -1;
  fi_addr_t addr = FI_ADDR_UNSPEC;
  bool same_host = false;  // then liveness is checked by pid
  int pid = 0;
  uint64_t pid_start_time = 0;
};

// Tag layout: [63:48] communicator bits, [47:32] sender rank, [31:0] sequence.
// Failure notices use sender field kOfiNoticeSender and the sender's rank as
// sequence, so ranks go up to kOfiNoticeSender - 1.
uint64_t ofi_tag(uint64_t comm_id, int sender, uint32_t seq);
constexpr int kOfiNoticeSender = 0xffff;

class OfiLink final : public Link {
 public:
  static constexpr int kWindow = 4;  // pieces in flight per direction
  static constexpr size_t kInline = kOfiInlineBytes;  // payload carried in the header message

  // inline_bytes: the largest payload sent inside its header message (at most kInline).
  OfiLink(std::shared_ptr<OfiFabric> fabric, int rank, OfiPeer peer, uint64_t comm_id, size_t piece_bytes,
          size_t inline_bytes = kInline);
  ~OfiLink() override;
  OfiLink(const OfiLink&) = delete;
  OfiLink& operator=(const OfiLink&) = delete;
  const char* kind() const override { return "ofi"; }
  Status progress_send(SendOp& op, bool* progressed) override;
  Status progress_recv(RecvOp& op, bool* progressed) override;
  Status check_peer() override;
  Status check_notice() override;
  NoticeCheck notice_check() const override { return {nullptr, true}; }
  void send_notice(cfxResult_t code, const std::string& why) override;
  void quiesce() override;
  // The shared CQ's wait descriptor, after fi_trywait (-1: poll again first).
  int poll_fd() const override { return fabric_->wait_fd(); }
  // tcp;ofi_rxm's descriptor does not signal every event manual progress
  // needs (a socket turning writable): sleep on it only briefly.
  int max_sleep_ms() const override { return 1; }
  // Any completion (send or receive) makes the CQ descriptor readable.
  short poll_events(bool recv_waiting, bool send_waiting) const override {
    return recv_waiting || send_waiting ? POLLIN : 0;
  }

 private:
  struct Header {
    uint32_t magic;
    uint32_t reserved;
    uint64_t bytes;
    OpSig sig;
  };
  Status failed(const char* what, const OfiReq& req) const;
  Status finish_inline(RecvOp& op, bool* progressed);
  void post_notice_recv();
  bool peer_process_gone() const;  // same-host peer only (pidfd / pid); false when unknown
  static constexpr size_t kNoticeBytes = sizeof(int32_t) + kNoticeTextBytes;
  bool inlined(size_t bytes) const { return bytes <= inline_; }
  size_t pieces(size_t bytes) const { return (bytes + piece_ - 1) / piece_; }
  size_t piece_len(size_t bytes, size_t i) const { return std::min(piece_, bytes - i * piece_); }

  std::shared_ptr<OfiFabric> fabric_;
  int rank_;
  OfiPeer peer_;
  uint64_t comm_id_;
  size_t piece_;
  size_t inline_;
  bool check_before_send_;  // shm provider: is the peer alive? (see progress_send)
  int pidfd_ = -1;  // same-host peer's process, for check_peer
  // Failure notices: [0] the receive posted for the peer's, [1] our send;
  // buffers of kNoticeBytes (code, then text), owned by the fabric.
  OfiReq* notice_reqs_;
  uint8_t* notice_in_;
  uint8_t* notice_out_;
  bool notice_sent_ = false;
  // A message to or from the peer is under way on this link (check_peer).
  bool send_active_ = false, recv_active_ = false;
  // When check_peer first saw the peer gone while no message was under way.
  std::chrono::steady_clock::time_point gone_idle_since_{};

  // Send direction: the head message's header, piece requests and counters.
  Header send_header_{};
  std::vector<uint8_t> send_inline_;  // header + payload of an inlined message
  OfiReq* send_reqs_;  // [0] header, [1 + i % kWindow] piece i
  uint32_t send_seq_ = 0;
  uint32_t send_base_ = 0;
  size_t send_pieces_ = 0, send_posted_ = 0, send_completed_ = 0;

  // Receive direction. The header lands at the front of recv_inline_, with
  // room behind it for an inlined payload.
  Header recv_header_{};
  std::vector<uint8_t> recv_inline_;
  OfiReq* recv_reqs_;
  uint32_t recv_seq_ = 0;
  uint32_t recv_base_ = 0;
  size_t recv_pieces_ = 0, recv_posted_ = 0, recv_completed_ = 0;
  std::vector<uint8_t> bounce_;  // kWindow pieces, allocated at the first reduction
};

}  // namespace conflux
