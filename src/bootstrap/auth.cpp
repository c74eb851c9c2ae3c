#include "bootstrap/auth.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

#include <cstring>
#include <fstream>

namespace conflux {
namespace {

constexpr uint32_t kHelloMagic = 0x43465831;  // "CFX1"
constexpr uint16_t kProtocolVersion = 1;
constexpr size_t kNonce = 16;
constexpr size_t kMac = 32;

struct ClientHello {
  uint32_t magic;
  uint16_t version;
  uint16_t kind;
  uint8_t nonce[kNonce];
};
struct ServerHello {
  uint32_t magic;
  uint16_t version;
  uint16_t kind;
  uint8_t nonce[kNonce];
  uint8_t mac[kMac];  // proves the server knows the secret
};

using Mac = std::array<uint8_t, kMac>;

Mac compute_mac(const Secret& secret, char role, ConnKind kind, const uint8_t* first, const uint8_t* second) {
  uint8_t msg[1 + 2 + 2 * kNonce];
  msg[0] = static_cast<uint8_t>(role);
  uint16_t k = static_cast<uint16_t>(kind);
  std::memcpy(msg + 1, &k, 2);
  std::memcpy(msg + 3, first, kNonce);
  std::memcpy(msg + 3 + kNonce, second, kNonce);
  Mac mac{};
  unsigned int len = 0;
  HMAC(EVP_sha256(), secret.data(), static_cast<int>(secret.size()), msg, sizeof msg, mac.data(), &len);
  return mac;
}

}  // namespace

void random_bytes(void* out, size_t n) {
  if (RAND_bytes(static_cast<unsigned char*>(out), static_cast<int>(n)) == 1) return;
  std::ifstream urandom("/dev/urandom", std::ios::binary);
  urandom.read(static_cast<char*>(out), static_cast<std::streamsize>(n));
}

Secret random_secret() {
  Secret s;
  random_bytes(s.data(), s.size());
  return s;
}

Status authenticate_as_client(const Socket& s, const Secret& secret, ConnKind kind, Deadline deadline) {
  ClientHello hello{kHelloMagic, kProtocolVersion, static_cast<uint16_t>(kind), {}};
  random_bytes(hello.nonce, kNonce);
  CFX_RETURN_IF_ERROR(s.send_all(&hello, sizeof hello, deadline));
  ServerHello reply{};
  CFX_RETURN_IF_ERROR(s.recv_all(&reply, sizeof reply, deadline));
  if (reply.magic != kHelloMagic || reply.version != kProtocolVersion || reply.kind != hello.kind)
    return remote_error("peer is not a conflux endpoint of this protocol version");
  Mac expect = compute_mac(secret, 'S', kind, hello.nonce, reply.nonce);
  if (CRYPTO_memcmp(expect.data(), reply.mac, kMac) != 0)
    return remote_error("peer failed to prove the communicator secret (wrong unique id?)");
  Mac proof = compute_mac(secret, 'C', kind, reply.nonce, hello.nonce);
  return s.send_all(proof.data(), proof.size(), deadline);
}

Status authenticate_as_server(const Socket& s, const Secret& secret, ConnKind kind, Deadline deadline) {
  ClientHello hello{};
  CFX_RETURN_IF_ERROR(s.recv_all(&hello, sizeof hello, deadline));
  if (hello.magic != kHelloMagic || hello.version != kProtocolVersion ||
      hello.kind != static_cast<uint16_t>(kind))
    return remote_error("not a conflux hello (bad magic, version or connection kind)");
  ServerHello reply{kHelloMagic, kProtocolVersion, hello.kind, {}, {}};
  random_bytes(reply.nonce, kNonce);
  Mac mac = compute_mac(secret, 'S', kind, hello.nonce, reply.nonce);
  std::memcpy(reply.mac, mac.data(), kMac);
  CFX_RETURN_IF_ERROR(s.send_all(&reply, sizeof reply, deadline));
  Mac proof{};
  CFX_RETURN_IF_ERROR(s.recv_all(proof.data(), proof.size(), deadline));
  Mac expect = compute_mac(secret, 'C', kind, reply.nonce, hello.nonce);
  if (CRYPTO_memcmp(expect.data(), proof.data(), kMac) != 0)
    return remote_error("client failed to prove the communicator secret");
  return Status::Ok();
}

}  // namespace conflux
