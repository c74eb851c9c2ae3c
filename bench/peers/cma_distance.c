/* process_vm_readv between two processes with the destination at several
 * distances past the source modulo 4 KiB, and the same read through a
 * bounce buffer at the source's offset in 128 KiB pieces, each copied on
 * with a 16-byte vector loop (what src/transport/shm/kernel_copies.cpp
 * does at the slow distances). Best of 15 reads each, GB/s.
 *
 * On the AMD EPYC VMs of bench/README.md (kernel 6.18), the kernel's copy
 * ran at 1.3-1.6 GB/s at distances 1-31 against 4.7-8.8 at 0 and 32-4064;
 * through the bounce, 3.6-6.2.
 *
 *   cc -O2 -o cma_distance bench/peers/cma_distance.c && ./cma_distance
 */
#define _GNU_SOURCE
#include <emmintrin.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double now_us(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

static void copy_vectors(char* dst, const char* src, size_t n) {
  size_t i = 0;
  for (; i + 16 <= n; i += 16) _mm_storeu_si128((__m128i*)(dst + i), _mm_loadu_si128((const __m128i*)(src + i)));
  memcpy(dst + i, src + i, n - i);
}

#define PIECE (128 << 10)

/* The child reads the parent's `src` into its own `dst + distance`. */
static double read_gbps(pid_t parent, const char* src, char* dst, char* bounce, size_t n, int distance, int bounced) {
  double best = 1e30;
  for (int r = 0; r < 15; ++r) {
    const double t0 = now_us();
    if (!bounced) {
      struct iovec l = {dst + distance, n}, rr = {(void*)src, n};
      if (process_vm_readv(parent, &l, 1, &rr, 1, 0) != (ssize_t)n) return 0;
    } else {
      for (size_t off = 0; off < n; off += PIECE) {
        const size_t m = n - off < PIECE ? n - off : PIECE;
        struct iovec l = {bounce, m}, rr = {(void*)(src + off), m};
        if (process_vm_readv(parent, &l, 1, &rr, 1, 0) != (ssize_t)m) return 0;
        copy_vectors(dst + distance + off, bounce, m);
      }
    }
    const double t = now_us() - t0;
    if (t < best) best = t;
  }
  return n / 1e3 / best;
}

int main(void) {
  static const size_t sizes[] = {16 << 10, 256 << 10, 4 << 20};
  static const int distances[] = {0, 1, 8, 16, 31, 32, 48, 64, 4064};
  const size_t most = 4 << 20;
  char* src = aligned_alloc(4096, most + 8192);
  char* dst = aligned_alloc(4096, most + 8192);
  char* bounce = aligned_alloc(4096, PIECE);
  if (!src || !dst || !bounce) return 1;
  memset(src, 1, most + 8192);
  memset(dst, 2, most + 8192);
  memset(bounce, 0, PIECE);
  /* Let the child read us where ptrace rules (Yama) would refuse it. */
  prctl(PR_SET_PTRACER, PR_SET_PTRACER_ANY);
  const pid_t parent = getpid();
  const pid_t child = fork();
  if (child < 0) return 1;
  if (child == 0) {
    printf("# process_vm_readv, child reads parent, GB/s (best of 15)\n");
    printf("%10s %8s %10s %10s\n", "bytes", "distance", "direct", "bounced");
    for (size_t s = 0; s < sizeof sizes / sizeof *sizes; ++s)
      for (size_t d = 0; d < sizeof distances / sizeof *distances; ++d)
        printf("%10zu %8d %10.2f %10.2f\n", sizes[s], distances[d],
               read_gbps(parent, src, dst, bounce, sizes[s], distances[d], 0),
               read_gbps(parent, src, dst, bounce, sizes[s], distances[d], 1));
    fflush(stdout);
    _exit(0);
  }
  int status = 0;
  waitpid(child, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}
