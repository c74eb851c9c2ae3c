#include "exec/shm_coll.h"

namespace conflux {

// Until the shared-segment collectives land, every operation takes the
// point-to-point schedules.
Result<std::unique_ptr<ShmCollectives>> ShmCollectives::create(cfxComm&) {
  return std::unique_ptr<ShmCollectives>();
}

}  // namespace conflux
