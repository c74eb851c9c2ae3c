#include "bootstrap/socket.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <thread>

namespace conflux {

Deadline deadline_after_ms(int64_t ms) {
  if (ms <= 0) return Deadline::max();
  return Clock::now() + std::chrono::milliseconds(ms);
}

int remaining_ms(Deadline deadline) {
  if (deadline == Deadline::max()) return -1;
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
  return left <= 0 ? 0 : static_cast<int>(std::min<int64_t>(left, 1 << 30));
}

Result<SockAddr> SockAddr::resolve(const std::string& host, int port) {
  if (port < 0 || port > 65535) return invalid_argument("port " + std::to_string(port) + " out of range");
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  int rc = getaddrinfo(host.c_str(), nullptr, &hints, &res);
  if (rc != 0 || res == nullptr) {
    return invalid_argument("cannot resolve host '" + host + "': " + gai_strerror(rc));
  }
  SockAddr a;
  std::memcpy(&a.storage, res->ai_addr, res->ai_addrlen);
  a.len = res->ai_addrlen;
  freeaddrinfo(res);
  a.set_port(port);
  return a;
}

Result<SockAddr> SockAddr::parse(const std::string& host_port) {
  std::string host;
  std::string port;
  if (!host_port.empty() && host_port[0] == '[') {
    size_t close = host_port.find(']');
    if (close == std::string::npos || close + 1 >= host_port.size() || host_port[close + 1] != ':')
      return invalid_argument("bad address '" + host_port + "' (expected [v6addr]:port)");
    host = host_port.substr(1, close - 1);
    port = host_port.substr(close + 2);
  } else {
    size_t colon = host_port.rfind(':');
    if (colon == std::string::npos) return invalid_argument("bad address '" + host_port + "' (expected host:port)");
    host = host_port.substr(0, colon);
    port = host_port.substr(colon + 1);
  }
  char* end = nullptr;
  long p = std::strtol(port.c_str(), &end, 10);
  if (port.empty() || *end != '\0' || p < 0 || p > 65535)
    return invalid_argument("bad port in '" + host_port + "'");
  return resolve(host, static_cast<int>(p));
}

std::string SockAddr::str() const {
  char buf[INET6_ADDRSTRLEN] = "?";
  if (family() == AF_INET) {
    auto* in = reinterpret_cast<const sockaddr_in*>(&storage);
    inet_ntop(AF_INET, &in->sin_addr, buf, sizeof buf);
    return std::string(buf) + ":" + std::to_string(port());
  }
  if (family() == AF_INET6) {
    auto* in6 = reinterpret_cast<const sockaddr_in6*>(&storage);
    inet_ntop(AF_INET6, &in6->sin6_addr, buf, sizeof buf);
    return "[" + std::string(buf) + "]:" + std::to_string(port());
  }
  return "<no address>";
}

int SockAddr::port() const {
  if (family() == AF_INET) return ntohs(reinterpret_cast<const sockaddr_in*>(&storage)->sin_port);
  if (family() == AF_INET6) return ntohs(reinterpret_cast<const sockaddr_in6*>(&storage)->sin6_port);
  return -1;
}

void SockAddr::set_port(int p) {
  if (family() == AF_INET) reinterpret_cast<sockaddr_in*>(&storage)->sin_port = htons(static_cast<uint16_t>(p));
  if (family() == AF_INET6) reinterpret_cast<sockaddr_in6*>(&storage)->sin6_port = htons(static_cast<uint16_t>(p));
}

Socket& Socket::operator=(Socket&& o) noexcept {
  if (this != &o) {
    close();
    fd_ = o.release();
  }
  return *this;
}

void Socket::close() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

Status Socket::set_nonblocking(bool on) const {
  int flags = fcntl(fd_, F_GETFL);
  if (flags < 0) return system_error("fcntl(F_GETFL)", errno);
  flags = on ? (flags | O_NONBLOCK) : (flags & ~O_NONBLOCK);
  if (fcntl(fd_, F_SETFL, flags) < 0) return system_error("fcntl(F_SETFL)", errno);
  return Status::Ok();
}

void Socket::tune_for_bulk(int fd, size_t buffer_bytes) {
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  if (buffer_bytes > 0) {
    int size = static_cast<int>(buffer_bytes);
    setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &size, sizeof size);
    setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &size, sizeof size);
  }
}

