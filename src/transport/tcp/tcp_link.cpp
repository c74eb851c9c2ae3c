#include "transport/tcp/tcp_link.h"

#include "core/config.h"
#include "core/copy.h"

#include <linux/sockios.h>
#include <poll.h>
#include <pthread.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <thread>

namespace conflux {
namespace {
constexpr uint32_t kFrameMagic = 0x43465846;      // "CFXF"
constexpr uint32_t kHeartbeatMagic = 0x43465842;  // "CFXB"
constexpr uint32_t kNoticeMagic = 0x4346584e;     // "CFXN"
constexpr auto kHeartbeatInterval = std::chrono::milliseconds(500);
// A frame's header and up to this much of what follows it come in one recv
// (a 16 KiB payload with its header, and the next frame's header); a payload
// with more than this left to read goes straight into place.
constexpr size_t kReadAheadBytes = (16 << 10) + 256;

// One thread per process beats for every TcpLink. Leaked on purpose: it may
// run while statics are destroyed at exit.
struct Heartbeats {
  std::mutex mu;
  std::vector<TcpLink*> links;
  pid_t thread_pid = 0;  // a forked child needs its own thread
  bool enabled = true;

  static Heartbeats& get() {
    static Heartbeats* h = [] {
      auto* p = new Heartbeats;
      // A forked child shares its parent's sockets: it must never beat on
      // them (bytes would interleave with the parent's frames).
      pthread_atfork([] { get().mu.lock(); }, [] { get().mu.unlock(); },
                     [] {
                       get().links.clear();
                       get().mu.unlock();
                     });
      return p;
    }();
    return *h;
  }
  void add(TcpLink* l) {
    std::lock_guard lk(mu);
    if (!enabled) return;
    links.push_back(l);
    if (thread_pid != getpid()) {
      thread_pid = getpid();
      std::thread([this] { loop(); }).detach();
    }
  }
  void remove(TcpLink* l) {
    std::lock_guard lk(mu);
    links.erase(std::remove(links.begin(), links.end(), l), links.end());
  }
  void loop() {
    const pid_t me = getpid();
    for (;;) {
      std::this_thread::sleep_for(kHeartbeatInterval);
      std::lock_guard lk(mu);
      if (thread_pid != me) return;
      for (TcpLink* l : links) l->send_heartbeat();
    }
  }
};
}  // namespace

TcpLink::TcpLink(Socket socket, int peer, size_t bounce_bytes)
    : socket_(std::move(socket)), peer_(peer), bounce_(bounce_bytes), ahead_(kReadAheadBytes) {
  heartbeat_ = Header{kHeartbeatMagic, 0, 0, OpSig{}};
  Heartbeats::get().add(this);
}

TcpLink::~TcpLink() { Heartbeats::get().remove(this); }

void TcpLink::begin_close() {
  Heartbeats::get().remove(this);  // no heartbeat may follow the FIN
  std::lock_guard lk(send_mu_);
  (void)::shutdown(socket_.fd(), SHUT_WR);
}

void TcpLink::finish_close(Clock::time_point deadline) {
  char sink[4096];
  bool peer_finished = false;  // its FIN came: nothing more to read
  for (;;) {
    // Sent but not yet acknowledged, the FIN included: 0 once the peer's
    // kernel holds every byte (a reset purges the queue: 0 as well).
    int unacked = 0;
    if (::ioctl(socket_.fd(), SIOCOUTQ, &unacked) != 0 || unacked == 0) return;
    if (!peer_finished) {
      ssize_t n;
      while ((n = ::recv(socket_.fd(), sink, sizeof sink, MSG_DONTWAIT)) > 0) {
      }
      if (n == 0) peer_finished = true;
      else if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) return;  // reset: nothing to wait for
    }
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) return;
    // Acknowledgements raise no event: look again within a few ms. Once
    // both sides have shut down, poll() reports POLLHUP at once: sleep.
    if (peer_finished) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    } else {
      pollfd p{socket_.fd(), POLLIN, 0};
      (void)::poll(&p, 1, static_cast<int>(std::min<int64_t>(left, 5)));
    }
  }
}

void TcpLink::set_heartbeats_enabled(bool on) {
  std::lock_guard lk(Heartbeats::get().mu);
  Heartbeats::get().enabled = on;
}

