/* Reference bandwidth for bench/compare: memcpy of SIZE bytes (default
 * 256 MiB) by one thread, then the same SIZE split between 2 threads.
 * Bandwidth is bytes copied / time (payload, as nccl-tests counts it; the
 * memory traffic is about twice that). Prints "memcpy threads=T GBps=X". */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

struct job { char* dst; const char* src; size_t len; int reps; pthread_barrier_t* bar; };

static void* worker(void* p) {
  struct job* j = p;
  for (int r = 0; r < j->reps; ++r) {
    pthread_barrier_wait(j->bar);
    memcpy(j->dst, j->src, j->len);
  }
  pthread_barrier_wait(j->bar);
  return NULL;
}

static double measure(char* dst, const char* src, size_t size, int threads, int reps) {
  pthread_barrier_t bar;
  pthread_barrier_init(&bar, NULL, (unsigned)threads + 1);
  pthread_t tid[16];
  struct job jobs[16];
  size_t per = size / (size_t)threads;
  for (int t = 0; t < threads; ++t) {
    jobs[t] = (struct job){dst + per * (size_t)t, src + per * (size_t)t, per, reps, &bar};
    pthread_create(&tid[t], NULL, worker, &jobs[t]);
  }
  pthread_barrier_wait(&bar); /* rep 0 starts: warm-up rep, not timed */
  double t0 = 0;
  for (int r = 1; r < reps; ++r) {
    pthread_barrier_wait(&bar);
    if (r == 1) t0 = now();
  }
  pthread_barrier_wait(&bar);
  double t = now() - t0;
  for (int i = 0; i < threads; ++i) pthread_join(tid[i], NULL);
  pthread_barrier_destroy(&bar);
  return (double)per * threads * (reps - 1) / t / 1e9;
}

int main(int argc, char** argv) {
  size_t size = argc > 1 ? strtoull(argv[1], NULL, 10) : (size_t)256 << 20;
  int reps = argc > 2 ? atoi(argv[2]) : 6;
  if (reps < 2) reps = 2;
  char* src = malloc(size);
  char* dst = malloc(size);
  if (!src || !dst) { fprintf(stderr, "memcpy_bench: out of memory\n"); return 1; }
  memset(src, 1, size);
  memset(dst, 0, size);
  printf("memcpy threads=1 bytes=%zu GBps=%.3f\n", size, measure(dst, src, size, 1, reps));
  printf("memcpy threads=2 bytes=%zu GBps=%.3f\n", size, measure(dst, src, size, 2, reps));
  free(src);
  free(dst);
  return 0;
}
