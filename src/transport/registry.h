// Transports register here, and the communicator sets up its links through
// this interface alone: each transport opens what its peers connect to and
// writes its part of this rank's address (publish, before the exchange),
// says which peers it can reach, and connects to the peers it is given.
// Peers take the first transport, in preference order, that reaches them.
#pragma once

#include "bootstrap/interfaces.h"
#include "bootstrap/rank_info.h"
#include "bootstrap/unique_id.h"
#include "core/config.h"
#include "transport/peer_memory.h"
#include "transport/transport.h"

#include <memory>
#include <string>
#include <vector>

namespace conflux {

class ShmWaiter;

// Every link of a rank: links[channel][peer] (channel 0 always; more for
// CONFLUX_TCP_CHANNELS > 1 where a network peer exists), null for self.
struct LinkTable {
  std::vector<std::vector<std::unique_ptr<Link>>> by_channel;
  std::unique_ptr<Link>& at(int channel, int peer);
};

// What set-up needs to know about this rank and the job.
struct TransportContext {
  int rank = 0, nranks = 1;
  UniqueIdData id;             // communicator id and secret (TCP peers authenticate with it)
  DataInterfaces data;         // where TCP data listens (bootstrap/interfaces.h)
  std::string nearest_ifname;  // the nearest NIC's interface by topology ("" unknown)
  Deadline deadline = Deadline::max();
};

// What connect() is told once every rank's address is known.
struct ConnectPlan {
  std::vector<RankInfo> table;
  std::vector<bool> mine;      // by peer: this transport serves it
  int channels = 1;            // connections per network peer, agreed by every rank
  bool any_network_peer = false;
};

class Transport {
 public:
  virtual ~Transport() = default;
  virtual const char* name() const = 0;
  // Before the address exchange: opens what peers connect to and writes
  // its address into `mine`.
  virtual Status publish(RankInfo* mine) = 0;
  // Whether this transport can reach `peer` from `mine`.
  virtual bool reaches(const RankInfo& mine, const RankInfo& peer) const = 0;
  // Opens the links to the peers plan.mine names.
  virtual Status connect(const ConnectPlan& plan, LinkTable* links) = 0;
  // Every rank has connected (the communicator's first barrier passed).
  virtual void connected() {}
  // Where a waiting executor sleeps when its links have no descriptor to
  // poll (shared memory), or nullptr.
  virtual ShmWaiter* waiter() { return nullptr; }
  // One-sided access to the peers it serves, or nullptr.
  virtual PeerMemory* peer_memory() { return nullptr; }
  // Whether its one-sided access can read peers' ordinary buffers (through
  // the kernel: ptrace rules or containers may forbid it).
  virtual bool reads_peer_buffers() { return false; }
};

// The transports CONFLUX_TRANSPORT asks for, in preference order: auto is
// shared memory within a host and TCP across hosts; tcp, shm or ofi serve
// every peer (a peer that one cannot reach is an error).
Result<std::vector<std::unique_ptr<Transport>>> make_transports(const Config& cfg, const TransportContext& ctx);

// The transports this build has, for `conflux version`.
std::vector<std::string> built_transports();

}  // namespace conflux
