// One-sided access to the ranks of this host (PeerMemory): flags, buffer
// tables and staging areas live in each rank's segment, which every
// same-host peer has mapped. A peer's user buffers are read and written
// with plain loads and stores where they lie in cfxMemAlloc memory (the
// region is mapped here once, through pidfd_getfd or /proc/<pid>/fd),
// else with process_vm_readv/writev (Cross Memory Attach), one kernel copy
// per byte.
#pragma once

#include "transport/peer_memory.h"
#include "transport/shm/kernel_copies.h"
#include "transport/shm/shm_segment.h"

#include <vector>

namespace conflux {

class ShmPeerMemory final : public PeerMemory {
 public:
  // peers[p]: p's segment (nullptr where p is not on this host); pids and
  // pidfds (-1: none) by rank. The transport owns the segments and the
  // pidfds, and outlives this.
  ShmPeerMemory(const ShmSegment& mine, std::vector<const ShmSegment*> peers, std::vector<int> pids,
                std::vector<int> pidfds);
  ~ShmPeerMemory() override;
  ShmPeerMemory(const ShmPeerMemory&) = delete;
  ShmPeerMemory& operator=(const ShmPeerMemory&) = delete;

  bool reaches(int peer) const override;
  int begin_call(uint64_t epoch, const OpSig& sig, const uint8_t* send, size_t send_bytes, uint8_t* recv,
                 size_t recv_bytes, bool staging, size_t staging_extent, bool expose) override;
  Status check_call(int peer, uint64_t seen) const override;
  void announce_call(uint64_t epoch, const OpSig& sig) override;
  uint8_t* staging(int half) const override { return staging_of(mine_, half); }
  size_t staging_bytes() const override { return mine_.layout().staging_bytes; }
  uint8_t* view(int peer, int buf, size_t offset, size_t bytes) override;
  Status read(int peer, int buf, size_t offset, void* to, size_t bytes) override;
  Status write(int peer, int buf, size_t offset, const void* from, size_t bytes) override;
  Status transfer(int peer, int buf, bool to_peer, const Piece* pieces, size_t count) override;
  void signal(uint32_t signals) override;
  uint64_t flag(int peer) override;

  // Whether process_vm_readv reaches every same-host peer (ptrace rules,
  // containers): reads a word of each peer's segment through the kernel.
  bool kernel_copy_works();

 private:
  // Sets the call's epoch, signature and hash, and publishes the signature.
  void publish_call(uint64_t epoch, const OpSig& sig);
  struct Mapping {
    int peer;
    uint64_t id;
    uint8_t* at;  // nullptr: mapping failed; use the kernel
    size_t size;
  };
  // The peer's address of (buf, offset) in the current call, after checking
  // that the peer published this call's buffers and the range fits.
  Result<uint64_t> remote_address(int peer, int buf, size_t offset, size_t bytes) const;
  // Where `seg`'s staging half lies in this call (beside its flag for a
  // small call), and how many bytes it holds.
  uint8_t* staging_of(const ShmSegment& seg, int half) const {
    return in_flag_line_ ? seg.flag().staging[half] : seg.staging(half);
  }
  size_t staging_size(const ShmSegment& seg) const {
    return in_flag_line_ ? kFlagLineStagingBytes : seg.layout().staging_bytes;
  }
  uint8_t* map_region(int peer, const SharedRegionRef& ref);
  // Where `bytes` at the peer's address `remote` (in buffer `buf`) lie in
  // this process, or nullptr when they are not in a mapped region.
  uint8_t* mapped(int peer, int buf, uint64_t remote, size_t bytes);

  const ShmSegment& mine_;
  std::vector<const ShmSegment*> peers_;
  std::vector<int> pids_, pidfds_;
  uint64_t epoch_ = 0;
  OpSig sig_;
  uint32_t call_hash_ = 0;
  int staging_calls_ = 0;  // calls so far that used the staging areas
  bool in_flag_line_ = false;  // this call's staging halves are the flags' (ShmFlag::staging)
  int half_ = 0;
  // A small call's staged bytes, by peer, copied from the peer's flag
  // line in the look that showed its signal in this call (epoch). The
  // peer writes its next call's half into that same line as soon as it
  // has seen our signal: reading the bytes from the line later would
  // fetch it again.
  struct Snapshot {
    uint64_t epoch = 0;  // 0: none
    uint8_t bytes[kFlagLineStagingBytes];
  };
  std::vector<Snapshot> snapshots_;
  std::vector<Mapping> mappings_;
  KernelCopies kernel_;  // peers' ordinary buffers
};

}  // namespace conflux