Result<Socket> Socket::listen_on(const SockAddr& addr, int backlog) {
  Socket s(::socket(addr.family(), SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!s.valid()) return system_error("socket()", errno);
  int one = 1;
  setsockopt(s.fd(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (::bind(s.fd(), addr.sa(), addr.len) != 0) return system_error("bind(" + addr.str() + ")", errno);
  if (::listen(s.fd(), backlog) != 0) return system_error("listen(" + addr.str() + ")", errno);
  CFX_RETURN_IF_ERROR(s.set_nonblocking(true));
  return s;
}

Result<Socket> Socket::connect_to(const SockAddr& addr, Deadline deadline) {
  int delay_ms = 1;
  for (;;) {
    Socket s(::socket(addr.family(), SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
    if (!s.valid()) return system_error("socket()", errno);
    int rc = ::connect(s.fd(), addr.sa(), addr.len);
    int err = rc == 0 ? 0 : errno;
    if (err == EINPROGRESS) {
      pollfd p{s.fd(), POLLOUT, 0};
      int n = ::poll(&p, 1, remaining_ms(deadline));
      if (n == 0) return timeout_error("connect to " + addr.str() + " timed out");
      socklen_t len = sizeof err;
      getsockopt(s.fd(), SOL_SOCKET, SO_ERROR, &err, &len);
    }
    if (err == 0) return s;
    bool retry = err == ECONNREFUSED || err == ETIMEDOUT || err == ECONNRESET || err == EAGAIN;
    if (!retry) return system_error("connect to " + addr.str(), err);
    if (remaining_ms(deadline) == 0)
      return timeout_error("connect to " + addr.str() + " kept failing (" + std::strerror(err) + ") until the deadline");
    std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms));
    delay_ms = std::min(delay_ms * 2, 100);
  }
}

Result<Socket> Socket::accept_one(Deadline deadline, SockAddr* peer) const {
  for (;;) {
    SockAddr a;
    a.len = sizeof a.storage;
    int fd = ::accept4(fd_, reinterpret_cast<sockaddr*>(&a.storage), &a.len, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd >= 0) {
      if (peer) *peer = a;
      return Socket(fd);
    }
    if (errno == EINTR || errno == ECONNABORTED) continue;
    if (errno != EAGAIN && errno != EWOULDBLOCK) return system_error("accept()", errno);
    pollfd p{fd_, POLLIN, 0};
    int n = ::poll(&p, 1, remaining_ms(deadline));
    if (n == 0) return timeout_error("no connection arrived before the deadline");
  }
}

Status Socket::send_all(const void* buf, size_t len, Deadline deadline) const {
  auto* p = static_cast<const char*>(buf);
  while (len > 0) {
    ssize_t n = ::send(fd_, p, len, MSG_NOSIGNAL);
    if (n > 0) {
      p += n;
      len -= static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK) return system_error("send", errno);
    pollfd pf{fd_, POLLOUT, 0};
    if (::poll(&pf, 1, remaining_ms(deadline)) == 0) return timeout_error("send timed out");
  }
  return Status::Ok();
}

Status Socket::recv_all(void* buf, size_t len, Deadline deadline) const {
  auto* p = static_cast<char*>(buf);
  while (len > 0) {
    ssize_t n = ::recv(fd_, p, len, 0);
    if (n > 0) {
      p += n;
      len -= static_cast<size_t>(n);
      continue;
    }
    if (n == 0) return remote_error("connection closed by peer");
    if (errno == EINTR) continue;
    if (errno != EAGAIN && errno != EWOULDBLOCK) return system_error("recv", errno);
    pollfd pf{fd_, POLLIN, 0};
    if (::poll(&pf, 1, remaining_ms(deadline)) == 0) return timeout_error("recv timed out");
  }
  return Status::Ok();
}

Result<SockAddr> Socket::local_addr() const {
  SockAddr a;
  a.len = sizeof a.storage;
  if (getsockname(fd_, reinterpret_cast<sockaddr*>(&a.storage), &a.len) != 0)
    return system_error("getsockname", errno);
  return a;
}

}  // namespace conflux
