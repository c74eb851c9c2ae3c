// Intra-host collectives over one shared segment (issue 3): when every rank
// of a communicator is on this host, collectives read and write shared
// memory directly instead of passing point-to-point messages.
#pragma once

#include "bootstrap/socket.h"
#include "core/coll.h"
#include "core/op.h"
#include "core/status.h"

#include <atomic>
#include <memory>

struct cfxComm;

namespace conflux {

class ShmCollectives {
 public:
  virtual ~ShmCollectives() = default;
  // Called at the end of communicator init, on every rank, when all ranks
  // share this host. May run collectives on `comm` to exchange set-up data.
  // Returns nullptr (not an error) when the fast path does not apply.
  static Result<std::unique_ptr<ShmCollectives>> create(cfxComm& comm);
  // Whether run() serves this operation (collective, type, op, size).
  virtual bool handles(const OpDesc& op) const = 0;
  // Runs op, or sets *handed_back when every rank found, once all had
  // announced their buffers, that the point-to-point path serves it better
  // (then the caller runs it there, on every rank alike).
  virtual Status run(const OpDesc& op, const OpSig& sig, Deadline deadline, const std::atomic<bool>* abort,
                     bool* handed_back) = 0;
};

}  // namespace conflux
