#include "transport/shm/kernel_copies.h"

#include "core/copy.h"

#include <cerrno>

namespace conflux {
namespace {
constexpr size_t kLine = 64;
}  // namespace

KernelCopies::KernelCopies()
    : direct_(std::make_unique<Batch>()),
      bounced_(std::make_unique<Batch>()),
      bounce_(kBounceBytes, 0) {}

bool KernelCopies::slow_distance(const void* dst, const void* src, size_t bytes) {
  const size_t gap = page_distance(dst, src);
  return bytes >= kBounceFrom && gap != 0 && gap < 32;
}

void KernelCopies::begin(int peer, int pid, bool to_peer) {
  peer_ = peer;
  pid_ = pid;
  to_peer_ = to_peer;
  direct_->count = direct_->bytes = 0;
  bounced_->count = bounced_->bytes = 0;
  copy_out_.clear();
  bounce_used_ = 0;
}

void KernelCopies::push(Batch& b, void* local, uint64_t remote, size_t bytes) {
  b.local[b.count] = iovec{local, bytes};
  b.remote[b.count] = iovec{reinterpret_cast<void*>(remote), bytes};
  ++b.count;
  b.bytes += bytes;
}

Status KernelCopies::add(uint8_t* local, uint64_t remote, size_t bytes) {
  if (bytes == 0) return Status::Ok();
  const void* remote_at = reinterpret_cast<const void*>(remote);
  const bool slow = to_peer_ ? slow_distance(remote_at, local, bytes) : slow_distance(local, remote_at, bytes);
  if (slow) return add_bounced(local, remote, bytes);
  push(*direct_, local, remote, bytes);
  return direct_->count == kBatch ? flush(*direct_) : Status::Ok();
}

Status KernelCopies::add_bounced(uint8_t* local, uint64_t remote, size_t bytes) {
  while (bytes > 0) {
    // The piece starts in the bounce at its remote bytes' offset within a
    // line: the kernel's copy then runs between whole-line distances.
    size_t at = (bounce_used_ + kLine - 1) / kLine * kLine + remote % kLine;
    if (at >= kBounceBytes) {
      CFX_RETURN_IF_ERROR(flush_bounced());
      at = remote % kLine;
    }
    const size_t n = std::min(bytes, kBounceBytes - at);
    uint8_t* b = reinterpret_cast<uint8_t*>(bounce_.data()) + at;
    if (to_peer_) copy_bytes(b, local, n);
    else copy_out_.push_back({local, b, n});
    push(*bounced_, b, remote, n);
    bounce_used_ = at + n;
    bounced_total_ += n;
    if (bounced_->count == kBatch) CFX_RETURN_IF_ERROR(flush_bounced());
    local += n;
    remote += n;
    bytes -= n;
  }
  return Status::Ok();
}

Status KernelCopies::flush_bounced() {
  CFX_RETURN_IF_ERROR(flush(*bounced_));
  for (const CopyOut& c : copy_out_) copy_bytes(c.to, c.from, c.bytes);
  copy_out_.clear();
  bounce_used_ = 0;
  return Status::Ok();
}

Status KernelCopies::finish() {
  CFX_RETURN_IF_ERROR(flush(*direct_));
  return flush_bounced();
}

Status KernelCopies::flush(Batch& b) {
  if (b.count == 0) return Status::Ok();
  const ssize_t moved = to_peer_ ? process_vm_writev(pid_, b.local, b.count, b.remote, b.count, 0)
                                 : process_vm_readv(pid_, b.local, b.count, b.remote, b.count, 0);
  size_t done = moved > 0 ? static_cast<size_t>(moved) : 0;
  if (done != b.bytes) {
    // A partial transfer (or an error, which copy_range reports with its
    // cause): the rest piece by piece.
    for (size_t i = 0; i < b.count; ++i) {
      const size_t len = b.local[i].iov_len, skip = std::min(done, len);
      done -= skip;
      if (skip == len) continue;
      CFX_RETURN_IF_ERROR(copy_range(peer_, pid_, reinterpret_cast<uint64_t>(b.remote[i].iov_base) + skip,
                                     static_cast<uint8_t*>(b.local[i].iov_base) + skip, len - skip, to_peer_));
    }
  }
  b.count = b.bytes = 0;
  return Status::Ok();
}

Status KernelCopies::copy_range(int peer, int pid, uint64_t remote, void* local, size_t bytes, bool to_peer) {
  auto* at = static_cast<uint8_t*>(local);
  while (bytes > 0) {
    iovec l{at, bytes}, r{reinterpret_cast<void*>(remote), bytes};
    const ssize_t moved = to_peer ? process_vm_writev(pid, &l, 1, &r, 1, 0) : process_vm_readv(pid, &l, 1, &r, 1, 0);
    if (moved <= 0) {
      const int err = moved < 0 ? errno : EIO;
      if (err == EINTR) continue;
      if (err == ESRCH) return remote_error("rank " + std::to_string(peer) + " exited or was killed");
      return system_error(std::string(to_peer ? "writing" : "reading") + " rank " + std::to_string(peer) +
                              "'s buffer (" + (to_peer ? "process_vm_writev" : "process_vm_readv") + ")",
                          err);
    }
    at += moved;
    remote += static_cast<uint64_t>(moved);
    bytes -= static_cast<size_t>(moved);
  }
  return Status::Ok();
}

}  // namespace conflux
