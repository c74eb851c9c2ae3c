// The shared-memory transport: a segment per rank (rings, doorbell, notices,
// flags, staging), ShmLinks to same-host peers, and one-sided access to
// their memory (ShmPeerMemory).
#pragma once

#include "transport/registry.h"
#include "transport/shm/shm_peer_memory.h"
#include "transport/shm/shm_segment.h"
#include "transport/shm/shm_waiter.h"

namespace conflux {

class ShmTransport final : public Transport {
 public:
  ShmTransport(const Config& cfg, const TransportContext& ctx) : cfg_(cfg), ctx_(ctx) {}
  ~ShmTransport() override;
  ShmTransport(const ShmTransport&) = delete;
  ShmTransport& operator=(const ShmTransport&) = delete;
  const char* name() const override { return "shm"; }
  Status publish(RankInfo* mine) override;
  bool reaches(const RankInfo& mine, const RankInfo& peer) const override;
  Status connect(const ConnectPlan& plan, LinkTable* links) override;
  void connected() override { segment_.unlink(); }
  ShmWaiter* waiter() override { return peers_ > 0 ? waiter_.get() : nullptr; }
  PeerMemory* peer_memory() override { return peer_memory_.get(); }
  bool reads_peer_buffers() override;

 private:
  const Config& cfg_;
  TransportContext ctx_;
  ShmSegment segment_;
  std::vector<ShmSegment> peer_segments_;
  // By rank: a pidfd watching each same-host peer's process (-1: none),
  // shared by its links and the peer memory.
  std::vector<int> pidfds_;
  std::unique_ptr<ShmWaiter> waiter_;
  std::unique_ptr<ShmPeerMemory> peer_memory_;
  int peers_ = 0;
  int kernel_copy_ = -1;  // -1 untested, else whether process_vm_readv reaches every peer
};

// Bytes of each half of a rank's staging area for the eager one-sided
// algorithms (0 when CONFLUX_SHM_COLL=0 turns them off).
size_t staging_bytes_for(const Config& cfg);

}  // namespace conflux
