#include "exec/shm_coll.h"

#include "core/comm.h"
#include "core/config.h"
#include "core/log.h"
#include "exec/reduce.h"
#include "exec/shm_coll_impl.h"
#include "transport/transport.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <thread>

namespace conflux {

namespace {

constexpr size_t kEagerSlotBytes = size_t{64} * 1024;  // per rank and parity
// From this size, calls whose buffers are all cfxMemAlloc memory skip the
// slots: peers read (and reduce from) the buffers in place. 2 ranks,
// interleaved: AllReduce 64 KiB 1.9 against 11.4 us, 8 KiB 0.54 against 1.6;
// at 4 KiB the extra flag round of the in-place path makes it a wash.
constexpr size_t kMappedInPlaceFrom = size_t{8} * 1024;
// A 2-rank Broadcast through a slot is two copies one after the other (the
// root's in, the peer's out); from this size one process_vm_readv wins
// (2 ranks: 64 KiB 6.4 against 9.3 us, 32 KiB 4.2 against 4.7). Not at 4
// ranks, where the root's pushes to 3 peers cost more (64 KiB: 21 against 13).
constexpr size_t kTwoRankBroadcastCmaFrom = size_t{32} * 1024;
// Reductions on ordinary (heap) buffers from these sizes go back to the
// point-to-point schedules, whose shared-memory slot rings copy in and out
// through cache-sized pieces: that beats reading peers' buffers with
// process_vm_readv, which pins every page of them on every call. Interleaved,
// heap buffers, point-to-point against this path: AllReduce 2 ranks 1 MiB
// 95 against 163 us, 4 MiB 537 against 1026, 64 MiB 15.7 against 19.7 ms;
// 4 ranks 1 MiB 204 against 368 us; ReduceScatter 2 ranks 1 MiB 58 against
// 89; Reduce 2 ranks 256 KiB 16 against 31, 4 MiB 197 against 722. Below
// these sizes this path wins (AllReduce 64 KiB 11 against 40 us).
// AllGather, AlltoAll and Broadcast copy each byte once either way and stay
// here: handing them back at 4 ranks from 1 MiB measured 0.5-1.4x, against
// the previous binary, interleaved (Broadcast 4 MiB 1531 against 798 us).
constexpr size_t kHeapReductionPointToPointFrom = size_t{1024} * 1024;
constexpr size_t kHeapReducePointToPointFrom = size_t{256} * 1024;

// Whether a call on ordinary buffers runs faster on the point-to-point path.
// Sizes count as nccl-tests counts them (AllGather: the whole output).
bool prefers_point_to_point(const OpDesc& op, int nranks) {
  const size_t bytes = op.count * datatype_size(op.dtype);
  const size_t n = static_cast<size_t>(nranks);
  switch (op.coll) {
    case Coll::kAllReduce: return bytes >= kHeapReductionPointToPointFrom;
    case Coll::kReduceScatter: return bytes * n >= kHeapReductionPointToPointFrom;
    case Coll::kReduce: return bytes >= kHeapReducePointToPointFrom;
    default: return false;
  }
}
constexpr uint64_t kProbeMagic = 0xC0F1000000000000ull;

// Runs one collective on the point-to-point path during set-up.
Status run_one(cfxComm& comm, Coll coll, void* buf, size_t count, cfxDataType_t type, cfxRedOp_t op) {
  OpDesc d;
  d.coll = coll;
  d.sendbuf = buf;
  d.recvbuf = buf;
  d.count = count;
  d.dtype = type;
  d.op = op;
  d.root = 0;
  return comm.run(std::vector<OpDesc>{d});
}

// Every rank's vote must be yes for the fast path to apply anywhere:
// handles() must agree on all ranks or calls would take different paths.
Result<bool> all_agree(cfxComm& comm, bool mine) {
  int32_t v = mine ? 1 : 0;
  CFX_RETURN_IF_ERROR(run_one(comm, Coll::kAllReduce, &v, 1, cfxInt32, cfxMin));
  return v == 1;
}

}  // namespace

size_t eager_bytes(const OpDesc& op, int nranks) {
  size_t bytes = op.count * datatype_size(op.dtype);
  switch (op.coll) {
    case Coll::kReduceScatter:
    case Coll::kScatter:
    case Coll::kAlltoAll: return bytes * static_cast<size_t>(nranks);
    case Coll::kBarrier: return 0;
    default: return bytes;
  }
}

ShmCollImpl::ShmCollImpl(int rank, int nranks, uint8_t* base, size_t bytes, size_t slot_bytes, std::vector<int> pids)
    : rank_(rank), nranks_(nranks), base_(base), bytes_(bytes), pids_(std::move(pids)) {
  layout_.nranks = nranks;
  layout_.slot_bytes = slot_bytes;
  pidfds_.assign(nranks, -1);
  for (int p = 0; p < nranks; ++p) {
    if (p == rank) continue;
#ifdef SYS_pidfd_open
    pidfds_[p] = static_cast<int>(syscall(SYS_pidfd_open, pids_[p], 0));
#endif
  }
  // More ranks than cores: a spinning waiter steals the core of the rank it
  // waits for, so give the core away almost at once.
  unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  bool oversubscribed = static_cast<unsigned>(nranks) > cores;
  spin_ = oversubscribed ? 32 : std::clamp(config().spin_iterations / 2, 64, 1000);
  yields_ = oversubscribed ? 64 : 16;
}

ShmCollImpl::~ShmCollImpl() {
  for (const Mapping& m : mappings_)
    if (m.at != nullptr) munmap(m.at, m.size);
  for (int fd : pidfds_)
    if (fd >= 0) ::close(fd);
  if (base_) munmap(base_, bytes_);
}

CollCounter& ShmCollImpl::counter(int rank) const {
  return reinterpret_cast<CollCounter*>(base_ + layout_.counters_off())[rank];
}

CollControl& ShmCollImpl::control(int rank, int parity) const {
  return reinterpret_cast<CollControl*>(base_ + layout_.controls_off())[rank * 2 + parity];
}

uint8_t* ShmCollImpl::slot(int rank, int parity) const {
  return base_ + layout_.slots_off() + layout_.slot_bytes * static_cast<size_t>(rank * 2 + parity);
}

uint8_t* ShmCollImpl::tmp(size_t bytes) {
  if (tmp_.size() < bytes) tmp_.resize(bytes);
  return tmp_.data();
}

size_t ShmCollImpl::eager_limit(const OpDesc& op) const {
  size_t limit = std::min(layout_.slot_bytes, config().chunk_bytes);
  if (op.coll == Coll::kBroadcast && nranks_ == 2) limit = std::min(limit, kTwoRankBroadcastCmaFrom - 1);
  return limit;
}

bool ShmCollImpl::buffers_mapped(const CollControl& c) {
  return c.recv_region.id != 0 && (c.send_region.id != 0 || c.sendbuf == c.recvbuf);
}

bool ShmCollImpl::all_buffers_mapped(int parity) const {
  for (int p = 0; p < nranks_; ++p)
    if (!buffers_mapped(control(p, parity))) return false;
  return true;
}

bool ShmCollImpl::handles(const OpDesc& op) const {
  switch (op.coll) {
    case Coll::kBarrier: return true;
    case Coll::kAllReduce:
    case Coll::kReduce:
    case Coll::kReduceScatter: return reduce_fn(op.dtype, op.op) != nullptr;
    case Coll::kBroadcast:
    case Coll::kAllGather:
    case Coll::kAlltoAll:
    case Coll::kGather:
    case Coll::kScatter: return datatype_size(op.dtype) != 0;
    default: return false;
  }
}

Status ShmCollImpl::run(const OpDesc& op, const OpSig& sig, Deadline deadline, const std::atomic<bool>* abort,
                        bool* handed_back) {
  *handed_back = false;
  if (abort && abort->load(std::memory_order_relaxed)) return aborted_error("communicator was aborted");
  deadline_ = deadline;
  abort_ = abort;
  const uint64_t k = ++op_;
  const int parity = static_cast<int>(k & 1);
  // Small payloads go through the eager slots; everything else is read in
  // place from the peers' buffers. Bounded by CONFLUX_CHUNK_SIZE too, so the
  // tests' tiny chunks exercise both paths.
  const size_t need = eager_bytes(op, nranks_);
  const bool eager = need <= eager_limit(op);
  // Whether every rank's buffers are cfxMemAlloc memory is known only after
  // the announce, so a rank whose buffers are defers its slot copy until
  // it knows the copy is needed.
  const bool may_read_in_place = eager && need >= kMappedInPlaceFrom;

  CollControl& mine = control(rank_, parity);
  mine.sig = sig;
  mine.sendbuf = reinterpret_cast<uint64_t>(op.sendbuf);
  mine.recvbuf = reinterpret_cast<uint64_t>(op.recvbuf);
  const bool regions = !eager || may_read_in_place;
  mine.send_region = regions ? shared_region_of(op.sendbuf) : SharedRegionRef{};
  mine.recv_region = regions ? shared_region_of(op.recvbuf) : SharedRegionRef{};
  const bool deferred = may_read_in_place && buffers_mapped(mine);
  parity_ = parity;
  forget_mappings_if_many();
  bool writes_slot = op.coll != Coll::kBarrier &&
                     ((op.coll != Coll::kBroadcast && op.coll != Coll::kScatter) || op.root == rank_);
  if (eager && writes_slot && need > 0 && !deferred) std::memcpy(slot(rank_, parity), op.sendbuf, need);
  publish(k * 4 + kAnnounced);
  CFX_RETURN_IF_ERROR(wait_for(k * 4 + kAnnounced, -1, "enter the call"));
  // Every rank compares every peer's call with its own before touching any
  // data, so a mismatch fails on all ranks involved.
  for (int p = 0; p < nranks_; ++p) {
    if (p == rank_) continue;
    const CollControl& theirs = control(p, parity);
    CFX_RETURN_IF_ERROR(check_incoming(sig, 0, theirs.sig, 0, p));
  }
  if (op.coll == Coll::kBarrier) return Status::Ok();
  if (!eager) {
    // cfxMemAlloc buffers are read in place without pinning: this path
    // stays fastest for them at every size.
    if (prefers_point_to_point(op, nranks_) && !all_buffers_mapped(parity)) {
      *handed_back = true;
      return Status::Ok();
    }
    return run_cma(op, parity);
  }
  if (may_read_in_place) {
    if (all_buffers_mapped(parity)) return run_cma(op, parity);
    CFX_RETURN_IF_ERROR(fill_deferred_slots(op, parity, deferred && writes_slot ? need : 0, deferred));
  }
  return run_eager(op, parity);
}

Status ShmCollImpl::fill_deferred_slots(const OpDesc& op, int parity, size_t bytes, bool deferred) {
  // Some rank's buffers are ordinary memory: the slots after all. Ranks
  // that deferred their copy make it now and say so.
  const uint64_t k = op_;
  if (deferred) {
    if (bytes > 0) std::memcpy(slot(rank_, parity), op.sendbuf, bytes);
    publish(k * 4 + kMidway);
  }
  for (int p = 0; p < nranks_; ++p)
    if (p != rank_ && buffers_mapped(control(p, parity)))
      CFX_RETURN_IF_ERROR(wait_for(k * 4 + kMidway, p, "fill its eager slot"));
  return Status::Ok();
}

Result<std::unique_ptr<ShmCollectives>> ShmCollectives::create(cfxComm& comm) {
  const int rank = comm.rank(), n = comm.nranks();
  CollLayout layout;
  layout.nranks = n;
  layout.slot_bytes = kEagerSlotBytes;
  const size_t bytes = layout.total_bytes();

  // Rank 0 creates the segment and tells the others its name.
  char name[64] = {};
  int fd = -1;
  if (rank == 0) {
    std::snprintf(name, sizeof name, "/conflux-coll-%016llx-%d",
                  static_cast<unsigned long long>(comm.id().comm_id), static_cast<int>(getpid()));
    fd = shm_open(name, O_CREAT | O_EXCL | O_RDWR | O_CLOEXEC, 0600);
    if (fd >= 0 && ftruncate(fd, static_cast<off_t>(bytes)) != 0) {
      ::close(fd);
      shm_unlink(name);
      fd = -1;
    }
    if (fd < 0) {
      CFX_WARN(kShm, "shared collectives: cannot create segment %s: %s", name, std::strerror(errno));
      name[0] = 0;
    }
  }
  CFX_RETURN_IF_ERROR(run_one(comm, Coll::kBroadcast, name, sizeof name, cfxUint8, cfxSum));
  if (rank != 0 && name[0]) fd = shm_open(name, O_RDWR | O_CLOEXEC, 0);
  void* base = MAP_FAILED;
  if (fd >= 0) {
    base = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    ::close(fd);
  }
  std::vector<int> pids(n);
  for (int p = 0; p < n; ++p) pids[p] = comm.peers()[p].pid;
  std::unique_ptr<ShmCollImpl> impl;
  if (base != MAP_FAILED) {
    impl = std::make_unique<ShmCollImpl>(rank, n, static_cast<uint8_t*>(base), bytes, layout.slot_bytes, pids);
    impl->probe_word = kProbeMagic | static_cast<uint64_t>(rank);
    impl->control(rank, 0).probe = reinterpret_cast<uint64_t>(&impl->probe_word);
  }
  CFX_ASSIGN_OR_RETURN(bool mapped, all_agree(comm, impl != nullptr));
  if (rank == 0 && name[0]) shm_unlink(name);  // everyone who could open it has
  if (!mapped) return std::unique_ptr<ShmCollectives>();

  // Large operations read peers' buffers with process_vm_readv; check that
  // the kernel allows it here (ptrace_scope, containers) before relying on it.
  int next = (rank + 1) % n;
  uint64_t seen = 0;
  Status cma = impl->cma_read(next, impl->control(next, 0).probe, &seen, sizeof seen);
  bool cma_ok = cma.ok() && seen == (kProbeMagic | static_cast<uint64_t>(next));
  if (!cma_ok) CFX_WARN(kShm, "shared collectives off: cross-memory reads fail: %s", cma.message().c_str());
  CFX_ASSIGN_OR_RETURN(bool all_cma, all_agree(comm, cma_ok));
  if (!all_cma) return std::unique_ptr<ShmCollectives>();
  impl->check_notices = [&comm] { return comm.check_notices(); };
  CFX_INFO(kShm, "shared collectives on: segment of %zu bytes, eager slots of %zu bytes", bytes, layout.slot_bytes);
  return std::unique_ptr<ShmCollectives>(std::move(impl));
}

}  // namespace conflux
