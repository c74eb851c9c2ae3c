#include "transport/transport.h"

#include <cstring>

namespace conflux {

Status check_incoming(const OpSig& expected, size_t expected_bytes, const OpSig& got, size_t got_bytes,
                      int peer) {
  bool same_call = std::memcmp(&expected, &got, sizeof(OpSig)) == 0;
  if (same_call && expected_bytes == got_bytes) return Status::Ok();
  std::string msg = "mismatched calls: rank " + std::to_string(peer) + " is in " + describe(got) +
                    " but this rank is in " + describe(expected);
  if (same_call)
    msg = "mismatched message size in " + describe(expected) + ": rank " + std::to_string(peer) + " sent " +
          std::to_string(got_bytes) + " bytes, this rank expected " + std::to_string(expected_bytes);
  return invalid_usage(msg);
}

Status notice_error(int peer, int32_t code, const std::string& why) {
  auto c = static_cast<cfxResult_t>(code);
  if (c <= cfxSuccess || c >= cfxNumResults) c = cfxRemoteError;
  return Status(c, "rank " + std::to_string(peer) + kNoticeRelayMarker + why);
}

}  // namespace conflux
