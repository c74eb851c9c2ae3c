// Copying bytes between buffers the way the data path does it: memcpy,
// except where glibc's memcpy is pathologically slow.
//
// glibc copies 2 KiB to 512 KiB with `rep movsb` on CPUs that report fast
// short `rep movsb` (FSRM). On the AMD EPYC machines measured here (glibc
// 2.36), a `rep movsb` whose destination lies 1-63 bytes past its source
// modulo 4 KiB copies at 2-3 GB/s instead of 35-45: each load waits on the
// stores just before it, which its address seems to alias. glibc avoids
// that case only on CPUs it flags (Avoid_Short_Distance_REP_MOVSB, Intel).
// Buffers meet at such offsets all the time: a heap buffer 16 bytes past a
// page receiving into a page-aligned shared-memory slot, a row of one
// tensor copied into another. copy_bytes then copies with 16-byte vector
// loads and stores (29-37 GB/s at 64-256 KiB in the same measurement).
#pragma once

#include <cstddef>
#include <cstdint>

namespace conflux {

// How many bytes dst lies past src modulo 4 KiB: what decides whether a
// `rep movsb` between them stalls.
inline size_t page_distance(const void* dst, const void* src) {
  return (reinterpret_cast<uintptr_t>(dst) - reinterpret_cast<uintptr_t>(src)) & 4095;
}

// dst and src must not overlap (as memcpy).
void copy_bytes(void* dst, const void* src, size_t bytes);

// As memmove: the ranges may overlap.
void move_bytes(void* dst, const void* src, size_t bytes);

}  // namespace conflux
