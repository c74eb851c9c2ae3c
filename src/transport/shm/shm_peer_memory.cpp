#include "transport/shm/shm_peer_memory.h"

#include "algo/schedule.h"
#include "bootstrap/rank_info.h"
#include "core/copy.h"
#include "core/log.h"
#include "transport/transport.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace conflux {

namespace {

// Peers free and allocate regions over time: past this many mappings the
// table is dropped between calls (views handed out during a call are in use
// until it ends).
constexpr size_t kMaxMappings = 64;

bool user_buffer(int buf) { return buf == algo::kSendBuf || buf == algo::kRecvBuf; }

}  // namespace

ShmPeerMemory::ShmPeerMemory(const ShmSegment& mine, std::vector<const ShmSegment*> peers, std::vector<int> pids,
                             std::vector<int> pidfds)
    : mine_(mine), peers_(std::move(peers)), pids_(std::move(pids)), pidfds_(std::move(pidfds)) {
  snapshots_.resize(peers_.size());
}

ShmPeerMemory::~ShmPeerMemory() {
  for (const Mapping& m : mappings_)
    if (m.at != nullptr) munmap(m.at, m.size);
}

bool ShmPeerMemory::reaches(int peer) const {
  return peer >= 0 && static_cast<size_t>(peer) < peers_.size() && peers_[peer] != nullptr;
}

int ShmPeerMemory::begin_call(uint64_t epoch, const OpSig& sig, const uint8_t* send, size_t send_bytes,
                              uint8_t* recv, size_t recv_bytes, bool staging, size_t staging_extent,
                              bool expose) {
  if (mappings_.size() >= kMaxMappings) {
    for (const Mapping& m : mappings_)
      if (m.at != nullptr) munmap(m.at, m.size);
    mappings_.clear();
  }
  publish_call(epoch, sig);
  if (staging) half_ = staging_calls_++ % 2;
  in_flag_line_ = staging && staging_extent > 0 && staging_extent <= kFlagLineStagingBytes;
  if (!expose) return staging ? half_ : -1;
  ShmExposure& e = mine_.exposure();
  e.epoch.store(0, std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_release);
  e.addr[0] = reinterpret_cast<uint64_t>(send);
  e.addr[1] = reinterpret_cast<uint64_t>(recv);
  e.bytes[0] = send_bytes;
  e.bytes[1] = recv_bytes;
  e.region[0] = send_bytes > 0 ? shared_region_of(send) : SharedRegionRef{};
  e.region[1] = recv_bytes > 0 ? shared_region_of(recv) : SharedRegionRef{};
  e.epoch.store(epoch, std::memory_order_release);
  return staging ? half_ : -1;
}

void ShmPeerMemory::publish_call(uint64_t epoch, const OpSig& sig) {
  epoch_ = epoch;
  sig_ = sig;
  // The signature's three words mixed (splitmix64's finaliser between
  // them), folded to 24 bits: every rank computes it alike, and calls that
  // differ in any field differ in it but for a 1 in 2^24 chance.
  static_assert(sizeof sig == 3 * sizeof(uint64_t), "OpSig is hashed as three words");
  uint64_t w[3];
  std::memcpy(w, &sig, sizeof w);
  auto mix = [](uint64_t x) {
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
  };
  const uint64_t h = mix(mix(mix(w[0]) ^ w[1]) ^ w[2]);
  call_hash_ = static_cast<uint32_t>((h ^ (h >> 24) ^ (h >> 48)) & 0xffffffu);
  ShmCallSig& cs = mine_.call_sig();  // only read to describe a mismatch
  cs.epoch.store(0, std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_release);
  cs.sig = sig;
  cs.epoch.store(epoch, std::memory_order_release);
}

void ShmPeerMemory::announce_call(uint64_t epoch, const OpSig& sig) {
  publish_call(epoch, sig);
  mine_.flag().value.store(flag_value(epoch_, call_hash_, 0), std::memory_order_release);
  // Only a peer in another (one-sided) call of this epoch waits on this
  // flag: wake the sleepers without the fence signal() pays; one missed
  // sees the flag when its bounded sleep ends.
  for (size_t p = 0; p < peers_.size(); ++p)
    if (peers_[p] != nullptr && peers_[p]->doorbell().sleeping.load(std::memory_order_relaxed) != 0)
      ring_doorbell(peers_[p]->doorbell());
}

