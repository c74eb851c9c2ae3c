#include "transport/tcp/tcp_link.h"

#include <sys/socket.h>
#include <sys/uio.h>

#include <cerrno>
#include <cstring>

namespace conflux {
namespace {
constexpr uint32_t kFrameMagic = 0x43465846;  // "CFXF"
}

TcpLink::TcpLink(Socket socket, int peer, size_t bounce_bytes)
    : socket_(std::move(socket)), peer_(peer), bounce_(bounce_bytes) {}

Status TcpLink::peer_failed(const char* what, int err) const {
  std::string msg = "connection to rank " + std::to_string(peer_) + " failed during " + what;
  if (err == 0) return remote_error(msg + ": peer closed the connection (did it exit or crash?)");
  return remote_error(msg + ": " + std::strerror(err));
}

Status TcpLink::progress_send(SendOp& op, bool* progressed) {
  // stage 0: header not fully sent; op.done counts header+payload bytes.
  if (op.stage == 0) {
    send_header_ = Header{kFrameMagic, 0, op.bytes, op.sig};
    op.stage = 1;
    op.done = 0;
  }
  const size_t total = sizeof(Header) + op.bytes;
  while (op.done < total) {
    iovec iov[2];
    int n = 0;
    if (op.done < sizeof(Header)) {
      iov[n++] = {reinterpret_cast<uint8_t*>(&send_header_) + op.done, sizeof(Header) - op.done};
      if (op.bytes > 0) iov[n++] = {const_cast<uint8_t*>(op.buf), op.bytes};
    } else {
      size_t off = op.done - sizeof(Header);
      iov[n++] = {const_cast<uint8_t*>(op.buf) + off, op.bytes - off};
    }
    msghdr msg{};
    msg.msg_iov = iov;
    msg.msg_iovlen = static_cast<size_t>(n);
    ssize_t sent = ::sendmsg(socket_.fd(), &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (sent > 0) {
      op.done += static_cast<size_t>(sent);
      *progressed = true;
      continue;
    }
    if (sent < 0 && errno == EINTR) continue;
    if (sent < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return Status::Ok();
    return peer_failed("send", sent < 0 ? errno : 0);
  }
  op.complete = true;
  return Status::Ok();
}

Status TcpLink::progress_recv(RecvOp& op, bool* progressed) {
  if (op.stage == 0) {
    while (recv_header_done_ < sizeof(Header)) {
      ssize_t n = ::recv(socket_.fd(), reinterpret_cast<uint8_t*>(&recv_header_) + recv_header_done_,
                         sizeof(Header) - recv_header_done_, MSG_DONTWAIT);
      if (n > 0) {
        recv_header_done_ += static_cast<size_t>(n);
        *progressed = true;
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return Status::Ok();
      return peer_failed("recv", n < 0 ? errno : 0);
    }
    recv_header_done_ = 0;
    if (recv_header_.magic != kFrameMagic)
      return remote_error("corrupt frame from rank " + std::to_string(peer_) + " (bad magic): stream out of sync");
    CFX_RETURN_IF_ERROR(check_incoming(op.sig, op.bytes, recv_header_.sig, recv_header_.bytes, peer_));
    op.stage = 1;
    op.done = 0;
    bounce_fill_ = 0;
  }
  while (op.done < op.bytes) {
    uint8_t* into;
    size_t want;
    if (op.reduce == nullptr) {
      into = op.dst + op.done;
      want = op.bytes - op.done;
    } else {
      into = bounce_.data() + bounce_fill_;
      want = std::min(bounce_.size() - bounce_fill_, op.bytes - op.done - bounce_fill_);
    }
    ssize_t n = ::recv(socket_.fd(), into, want, MSG_DONTWAIT);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return Status::Ok();
    if (n <= 0) return peer_failed("recv", n < 0 ? errno : 0);
    *progressed = true;
    if (op.reduce == nullptr) {
      op.done += static_cast<size_t>(n);
      continue;
    }
    bounce_fill_ += static_cast<size_t>(n);
    bool last = op.done + bounce_fill_ == op.bytes;
    if (bounce_fill_ == bounce_.size() || last) {
      // Reduce only whole elements; a split element waits for its tail.
      size_t whole = bounce_fill_ / op.elem_size * op.elem_size;
      op.reduce(op.dst + op.done, op.reduce_with + op.done, bounce_.data(), whole / op.elem_size);
      op.done += whole;
      std::memmove(bounce_.data(), bounce_.data() + whole, bounce_fill_ - whole);
      bounce_fill_ -= whole;
    }
  }
  op.complete = true;
  return Status::Ok();
}

}  // namespace conflux
