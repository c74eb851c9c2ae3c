// A Link to a peer on the same host through shared-memory rings: we write
// into our ring in the peer's segment and read the peer's ring in ours. The
// small-message path is a copy and a release store: no system call unless
// the other side sleeps.
#pragma once

#include "transport/shm/shm_segment.h"
#include "transport/transport.h"

namespace conflux {

class ShmLink final : public Link {
 public:
  // `mine` is this rank's segment, `theirs` the peer's; `pidfd` watches the
  // peer process (-1 if pidfd_open is unavailable; then its pid). The
  // transport owns the segments and the pidfd, and outlives its links.
  // `channel` picks the pair of rings (one link per channel; see
  // ShmSegment::Layout::channels).
  ShmLink(const ShmSegment& mine, const ShmSegment& theirs, int my_rank, int peer, int peer_pid, int pidfd,
          int channel = 0);
  const char* kind() const override { return "shm"; }
  Status progress_send(SendOp& op, bool* progressed) override;
  Status progress_recv(RecvOp& op, bool* progressed) override;
  Status check_peer() override;
  Status check_notice() override;
  NoticeCheck notice_check() const override;
  void send_notice(cfxResult_t code, const std::string& why) override;

 private:
  const ShmSegment& mine_;
  const ShmSegment& theirs_;
  int my_rank_;
  int peer_;
  int send_ring_;  // ours in the peer's segment
  int recv_ring_;  // the peer's in ours
  int peer_pid_;
  int pidfd_;
  // Each ring has one writer per index: the sender moves tail, the
  // receiver head. Each side keeps its own index here and the other's as
  // last seen, and reads the shared one again only when the ring looks
  // full (sender) or empty (receiver). A sender that read head for every
  // message took a line the receiver had just written, and the
  // receiver's next store had to take it back.
  ShmRingControl& send_ctl_;
  ShmRingControl& recv_ctl_;
  uint64_t send_tail_;       // slots we have published
  uint64_t send_head_seen_;  // slots the peer had consumed when we last looked
  uint64_t recv_head_;       // slots we have consumed
  uint64_t recv_tail_seen_;  // slots the peer had published when we last looked
};

}  // namespace conflux
