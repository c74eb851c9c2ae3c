// Thin RAII over TCP sockets with deadlines: every blocking step polls with
// the time left, so nothing in bootstrap can wait forever.
#pragma once

#include "core/status.h"

#include <netinet/in.h>
#include <sys/socket.h>

#include <chrono>
#include <cstdint>
#include <string>

namespace conflux {

using Clock = std::chrono::steady_clock;
using Deadline = Clock::time_point;
Deadline deadline_after_ms(int64_t ms);  // ms <= 0: no deadline (far future)
int remaining_ms(Deadline deadline);     // for poll(); -1 when there is no deadline

// An IPv4 or IPv6 address with port, stored as a sockaddr.
struct SockAddr {
  sockaddr_storage storage{};
  socklen_t len = 0;

  static Result<SockAddr> parse(const std::string& host_port);  // "host:port", "[v6]:port"
  static Result<SockAddr> resolve(const std::string& host, int port);
  std::string str() const;
  int port() const;
  void set_port(int port);
  int family() const { return storage.ss_family; }
  const sockaddr* sa() const { return reinterpret_cast<const sockaddr*>(&storage); }
};

class Socket {
 public:
  Socket() = default;
  explicit Socket(int fd) : fd_(fd) {}
  Socket(Socket&& o) noexcept : fd_(o.release()) {}
  Socket& operator=(Socket&& o) noexcept;
  Socket(const Socket&) = delete;
  Socket& operator=(const Socket&) = delete;
  ~Socket() { close(); }

  int fd() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  int release() { int f = fd_; fd_ = -1; return f; }
  void close();

  static Result<Socket> listen_on(const SockAddr& addr, int backlog = 128);
  // Retries refused connections (the listener may not be up yet) until the deadline.
  static Result<Socket> connect_to(const SockAddr& addr, Deadline deadline);
  Result<Socket> accept_one(Deadline deadline, SockAddr* peer = nullptr) const;

  Status send_all(const void* buf, size_t len, Deadline deadline) const;
  Status recv_all(void* buf, size_t len, Deadline deadline) const;
  Result<SockAddr> local_addr() const;

  Status set_nonblocking(bool on) const;
  void tune_for_bulk(size_t buffer_bytes) const { tune_for_bulk(fd_, buffer_bytes); }
  // TCP_NODELAY, and SO_SNDBUF/SO_RCVBUF of buffer_bytes (0: the kernel's
  // autotuning), on any TCP socket (calibration times raw ones the same way).
  static void tune_for_bulk(int fd, size_t buffer_bytes);

 private:
  int fd_ = -1;
};

}  // namespace conflux
