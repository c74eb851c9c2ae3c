/* Two processes pinned to CPUs 0 and 1 exchange BYTES each way per
 * iteration over one loopback TCP connection (4 MiB socket buffers,
 * nonblocking: send what fits, receive what came), each payload preceded by
 * a PREFIX of bytes in the same sendmsg, as a frame's header precedes it.
 * Buffers start SRC_OFFSET / DST_OFFSET bytes past a page.
 *
 * What it shows: the kernel copies a send into socket buffer pages at the
 * running offset of the thread's page fragment, so the prefix decides where
 * the payload lands relative to its source. On the AMD EPYC VMs of
 * bench/README.md a 16- or 40-byte prefix made the 2 MiB exchange 1.14-2.2x
 * slower than a 64-byte one (loads waiting on stores they seem to alias);
 * TcpLink pads its frames for that reason.
 *
 *   cc -O2 -o tcp_prefix_exchange bench/peers/tcp_prefix_exchange.c
 *   for p in 40 64; do ./tcp_prefix_exchange 2097152 300 16 16 $p; done
 *
 * Prints "bytes B src+S dst+D prefix P: T us/iter". */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double now_us(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

static void pin(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  sched_setaffinity(0, sizeof set, &set);
}

int main(int argc, char** argv) {
  if (argc < 6) {
    fprintf(stderr, "usage: %s BYTES ITERS SRC_OFFSET DST_OFFSET PREFIX\n", argv[0]);
    return 2;
  }
  const size_t n = strtoull(argv[1], NULL, 10), src_off = strtoull(argv[3], NULL, 10) % 4096,
               dst_off = strtoull(argv[4], NULL, 10) % 4096, prefix = strtoull(argv[5], NULL, 10);
  const int iters = atoi(argv[2]);
  if (prefix > 256 || iters < 1) return 2;

  int listener = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in addr = {0};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  if (bind(listener, (struct sockaddr*)&addr, sizeof addr) != 0 || getsockname(listener, (struct sockaddr*)&addr, &len) != 0 ||
      listen(listener, 1) != 0) {
    perror("listen");
    return 1;
  }
  const pid_t child = fork();
  int fd;
  if (child == 0) {
    fd = socket(AF_INET, SOCK_STREAM, 0);
    if (connect(fd, (struct sockaddr*)&addr, sizeof addr) != 0) return 1;
    pin(1);
  } else {
    fd = accept(listener, NULL, NULL);
    pin(0);
  }
  int buf = 4 << 20, one = 1;
  setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &buf, sizeof buf);
  setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &buf, sizeof buf);
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);

  char* src = (char*)aligned_alloc(4096, n + 4096) + src_off;
  char* dst = (char*)aligned_alloc(4096, n + 4096) + dst_off;
  memset(src, 1, n);
  memset(dst, 2, n);
  char head[256] = {0}, head_in[256];
  double start = 0;
  for (int it = -5; it < iters; ++it) {
    if (it == 0) start = now_us();
    size_t sent = 0, got_head = 0, got = 0;
    const size_t frame = prefix + n;
    while (sent < frame || got_head < prefix || got < n) {
      if (sent < frame) {
        struct iovec iov[2];
        int k = 0;
        if (sent < prefix) {
          iov[k++] = (struct iovec){head + sent, prefix - sent};
          iov[k++] = (struct iovec){src, n};
        } else {
          iov[k++] = (struct iovec){src + (sent - prefix), n - (sent - prefix)};
        }
        struct msghdr msg = {0};
        msg.msg_iov = iov;
        msg.msg_iovlen = k;
        const ssize_t x = sendmsg(fd, &msg, MSG_DONTWAIT);
        if (x > 0) {
          sent += (size_t)x;
          continue;
        }
      }
      if (got_head < prefix) {
        const ssize_t x = recv(fd, head_in + got_head, prefix - got_head, MSG_DONTWAIT);
        if (x > 0) got_head += (size_t)x;
        continue;
      }
      if (got < n) {
        const ssize_t x = recv(fd, dst + got, n - got, MSG_DONTWAIT);
        if (x > 0) got += (size_t)x;
      }
    }
  }
  const double us = (now_us() - start) / iters;
  if (child != 0) {
    int status;
    wait(&status);
    printf("bytes %zu src+%zu dst+%zu prefix %zu: %.1f us/iter\n", n, src_off, dst_off, prefix, us);
  }
  return 0;
}
