#include "transport/shm/shm_link.h"

#include "bootstrap/rank_info.h"
#include "core/copy.h"

#include <unistd.h>

#include <algorithm>
#include <cstring>

namespace conflux {

ShmLink::ShmLink(const ShmSegment& mine, const ShmSegment& theirs, int my_rank, int peer, int peer_pid,
                 int pidfd, int channel)
    : mine_(mine),
      theirs_(theirs),
      my_rank_(my_rank),
      peer_(peer),
      send_ring_(theirs.layout().ring_index(my_rank, channel)),
      recv_ring_(mine.layout().ring_index(peer, channel)),
      peer_pid_(peer_pid),
      pidfd_(pidfd),
      send_ctl_(theirs.ring(send_ring_)),
      recv_ctl_(mine.ring(recv_ring_)),
      send_tail_(send_ctl_.tail.load(std::memory_order_relaxed)),
      send_head_seen_(send_ctl_.head.load(std::memory_order_acquire)),
      recv_head_(recv_ctl_.head.load(std::memory_order_relaxed)),
      recv_tail_seen_(recv_head_) {}

Status ShmLink::progress_send(SendOp& op, bool* progressed) {
  const auto nslots = static_cast<uint64_t>(theirs_.layout().nslots);
  const size_t slot_bytes = theirs_.layout().slot_bytes;
  bool published = false;
  // A zero-byte message still takes one slot so the receiver sees its signature.
  while (!op.complete) {
    if (send_tail_ - send_head_seen_ >= nslots) {
      send_head_seen_ = send_ctl_.head.load(std::memory_order_acquire);
      if (send_tail_ - send_head_seen_ >= nslots) break;  // ring full
    }
    size_t piece = std::min(slot_bytes, op.bytes - op.done);
    ShmSlotHeader& h = theirs_.slot_header(send_ring_, send_tail_);
    h.msg_bytes = op.bytes;
    h.piece_bytes = static_cast<uint32_t>(piece);
    h.sig = op.sig;
    if (piece > 0) copy_bytes(theirs_.slot_data(send_ring_, send_tail_), op.buf + op.done, piece);
    send_ctl_.tail.store(++send_tail_, std::memory_order_release);
    op.done += piece;
    published = true;
    if (op.done == op.bytes) op.complete = true;
  }
  if (published) {
    *progressed = true;
    ring_doorbell(theirs_.doorbell());
  }
  return Status::Ok();
}

Status ShmLink::progress_recv(RecvOp& op, bool* progressed) {
  bool consumed = false;
  while (!op.complete) {
    if (recv_head_ == recv_tail_seen_) {
      recv_tail_seen_ = recv_ctl_.tail.load(std::memory_order_acquire);
      if (recv_head_ == recv_tail_seen_) break;  // empty
    }
    const ShmSlotHeader& h = mine_.slot_header(recv_ring_, recv_head_);
    if (op.done == 0) CFX_RETURN_IF_ERROR(check_incoming(op.sig, op.bytes, h.sig, h.msg_bytes, peer_));
    size_t piece = h.piece_bytes;
    if (piece > op.bytes - op.done)
      return remote_error("corrupt shared-memory slot from rank " + std::to_string(peer_));
    const uint8_t* data = mine_.slot_data(recv_ring_, recv_head_);
    if (op.reduce != nullptr)
      op.reduce(op.dst + op.done, op.reduce_with + op.done, data, piece / op.elem_size);
    else if (piece > 0)
      copy_bytes(op.dst + op.done, data, piece);
    recv_ctl_.head.store(++recv_head_, std::memory_order_release);
    op.done += piece;
    consumed = true;
    if (op.done == op.bytes) op.complete = true;
  }
  if (consumed) {
    *progressed = true;
    ring_doorbell(theirs_.doorbell());  // the sender may be waiting for free slots
  }
  return Status::Ok();
}

void ShmLink::send_notice(cfxResult_t code, const std::string& why) {
  ShmNotice& n = theirs_.notice(my_rank_);
  if (n.posted.load(std::memory_order_relaxed) != 0) return;  // one notice per link
  n.code = static_cast<int32_t>(code);
  const size_t len = std::min(why.size(), sizeof n.text - 1);
  std::memcpy(n.text, why.data(), len);
  n.text[len] = '\0';
  n.posted.store(1, std::memory_order_release);
  ring_doorbell(theirs_.doorbell());
}

Status ShmLink::check_notice() {
  const ShmNotice& n = mine_.notice(peer_);
  if (n.posted.load(std::memory_order_acquire) != 0)
    return notice_error(peer_, n.code, std::string(n.text, strnlen(n.text, sizeof n.text)));
  return Status::Ok();
}

Link::NoticeCheck ShmLink::notice_check() const { return {&mine_.notice(peer_).posted, false}; }

Status ShmLink::check_peer() {
  CFX_RETURN_IF_ERROR(check_notice());
  if (process_exited(pidfd_, peer_pid_, 0))
    return remote_error("rank " + std::to_string(peer_) + " (pid " + std::to_string(peer_pid_) +
                        ", same host) exited or was killed");
  return Status::Ok();
}

}  // namespace conflux
