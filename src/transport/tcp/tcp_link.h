// A Link over one TCP connection. Each message is framed by a checked header
// (magic, length, signature); payload goes straight into the destination
// unless it must be reduced, then through a bounce buffer in pieces.
#pragma once

#include "bootstrap/socket.h"
#include "transport/transport.h"

#include <vector>

namespace conflux {

class TcpLink final : public Link {
 public:
  TcpLink(Socket socket, int peer, size_t bounce_bytes);
  const char* kind() const override { return "tcp"; }
  Status progress_send(SendOp& op, bool* progressed) override;
  Status progress_recv(RecvOp& op, bool* progressed) override;
  int poll_fd() const override { return socket_.fd(); }

 private:
  struct Header {
    uint32_t magic;
    uint32_t reserved;
    uint64_t bytes;
    OpSig sig;
  };
  Status peer_failed(const char* what, int err) const;

  Socket socket_;
  int peer_;
  Header send_header_{};
  Header recv_header_{};
  size_t recv_header_done_ = 0;
  std::vector<uint8_t> bounce_;
  size_t bounce_fill_ = 0;
};

}  // namespace conflux
