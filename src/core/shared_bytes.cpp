#include "core/shared_bytes.h"

#include "core/log.h"
#include "core/shared_mem.h"

#include <utility>

namespace conflux {

SharedBytes& SharedBytes::operator=(SharedBytes&& other) noexcept {
  if (this == &other) return *this;
  release();
  at_ = other.at_;
  size_ = other.size_;
  capacity_ = other.capacity_;
  shared_ = other.shared_;
  heap_ = std::move(other.heap_);
  other.at_ = nullptr;
  other.size_ = other.capacity_ = 0;
  other.shared_ = false;
  return *this;
}

void SharedBytes::release() {
  if (shared_ && at_ != nullptr) {
    if (Status st = shared_mem_free(at_); !st.ok()) CFX_WARN(kColl, "freeing a shared row buffer: %s", st.message().c_str());
  }
  at_ = nullptr;
  size_ = capacity_ = 0;
  shared_ = false;
  heap_ = std::vector<uint8_t>();
}

void SharedBytes::resize(size_t bytes) {
  if (bytes <= capacity_) {
    size_ = bytes;
    return;
  }
  release();
  const size_t want = bytes + bytes / 4;  // room to grow into
  if (Result<void*> p = shared_mem_alloc(want); p.ok()) {
    at_ = static_cast<uint8_t*>(p.value());
    shared_ = true;
  } else {
    heap_.resize(want);
    at_ = heap_.data();
  }
  capacity_ = want;
  size_ = bytes;
}

void SharedBytes::reserve(size_t bytes) {
  if (bytes <= capacity_) return;
  Result<void*> p = shared_mem_alloc(bytes);
  if (!p.ok()) return;
  release();
  at_ = static_cast<uint8_t*>(p.value());
  shared_ = true;
  capacity_ = bytes;
}

}  // namespace conflux
