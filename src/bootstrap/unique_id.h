// What a cfxUniqueId carries: the rendezvous root's address, the random
// secret every connection of the communicator must prove, and a random
// communicator id. A checksum catches ids that were corrupted in transit.
#pragma once

#include "bootstrap/auth.h"
#include "bootstrap/socket.h"

#include <conflux/conflux.h>

namespace conflux {

struct UniqueIdData {
  SockAddr root;
  Secret secret{};
  uint64_t comm_id = 0;
};

cfxUniqueId encode_unique_id(const UniqueIdData& data);
Result<UniqueIdData> decode_unique_id(const cfxUniqueId& id);

}  // namespace conflux
