// One TCP stream over loopback at its fastest here: the reference for the
// loopback network rows of bench/compare. A sender bound to core 0 writes
// messages of MESSAGE bytes, each with one nonblocking send loop; a
// receiver bound to core 1 (a forked process, as a rank is) reads them
// with nonblocking receives that never sleep, as the TCP paths of conflux
// and Open MPI do. Large sends and a receiver that never waits for a
// wake-up beat iperf3 here (3.0-3.3 GB/s with 1 MiB blocks against 4-5.6).
//
//   tcp_stream MESSAGE SECONDS
//
// Prints "GBps=<goodput>" over the messages sent after a first 20% of
// SECONDS (warm-up: connection slow start, buffer autotuning).
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static void pin(int core) {
  cpu_set_t s;
  CPU_ZERO(&s);
  CPU_SET(core, &s);
  (void)sched_setaffinity(0, sizeof s, &s);  // one core machine: both share it
}

static int transfer(int fd, char* p, size_t n, int sending) {
  while (n > 0) {
    const ssize_t k = sending ? send(fd, p, n, MSG_DONTWAIT | MSG_NOSIGNAL) : recv(fd, p, n, MSG_DONTWAIT);
    if (k > 0) {
      p += k;
      n -= (size_t)k;
    } else if (k == 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
      return -1;
    }
  }
  return 0;
}

int main(int argc, char** argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: %s MESSAGE SECONDS\n", argv[0]);
    return 2;
  }
  const size_t message = strtoul(argv[1], NULL, 0);
  const double seconds = atof(argv[2]);
  char* buf = aligned_alloc(4096, (message + 4095) / 4096 * 4096);
  if (!buf || message == 0) return 1;
  memset(buf, 1, message);
  const int one = 1;
  int ls = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a = {0};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  if (bind(ls, (struct sockaddr*)&a, sizeof a) != 0 || getsockname(ls, (struct sockaddr*)&a, &len) != 0 ||
      listen(ls, 1) != 0) {
    perror("listen");
    return 1;
  }
  const pid_t child = fork();
  if (child == 0) {  // the receiver: reads until the sender closes
    pin(1);
    const int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (connect(fd, (struct sockaddr*)&a, sizeof a) != 0) _exit(1);
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    while (transfer(fd, buf, message, 0) == 0) {
    }
    _exit(0);
  }
  pin(0);
  const int fd = accept(ls, NULL, NULL);
  if (fd < 0) {
    perror("accept");
    return 1;
  }
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  const double start = now_s(), warm = start + 0.2 * seconds;
  double t0 = 0;
  size_t counted = 0;
  for (;;) {
    const double t = now_s();
    if (t0 == 0 && t >= warm) t0 = t;
    if (t - start >= seconds) break;
    if (transfer(fd, buf, message, 1) != 0) {
      perror("send");
      kill(child, SIGKILL);
      return 1;
    }
    if (t0 > 0) counted += message;
  }
  const double took = now_s() - t0;
  close(fd);
  waitpid(child, NULL, 0);
  printf("stream message=%zu GBps=%.3f\n", message, (double)counted / took / 1e9);
  return 0;
}
