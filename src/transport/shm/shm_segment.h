// A rank's shared-memory segment: one receive ring per possible sender, a
// doorbell (futex word) that peers ring when they give this rank work, a
// failure notice per sender, and what one-sided steps need of this rank:
// its flag, the addresses of its buffers in the current call, and its
// staging area (two halves). Each ring is a single-producer
// single-consumer queue of fixed-size slots; the head (consumer) and tail
// (producer) counters sit on their own cache lines.
#pragma once

#include "core/coll.h"
#include "core/shared_mem.h"
#include "core/status.h"
#include "transport/shm/stale_files.h"

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

namespace conflux {

struct alignas(64) ShmDoorbell {
  std::atomic<uint32_t> bell{0};
  char pad0[60];
  std::atomic<uint32_t> sleeping{0};
  char pad1[60];
};

struct ShmSlotHeader {
  uint64_t msg_bytes;   // length of the whole message
  uint32_t piece_bytes; // bytes of it in this slot
  uint32_t reserved;
  OpSig sig;
  char pad[64 - 16 - sizeof(OpSig)];
};
static_assert(sizeof(ShmSlotHeader) == 64);

// A failure notice from one sender (Link::send_notice): written once, then
// `posted` is released; the owner's check_peer() reads it.
struct alignas(64) ShmNotice {
  std::atomic<uint32_t> posted{0};
  int32_t code = 0;
  char text[512 - 8];
};
static_assert(sizeof(ShmNotice) == 512);

// This rank's flag (transport/peer_memory.h, flag_value): the call's
// epoch, a hash of its signature and the signals made in it, in one word
// peers poll. The full signature sits on a line of its own, read only to
// describe a mismatch.
//
// Beside the word, a small staging half per call parity: a call that
// stages at most kFlagLineStagingBytes stages them here instead of in the
// staging area, so the peer's poll that sees the flag brings the data in
// the same cache-line transfer (one miss per call instead of two; a
// 2-process 8-byte exchange: 0.15 us against 0.27 us per round). A rank
// rewrites a half only two staging calls later, after every peer has
// signalled in the call between, as for the staging area's halves.
inline constexpr size_t kFlagLineStagingBytes = 24;
struct alignas(64) ShmFlag {
  std::atomic<uint64_t> value{0};
  uint8_t staging[2][kFlagLineStagingBytes] = {};
};
static_assert(sizeof(ShmFlag) == 64, "the flag and its small staging halves share one cache line");
struct alignas(64) ShmCallSig {
  std::atomic<uint64_t> epoch{0};
  OpSig sig;
};

// The buffers of this rank's current one-sided call, written before its
// first signal of the call: peers read them only after seeing that signal,
// and this rank rewrites them only in a later call, after every peer that
// touched its buffers has said it is done.
struct alignas(64) ShmExposure {
  // 0 while the owner rewrites the rest.
  std::atomic<uint64_t> epoch{0};
  uint64_t addr[2] = {0, 0};     // send, receive buffer (this process's addresses)
  uint64_t bytes[2] = {0, 0};    // how far peers may reach into each
  SharedRegionRef region[2];     // the cfxMemAlloc region each lies in (id 0: none)
};

struct ShmRingControl {
  alignas(64) std::atomic<uint64_t> head{0};  // slots consumed (written by the receiver)
  alignas(64) std::atomic<uint64_t> tail{0};  // slots published (written by the sender)
};

class ShmSegment {
 public:
  struct Layout {
    int nranks = 0;
    int nslots = 0;
    size_t slot_bytes = 0;
    int channels = 1;  // rings per sender (multi-channel schedules, CONFLUX_TCP_CHANNELS)
    size_t staging_bytes = 0;  // each of the two staging halves
    size_t slot_stride() const { return sizeof(ShmSlotHeader) + slot_bytes; }
    size_t ring_bytes() const { return sizeof(ShmRingControl) + nslots * slot_stride(); }
    size_t total_bytes() const;
    // The ring that carries `sender`'s messages on `channel`.
    int ring_index(int sender, int channel) const { return sender + channel * nranks; }
  };

  ShmSegment() = default;
  ShmSegment(ShmSegment&& o) noexcept;
  ShmSegment& operator=(ShmSegment&& o) noexcept;
  ~ShmSegment();

  static Result<ShmSegment> create(const std::string& name, const Layout& layout);
  // A segment only this process maps (a measurement's or a test's, both
  // ends of its rings in threads): named as `rank`'s segment of a random
  // communicator id, so a crash before the unlink leaves a file the
  // stale-file sweep recognises, and unlinked at once (the mapping stays).
  static Result<ShmSegment> create_private(int rank, const Layout& layout);
  static Result<ShmSegment> open(const std::string& name, size_t expected_bytes);
  void unlink();  // removes the name; mappings stay valid
  // In a peer's segment, accesses once each page that `sender` uses: its
  // rings (every channel) and its notice, which it writes, and the header
  // and staging halves, which it reads. A page's first access through a
  // mapping can cost microseconds (shm_segment.cpp, touch_pages): paid here,
  // at set-up, not by the first calls. Nothing in a segment too large to
  // have been populated.
  void touch_as_sender(int sender) const;
  // Who created the segment open as `fd` (read from its header); nullopt
  // when it is not an initialised segment.
  static std::optional<ProcessStamp> maker(int fd);
  // Whether the file open as `fd` is a segment its creator has not finished
  // writing: empty, or its header's magic (written last) still 0.
  static bool unfinished(int fd);

  const Layout& layout() const { return layout_; }
  ShmDoorbell& doorbell() const;
  // Rings by Layout::ring_index; notices by sender.
  ShmRingControl& ring(int ring_index) const;
  ShmNotice& notice(int sender) const;
  ShmSlotHeader& slot_header(int ring_index, uint64_t index) const;
  uint8_t* slot_data(int ring_index, uint64_t index) const;
  ShmFlag& flag() const;
  ShmCallSig& call_sig() const;
  // The address the segment's creator sees for `inside`, a location in our mapping.
  uint64_t owner_address(const void* inside) const;
  ShmExposure& exposure() const;
  uint8_t* staging(int half) const;

 private:
  uint8_t* base_ = nullptr;
  size_t bytes_ = 0;
  std::string name_;
  bool owner_ = false;
  Layout layout_;
};

// Wakes the segment's owner if it sleeps on its doorbell.
void ring_doorbell(ShmDoorbell& d);

}  // namespace conflux
