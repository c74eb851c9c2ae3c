#include "algo/exchange.h"

#include "algo/compose.h"

#include <utility>
#include <vector>

namespace conflux::algo {

Schedule exchange_schedule(int peer, size_t bytes, int rounds, int flows) {
  Schedule s;
  std::vector<int> prev;
  for (int i = 0; i < rounds; ++i) {
    std::vector<int> received;
    for (int c = 0; c < flows; ++c) {
      const size_t off = part_begin(bytes, flows, c), len = part_size(bytes, flows, c);
      Step send = send_step(peer, Slice{kSendBuf, off, len});
      Step recv = make_step(StepKind::kRecv, peer);
      recv.dst = Slice{kRecvBuf, off, len};
      send.channel = recv.channel = static_cast<uint8_t>(c);
      add_after(s, send, prev);
      received.push_back(add_after(s, recv, prev));
    }
    prev = std::move(received);
  }
  return s;
}

}  // namespace conflux::algo
