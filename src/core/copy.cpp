#include "core/copy.h"

#include <cstdint>
#include <cstring>

#if defined(__x86_64__)
#include <emmintrin.h>
#endif

namespace conflux {
namespace {

// Below this glibc does not use `rep movsb` (its threshold is 2 KiB or more).
constexpr size_t kVectorFrom = 1024;

// Whether dst lies 1-63 bytes past src modulo 4 KiB: the distances at which
// `rep movsb` stalls.
bool short_distance(const void* dst, const void* src) {
  const size_t gap = page_distance(dst, src);
  return gap != 0 && gap < 64;
}

#if defined(__x86_64__)
void copy_vectors(uint8_t* dst, const uint8_t* src, size_t bytes) {
  size_t i = 0;
  for (; i + 64 <= bytes; i += 64) {
    const __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i));
    const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i + 16));
    const __m128i c = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i + 32));
    const __m128i d = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i + 48));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i), a);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i + 16), b);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i + 32), c);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i + 48), d);
  }
  std::memcpy(dst + i, src + i, bytes - i);  // under 64 bytes: no `rep movsb`
}
#endif

}  // namespace

void copy_bytes(void* dst, const void* src, size_t bytes) {
#if defined(__x86_64__)
  if (bytes >= kVectorFrom && short_distance(dst, src)) {
    copy_vectors(static_cast<uint8_t*>(dst), static_cast<const uint8_t*>(src), bytes);
    return;
  }
#endif
  std::memcpy(dst, src, bytes);
}

void move_bytes(void* dst, const void* src, size_t bytes) {
  const auto d = reinterpret_cast<uintptr_t>(dst), s = reinterpret_cast<uintptr_t>(src);
  const bool overlap = d < s + bytes && s < d + bytes;
  if (overlap) std::memmove(dst, src, bytes);
  else copy_bytes(dst, src, bytes);
}

}  // namespace conflux
