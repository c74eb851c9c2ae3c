// A growable buffer in shared memory (the cfxMemAlloc allocator), for
// buffers the library owns and same-host peers reach in place: a peer's
// one-sided reads and writes of it are copies through a mapping instead of
// process_vm_readv/writev, which pin and look up every page they touch.
// Where shared memory cannot be had, it falls back to the heap (peers then
// reach it through the kernel, as any buffer).
#pragma once

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

namespace conflux {

class SharedBytes {
 public:
  SharedBytes() = default;
  SharedBytes(const SharedBytes&) = delete;
  SharedBytes& operator=(const SharedBytes&) = delete;
  SharedBytes(SharedBytes&& other) noexcept { *this = std::move(other); }
  SharedBytes& operator=(SharedBytes&& other) noexcept;
  ~SharedBytes() { release(); }

  // Makes size() `bytes`. Contents are not kept when the buffer has to
  // grow: callers fill it afresh. Growth is geometric, so a buffer reused
  // from call to call settles on one region (peers keep one mapping of it).
  void resize(size_t bytes);
  // Makes the capacity at least `bytes` in shared memory, so that resize()
  // up to it never moves the buffer (contents are not kept). Pages are
  // committed only where written: reserving the worst case costs address
  // space, not memory. Where shared memory cannot be had it does nothing
  // (resize() then grows on the heap as before).
  void reserve(size_t bytes);
  uint8_t* data() const { return at_; }
  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }

 private:
  void release();

  uint8_t* at_ = nullptr;
  size_t size_ = 0, capacity_ = 0;
  bool shared_ = false;  // at_ is from shared_mem_alloc (else from the heap, heap_)
  std::vector<uint8_t> heap_;
};

}  // namespace conflux
