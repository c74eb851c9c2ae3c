// Where the two cores a 2-rank job runs on sit relative to each other, over
// time: a cache line's one-way hand-off between two pinned threads, and the
// rate of a one-way stream through shared-memory slots between them (the
// shape of the shm transport: 64 KiB slots, 4 in flight, 256 KiB messages).
// On a VM whose vCPUs are not pinned the host moves them between its
// cores, and both numbers move with them.
//
//   core_handoff SECONDS GAP_MS [CORE_A CORE_B]
//
// One line per window: seconds since the start, the median one-way hand-off
// of the window in ns, the stream's rate in GB/s. Between windows both
// threads sleep GAP_MS (0: none), as the cores of a machine between
// launches do.
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { kRoundTrips = 1000, kSlot = 64 << 10, kSlots = 4, kMessage = 256 << 10, kMessages = 32 };

static _Alignas(64) atomic_int ping;
static _Alignas(64) atomic_int pong;
static _Alignas(64) atomic_uint_fast64_t head;  // slots the receiver has emptied
static _Alignas(64) atomic_uint_fast64_t tail;  // slots the sender has filled
static _Alignas(64) atomic_int phase;           // window number the receiver may start
static char *slots, *from, *to;
static int core_a, core_b, gap_ms;

static double now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec * 1e9 + (double)t.tv_nsec;
}

static int pin(int core) {
  cpu_set_t s;
  CPU_ZERO(&s);
  CPU_SET(core, &s);
  return pthread_setaffinity_np(pthread_self(), sizeof s, &s);
}

// The receiver's side of one window: answer the hand-offs, then empty the
// stream's slots.
static void receive_window(int base) {
  for (int i = 1; i <= kRoundTrips; ++i) {
    while (atomic_load_explicit(&ping, memory_order_acquire) != base + i) {
    }
    atomic_store_explicit(&pong, base + i, memory_order_release);
  }
  uint_fast64_t h = atomic_load(&head);
  for (int m = 0; m < kMessages; ++m)
    for (size_t done = 0; done < kMessage; done += kSlot) {
      while (atomic_load_explicit(&tail, memory_order_acquire) == h) {
      }
      memcpy(to + done, slots + (h % kSlots) * kSlot, kSlot);
      atomic_store_explicit(&head, ++h, memory_order_release);
    }
}

static void* receiver(void* arg) {
  (void)arg;
  if (pin(core_b) != 0) return NULL;
  const struct timespec nap = {0, 50000};
  for (int w = 0;; ++w) {  // until the process exits
    while (atomic_load_explicit(&phase, memory_order_acquire) != w + 1)
      if (gap_ms > 0) nanosleep(&nap, NULL);  // between windows its core idles too
    receive_window(w * kRoundTrips);
  }
  return NULL;
}

static int cmp_double(const void* x, const void* y) {
  const double a = *(const double*)x, b = *(const double*)y;
  return a < b ? -1 : a > b;
}

int main(int argc, char** argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: %s SECONDS GAP_MS [CORE_A CORE_B]\n", argv[0]);
    return 2;
  }
  const double seconds = atof(argv[1]);
  gap_ms = atoi(argv[2]);
  core_a = argc > 4 ? atoi(argv[3]) : 0;
  core_b = argc > 4 ? atoi(argv[4]) : 1;
  slots = aligned_alloc(4096, (size_t)kSlots * kSlot);
  from = aligned_alloc(4096, kMessage);
  to = aligned_alloc(4096, kMessage);
  if (!slots || !from || !to) return 1;
  memset(slots, 0, (size_t)kSlots * kSlot);
  memset(from, 1, kMessage);
  memset(to, 2, kMessage);
  if (pin(core_a) != 0) {
    fprintf(stderr, "cannot pin to core %d\n", core_a);
    return 1;
  }
  pthread_t rx;
  pthread_create(&rx, NULL, receiver, NULL);
  const double start = now_ns();
  uint_fast64_t t = 0;
  for (int w = 0; (now_ns() - start) / 1e9 < seconds; ++w) {
    atomic_store_explicit(&phase, w + 1, memory_order_release);
    const int base = w * kRoundTrips;
    double trips[kRoundTrips / 100];
    for (int k = 0; k < kRoundTrips / 100; ++k) {  // the window's median over batches of 100
      const double t0 = now_ns();
      for (int i = k * 100 + 1; i <= (k + 1) * 100; ++i) {
        atomic_store_explicit(&ping, base + i, memory_order_release);
        while (atomic_load_explicit(&pong, memory_order_acquire) != base + i) {
        }
      }
      trips[k] = (now_ns() - t0) / 200;
    }
    qsort(trips, kRoundTrips / 100, sizeof trips[0], cmp_double);
    const double s0 = now_ns();
    for (int m = 0; m < kMessages; ++m)
      for (size_t done = 0; done < kMessage; done += kSlot) {
        while (t - atomic_load_explicit(&head, memory_order_acquire) >= kSlots) {
        }
        memcpy(slots + (t % kSlots) * kSlot, from + done, kSlot);
        atomic_store_explicit(&tail, ++t, memory_order_release);
      }
    while (atomic_load_explicit(&head, memory_order_acquire) != t) {
    }
    const double gbps = (double)kMessages * kMessage / (now_ns() - s0);
    printf("%.3f %.0f %.2f\n", (s0 - start) / 1e9, trips[kRoundTrips / 200], gbps);
    fflush(stdout);
    if (gap_ms > 0) {
      const struct timespec gap = {gap_ms / 1000, (long)(gap_ms % 1000) * 1000000L};
      nanosleep(&gap, NULL);
    }
  }
  return 0;  // the receiver, waiting for a window that never comes, ends with the process
}
