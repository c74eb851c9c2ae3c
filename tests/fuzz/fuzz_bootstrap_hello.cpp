// Fuzzes what the bootstrap root accepts from authenticated clients: a
// stream of RankHello records fed to admit_hello() in order, as the root
// sees successive connections. Invariants: nranks never changes once fixed,
// every admitted rank is in range and admitted once, and an admitted info is
// safe to read (terminated names, lengths within their arrays).
#include "bootstrap/bootstrap.h"

#include <cstdint>
#include <cstdlib>
#include <cstring>

using namespace conflux;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  // Bit 0 of the first byte repairs magic and size so the fuzzer spends its
  // time past the cheap checks too.
  const bool repair = data[0] & 1;
  ++data;
  --size;
  RootAdmission state;
  int admitted = 0;
  while (size > 0) {
    RankHello h;
    std::memset(&h, 0, sizeof h);
    size_t n = size < sizeof h ? size : sizeof h;
    std::memcpy(&h, data, n);
    data += n;
    size -= n;
    if (repair) {
      h.magic = kRankHelloMagic;
      h.info_size = sizeof(RankInfo);
      h.nranks = h.nranks % 64;
    }
    const int before = state.nranks;
    RankInfo info;
    Result<int> r = admit_hello(h, state, &info);
    if (before >= 0 && state.nranks != before) std::abort();
    if (!r.ok()) continue;
    int rank = *r;
    if (rank < 0 || rank >= state.nranks || !state.joined[rank] || info.rank != rank) std::abort();
    if (std::strlen(info.hostname) >= sizeof info.hostname || std::strlen(info.nic) >= sizeof info.nic ||
        std::strlen(info.shm_name) >= sizeof info.shm_name || info.listen_len > sizeof info.listen_addr)
      std::abort();
    if (++admitted > state.nranks) std::abort();
  }
  return 0;
}