bool TcpLink::flush_heartbeat() {
  while (heartbeat_done_ < sizeof(Header)) {
    ssize_t n = ::send(socket_.fd(), reinterpret_cast<uint8_t*>(&heartbeat_) + heartbeat_done_,
                       sizeof(Header) - heartbeat_done_, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) {
      heartbeat_done_ += static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    return n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);
  }
  return true;
}

void TcpLink::send_heartbeat() {
  std::lock_guard lk(send_mu_);
  if (send_in_frame_) return;  // data is flowing (or blocked: the peer then has bytes to read)
  if (heartbeat_done_ == sizeof(Header)) heartbeat_done_ = 0;
  (void)flush_heartbeat();  // errors surface on the data path
}

Status TcpLink::drain_heartbeats() {
  int pending = 0;
  if (::ioctl(socket_.fd(), FIONREAD, &pending) != 0) pending = 0;
  if (pending != last_pending_) last_heard_ = Clock::now();  // new bytes arrived (or we consumed some)
  last_pending_ = pending;
  if (recv_in_frame_ || recv_header_done_ > 0) return Status::Ok();  // mid-frame: the data path reads
  if (const ssize_t n = skip_padding(); n <= 0) {  // the last frame's tail
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return Status::Ok();
    return peer_failed("liveness check", n < 0 ? errno : 0);
  }
  while (ahead() > 0) {
    // Read ahead by the data path: the peer was heard then, and is ahead.
    last_heard_ = Clock::now();
    if (ahead() < sizeof(Header)) return Status::Ok();  // the rest of a header is on its way
    Header h;
    std::memcpy(&h, ahead_.data() + ahead_pos_, sizeof h);
    if (h.magic != kHeartbeatMagic && h.magic != kNoticeMagic) return Status::Ok();  // a data frame waits
    take_ahead(reinterpret_cast<uint8_t*>(&h), sizeof h);
    if (h.magic == kNoticeMagic) return read_notice(h);
  }
  for (;;) {
    Header h;
    ssize_t n = ::recv(socket_.fd(), &h, sizeof h, MSG_PEEK | MSG_DONTWAIT);
    if (n == 0) return peer_failed("liveness check", 0);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return Status::Ok();
      return peer_failed("liveness check", errno);
    }
    if (static_cast<size_t>(n) < sizeof h) return Status::Ok();
    last_heard_ = Clock::now();
    if (h.magic == kNoticeMagic) {
      (void)::recv(socket_.fd(), &h, sizeof h, MSG_DONTWAIT);
      return read_notice(h);
    }
    if (h.magic != kHeartbeatMagic) return Status::Ok();  // a data frame waits: the peer is ahead of us
    (void)::recv(socket_.fd(), &h, sizeof h, MSG_DONTWAIT);
    last_pending_ = std::max(0, last_pending_ - static_cast<int>(sizeof h));
  }
}

Status TcpLink::check_peer() {
  CFX_RETURN_IF_ERROR(drain_heartbeats());
  const int64_t bound = config().heartbeat_timeout_ms;
  if (bound <= 0) return Status::Ok();
  auto silent = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - last_heard_).count();
  if (silent <= bound) return Status::Ok();
  return remote_error("rank " + std::to_string(peer_) + " has sent nothing, not even a heartbeat, for " +
                      std::to_string(silent) + " ms (CONFLUX_HEARTBEAT_TIMEOUT is " + std::to_string(bound) +
                      " ms): stopped (SIGSTOP), hung in the kernel, or cut off by the network?");
}

void TcpLink::send_notice(cfxResult_t code, const std::string& why) {
  std::lock_guard lk(send_mu_);
  // Mid-frame the peer is reading our payload: a notice cannot cut in, and
  // the peer will see the connection close instead.
  if (send_in_frame_ || !flush_heartbeat() || heartbeat_done_ < sizeof(Header)) return;
  send_in_frame_ = true;  // for good: no heartbeat or frame may follow
  const std::string text = why.substr(0, kNoticeTextBytes);
  Header h{kNoticeMagic, static_cast<uint32_t>(code), text.size(), OpSig{}};
  std::string frame(reinterpret_cast<const char*>(&h), sizeof h);
  frame += text;
  // A few hundred bytes fit any socket buffer that is not full; if it is
  // full the peer is not reading and would not see the notice anyway.
  (void)socket_.send_all(frame.data(), frame.size(), deadline_after_ms(100));
}

