// The TCP transport: a listener on the data interface (the nearest NIC,
// with the route to the rendezvous as a fallback address), then one or more
// authenticated connections per peer (CONFLUX_TCP_CHANNELS).
#pragma once

#include "bootstrap/socket.h"
#include "transport/registry.h"

namespace conflux {

class TcpTransport final : public Transport {
 public:
  TcpTransport(const Config& cfg, const TransportContext& ctx) : cfg_(cfg), ctx_(ctx) {}
  const char* name() const override { return "tcp"; }
  Status publish(RankInfo* mine) override;
  bool reaches(const RankInfo&, const RankInfo&) const override { return true; }
  Status connect(const ConnectPlan& plan, LinkTable* links) override;

 private:
  Result<Socket> connect_nearest_or_fallback(const RankInfo& peer, SockAddr* addr, Deadline deadline);

  const Config& cfg_;
  TransportContext ctx_;
  Socket listener_;
};

}  // namespace conflux
