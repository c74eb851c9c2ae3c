// The libfabric transport (CONFLUX_TRANSPORT=ofi): one endpoint per rank,
// opened before the address exchange, and an OfiLink to every peer, same
// host or not.
#pragma once

#include "transport/ofi/ofi_fabric.h"
#include "transport/registry.h"

namespace conflux {

class OfiTransport final : public Transport {
 public:
  OfiTransport(const Config& cfg, const TransportContext& ctx) : cfg_(cfg), ctx_(ctx) {}
  const char* name() const override { return "ofi"; }
  Status publish(RankInfo* mine) override;
  bool reaches(const RankInfo&, const RankInfo& peer) const override { return peer.ofi_name_len > 0; }
  Status connect(const ConnectPlan& plan, LinkTable* links) override;

 private:
  const Config& cfg_;
  TransportContext ctx_;
  std::shared_ptr<OfiFabric> fabric_;
};

}  // namespace conflux
