#include "transport/shm/shm_segment.h"

#include "bootstrap/auth.h"
#include "transport/shm/stale_files.h"

#include <fcntl.h>
#include <linux/futex.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <new>

namespace conflux {
namespace {

constexpr uint64_t kSegMagic = 0x434658534547ull;  // "CFXSEG"

// The header's first cache line: what the segment is and who made it
// (plain data, read from the file by ShmSegment::maker).
struct SegmentDescription {
  uint64_t magic;
  int32_t nranks;
  int32_t nslots;
  uint64_t slot_bytes;
  int32_t channels;
  int32_t maker_pid;  // the creator (ProcessStamp): a segment its gone maker
                      // left in /dev/shm can be told from a live one
  uint64_t staging_bytes;
  uint64_t owner_base;  // where the creator mapped the segment (its own address of it)
  uint64_t maker_start_ticks;
  uint64_t maker_pid_namespace;
};
static_assert(sizeof(SegmentDescription) == 64);

struct SegmentHeader : SegmentDescription {
  ShmDoorbell doorbell;
  ShmFlag flag;
  ShmCallSig call_sig;
  ShmExposure exposure;
};
static_assert(sizeof(SegmentHeader) % 64 == 0);

constexpr size_t kStagingAlign = 4096;

size_t rings_end(const ShmSegment::Layout& l) {
  return sizeof(SegmentHeader) +
         static_cast<size_t>(l.nranks) * (static_cast<size_t>(l.channels) * l.ring_bytes() + sizeof(ShmNotice));
}

size_t staging_begin(const ShmSegment::Layout& l) { return (rings_end(l) + kStagingAlign - 1) / kStagingAlign * kStagingAlign; }

// Segments are mapped with their pages in place (MAP_POPULATE), up to this
// size. A slot's first use otherwise takes a page fault on the writer's and
// on the reader's side (and the zeroing of a fresh page): the first 16
// messages on each ring pay it, which a short benchmark (nccl-tests' 20
// iterations) sees as calls several times slower than the steady state
// (a 4-rank 64 KiB AllGather: 121 us over 20 calls, 14 us over 400). Larger
// segments (many channels) keep faulting pages in on first use, so memory
// no call touches is not committed.
constexpr size_t kPopulateUpTo = size_t{64} << 20;

int populate_flag(size_t bytes) { return bytes <= kPopulateUpTo ? MAP_POPULATE : 0; }

// Makes this process's first access to every page of [begin, end) happen
// now, one word per page: read, or written in place (an atomic or with 0,
// which changes no value even where another process writes the word). On
// some virtual machines a process's first access to a page costs several
// microseconds even when its mapping was populated (on this project's
// 2-vCPU guest 6-10 us a page: each page table entry's accessed and dirty
// bits, it seems). Left to the data path, a 64 KiB slot's first message
// took 100-400 us instead of 10, and a short benchmark (nccl-tests' 5
// warm-up and 20 timed calls) timed a 2-rank 256 KiB AlltoAll at 55-75 us
// against 13 in the steady state, until every slot of a 16-slot ring had
// been used once by both sides. Only addresses inside the range are
// touched: a page it shares with another range keeps its other words.
void touch_pages(uint8_t* begin, uint8_t* end, bool write) {
  const auto page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  for (uint8_t* at = begin; at < end; at += page - reinterpret_cast<uintptr_t>(at) % page) {
    uint8_t* word = at + (-reinterpret_cast<uintptr_t>(at) & 7);  // aligned up to 8
    if (word >= end || static_cast<size_t>(end - word) < sizeof(uint64_t)) break;
    auto* w = reinterpret_cast<uint64_t*>(word);
    if (write)
      __atomic_fetch_or(w, uint64_t{0}, __ATOMIC_RELAXED);
    else
      (void)__atomic_load_n(w, __ATOMIC_RELAXED);
  }
}

}  // namespace

size_t ShmSegment::Layout::total_bytes() const {
  return staging_bytes == 0 ? rings_end(*this) : staging_begin(*this) + 2 * staging_bytes;
}

ShmSegment::ShmSegment(ShmSegment&& o) noexcept { *this = std::move(o); }

ShmSegment& ShmSegment::operator=(ShmSegment&& o) noexcept {
  if (this != &o) {
    this->~ShmSegment();
    base_ = std::exchange(o.base_, nullptr);
    bytes_ = std::exchange(o.bytes_, 0);
    name_ = std::move(o.name_);
    owner_ = std::exchange(o.owner_, false);
    layout_ = o.layout_;
  }
  return *this;
}

ShmSegment::~ShmSegment() {
  if (owner_) unlink();
  if (base_ != nullptr) munmap(base_, bytes_);
  base_ = nullptr;
}

void ShmSegment::unlink() {
  if (owner_ && !name_.empty()) shm_unlink(name_.c_str());
  owner_ = false;
}

Result<ShmSegment> ShmSegment::create(const std::string& name, const Layout& layout) {
  int fd = shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR | O_CLOEXEC, 0600);
  if (fd < 0) return system_error("shm_open(" + name + ")", errno);
  ShmSegment seg;
  seg.name_ = name;
  seg.owner_ = true;
  seg.layout_ = layout;
  seg.bytes_ = layout.total_bytes();
  if (ftruncate(fd, static_cast<off_t>(seg.bytes_)) != 0) {
    int err = errno;
    ::close(fd);
    return system_error("ftruncate(" + name + ", " + std::to_string(seg.bytes_) + ") (is /dev/shm full?)", err);
  }
  void* p = mmap(nullptr, seg.bytes_, PROT_READ | PROT_WRITE, MAP_SHARED | populate_flag(seg.bytes_), fd, 0);
  int err = errno;
  ::close(fd);
  if (p == MAP_FAILED) return system_error("mmap(" + name + ")", err);
  seg.base_ = static_cast<uint8_t*>(p);
  // Every page is this rank's: it reads every ring, writes its staging.
  // Nobody else knows the segment yet. (A segment too large to populate
  // keeps paying on first use, as it pays its faults.)
  if (populate_flag(seg.bytes_) != 0) touch_pages(seg.base_, seg.base_ + seg.bytes_, /*write=*/true);
  auto* h = new (seg.base_) SegmentHeader{};
  h->nranks = layout.nranks;
  h->channels = layout.channels;
  h->nslots = layout.nslots;
  h->slot_bytes = layout.slot_bytes;
  h->staging_bytes = layout.staging_bytes;
  h->owner_base = reinterpret_cast<uint64_t>(seg.base_);
  const ProcessStamp maker = this_process_stamp();
  h->maker_pid = maker.pid;
  h->maker_start_ticks = maker.start_ticks;
  h->maker_pid_namespace = maker.pid_namespace;
  new (&h->doorbell) ShmDoorbell();
  new (&h->flag) ShmFlag();
  new (&h->call_sig) ShmCallSig();
  new (&h->exposure) ShmExposure();
  for (int r = 0; r < layout.nranks; ++r) {
    new (&seg.ring(r)) ShmRingControl();
    new (&seg.notice(r)) ShmNotice();
  }
  std::atomic_thread_fence(std::memory_order_release);
  h->magic = kSegMagic;
  return seg;
}

