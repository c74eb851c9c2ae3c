// Sleeping on this rank's doorbell: peers ring it when they publish data for
// us or free slots we wait for. arm() announces the intent to sleep; the
// caller then checks for work once more before sleep(), so no wake-up is lost.
#pragma once

#include "transport/shm/shm_segment.h"

namespace conflux {

class ShmWaiter {
 public:
  explicit ShmWaiter(ShmDoorbell& bell) : bell_(bell) {}
  uint32_t arm();
  void sleep(uint32_t token, int timeout_ms);
  void disarm();

 private:
  ShmDoorbell& bell_;
};

}  // namespace conflux
