// Mutual challenge-response over a fresh TCP connection: each side proves it
// knows the communicator's secret (HMAC-SHA256 of the other's nonce) without
// ever sending the secret. Comparisons are constant-time.
#pragma once

#include "bootstrap/socket.h"

#include <array>
#include <cstdint>

namespace conflux {

using Secret = std::array<uint8_t, 32>;
Secret random_secret();
void random_bytes(void* out, size_t n);

// Purpose of a connection; part of the MAC so a peer connection cannot be
// replayed against the root and vice versa.
enum class ConnKind : uint16_t { kRoot = 1, kPeer = 2 };

// Client side (the connecting process). Fails on a wrong proof or timeout.
Status authenticate_as_client(const Socket& s, const Secret& secret, ConnKind kind, Deadline deadline);
// Server side (the accepting process).
Status authenticate_as_server(const Socket& s, const Secret& secret, ConnKind kind, Deadline deadline);

}  // namespace conflux
