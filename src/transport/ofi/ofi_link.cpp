#include "transport/ofi/ofi_link.h"

#include "bootstrap/rank_info.h"
#include "core/copy.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>

namespace conflux {
namespace {
constexpr uint32_t kHeaderMagic = 0x43464f48;  // "CFOH"
}

uint64_t ofi_tag(uint64_t comm_id, int sender, uint32_t seq) {
  // Fold the 64-bit communicator id into 16 bits: each communicator has its
  // own endpoint today, the bits guard against a shared one later.
  uint64_t c = (comm_id ^ (comm_id >> 16) ^ (comm_id >> 32) ^ (comm_id >> 48)) & 0xffff;
  return (c << 48) | (static_cast<uint64_t>(sender & 0xffff) << 32) | seq;
}

OfiLink::OfiLink(std::shared_ptr<OfiFabric> fabric, int rank, OfiPeer peer, uint64_t comm_id, size_t piece_bytes,
                 size_t inline_bytes)
    : fabric_(std::move(fabric)),
      rank_(rank),
      peer_(peer),
      comm_id_(comm_id),
      piece_(piece_bytes),
      inline_(std::min(inline_bytes, kInline)),
      check_before_send_(fabric_->provider() == "shm" && peer_.same_host) {
  send_reqs_ = fabric_->new_requests(1 + kWindow);
  recv_reqs_ = fabric_->new_requests(1 + kWindow);
  notice_reqs_ = fabric_->new_requests(2);
  notice_in_ = fabric_->new_buffer(kNoticeBytes);
  notice_out_ = fabric_->new_buffer(kNoticeBytes);
  notice_reqs_[0].standing = notice_reqs_[1].standing = true;
  post_notice_recv();
  if (peer_.same_host && peer_.pid > 0) pidfd_ = open_pidfd(peer_.pid);
}

OfiLink::~OfiLink() {
  if (pidfd_ >= 0) ::close(pidfd_);
}

Status OfiLink::failed(const char* what, const OfiReq& req) const {
  return remote_error("libfabric " + fabric_->provider() + ": " + what + " rank " + std::to_string(peer_.rank) +
                      " failed: " + req.error);
}

Status OfiLink::progress_send(SendOp& op, bool* progressed) {
  OfiReq& header = send_reqs_[0];
  // Post before reading the CQ: an injected header completes on the spot,
  // and reading the CQ first would cost a system call (the provider's
  // progress polls its sockets) on every small message.
  const bool polled = op.stage != 0;
  if (polled) CFX_RETURN_IF_ERROR(fabric_->poll(progressed));
  if (op.stage == 0) {
    send_header_ = Header{kHeaderMagic, 0, op.bytes, op.sig};
    send_pieces_ = inlined(op.bytes) ? 0 : pieces(op.bytes);
    send_posted_ = send_completed_ = 0;
    send_base_ = send_seq_;
    send_seq_ += 1 + static_cast<uint32_t>(send_pieces_);
    header.done = false;
    op.stage = 1;
    op.done = 0;
    send_active_ = true;
    if (inlined(op.bytes)) {
      // The op's buffer stays valid until the send completes, but the
      // header must precede it in one contiguous message: stage both.
      send_inline_.resize(sizeof(Header) + op.bytes);
      std::memcpy(send_inline_.data(), &send_header_, sizeof(Header));
      if (op.bytes > 0) copy_bytes(send_inline_.data() + sizeof(Header), op.buf, op.bytes);
    }
  }
  if (op.stage == 1) {
    // libfabric's shm provider spins forever in fi_tsend when the peer died
    // holding a lock in its shared region (kill test): look first. This
    // narrows the window; it cannot close it.
    if (check_before_send_ && peer_process_gone())
      return remote_error("rank " + std::to_string(peer_.rank) + " (pid " + std::to_string(peer_.pid) +
                          ") exited (libfabric " + fabric_->provider() + " link)");
    const bool in = inlined(op.bytes);
    const void* msg = in ? static_cast<const void*>(send_inline_.data()) : &send_header_;
    const size_t msg_len = in ? send_inline_.size() : sizeof send_header_;
    const uint64_t tag = ofi_tag(comm_id_, rank_, send_base_);
    if (msg_len <= fabric_->inject_size()) {
      // Small: the provider copies it now and writes no completion (one CQ
      // entry less to read, and on tcp;ofi_rxm one wake-up signal less).
      bool posted = false;
      CFX_RETURN_IF_ERROR(fabric_->inject(msg, msg_len, peer_.addr, tag, &posted));
      if (!posted) return Status::Ok();  // provider busy; poll and retry
      header.done = true;
      header.error.clear();
    } else {
      CFX_RETURN_IF_ERROR(fabric_->post_send(msg, msg_len, peer_.addr, tag, &header));
      if (!header.posted) return Status::Ok();  // provider busy; poll and retry
    }
    op.stage = 2;
    *progressed = true;
  }
  // Pieces follow the header at once: the receiver matches them by tag.
  while (send_posted_ < send_pieces_ && send_posted_ - send_completed_ < kWindow) {
    OfiReq& r = send_reqs_[1 + send_posted_ % kWindow];
    const size_t off = send_posted_ * piece_;
    CFX_RETURN_IF_ERROR(fabric_->post_send(op.buf + off, piece_len(op.bytes, send_posted_), peer_.addr,
                                           ofi_tag(comm_id_, rank_, send_base_ + 1 + static_cast<uint32_t>(send_posted_)), &r));
    if (!r.posted) break;
    ++send_posted_;
    *progressed = true;
  }
  if (header.done && !header.error.empty()) return failed("send header to", header);
  while (send_completed_ < send_posted_) {
    OfiReq& r = send_reqs_[1 + send_completed_ % kWindow];
    if (!r.done) break;
    if (!r.error.empty()) return failed("send to", r);
    r.done = false;
    op.done += piece_len(op.bytes, send_completed_);
    ++send_completed_;
  }
  if (header.done && send_completed_ == send_pieces_) {
    if (send_pieces_ == 0) op.done = op.bytes;
    op.complete = true;
    send_active_ = false;
  } else if (!polled && op.stage == 2) {
    CFX_RETURN_IF_ERROR(fabric_->poll(progressed));  // just posted: drive it (once per call)
  }
  return Status::Ok();
}

Status OfiLink::progress_recv(RecvOp& op, bool* progressed) {
  OfiReq& header = recv_reqs_[0];
  // Posting first lets a message that already arrived match at once.
  if (op.stage != 0) CFX_RETURN_IF_ERROR(fabric_->poll(progressed));
  if (op.stage == 0) {
    header.done = false;
    // Room for an inlined payload whatever the sender chose; the
    // signature check below decides whether it is one we accept.
    if (recv_inline_.empty()) recv_inline_.resize(sizeof(Header) + inline_);
    CFX_RETURN_IF_ERROR(fabric_->post_recv(recv_inline_.data(), recv_inline_.size(),
                                           ofi_tag(comm_id_, peer_.rank, recv_seq_), &header));
    if (!header.posted) return fabric_->poll(progressed);  // provider busy: drive it, retry next pass
    op.stage = 1;
    op.done = 0;
    recv_active_ = true;
  }
  if (op.stage == 1) {
    if (!header.done) return Status::Ok();
    if (!header.error.empty()) return failed("receive header from", header);
    *progressed = true;
    if (header.len >= sizeof recv_header_) std::memcpy(&recv_header_, recv_inline_.data(), sizeof recv_header_);
    if (header.len < sizeof recv_header_ || recv_header_.magic != kHeaderMagic)
      return remote_error("libfabric: corrupt message header from rank " + std::to_string(peer_.rank));
    // The signature is checked before any byte lands in user memory.
    CFX_RETURN_IF_ERROR(check_incoming(op.sig, op.bytes, recv_header_.sig, recv_header_.bytes, peer_.rank));
    if (inlined(op.bytes)) return finish_inline(op, progressed);
    if (header.len != sizeof recv_header_)
      return remote_error("libfabric: rank " + std::to_string(peer_.rank) + " sent " + std::to_string(header.len) +
                          " header bytes for a message of " + std::to_string(op.bytes));
    recv_pieces_ = pieces(op.bytes);
    recv_posted_ = recv_completed_ = 0;
    recv_base_ = recv_seq_;
    recv_seq_ += 1 + static_cast<uint32_t>(recv_pieces_);
    if (op.reduce != nullptr && bounce_.empty()) bounce_.resize(piece_ * kWindow);
    op.stage = 2;
  }
  while (recv_posted_ < recv_pieces_ && recv_posted_ - recv_completed_ < kWindow) {
    const size_t slot = recv_posted_ % kWindow;
    OfiReq& r = recv_reqs_[1 + slot];
    uint8_t* into = op.reduce == nullptr ? op.dst + recv_posted_ * piece_ : bounce_.data() + slot * piece_;
    CFX_RETURN_IF_ERROR(fabric_->post_recv(into, piece_len(op.bytes, recv_posted_),
                                           ofi_tag(comm_id_, peer_.rank, recv_base_ + 1 + static_cast<uint32_t>(recv_posted_)), &r));
    if (!r.posted) break;
    ++recv_posted_;
    *progressed = true;
  }
  while (recv_completed_ < recv_posted_) {
    const size_t slot = recv_completed_ % kWindow;
    OfiReq& r = recv_reqs_[1 + slot];
    if (!r.done) break;
    if (!r.error.empty()) return failed("receive from", r);
    const size_t len = piece_len(op.bytes, recv_completed_);
    if (r.len != len)
      return remote_error("libfabric: rank " + std::to_string(peer_.rank) + " sent a piece of " +
                          std::to_string(r.len) + " bytes, expected " + std::to_string(len));
    if (op.reduce != nullptr) {
      const size_t off = recv_completed_ * piece_;
      op.reduce(op.dst + off, op.reduce_with + off, bounce_.data() + slot * piece_, len / op.elem_size);
    }
    r.done = false;
    op.done += len;
    ++recv_completed_;
    *progressed = true;
  }
  if (recv_completed_ == recv_pieces_) {
    op.complete = true;
    recv_active_ = false;
  }
  return Status::Ok();
}

Status OfiLink::finish_inline(RecvOp& op, bool* progressed) {
  if (recv_inline_.size() < sizeof(Header) + op.bytes || recv_reqs_[0].len != sizeof(Header) + op.bytes)
    return remote_error("libfabric: rank " + std::to_string(peer_.rank) + " sent " +
                        std::to_string(recv_reqs_[0].len) + " bytes for an inlined message of " +
                        std::to_string(op.bytes));
  const uint8_t* payload = recv_inline_.data() + sizeof(Header);
  if (op.bytes > 0) {
    if (op.reduce != nullptr)
      op.reduce(op.dst, op.reduce_with, payload, op.bytes / op.elem_size);
    else
      copy_bytes(op.dst, payload, op.bytes);
  }
  recv_seq_ += 1;
  op.done = op.bytes;
  op.complete = true;
  recv_active_ = false;
  *progressed = true;
  return Status::Ok();
}

void OfiLink::quiesce() {
  // Receives still posted into the failed call's buffers (or this link's
  // inline and bounce buffers) would be written whenever the provider next
  // makes progress, at the latest while the endpoint closes in
  // cfxCommDestroy, into memory the caller may have freed: the kill test
  // found heap corruption that way (free() aborting inside fi_close). Drop
  // them, and let posted sends finish reading. Closing the endpoint at once
  // would do too, but resets the connections of survivors still sending to
  // this rank, whose errors then blame it instead of the rank that died.
  for (int i = 0; i <= kWindow; ++i) fabric_->cancel(&recv_reqs_[i]);
  auto pending = [&] {
    for (int i = 0; i <= kWindow; ++i)
      if (recv_reqs_[i].posted || send_reqs_[i].posted) return true;
    return false;
  };
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::milliseconds(100);
  while (pending() && std::chrono::steady_clock::now() < give_up) {
    bool progressed = false;
    if (!fabric_->poll(&progressed).ok()) break;
  }
  if (pending()) fabric_->shutdown();  // a receive already filling, or a send to a dead peer
}

void OfiLink::post_notice_recv() {
  OfiReq& r = notice_reqs_[0];
  if (r.posted || r.done) return;
  // Out of resources now: check_peer() tries again.
  (void)fabric_->post_recv(notice_in_, kNoticeBytes, ofi_tag(comm_id_, kOfiNoticeSender, static_cast<uint32_t>(peer_.rank)), &r);
}

bool OfiLink::peer_process_gone() const {
  if (!peer_.same_host || peer_.pid <= 0) return false;
  return process_exited(pidfd_, peer_.pid, peer_.pid_start_time);
}

void OfiLink::send_notice(cfxResult_t code, const std::string& why) {
  if (notice_sent_) return;
  notice_sent_ = true;
  // Nobody to tell; and libfabric's shm provider can spin forever on a lock
  // in the shared region of a peer killed while holding it (seen in the kill
  // test: fi_tsend never returned).
  if (peer_process_gone()) return;
  const auto c = static_cast<int32_t>(code);
  const size_t len = std::min(why.size(), kNoticeTextBytes);
  std::memcpy(notice_out_, &c, sizeof c);
  std::memcpy(notice_out_ + sizeof c, why.data(), len);
  OfiReq& r = notice_reqs_[1];
  for (int attempt = 0; attempt < 100 && !r.posted; ++attempt) {
    if (!fabric_->post_send(notice_out_, sizeof c + len, peer_.addr,
                            ofi_tag(comm_id_, kOfiNoticeSender, static_cast<uint32_t>(rank_)), &r).ok())
      return;
    bool progressed = false;
    if (!fabric_->poll(&progressed).ok()) return;
  }
  // Drive it out a little: with manual progress nothing moves unless we poll.
  for (int i = 0; i < 1000 && r.posted; ++i) {
    bool progressed = false;
    if (!fabric_->poll(&progressed).ok()) return;
  }
}

Status OfiLink::check_notice() {
  // No CQ read here: completions are read by every progress call anyway.
  post_notice_recv();
  const OfiReq& r = notice_reqs_[0];
  if (!r.done || !r.error.empty() || r.len < sizeof(int32_t)) return Status::Ok();
  int32_t code = 0;
  std::memcpy(&code, notice_in_, sizeof code);
  return notice_error(peer_.rank, code,
                      std::string(reinterpret_cast<const char*>(notice_in_) + sizeof code, r.len - sizeof code));
}

Status OfiLink::check_peer() {
  {
    bool progressed = false;
    CFX_RETURN_IF_ERROR(fabric_->poll(&progressed));
    CFX_RETURN_IF_ERROR(check_notice());
  }
  // Providers report a dead peer only on some operations (tcp: a reset
  // connection; shm: nothing): a peer on this host is checked by its pid.
  if (!peer_process_gone()) {
    gone_idle_since_ = {};
    return Status::Ok();
  }
  // Gone is not failed yet. A peer exits as soon as its last sends completed
  // (delivery complete: our provider has them), possibly before we read the
  // CQ: read it first, the executor then finishes with what arrived.
  bool progressed = false;
  CFX_RETURN_IF_ERROR(fabric_->poll(&progressed));
  if (progressed) return Status::Ok();
  // A peer that finished its part of the call may exit cleanly while we
  // still wait on another rank: with nothing under way on this link that is
  // no failure. Still gone after kIdleGrace (what the executor waits before
  // checking every link of a stalled collective): the others are likely
  // stuck on it, so name it.
  constexpr auto kIdleGrace = std::chrono::seconds(2);
  if (!send_active_ && !recv_active_) {
    const auto now = std::chrono::steady_clock::now();
    if (gone_idle_since_ == std::chrono::steady_clock::time_point{}) gone_idle_since_ = now;
    if (now - gone_idle_since_ < kIdleGrace) return Status::Ok();
  }
  return remote_error("rank " + std::to_string(peer_.rank) + " (pid " + std::to_string(peer_.pid) +
                      ") exited (libfabric " + fabric_->provider() + " link)");
}

}  // namespace conflux