Status TcpLink::read_notice(const Header& h) {
  if (h.bytes > kNoticeTextBytes)
    return remote_error("corrupt frame from rank " + std::to_string(peer_) + " (notice of " +
                        std::to_string(h.bytes) + " bytes)");
  // The sender wrote header and text in one go: the text is here or close.
  // Cut short (closed, 1 s), the part that arrived is still the reason.
  std::string text(h.bytes, '\0');
  const size_t buffered = take_ahead(reinterpret_cast<uint8_t*>(text.data()), text.size());
  (void)socket_.recv_all(text.data() + buffered, text.size() - buffered, deadline_after_ms(1000));
  text.resize(strnlen(text.c_str(), text.size()));
  notice_read_ = true;
  return notice_error(peer_, static_cast<int32_t>(h.reserved), text);
}

size_t TcpLink::take_ahead(uint8_t* dst, size_t want) {
  const size_t n = std::min(want, ahead());
  copy_bytes(dst, ahead_.data() + ahead_pos_, n);
  return drop_ahead(n);
}

size_t TcpLink::drop_ahead(size_t want) {
  const size_t n = std::min(want, ahead());
  ahead_pos_ += n;
  if (ahead_pos_ == ahead_end_) ahead_pos_ = ahead_end_ = 0;
  return n;
}

ssize_t TcpLink::read_into(uint8_t* dst, size_t want) {
  const ssize_t n = ::recv(socket_.fd(), dst, want, MSG_DONTWAIT);
  if (n > 0) last_heard_ = Clock::now();
  return n;
}

ssize_t TcpLink::read_ahead(size_t most) {
  if (ahead_pos_ > 0) {  // keep the unread tail at the front
    std::memmove(ahead_.data(), ahead_.data() + ahead_pos_, ahead());
    ahead_end_ -= ahead_pos_;
    ahead_pos_ = 0;
  }
  const ssize_t n = read_into(ahead_.data() + ahead_end_, std::min(most, ahead_.size() - ahead_end_));
  if (n > 0) ahead_end_ += static_cast<size_t>(n);
  return n;
}

ssize_t TcpLink::skip_padding() {
  while (recv_skip_ > 0) {
    if (ahead() == 0) {
      const ssize_t n = read_ahead(recv_skip_);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return n;
    }
    recv_skip_ -= drop_ahead(recv_skip_);
  }
  return 1;
}

uint32_t TcpLink::frame_lead(const void* src, size_t bytes) {
  if (bytes < kLeadFrom) return 0;
  const uintptr_t at = reinterpret_cast<uintptr_t>(src);
  return static_cast<uint32_t>((at + kFrameAlign - sizeof(Header) % kFrameAlign) % kFrameAlign);
}

size_t TcpLink::frame_bytes(size_t lead, size_t payload) {
  return (sizeof(Header) + lead + payload + kFrameAlign - 1) / kFrameAlign * kFrameAlign;
}

Status TcpLink::peer_failed(const char* what, int err) const {
  std::string msg = "connection to rank " + std::to_string(peer_) + " failed during " + what;
  if (err == 0) return remote_error(msg + ": peer closed the connection (did it exit or crash?)");
  return remote_error(msg + ": " + std::strerror(err));
}

