// Nonblocking operations: a per-communicator progress thread, started on
// first use, runs queued requests in issue order.
#include "core/comm.h"
#include "core/log.h"

using namespace conflux;

cfxRequest* cfxComm::submit(std::vector<OpDesc> ops) {
  auto* req = new cfxRequest();
  req->ops = std::move(ops);
  async_outstanding_.fetch_add(1, std::memory_order_acq_rel);
  use_registrations(req->ops, +1);  // until it has run: deregistering meanwhile is an error
  {
    std::lock_guard lock(queue_mutex_);
    queue_.push_back(req);
    if (!worker_.joinable()) worker_ = std::thread([this] { worker_loop(); });
  }
  queue_cv_.notify_one();
  return req;
}

void cfxComm::worker_loop() {
  log::set_thread_rank(rank_);
  for (;;) {
    cfxRequest* req = nullptr;
    {
      std::unique_lock lock(queue_mutex_);
      queue_cv_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping and drained
      req = queue_.front();
      queue_.pop_front();
      worker_busy_ = true;
    }
    Status st;
    {
      std::lock_guard exec(exec_mutex_);
      st = run_locked(req->ops);
      if (!st.ok()) set_last_error(st.message());
      use_registrations(req->ops, -1);
    }
    {
      std::lock_guard lock(queue_mutex_);
      worker_busy_ = !queue_.empty();
    }
    async_outstanding_.fetch_sub(1, std::memory_order_acq_rel);
    {
      // Notified under the lock: a waiter that sees done may free the
      // request at once (cfxRequestFree, or a blocking call queued behind
      // nonblocking ones), and it can only see done after this unlocks.
      std::lock_guard rl(req->mutex);
      req->status = st;
      req->done = true;
      req->cv.notify_all();
    }
  }
}
