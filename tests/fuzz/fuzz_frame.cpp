// Fuzzes the TCP frame path as a receiver sees it: the first bytes choose
// what this rank expects (signature, length, copy or reduce), the rest
// arrive on the socket (a socketpair) as if sent by the peer, and
// TcpLink::progress_recv() runs messages until it errors or starves. Frame
// headers, heartbeat skipping, check_incoming()'s mismatch messages (which
// describe() wire values) and the reduce bounce buffer are all covered.
// Invariants: never more bytes written than the receive asked for, no crash.
#include "transport/tcp/tcp_link.h"

#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <vector>

using namespace conflux;

namespace {
void add_bytes(void* dst, const void* a, const void* b, size_t count) {
  auto* d = static_cast<uint8_t*>(dst);
  auto* x = static_cast<const uint8_t*>(a);
  auto* y = static_cast<const uint8_t*>(b);
  for (size_t i = 0; i < count; ++i) d[i] = static_cast<uint8_t>(x[i] + y[i]);
}
void add_u32(void* dst, const void* a, const void* b, size_t count) {
  for (size_t i = 0; i < count; ++i) {
    uint32_t x, y;
    std::memcpy(&x, static_cast<const uint8_t*>(a) + 4 * i, 4);
    std::memcpy(&y, static_cast<const uint8_t*>(b) + 4 * i, 4);
    x += y;
    std::memcpy(static_cast<uint8_t*>(dst) + 4 * i, &x, 4);
  }
}
struct Config {
  OpSig sig;
  uint16_t bytes;
  uint8_t mode;
  uint8_t bounce;
};
}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  TcpLink::set_heartbeats_enabled(false);  // deterministic: no thread writing
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  Config cfg;
  if (size < sizeof cfg) return 0;
  std::memcpy(&cfg, data, sizeof cfg);
  data += sizeof cfg;
  size -= sizeof cfg;
  int sv[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0) return 0;
  size_t off = 0;
  while (off < size) {
    ssize_t n = ::write(sv[1], data + off, size - off);
    if (n <= 0) break;
    off += static_cast<size_t>(n);
  }
  ::shutdown(sv[1], SHUT_WR);
  {
    TcpLink link(Socket(sv[0]), 3, 1 + cfg.bounce % 64);
    const size_t bytes = cfg.bytes % 2048;
    const bool reduce = cfg.mode & 1;
    const size_t elem = (cfg.mode & 2) ? 4 : 1;
    const size_t expect = reduce ? bytes / elem * elem : bytes;
    // Guard bytes after the destination catch any overrun without ASan too.
    std::vector<uint8_t> dst(expect + 16, 0xA5), with(expect + 1, 1);
    for (int msg = 0; msg < 8; ++msg) {
      RecvOp op;
      op.dst = dst.data();
      op.bytes = expect;
      op.sig = cfg.sig;
      op.sig.seq += static_cast<uint32_t>(msg);
      if (reduce) {
        op.reduce_with = with.data();
        op.reduce = elem == 4 ? add_u32 : add_bytes;
        op.elem_size = elem;
      }
      Status st;
      for (int spin = 0; spin < 64 && st.ok() && !op.complete; ++spin) {
        bool progressed = false;
        st = link.progress_recv(op, &progressed);
        if (!progressed) break;
      }
      if (op.done > op.bytes) std::abort();
      for (size_t i = expect; i < dst.size(); ++i)
        if (dst[i] != 0xA5) std::abort();
      if (!st.ok() || !op.complete) break;
    }
    (void)link.check_peer();
  }
  ::close(sv[1]);
  return 0;
}