Status TcpLink::progress_send(SendOp& op, bool* progressed) {
  std::lock_guard lk(send_mu_);
  // A heartbeat the other thread began must be finished before any frame.
  if (!flush_heartbeat()) return peer_failed("send", errno);
  if (heartbeat_done_ < sizeof(Header)) return Status::Ok();
  // stage 0: nothing sent yet; op.done counts the frame's bytes (header,
  // lead, payload, tail).
  if (op.stage == 0) {
    const uint32_t lead = frame_lead(op.buf, op.bytes);
    send_header_ = Header{kFrameMagic, lead, op.bytes, op.sig};
    op.stage = 1;
    op.done = 0;
    send_in_frame_ = true;
  }
  const size_t lead = send_header_.reserved;
  const size_t total = frame_bytes(lead, op.bytes);
  while (op.done < total) {
    static const uint8_t kZeros[kFrameAlign] = {};
    const iovec parts[4] = {{&send_header_, sizeof(Header)},
                            {const_cast<uint8_t*>(kZeros), lead},
                            {const_cast<uint8_t*>(op.buf), op.bytes},
                            {const_cast<uint8_t*>(kZeros), total - sizeof(Header) - lead - op.bytes}};
    iovec iov[4];
    int n = 0;
    size_t skip = op.done;
    for (const iovec& part : parts) {
      if (skip >= part.iov_len) {
        skip -= part.iov_len;
        continue;
      }
      iov[n++] = {static_cast<uint8_t*>(part.iov_base) + skip, part.iov_len - skip};
      skip = 0;
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
    const int err = sent < 0 ? errno : 0;
    // A peer that gave up sent its reason before it closed: the notice
    // waiting in our receive queue says more than "Broken pipe" (a rank
    // whose neighbour died exits, and its other neighbour learns why).
    if (Status why = drain_heartbeats(); !why.ok() && notice_read_) return why;
    return peer_failed("send", err);
  }
  send_in_frame_ = false;
  op.complete = true;
  return Status::Ok();
}

Status TcpLink::progress_recv(RecvOp& op, bool* progressed) {
  if (op.stage == 0) {
    for (;;) {
      if (const ssize_t n = skip_padding(); n <= 0) {  // the last frame's tail
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return Status::Ok();
        return peer_failed("recv", n < 0 ? errno : 0);
      }
      while (recv_header_done_ < sizeof(Header)) {
        if (ahead() > 0) {
          recv_header_done_ += take_ahead(reinterpret_cast<uint8_t*>(&recv_header_) + recv_header_done_,
                                          sizeof(Header) - recv_header_done_);
          continue;
        }
        // Not "progress" yet: a heartbeat must not look like it to the
        // executor's stall clock. The bytes are kept either way. A small
        // frame comes whole with what follows it; a large one's header
        // with at most a line more (its lead, the payload's first bytes),
        // so that its payload lands in place (reading it ahead and copying
        // it over cost 7% at 64 KiB).
        const size_t header_left = sizeof(Header) - recv_header_done_;
        const bool small = sizeof(Header) + kFrameAlign + op.bytes <= ahead_.size();
        const ssize_t n = read_ahead(small ? ahead_.size() : header_left + kFrameAlign - 1);
        if (n > 0) continue;
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return Status::Ok();
        return peer_failed("recv", n < 0 ? errno : 0);
      }
      recv_header_done_ = 0;
      if (recv_header_.magic == kNoticeMagic) return read_notice(recv_header_);
      if (recv_header_.magic != kHeartbeatMagic) break;
      if (recv_header_.bytes != 0)
        return remote_error("corrupt frame from rank " + std::to_string(peer_) + " (heartbeat with payload)");
    }
    if (recv_header_.magic != kFrameMagic)
      return remote_error("corrupt frame from rank " + std::to_string(peer_) + " (bad magic): stream out of sync");
    if (recv_header_.reserved >= kFrameAlign)
      return remote_error("corrupt frame from rank " + std::to_string(peer_) + " (a lead of " +
                          std::to_string(recv_header_.reserved) + " bytes)");
    CFX_RETURN_IF_ERROR(check_incoming(op.sig, op.bytes, recv_header_.sig, recv_header_.bytes, peer_));
    recv_in_frame_ = true;
    *progressed = true;
    op.stage = 1;
    op.done = 0;
    bounce_fill_ = 0;
    recv_skip_ = recv_header_.reserved;
  }
  if (const ssize_t n = skip_padding(); n <= 0) {  // the payload's lead
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return Status::Ok();
    return peer_failed("recv", n < 0 ? errno : 0);
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
    ssize_t n;
    if (ahead() > 0) {
      n = static_cast<ssize_t>(take_ahead(into, want));
    } else if (op.bytes - op.done - bounce_fill_ < ahead_.size()) {
      // The frame's last few bytes: read them with what follows.
      n = read_ahead(ahead_.size());
      if (n > 0) continue;
    } else {
      n = read_into(into, want);
    }
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
  recv_in_frame_ = false;
  recv_skip_ = frame_bytes(recv_header_.reserved, op.bytes) - sizeof(Header) - recv_header_.reserved - op.bytes;
  op.complete = true;
  return Status::Ok();
}

}  // namespace conflux
