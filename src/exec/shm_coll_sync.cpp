// Publishing progress and waiting for peers on the shared segment. A waiter
// spins briefly (ranks usually arrive together), then yields, then sleeps on
// one futex word that publishers bump only when someone sleeps, so the
// common case makes no system call. Sleeps are sliced (50 ms) to notice the
// deadline, the abort flag and dead peers.
#include "core/log.h"
#include "exec/shm_coll_impl.h"

#include <emmintrin.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <climits>
#include <cstring>

namespace conflux {

namespace {

constexpr int kSliceMs = 50;

CollSegmentHeader& header(uint8_t* base) { return *reinterpret_cast<CollSegmentHeader*>(base); }

}  // namespace

void ShmCollImpl::publish(uint64_t value) {
  counter(rank_).value.store(value, std::memory_order_release);
  // Pairs with the waiter's increment of `sleepers` before its last check
  // (Dekker): either it sees our value or we see it sleeping.
  std::atomic_thread_fence(std::memory_order_seq_cst);
  CollSegmentHeader& h = header(base_);
  if (h.sleepers.load(std::memory_order_relaxed) > 0) {
    h.epoch.fetch_add(1, std::memory_order_seq_cst);
    syscall(SYS_futex, reinterpret_cast<uint32_t*>(&h.epoch), FUTEX_WAKE, INT_MAX, nullptr, nullptr, 0);
  }
}

bool ShmCollImpl::peer_gone(int p) const {
  if (pidfds_[p] >= 0) {
    pollfd pfd{pidfds_[p], POLLIN, 0};
    return ::poll(&pfd, 1, 0) > 0;  // readable once the process has exited
  }
  return ::kill(pids_[p], 0) != 0 && errno == ESRCH;
}

Status ShmCollImpl::check_peers_alive(uint64_t target, int only) const {
  for (int p = 0; p < nranks_; ++p) {
    if (p == rank_ || (only >= 0 && p != only)) continue;
    if (counter(p).value.load(std::memory_order_acquire) >= target) continue;
    if (!peer_gone(p)) continue;
    std::string msg = "rank " + std::to_string(p) + " (pid " + std::to_string(pids_[p]) + ", same host) exited or was killed";
    // The one we wait for may have exited only after failing on another
    // that died first (which had already passed this point): name all.
    for (int q = 0; q < nranks_; ++q)
      if (q != rank_ && q != p && peer_gone(q)) msg += "; also rank " + std::to_string(q) + " exited";
    return remote_error(msg);
  }
  return Status::Ok();
}

Status ShmCollImpl::wait_for(uint64_t target, int only, const char* what) {
  auto arrived = [&] {
    for (int p = 0; p < nranks_; ++p) {
      if (p == rank_ || (only >= 0 && p != only)) continue;
      if (counter(p).value.load(std::memory_order_acquire) < target) return false;
    }
    return true;
  };
  for (int i = 0; i < spin_; ++i) {
    if (arrived()) return Status::Ok();
    _mm_pause();
  }
  for (int i = 0; i < yields_; ++i) {
    if (arrived()) return Status::Ok();
    sched_yield();
  }
  CollSegmentHeader& h = header(base_);
  for (;;) {
    if (arrived()) return Status::Ok();
    if (abort_ && abort_->load(std::memory_order_relaxed)) return aborted_error("communicator was aborted");
    CFX_RETURN_IF_ERROR(check_peers_alive(target, only));
    if (check_notices) CFX_RETURN_IF_ERROR(check_notices());
    auto now = Clock::now();
    if (now >= deadline_) {
      std::string missing;
      for (int p = 0; p < nranks_; ++p) {
        if (p == rank_ || (only >= 0 && p != only)) continue;
        if (counter(p).value.load(std::memory_order_acquire) < target)
          missing += (missing.empty() ? "" : ", ") + std::to_string(p);
      }
      return timeout_error("timed out waiting for rank(s) " + missing + " to " + what);
    }
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline_ - now).count();
    int slice = static_cast<int>(std::min<int64_t>(kSliceMs, std::max<int64_t>(1, left)));
    h.sleepers.fetch_add(1, std::memory_order_seq_cst);
    uint32_t epoch = h.epoch.load(std::memory_order_seq_cst);
    if (!arrived()) {
      timespec ts{0, static_cast<long>(slice) * 1000000L};
      syscall(SYS_futex, reinterpret_cast<uint32_t*>(&h.epoch), FUTEX_WAIT, epoch, &ts, nullptr, 0);
    }
    h.sleepers.fetch_sub(1, std::memory_order_relaxed);
  }
}