Result<ShmSegment> ShmSegment::open(const std::string& name, size_t expected_bytes) {
  int fd = shm_open(name.c_str(), O_RDWR | O_CLOEXEC, 0);
  if (fd < 0) return system_error("shm_open(" + name + ") of a peer's segment", errno);
  struct stat st{};
  if (fstat(fd, &st) != 0 || static_cast<size_t>(st.st_size) != expected_bytes) {
    ::close(fd);
    return remote_error("peer segment " + name + " has an unexpected size");
  }
  void* p = mmap(nullptr, expected_bytes, PROT_READ | PROT_WRITE, MAP_SHARED | populate_flag(expected_bytes), fd, 0);
  int err = errno;
  ::close(fd);
  if (p == MAP_FAILED) return system_error("mmap(" + name + ")", err);
  ShmSegment seg;
  seg.base_ = static_cast<uint8_t*>(p);
  seg.bytes_ = expected_bytes;
  seg.name_ = name;
  auto* h = reinterpret_cast<SegmentHeader*>(seg.base_);
  if (h->magic != kSegMagic) return remote_error("peer segment " + name + " is not initialised");
  seg.layout_ = Layout{h->nranks, h->nslots, h->slot_bytes, h->channels, h->staging_bytes};
  if (seg.layout_.total_bytes() != expected_bytes) return remote_error("peer segment " + name + " has a bad layout");
  return seg;
}

