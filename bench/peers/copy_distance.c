/* memcpy against a 16-byte vector loop (what src/core/copy.cpp does at
 * short distances), for sizes 4 KiB-1 MiB, with the destination at several
 * distances past the source modulo 4 KiB. Best of 300 copies each, GB/s.
 *
 * On the AMD EPYC VMs of bench/README.md (glibc 2.36, which copies
 * 2 KiB-512 KiB with `rep movsb`), memcpy ran at 2.1-3.1 GB/s at distances
 * 8 and 16 against 35-45 GB/s at 0, 48 and 64; the vector loop at 29-37.
 *
 *   cc -O2 -o copy_distance bench/peers/copy_distance.c && ./copy_distance
 */
#include <emmintrin.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now_us(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

static void copy_vectors(char* dst, const char* src, size_t n) {
  size_t i = 0;
  for (; i + 64 <= n; i += 64) {
    __m128i a = _mm_loadu_si128((const __m128i*)(src + i)), b = _mm_loadu_si128((const __m128i*)(src + i + 16));
    __m128i c = _mm_loadu_si128((const __m128i*)(src + i + 32)), d = _mm_loadu_si128((const __m128i*)(src + i + 48));
    _mm_storeu_si128((__m128i*)(dst + i), a);
    _mm_storeu_si128((__m128i*)(dst + i + 16), b);
    _mm_storeu_si128((__m128i*)(dst + i + 32), c);
    _mm_storeu_si128((__m128i*)(dst + i + 48), d);
  }
  memcpy(dst + i, src + i, n - i);
}

int main(void) {
  const size_t sizes[] = {4096, 65536, 262144, 1048576};
  const int gaps[] = {0, 8, 16, 48, 64, -16};
  const size_t arena = (1 << 21) + 8192;
  char* a = aligned_alloc(4096, arena);
  char* b = aligned_alloc(4096, arena);
  memset(a, 1, arena);
  memset(b, 2, arena);
  for (size_t si = 0; si < sizeof sizes / sizeof sizes[0]; ++si) {
    for (size_t gi = 0; gi < sizeof gaps / sizeof gaps[0]; ++gi) {
      const size_t n = sizes[si];
      char* src = a + 64;
      char* dst = b + 64 + gaps[gi];
      double best[2] = {1e30, 1e30};
      for (int r = 0; r < 300; ++r) {
        for (int m = 0; m < 2; ++m) {
          const double t0 = now_us();
          if (m == 0) memcpy(dst, src, n);
          else copy_vectors(dst, src, n);
          const double t = now_us() - t0;
          if (t < best[m]) best[m] = t;
          __asm__ volatile("" ::"r"(dst) : "memory");
        }
      }
      if (memcmp(dst, src, n) != 0) return 1;
      printf("bytes %7zu distance %3d: memcpy %5.1f GB/s, vector loop %5.1f GB/s\n", n, gaps[gi], n / best[0] / 1e3,
             n / best[1] / 1e3);
    }
  }
  return 0;
}
