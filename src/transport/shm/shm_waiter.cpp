#include "transport/shm/shm_waiter.h"

#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <ctime>

namespace conflux {

uint32_t ShmWaiter::arm() {
  bell_.sleeping.store(1, std::memory_order_seq_cst);
  return bell_.bell.load(std::memory_order_seq_cst);
}

void ShmWaiter::sleep(uint32_t token, int timeout_ms) {
  timespec ts{timeout_ms / 1000, static_cast<long>(timeout_ms % 1000) * 1000000L};
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(&bell_.bell), FUTEX_WAIT, token, &ts, nullptr, 0);
  disarm();
}

void ShmWaiter::disarm() { bell_.sleeping.store(0, std::memory_order_relaxed); }

}  // namespace conflux