void ShmSegment::touch_as_sender(int sender) const {
  if (populate_flag(bytes_) == 0) return;
  for (int c = 0; c < layout_.channels; ++c) {
    auto* ring_begin = reinterpret_cast<uint8_t*>(&ring(layout_.ring_index(sender, c)));
    touch_pages(ring_begin, ring_begin + layout_.ring_bytes(), /*write=*/true);
  }
  auto* my_notice = reinterpret_cast<uint8_t*>(&notice(sender));
  touch_pages(my_notice, my_notice + sizeof(ShmNotice), /*write=*/true);
  touch_pages(base_, base_ + sizeof(SegmentHeader), /*write=*/false);
  if (layout_.staging_bytes > 0) touch_pages(staging(0), staging(0) + 2 * layout_.staging_bytes, /*write=*/false);
}

std::optional<ProcessStamp> ShmSegment::maker(int fd) {
  SegmentDescription h{};
  if (pread(fd, &h, sizeof h, 0) != static_cast<ssize_t>(sizeof h) || h.magic != kSegMagic)
    return std::nullopt;
  return ProcessStamp{h.maker_pid, h.maker_start_ticks, h.maker_pid_namespace};
}

bool ShmSegment::unfinished(int fd) {
  uint64_t magic = 0;
  ssize_t got = pread(fd, &magic, sizeof magic, 0);
  return got == 0 || (got == static_cast<ssize_t>(sizeof magic) && magic == 0);
}

ShmDoorbell& ShmSegment::doorbell() const { return reinterpret_cast<SegmentHeader*>(base_)->doorbell; }

Result<ShmSegment> ShmSegment::create_private(int rank, const Layout& layout) {
  uint64_t id = 0;
  random_bytes(&id, sizeof id);
  auto made = create(segment_name(id, rank, static_cast<int>(getpid())), layout);
  if (made.ok()) made.value().unlink();
  return made;
}

ShmRingControl& ShmSegment::ring(int ring_index) const {
  return *reinterpret_cast<ShmRingControl*>(base_ + sizeof(SegmentHeader) +
                                            static_cast<size_t>(ring_index) * layout_.ring_bytes());
}

ShmNotice& ShmSegment::notice(int sender) const {
  // After all rings; ring_bytes() is a multiple of 64 (slot headers are), so
  // each notice keeps its cache-line alignment.
  return *reinterpret_cast<ShmNotice*>(base_ + sizeof(SegmentHeader) +
                                       static_cast<size_t>(layout_.nranks) * layout_.channels * layout_.ring_bytes() +
                                       static_cast<size_t>(sender) * sizeof(ShmNotice));
}

ShmSlotHeader& ShmSegment::slot_header(int ring_index, uint64_t index) const {
  auto* ring_base = reinterpret_cast<uint8_t*>(&ring(ring_index));
  return *reinterpret_cast<ShmSlotHeader*>(ring_base + sizeof(ShmRingControl) +
                                           (index % layout_.nslots) * layout_.slot_stride());
}

uint8_t* ShmSegment::slot_data(int ring_index, uint64_t index) const {
  return reinterpret_cast<uint8_t*>(&slot_header(ring_index, index)) + sizeof(ShmSlotHeader);
}

uint64_t ShmSegment::owner_address(const void* inside) const {
  return reinterpret_cast<SegmentHeader*>(base_)->owner_base + static_cast<uint64_t>(static_cast<const uint8_t*>(inside) - base_);
}

ShmFlag& ShmSegment::flag() const { return reinterpret_cast<SegmentHeader*>(base_)->flag; }

ShmCallSig& ShmSegment::call_sig() const { return reinterpret_cast<SegmentHeader*>(base_)->call_sig; }

ShmExposure& ShmSegment::exposure() const { return reinterpret_cast<SegmentHeader*>(base_)->exposure; }

uint8_t* ShmSegment::staging(int half) const {
  if (layout_.staging_bytes == 0) return nullptr;
  return base_ + staging_begin(layout_) + static_cast<size_t>(half) * layout_.staging_bytes;
}

void ring_doorbell(ShmDoorbell& d) {
  // Dekker pairing with the sleeper: the caller's publish (release store)
  // precedes this seq_cst load; the sleeper sets `sleeping` before its last
  // check. At least one of the two sees the other.
  std::atomic_thread_fence(std::memory_order_seq_cst);
  if (d.sleeping.load(std::memory_order_relaxed) != 0) {
    d.bell.fetch_add(1, std::memory_order_seq_cst);
    syscall(SYS_futex, reinterpret_cast<uint32_t*>(&d.bell), FUTEX_WAKE, INT32_MAX, nullptr, nullptr, 0);
  }
}

}  // namespace conflux
