// Internals of the intra-host collectives (issue 3). One shared segment per
// communicator holds, per rank: a progress counter on its own cache line, a
// control block (the call's OpSig and buffer addresses) and an eager slot for
// small payloads, both double-buffered by operation parity so no trailing
// barrier is needed on the eager path. Large payloads never pass through the
// segment: ranks read each other's user buffers directly with
// process_vm_readv (Cross Memory Attach), so each byte is copied once.
#pragma once

#include "core/shared_mem.h"
#include "exec/shm_coll.h"

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace conflux {

struct alignas(64) CollCounter {
  std::atomic<uint64_t> value{0};
};

// What a rank publishes for one operation before it announces it.
struct alignas(64) CollControl {
  OpSig sig;
  uint64_t sendbuf = 0;  // addresses in the publishing process, for CMA reads
  uint64_t recvbuf = 0;
  uint64_t probe = 0;    // set-up only: address of a word peers read to test CMA
  // When a buffer lies in cfxMemAlloc memory: the region, so peers map it
  // and read it with loads instead of process_vm_readv.
  SharedRegionRef send_region, recv_region;
};

struct CollSegmentHeader {
  alignas(64) std::atomic<uint32_t> epoch{0};     // futex word: bumped when a sleeper must wake
  alignas(64) std::atomic<uint32_t> sleepers{0};  // ranks inside (or about to enter) futex_wait
};

// Offsets of each part inside the segment, the same in every process.
struct CollLayout {
  int nranks = 0;
  size_t slot_bytes = 0;
  size_t counters_off() const { return sizeof(CollSegmentHeader); }
  size_t controls_off() const { return counters_off() + sizeof(CollCounter) * nranks; }
  size_t slots_off() const { return controls_off() + sizeof(CollControl) * 2 * nranks; }
  size_t total_bytes() const { return slots_off() + slot_bytes * 2 * nranks; }
};

// Progress values: op k (from 1) moves each rank's counter through
// k*4+kAnnounced (control + eager slot written), k*4+kMidway (its share of a
// two-phase algorithm is ready) and k*4+kFinished (it no longer reads peers).
enum CollPhase : uint64_t { kAnnounced = 1, kMidway = 2, kFinished = 3 };

class ShmCollImpl final : public ShmCollectives {
 public:
  ShmCollImpl(int rank, int nranks, uint8_t* base, size_t bytes, size_t slot_bytes, std::vector<int> pids);
  ~ShmCollImpl() override;

  bool handles(const OpDesc& op) const override;
  Status run(const OpDesc& op, const OpSig& sig, Deadline deadline, const std::atomic<bool>* abort,
             bool* handed_back) override;

  // Failure notices from peers (over the point-to-point links), checked
  // while waiting: a rank that failed elsewhere never arrives here.
  std::function<Status()> check_notices;

  // Set-up helpers used by create().
  CollControl& control(int rank, int parity) const;
  // Copy from / to a peer's memory: with loads and stores when the address
  // lies in a cfxMemAlloc region the peer published for this operation,
  // else with process_vm_readv / process_vm_writev.
  Status cma_read(int peer, uint64_t remote, void* local, size_t bytes);
  uint64_t probe_word = 0;  // read by a peer at set-up

 private:
  friend struct CollRun;
  CollCounter& counter(int rank) const;
  uint8_t* slot(int rank, int parity) const;

  // Publishing and waiting (shm_coll_sync.cpp).
  void publish(uint64_t value);
  // Waits until rank `only` (or every peer when only < 0) reaches `target`.
  Status wait_for(uint64_t target, int only, const char* what);
  Status check_peers_alive(uint64_t target, int only) const;
  bool peer_gone(int p) const;

  // Largest eager_bytes() that goes through the eager slots.
  size_t eager_limit(const OpDesc& op) const;
  // Whether a rank's published buffers are all cfxMemAlloc memory, which
  // peers then read and write in place.
  static bool buffers_mapped(const CollControl& c);
  bool all_buffers_mapped(int parity) const;
  // Slot-sized call where some rank's buffers are not mapped: the ranks
  // that deferred their slot copy (of `bytes`) make it, and all wait for them.
  Status fill_deferred_slots(const OpDesc& op, int parity, size_t bytes, bool deferred);

  // The algorithms (shm_coll_eager.cpp, shm_coll_cma.cpp); the announce
  // round and the signature check have happened.
  Status run_eager(const OpDesc& op, int parity);
  Status run_cma(const OpDesc& op, int parity);
  Status cma_write(int peer, uint64_t remote, const void* local, size_t bytes);
  // The peer's bytes [remote, remote + bytes) mapped into this process, or
  // nullptr when they are not in a region it published for this operation.
  uint8_t* view(int peer, uint64_t remote, size_t bytes);
  uint8_t* map_region(int peer, const SharedRegionRef& ref);  // nullptr: cannot (warned once)
  void forget_mappings_if_many();  // between calls only
  uint8_t* tmp(size_t bytes);

  int rank_, nranks_;
  uint8_t* base_;
  size_t bytes_;
  CollLayout layout_;
  std::vector<int> pids_, pidfds_;
  uint64_t op_ = 0;  // operations run so far on this path (the same on every rank)
  Deadline deadline_{};
  const std::atomic<bool>* abort_ = nullptr;
  std::string what_op_;  // for wait errors
  int spin_ = 0;
  int yields_ = 0;
  std::vector<uint8_t> tmp_;
  int parity_ = 0;  // of the operation running (its control blocks)
  struct Mapping {
    int peer;
    uint64_t id;
    uint8_t* at;  // nullptr: mapping failed, read it with process_vm_readv
    size_t size;
  };
  std::vector<Mapping> mappings_;  // peers' regions mapped here, kept across calls
};

// Bytes each rank (or the root) puts in its eager slot for op: a function
// of the call's signature only, so every rank makes the same choice.
size_t eager_bytes(const OpDesc& op, int nranks);

}  // namespace conflux