Status ShmPeerMemory::check_call(int peer, uint64_t seen) const {
  if (flag_epoch(seen) != (epoch_ & 0xffffffffull) || flag_call_hash(seen) == call_hash_) return Status::Ok();
  // Another call: describe it from the signature the peer published.
  const ShmCallSig& cs = peers_[peer]->call_sig();
  const OpSig theirs = cs.sig;
  std::atomic_thread_fence(std::memory_order_acquire);
  if (cs.epoch.load(std::memory_order_relaxed) == epoch_) {
    Status st = check_incoming(sig_, 0, theirs, 0, peer);
    if (!st.ok()) return st;
  }
  return invalid_usage("mismatched calls: rank " + std::to_string(peer) + " is in another call than this rank's " +
                       describe(sig_));
}

Result<uint64_t> ShmPeerMemory::remote_address(int peer, int buf, size_t offset, size_t bytes) const {
  if (!reaches(peer)) return internal_error("one-sided step names rank " + std::to_string(peer) + ", which is not on this host");
  if (buf == algo::kStaging) {
    if (offset + bytes > staging_size(*peers_[peer]))
      return internal_error("one-sided step reaches past rank " + std::to_string(peer) + "'s staging area");
    return reinterpret_cast<uint64_t>(staging_of(*peers_[peer], half_) + offset);
  }
  if (!user_buffer(buf)) return internal_error("one-sided step names a private buffer of rank " + std::to_string(peer));
  const ShmExposure& e = peers_[peer]->exposure();
  if (const uint64_t seen = e.epoch.load(std::memory_order_acquire); seen != epoch_)
    return internal_error("rank " + std::to_string(peer) + " has not published its buffers for this call (epoch " +
                          std::to_string(seen) + ", expected " + std::to_string(epoch_) + ")");
  const int k = buf == algo::kSendBuf ? 0 : 1;
  if (offset + bytes > e.bytes[k])
    return internal_error("one-sided step reaches past rank " + std::to_string(peer) + "'s " +
                          (k == 0 ? "send" : "receive") + " buffer");
  return e.addr[k] + offset;
}

