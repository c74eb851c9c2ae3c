// Fuzzes the root's side of the challenge-response: arbitrary bytes arrive
// on an accepted connection (a socketpair here, so no network) and
// authenticate_as_server() must fail cleanly without crashing, hanging or
// ever accepting: a proof that passes without the secret is a forgery.
#include "bootstrap/auth.h"
#include "transport/tcp/tcp_link.h"

#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>

using namespace conflux;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  int sv[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0) return 0;
  Socket server(sv[0]);
  // Socketpair buffers hold far more than max_len, so this never blocks.
  size_t off = 0;
  while (off < size) {
    ssize_t n = ::write(sv[1], data + off, size - off);
    if (n <= 0) break;
    off += static_cast<size_t>(n);
  }
  ::shutdown(sv[1], SHUT_WR);
  static const Secret secret = random_secret();
  const ConnKind kind = size > 0 && (data[0] & 1) ? ConnKind::kPeer : ConnKind::kRoot;
  Status st = authenticate_as_server(server, secret, kind, deadline_after_ms(1000));
  ::close(sv[1]);
  if (st.ok()) std::abort();  // random bytes proved a secret they cannot know
  return 0;
}
