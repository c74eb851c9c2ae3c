#include "transport/registry.h"

#include "transport/shm/shm_transport.h"
#include "transport/tcp/tcp_transport.h"
#ifdef CONFLUX_HAVE_OFI
#include "transport/ofi/ofi_transport.h"
#endif

namespace conflux {

std::unique_ptr<Link>& LinkTable::at(int channel, int peer) {
  if (by_channel.size() <= static_cast<size_t>(channel)) by_channel.resize(static_cast<size_t>(channel) + 1);
  auto& row = by_channel[channel];
  if (row.size() <= static_cast<size_t>(peer)) row.resize(static_cast<size_t>(peer) + 1);
  return row[peer];
}

Result<std::vector<std::unique_ptr<Transport>>> make_transports(const Config& cfg, const TransportContext& ctx) {
  std::vector<std::unique_ptr<Transport>> out;
  switch (cfg.transport) {
    case TransportChoice::kAuto:
      out.push_back(std::make_unique<ShmTransport>(cfg, ctx));
      out.push_back(std::make_unique<TcpTransport>(cfg, ctx));
      break;
    case TransportChoice::kShm: out.push_back(std::make_unique<ShmTransport>(cfg, ctx)); break;
    case TransportChoice::kTcp: out.push_back(std::make_unique<TcpTransport>(cfg, ctx)); break;
    case TransportChoice::kOfi:
#ifdef CONFLUX_HAVE_OFI
      out.push_back(std::make_unique<OfiTransport>(cfg, ctx));
      break;
#else
      return invalid_usage("CONFLUX_TRANSPORT=ofi: this conflux was built without libfabric (libfabric-dev not found)");
#endif
  }
  return out;
}

std::vector<std::string> built_transports() {
  std::vector<std::string> t{"shm", "tcp"};
#ifdef CONFLUX_HAVE_OFI
  t.push_back("ofi");
#endif
  return t;
}

}  // namespace conflux