uint8_t* ShmPeerMemory::map_region(int peer, const SharedRegionRef& ref) {
  for (const Mapping& m : mappings_)
    if (m.peer == peer && m.id == ref.id) return m.at;
  int fd = -1;
#ifdef SYS_pidfd_getfd
  if (pidfds_[peer] >= 0) fd = static_cast<int>(syscall(SYS_pidfd_getfd, pidfds_[peer], ref.fd, 0));
#endif
  if (fd < 0) {
    const std::string path = "/proc/" + std::to_string(pids_[peer]) + "/fd/" + std::to_string(ref.fd);
    fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
  }
  void* p = MAP_FAILED;
  int err = errno;
  if (fd >= 0) {
    p = mmap(nullptr, ref.size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    err = errno;
    ::close(fd);
  }
  // A failure is remembered (nullptr) and costs only speed: the region is
  // then reached through the kernel like any buffer.
  uint8_t* at = p == MAP_FAILED ? nullptr : static_cast<uint8_t*>(p);
  if (at == nullptr)
    CFX_WARN(kShm, "cannot map rank %d's cfxMemAlloc buffer (%s); reaching it with process_vm_readv", peer,
             std::strerror(err));
  mappings_.push_back(Mapping{peer, ref.id, at, ref.size});
  return at;
}

uint8_t* ShmPeerMemory::mapped(int peer, int buf, uint64_t remote, size_t bytes) {
  if (buf == algo::kStaging) return reinterpret_cast<uint8_t*>(remote);
  const SharedRegionRef& ref = peers_[peer]->exposure().region[buf == algo::kSendBuf ? 0 : 1];
  if (ref.id == 0 || remote < ref.base || remote + bytes > ref.base + ref.size) return nullptr;
  uint8_t* at = map_region(peer, ref);
  return at == nullptr ? nullptr : at + (remote - ref.base);
}

uint8_t* ShmPeerMemory::view(int peer, int buf, size_t offset, size_t bytes) {
  // A peer's staging area is always mapped: the eager algorithms' path.
  if (buf == algo::kStaging) {
    if (!reaches(peer) || offset + bytes > staging_size(*peers_[peer])) return nullptr;
    if (in_flag_line_ && snapshots_[peer].epoch == epoch_) return snapshots_[peer].bytes + offset;
    return staging_of(*peers_[peer], half_) + offset;
  }
  Result<uint64_t> remote = remote_address(peer, buf, offset, bytes);
  return remote.ok() ? mapped(peer, buf, remote.value(), bytes) : nullptr;
}

Status ShmPeerMemory::read(int peer, int buf, size_t offset, void* to, size_t bytes) {
  Piece piece{offset, static_cast<uint8_t*>(to), bytes};
  return transfer(peer, buf, false, &piece, 1);
}

Status ShmPeerMemory::write(int peer, int buf, size_t offset, const void* from, size_t bytes) {
  Piece piece{offset, static_cast<uint8_t*>(const_cast<void*>(from)), bytes};
  return transfer(peer, buf, true, &piece, 1);
}

Status ShmPeerMemory::transfer(int peer, int buf, bool to_peer, const Piece* pieces, size_t count) {
  kernel_.begin(peer, pids_[peer], to_peer);
  for (size_t i = 0; i < count; ++i) {
    const Piece& p = pieces[i];
    if (p.bytes == 0) continue;
    if (buf == algo::kStaging) {
      uint8_t* v = view(peer, buf, p.offset, p.bytes);
      if (v == nullptr) return internal_error("one-sided step reaches past rank " + std::to_string(peer) + "'s staging area");
      if (to_peer) copy_bytes(v, p.local, p.bytes);
      else copy_bytes(p.local, v, p.bytes);
      continue;
    }
    CFX_ASSIGN_OR_RETURN(uint64_t at, remote_address(peer, buf, p.offset, p.bytes));
    if (uint8_t* v = mapped(peer, buf, at, p.bytes)) {
      if (to_peer) copy_bytes(v, p.local, p.bytes);
      else copy_bytes(p.local, v, p.bytes);
      continue;
    }
    CFX_RETURN_IF_ERROR(kernel_.add(p.local, at, p.bytes));
  }
  return kernel_.finish();
}

void ShmPeerMemory::signal(uint32_t signals) {
  mine_.flag().value.store(flag_value(epoch_, call_hash_, signals), std::memory_order_release);
  // Dekker pairing with each sleeper (ring_doorbell's): one fence for all
  // peers, then a futex wake only for those that sleep.
  std::atomic_thread_fence(std::memory_order_seq_cst);
  for (size_t p = 0; p < peers_.size(); ++p)
    if (peers_[p] != nullptr && peers_[p]->doorbell().sleeping.load(std::memory_order_relaxed) != 0)
      ring_doorbell(peers_[p]->doorbell());
}

uint64_t ShmPeerMemory::flag(int peer) {
  const ShmFlag& line = peers_[peer]->flag();
  const uint64_t f = line.value.load(std::memory_order_acquire);
  // The peer's first signal in this call: what it staged beside the flag
  // is complete (staging precedes the signal that publishes it) and stays
  // until its next call with the same half, two staging calls away.
  Snapshot& snap = snapshots_[peer];
  if (in_flag_line_ && snap.epoch != epoch_ && flag_epoch(f) == (epoch_ & 0xffffffffull) && flag_signals(f) > 0) {
    std::memcpy(snap.bytes, line.staging[half_], kFlagLineStagingBytes);
    snap.epoch = epoch_;
  }
  return f;
}

bool ShmPeerMemory::kernel_copy_works() {
  for (size_t p = 0; p < peers_.size(); ++p) {
    if (peers_[p] == nullptr) continue;
    // A word of the peer's segment, at the peer's own address of it.
    uint64_t word = 0;
    const uint64_t remote = peers_[p]->owner_address(&peers_[p]->flag());
    Status st = KernelCopies::copy_range(static_cast<int>(p), pids_[p], remote, &word, sizeof word, false);
    if (!st.ok()) {
      CFX_WARN(kShm, "one-sided single-copy algorithms off: %s", st.message().c_str());
      return false;
    }
  }
  return true;
}

}  // namespace conflux
