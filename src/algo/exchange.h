// The schedule of a two-rank exchange, the way a collective's step loads a
// link: both ranks send at once and wait for each other's message (a ring
// or tree step is such an exchange, not a ping-pong). Measurements of the
// data path run it: the network probe between hosts, the calibration's
// call cost inside one.
#pragma once

#include "algo/schedule.h"

#include <cstddef>

namespace conflux::algo {

// `rounds` exchanges of `bytes` each way with `peer`, from kSendBuf into
// kRecvBuf, each split over `flows` channels (Step::channel 0..flows-1).
// Round i's sends and receives wait for round i-1's receives only: neither
// waits for its own send, or two large sends would fill both links' buffers
// with nobody reading.
Schedule exchange_schedule(int peer, size_t bytes, int rounds, int flows);

}  // namespace conflux::algo