uint8_t* ShmCollImpl::map_region(int peer, const SharedRegionRef& ref) {
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
  // then read with process_vm_readv like any buffer.
  uint8_t* at = p == MAP_FAILED ? nullptr : static_cast<uint8_t*>(p);
  if (at == nullptr)
    CFX_WARN(kShm, "cannot map rank %d's cfxMemAlloc buffer (%s); reading it with process_vm_readv", peer,
             std::strerror(err));
  mappings_.push_back(Mapping{peer, ref.id, at, ref.size});
  return at;
}

void ShmCollImpl::forget_mappings_if_many() {
  // Peers free and allocate regions over time: keep the table small. Only
  // between calls: views handed out during one are in use until it ends.
  if (mappings_.size() < 64) return;
  for (const Mapping& m : mappings_)
    if (m.at != nullptr) munmap(m.at, m.size);
  mappings_.clear();
}

uint8_t* ShmCollImpl::view(int peer, uint64_t remote, size_t bytes) {
  const CollControl& c = control(peer, parity_);
  for (const SharedRegionRef* ref : {&c.send_region, &c.recv_region}) {
    if (ref->id == 0 || remote < ref->base || remote + bytes > ref->base + ref->size) continue;
    uint8_t* at = map_region(peer, *ref);
    return at == nullptr ? nullptr : at + (remote - ref->base);
  }
  return nullptr;
}

Status ShmCollImpl::cma_read(int peer, uint64_t remote, void* local, size_t bytes) {
  if (const uint8_t* v = bytes > 0 ? view(peer, remote, bytes) : nullptr) {
    std::memcpy(local, v, bytes);
    return Status::Ok();
  }
  auto* dst = static_cast<uint8_t*>(local);
  while (bytes > 0) {
    iovec l{dst, bytes}, r{reinterpret_cast<void*>(remote), bytes};
    ssize_t got = process_vm_readv(pids_[peer], &l, 1, &r, 1, 0);
    if (got <= 0) {
      int err = got < 0 ? errno : EIO;
      if (err == EINTR) continue;
      if (err == ESRCH) return remote_error("rank " + std::to_string(peer) + " exited or was killed");
      return system_error("reading rank " + std::to_string(peer) + "'s buffer (process_vm_readv)", err);
    }
    dst += got;
    remote += static_cast<uint64_t>(got);
    bytes -= static_cast<size_t>(got);
  }
  return Status::Ok();
}

Status ShmCollImpl::cma_write(int peer, uint64_t remote, const void* local, size_t bytes) {
  if (uint8_t* v = bytes > 0 ? view(peer, remote, bytes) : nullptr) {
    std::memcpy(v, local, bytes);
    return Status::Ok();
  }
  auto* src = static_cast<const uint8_t*>(local);
  while (bytes > 0) {
    iovec l{const_cast<uint8_t*>(src), bytes}, r{reinterpret_cast<void*>(remote), bytes};
    ssize_t put = process_vm_writev(pids_[peer], &l, 1, &r, 1, 0);
    if (put <= 0) {
      int err = put < 0 ? errno : EIO;
      if (err == EINTR) continue;
      if (err == ESRCH) return remote_error("rank " + std::to_string(peer) + " exited or was killed");
      return system_error("writing rank " + std::to_string(peer) + "'s buffer (process_vm_writev)", err);
    }
    src += put;
    remote += static_cast<uint64_t>(put);
    bytes -= static_cast<size_t>(put);
  }
  return Status::Ok();
}

}  // namespace conflux
