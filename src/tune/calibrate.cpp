#include "tune/calibrate.h"

#include "bootstrap/socket.h"
#include "core/config.h"
#include "core/copy.h"
#include "core/log.h"
#include "core/page_buffer.h"
#include "exec/reduce.h"
#include "topo/plan.h"
#include "tune/calibrate_call.h"
#include "tune/comm_tuning.h"
#include "tune/median.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <sched.h>
#include <spawn.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cctype>
#include <cerrno>
#include <csignal>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <mutex>
#include <optional>
#include <sstream>
#include <thread>
#include <utility>
#include <vector>

namespace conflux::tune {
namespace {

using Clock = std::chrono::steady_clock;
double us_since(Clock::time_point t0) { return std::chrono::duration<double, std::micro>(Clock::now() - t0).count(); }

// Best of a few repetitions: the machine is shared, the minimum is the signal.
template <typename F>
double best_of(int reps, F f) {
  double best = 1e300;
  for (int i = 0; i < reps; ++i) best = std::min(best, f());
  return best;
}

// A local copy of `n` bytes as the data path makes it (copy_bytes), best
// of a few: 8 MiB leaves the caches, 256 KiB (a call's first bytes, see
// sim::ClusterModel::call_cached_bytes) stays.
double measure_memcpy_gbps(size_t n) {
  PageBuffer a(n, 1), b(n, 2);
  double us = best_of(5, [&] {
    auto t0 = Clock::now();
    copy_bytes(b.data(), a.data(), n);
    std::swap(a, b);
    return us_since(t0);
  });
  return double(n) / 1e3 / std::max(us, 1e-3);
}

double measure_reduce_gbps() {
  const size_t count = 1 << 20;
  std::vector<float> a(count, 1.0f), b(count, 2.0f);
  ReduceFn fn = reduce_fn(cfxFloat32, cfxSum);
  if (!fn) return 4.0;
  double us = best_of(5, [&] {
    auto t0 = Clock::now();
    fn(a.data(), a.data(), b.data(), count);
    return us_since(t0);
  });
  return double(count * sizeof(float)) / 1e3 / std::max(us, 1e-3);
}

// The calling thread's CPU time, in microseconds.
double thread_cpu_us() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) * 1e6 + static_cast<double>(ts.tv_nsec) / 1e3;
}

// The least share of its wall time that any measuring thread of a pass ran
// on a core, relative to the share it is due (a whole core, or half of one
// for two threads pinned to one). A thread that spins or yields with its
// core to itself runs all of it; one whose core another busy task shares
// runs half or less, and what it times is that task's time slices: a
// calibration taken while other work kept this machine's two cores busy
// read the flag hand-off at 1240 us against 0.1-0.3, and the slot stream at
// 0.46 GB/s against 11-22.
class CoreShares {
 public:
  // Started by a measuring thread where its timed work begins.
  class Stretch {
   public:
    Stretch() : wall0_(Clock::now()), cpu0_(thread_cpu_us()) {}
    double share() const { return (thread_cpu_us() - cpu0_) / std::max(us_since(wall0_), 1e-3); }

   private:
    Clock::time_point wall0_;
    double cpu0_;
  };
  // Where the timed work ends: the share the thread ran, over `due`.
  void note(const Stretch& s, double due) {
    const double held = s.share() / due;
    std::lock_guard lock(mutex_);
    least_ = std::min(least_, held);
  }
  double least() const {
    std::lock_guard lock(mutex_);
    return std::min(least_, 1.0);
  }

 private:
  mutable std::mutex mutex_;
  double least_ = 1e300;
};

// Two cores for a measurement's two threads (calibration_cores), each
// pinned to one, so they never share a core. Nothing is pinned where the
// machine has one core.
class TwoCores {
 public:
  TwoCores() : cores_(calibration_cores()) {}
  // Pins the calling thread to the first (0) or second (1) core.
  void pin(int which) const {
    if (cores_.size() == 2) (void)topo::pin_this_thread(cores_[which]);
  }
  // The share of a core each thread is due: all of one, or half where the
  // machine has one core and the two threads share it.
  double due() const { return cores_.size() == 2 ? 1.0 : 0.5; }

 private:
  std::vector<int> cores_;
};

// A hand-off: one side raises each odd count on a flag, the other answers
// with the next even one, each waiting for the other by yielding its core,
// as the executor's wait yields. Both sides move the flag by compare and
// swap, so a timing side that gives up (kHandoffStop) and an answer in
// flight cannot overwrite each other.
constexpr int kHandoffStop = -1;

// The answering side: runs until the timing side stops it. It touches
// nothing but the flag and its stack, and calls nothing but sched_yield, so
// a ClonedChild may run it.
void answer_handoffs(std::atomic<int>& flag) {
  for (int i = 0;; ++i) {
    int seen = 2 * i + 1;
    while (!flag.compare_exchange_weak(seen, 2 * i + 2, std::memory_order_acq_rel, std::memory_order_acquire)) {
      if (seen == kHandoffStop) return;
      seen = 2 * i + 1;
      sched_yield();
    }
  }
}

// The timing side: half the round trip, the median of a few batches after
// a warm-up batch. Where the hand-offs outlast `budget_us` (other work takes
// the cores and each hand-off waits for a time slice, 1-2 ms here against
// 0.1-6 us; or the other side never runs) it stops early: `completed` is
// then false and `us` the average of the hand-offs made. Either way the
// answering side is stopped on return.
struct Handoffs {
  double us = 0;
  bool completed = false;
};
Handoffs time_handoffs(std::atomic<int>& flag, double budget_us) {
  constexpr int kBatches = 5, kPerBatch = 200;
  std::vector<double> batches;
  const auto start = Clock::now();
  unsigned polls = 0;  // the clock is read every 16 polls, of one hand-off or many
  for (int b = 0, i = 0; b <= kBatches; ++b) {
    const auto t0 = Clock::now();
    for (int k = 0; k < kPerBatch; ++k, ++i) {
      flag.store(2 * i + 1, std::memory_order_release);
      while (flag.load(std::memory_order_acquire) != 2 * i + 2) {
        sched_yield();
        int raised = 2 * i + 1;
        if (++polls % 16 == 0 && us_since(start) > budget_us &&
            flag.compare_exchange_strong(raised, kHandoffStop, std::memory_order_acq_rel)) {
          return {us_since(start) / (i + 1) / 2, false};
        }
      }
    }
    if (b > 0) batches.push_back(us_since(t0) / kPerBatch / 2);
  }
  flag.store(kHandoffStop, std::memory_order_release);
  return {median_of(std::move(batches)), true};
}

// Half the round trip of a flag bounced between two threads. Each first
// calls pin(0) or pin(1), and runs for `due` of its wall time where nothing
// else wants its core. Past 50 ms it stops: the average of the hand-offs
// made.
double yield_handoff_us(const std::function<void(int side)>& pin, double due, CoreShares& shares) {
  alignas(64) std::atomic<int> flag{0};
  std::thread peer([&] {
    pin(1);
    const CoreShares::Stretch ran;
    answer_handoffs(flag);
    shares.note(ran, due);
  });
  Handoffs timed;
  std::thread self([&] {
    pin(0);
    const CoreShares::Stretch ran;
    timed = time_handoffs(flag, 50'000);
    shares.note(ran, due);
  });
  self.join();
  peer.join();
  return timed.us;
}

// The hand-off between two threads on two cores (a rank bound to one core
// would otherwise time two threads sharing it: every hand-off a switch,
// 2 us here instead of 0.2).
double measure_thread_handoff_us(CoreShares& shares) {
  const TwoCores cores;
  return yield_handoff_us([&](int side) { cores.pin(side); }, cores.due(), shares);
}

// A message streamed one way through a ring of slots shaped as the shm
// transport's (config's slot count and size): the sender copies into the
// slots on one core while the receiver copies out on another, each slot
// released through its own counter. Its rate is a same-host message's
// bandwidth: both copies run at once on their own cores, while a rank that
// sends and receives at the same time (a ring step) does both copies on
// its one core, which the simulator models as one port per rank. The
// receiver reads lines the other core has just written, which a memcpy
// never does (here 32 GB/s against 45 for an 8 MiB memcpy in cache, and a
// two-way exchange at half of it). The median of a few batches.
double measure_slot_stream_gbps(CoreShares& shares) {
  const size_t slot_bytes = std::max<size_t>(4096, config().shm_slot_bytes);
  const uint64_t nslots = static_cast<uint64_t>(std::max(2, config().shm_slots));
  const size_t message = 1 << 20;
  constexpr int kBatches = 5, kPerBatch = 8;
  constexpr int kMessages = (kBatches + 1) * kPerBatch;
  PageBuffer slots(nslots * slot_bytes, 0), from(message, 1), to(message, 2);
  alignas(64) std::atomic<uint64_t> head{0};
  alignas(64) std::atomic<uint64_t> tail{0};
  const TwoCores cores;
  std::thread receiver([&] {
    cores.pin(1);
    const CoreShares::Stretch ran;
    uint64_t h = 0;
    for (int m = 0; m < kMessages; ++m)
      for (size_t done = 0; done < message;) {
        while (tail.load(std::memory_order_acquire) == h) sched_yield();
        const size_t piece = std::min(slot_bytes, message - done);
        copy_bytes(to.data() + done, slots.data() + (h % nslots) * slot_bytes, piece);
        head.store(++h, std::memory_order_release);
        done += piece;
      }
    shares.note(ran, cores.due());
  });
  double result = 0;
  std::thread sender([&] {
    cores.pin(0);
    const CoreShares::Stretch ran;
    std::vector<double> batches;
    uint64_t t = 0;
    for (int b = 0; b <= kBatches; ++b) {
      const auto t0 = Clock::now();
      for (int m = 0; m < kPerBatch; ++m)
        for (size_t done = 0; done < message;) {
          while (t - head.load(std::memory_order_acquire) >= nslots) sched_yield();
          const size_t piece = std::min(slot_bytes, message - done);
          copy_bytes(slots.data() + (t % nslots) * slot_bytes, from.data() + done, piece);
          tail.store(++t, std::memory_order_release);
          done += piece;
        }
      // The batch ends when the receiver has taken its last slot.
      while (head.load(std::memory_order_acquire) != t) sched_yield();
      if (b > 0) batches.push_back(us_since(t0) / kPerBatch);
    }
    result = double(message) / 1e3 / std::max(median_of(std::move(batches)), 1e-3);
    shares.note(ran, cores.due());
  });
  sender.join();
  receiver.join();
  return result;
}

// Whether this build runs under a sanitizer, whose runtime a forked child
// of a multi-threaded process must not enter.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr bool kSanitized = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer) || __has_feature(memory_sanitizer)
constexpr bool kSanitized = true;
#else
constexpr bool kSanitized = false;
#endif
#else
constexpr bool kSanitized = false;
#endif

// Kills a child this process started for a measurement and waits for it,
// so none is left running or unreaped; nothing where pid <= 0 (none started).
void kill_and_reap(pid_t pid) {
  if (pid <= 0) return;
  ::kill(pid, SIGKILL);
  while (::waitpid(pid, nullptr, 0) < 0 && errno == EINTR) {
  }
}

// A page this process shares with a child it clones (MAP_SHARED: the
// child's writes reach it, unlike the copy-on-write rest of its memory).
class SharedPage {
 public:
  SharedPage() : at_(::mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0)) {}
  ~SharedPage() {
    if (at_ != MAP_FAILED) ::munmap(at_, 4096);
  }
  SharedPage(const SharedPage&) = delete;
  SharedPage& operator=(const SharedPage&) = delete;
  explicit operator bool() const { return at_ != MAP_FAILED; }
  uint8_t* data() const { return static_cast<uint8_t*>(at_); }

 private:
  void* at_;
};

// Another process running this code, for a measurement whose other side
// must be a process: a child cloned from the calling thread without exec
// that runs `body` and exits. A bare clone (no fork handlers run; on a
// kernel that copies pinned pages at fork, registered memory stays the
// parent's): the child has only a copy-on-write copy of this process's
// memory and one thread, so `body` touches nothing but its stack, a
// SharedPage and memory of its own, and calls nothing but system calls
// (never under a sanitizer, whose runtime such a child must not enter).
// It inherits the calling thread's CPU binding. Killed and reaped when
// this goes; pid() < 0 where the clone failed.
class ClonedChild {
 public:
  template <typename Body>
  explicit ClonedChild(const Body& body)
      : pid_(static_cast<pid_t>(::syscall(SYS_clone, SIGCHLD, nullptr, nullptr, nullptr, nullptr))) {
    if (pid_ == 0) {
      body();
      ::syscall(SYS_exit_group, 0);
    }
  }
  ~ClonedChild() { kill_and_reap(pid_); }
  ClonedChild(const ClonedChild&) = delete;
  ClonedChild& operator=(const ClonedChild&) = delete;
  pid_t pid() const { return pid_; }

 private:
  pid_t pid_;
};

// Another process to read from, so that a kernel copy crosses into another
// address space as the one-sided algorithms' do: the kernel then walks
// that process's memory map, which a read of one's own memory (or of a
// child sharing it) does not (4 KiB here: 1.9-2.0 us from another process
// against 1.4-1.5 from oneself or a CLONE_VM child). A `sleep` is spawned
// (posix_spawn: no fork of this process, whose memory stays as it is) and
// the page at the top of its stack, which exec filled, is read. Killed at
// the end of the measurement.
class ReadableProcess {
 public:
  ReadableProcess() {
    char arg0[] = "sleep", arg1[] = "30";
    char* argv[] = {arg0, arg1, nullptr};
    char* envp[] = {nullptr};
    pid_t pid = -1;
    if (posix_spawn(&pid, "/bin/sleep", nullptr, nullptr, argv, envp) != 0) return;
    pid_ = pid;
    std::ifstream maps("/proc/" + std::to_string(pid) + "/maps");
    for (std::string line; std::getline(maps, line);) {
      unsigned long begin = 0, end = 0;
      if (line.find("[stack]") != std::string::npos && std::sscanf(line.c_str(), "%lx-%lx", &begin, &end) == 2 &&
          end - begin >= 4096)
        page_ = end - 4096;
    }
  }
  ~ReadableProcess() { kill_and_reap(pid_); }
  ReadableProcess(const ReadableProcess&) = delete;
  ReadableProcess& operator=(const ReadableProcess&) = delete;
  // Reads its page into `to` (4 KiB); false where it cannot be read.
  bool read_page(void* to) const {
    if (pid_ <= 0 || page_ == 0) return false;
    iovec l{to, 4096}, r{reinterpret_cast<void*>(page_), 4096};  // NOLINT(performance-no-int-to-ptr): an address in the other process
    return process_vm_readv(pid_, &l, 1, &r, 1, 0) == 4096;
  }

 private:
  pid_t pid_ = -1;
  unsigned long page_ = 0;
};

// A 4 KiB piece of process `pid`'s memory at `from`, read into `to`.
struct PieceRead {
  pid_t pid;
  const void* from;
  void* to;
};

// The child's side of time_mutual_read_us: makes `piece`'s read over and
// over, counting its reads, until it is killed; returns where a read is
// refused, after raising `refused`.
void read_until_killed(const PieceRead& piece, std::atomic<bool>& refused, std::atomic<uint64_t>& reads) {
  iovec l{piece.to, 4096}, r{const_cast<void*>(piece.from), 4096};
  while (::syscall(SYS_process_vm_readv, piece.pid, &l, 1, &r, 1, 0) == 4096)
    reads.fetch_add(1, std::memory_order_relaxed);
  refused.store(true, std::memory_order_release);
}

// A 4 KiB piece read with process_vm_readv from another process that
// reads this one's memory at the same time, as the ranks of a single-copy
// call read each other's: the two kernel copies contend (64 B: 2.6 us a
// call with both reading against 1.8 with one, a standalone C test here).
// The other process is a ClonedChild pinned to the second core while this
// side reads from the first; it reads `from` of this process
// into its copy of `to`, and this side reads its copy of `from`. Best of 5
// batches of 64 reads, each made while the child kept reading. 0 where it
// cannot be timed: under a sanitizer, on one core, or where either read is
// refused (ptrace rules may let a parent read its child but not the child
// its parent).
double time_mutual_read_us(const std::vector<int>& cores, char* to, const char* from) {
  if (kSanitized || cores.size() != 2) return 0;
  const SharedPage page;
  if (!page) return 0;
  auto* refused = new (page.data()) std::atomic<bool>(false);
  auto* reads = new (page.data() + 64) std::atomic<uint64_t>(0);
  double us = 0;
  std::thread timer([&] {
    if (!topo::pin_this_thread(cores[1])) return;
    const PieceRead piece{getpid(), from, to};
    const ClonedChild child([&] { read_until_killed(piece, *refused, *reads); });
    if (child.pid() < 0) return;
    // The child keeps the second core; this side reads from the first,
    // once the child is reading (a second's deadline).
    const auto t0 = Clock::now();
    while (reads->load(std::memory_order_relaxed) == 0 && !refused->load(std::memory_order_acquire) &&
           us_since(t0) < 1e6)
      sched_yield();
    if (!topo::pin_this_thread(cores[0]) || reads->load(std::memory_order_relaxed) == 0) return;
    iovec l{to, 4096}, r{const_cast<char*>(from), 4096};
    bool mutual = true;
    const double best = best_of(5, [&] {
      const uint64_t before = reads->load(std::memory_order_relaxed);
      const auto b0 = Clock::now();
      for (int i = 0; i < 64; ++i) mutual = mutual && process_vm_readv(child.pid(), &l, 1, &r, 1, 0) == 4096;
      const double batch = us_since(b0) / 64;
      mutual = mutual && reads->load(std::memory_order_relaxed) > before && !refused->load(std::memory_order_acquire);
      return batch;
    });
    if (mutual) us = best;
  });
  timer.join();
  return us;
}

// process_vm_readv as the one-sided algorithms use it: two ranks on two
// cores each write a buffer and then read the other's at the same time.
// The call's cost comes from 4 KiB pieces of another process's memory
// while that one reads this one's (time_mutual_read_us), else of an idle
// one (ReadableProcess), or of this process's own where none can be read (a
// process may read itself even where ptrace rules keep it from reading
// others); the bytes' from exchanges of 256 KiB, which stay in the caches,
// and of 4 MiB. Priced by one rate, that of a reader's own cached 4 MiB
// (10-13 GB/s here), 2- and 4-rank single-copy calls at 4 MiB read
// 0.42-0.83 of their measured time. Sets c's cma_us, cma_cached_gbps and
// cma_gbps (left as they are where the call is refused).
void measure_cma(CoreShares& shares, Constants* c) {
  const size_t big = 4 << 20, cached = 256 << 10, small = 4 << 10;
  PageBuffer buf[2] = {PageBuffer(big, 1), PageBuffer(big, 2)};
  PageBuffer to[2] = {PageBuffer(big, 3), PageBuffer(big, 4)};
  auto read_from = [&](int side, int peer, size_t bytes) {
    iovec l{to[side].data(), bytes}, r{buf[peer].data(), bytes};
    return process_vm_readv(getpid(), &l, 1, &r, 1, 0) == static_cast<ssize_t>(bytes);
  };
  if (!read_from(0, 0, small)) return;
  double small_us = time_mutual_read_us(calibration_cores(), to[1].data(), buf[1].data());
  if (small_us == 0) {
    const ReadableProcess other;
    const bool remote = other.read_page(to[0].data());
    small_us = best_of(5, [&] {
      auto t0 = Clock::now();
      for (int i = 0; i < 64; ++i) remote ? other.read_page(to[0].data()) : read_from(0, 0, small);
      return us_since(t0) / 64;
    });
  }
  // The median over rounds of the slower side's read; each round begins
  // with both sides rewriting their buffers and meeting at a barrier.
  auto exchange_us = [&](size_t bytes) {
    constexpr int kRounds = 7;
    std::atomic<int> arrived{0};
    double took[2][kRounds] = {};
    const TwoCores cores;
    auto meet = [&](int k) {  // the k-th barrier (from 1) of the two sides
      arrived.fetch_add(1, std::memory_order_acq_rel);
      while (arrived.load(std::memory_order_acquire) < 2 * k) sched_yield();
    };
    auto side = [&](int me) {
      cores.pin(me);
      const CoreShares::Stretch ran;
      for (int r = 0; r < kRounds; ++r) {
        std::memset(buf[me].data(), r, bytes);
        meet(2 * r + 1);
        const auto t0 = Clock::now();
        read_from(me, 1 - me, bytes);
        took[me][r] = us_since(t0);
        meet(2 * r + 2);  // nobody rewrites a buffer its peer may still be reading
      }
      shares.note(ran, cores.due());
    };
    // Both sides on threads of their own: pinning the caller would leave
    // the rank bound to one core for its lifetime (emulated hosts that all
    // calibrated then shared core 0, and their network probe read 22 us
    // against 8).
    std::thread self(side, 0), peer(side, 1);
    self.join();
    peer.join();
    std::vector<double> slower(kRounds);
    for (int r = 0; r < kRounds; ++r) slower[r] = std::max(took[0][r], took[1][r]);
    return median_of(std::move(slower));
  };
  const double cached_us = exchange_us(cached), big_us = exchange_us(big);
  // The call: a 4 KiB piece's time less its bytes at the cached rate.
  c->cma_us = std::max(0.05, small_us - cached_us * double(small) / double(cached));
  c->cma_cached_gbps = double(cached) / 1e3 / std::max(cached_us - c->cma_us, 1e-3);
  // The rate past the cached piece; where the two sizes disagree with that
  // shape (noise), the large exchange's average rate.
  c->cma_gbps = big_us > cached_us ? double(big - cached) / 1e3 / (big_us - cached_us) : double(big) / 1e3 / big_us;
}

// A hand-off between two threads pinned to one core, each waiting for the
// other's flag by yielding the core: where ranks outnumber cores, a rank
// that waits for a message yields to the rank queued on its core (the
// executor's wait, ExecContext::yield_while_waiting), and the message's
// receiver runs once the sender yields back. So a message for a waiting
// rank costs this switch, not a sleep and a wake-up: a byte bounced over
// pipes (a sleep and a wake each way) read 3.2 us here against 1.6-1.8
// for the yield (5 calibrations), and priced with the pipe's, 4 ranks on
// these 2 cores read 45 and 47 of 105 stored (point, algorithm) times
// within 25% in two runs, against 55 and 52 with the yield's.
// Median of batches after a warm-up batch; 0 where the threads cannot be
// pinned.
double measure_switch_us(CoreShares& shares) {
  const std::vector<int> allowed = topo::current_cpu_binding();
  const int cpu = sched_getcpu();
  if (cpu < 0 || std::find(allowed.begin(), allowed.end(), cpu) == allowed.end()) return 0;
  std::atomic<int> pinned{0};
  const double us = yield_handoff_us(
      [&](int) {
        if (topo::pin_this_thread(cpu)) pinned.fetch_add(1);
      },
      0.5, shares);
  return pinned.load() == 2 ? us : 0;
}

// The hand-off between two processes yielding one core, timed as
// yield_handoff_us times two threads: a rank switched onto a core another
// rank held leaves that rank's address space, which two threads never do
// (5.0-5.2 us a switch here against 1.8-1.9 between threads: this VM
// isolates the kernel's page tables; conflux_micro_bench's Switch). The
// other process is a ClonedChild answering on a SharedPage, pinned to
// `cpu` by inheriting the timing thread's binding. Its memory is this
// process's, shared copy-on-write while it lives (the timing's warm-up
// batch takes the first writes' faults). Median of
// batches after a warm-up; 0 where it cannot be timed, a hand-off stalls
// for a second, or under a sanitizer.
double time_process_handoff_us(int cpu) {
  if (kSanitized) return 0;
  const SharedPage page;
  if (!page) return 0;
  auto* flag = new (page.data()) std::atomic<int>(0);
  double us = 0;
  std::thread timer([&] {
    if (!topo::pin_this_thread(cpu)) return;
    const ClonedChild child([&] { answer_handoffs(*flag); });
    if (child.pid() < 0) return;
    const Handoffs timed = time_handoffs(*flag, 1e6);
    if (timed.completed) us = timed.us;
  });
  timer.join();
  return us;
}

// A switch between two processes on one core (0 where it cannot be timed).
double measure_process_switch_us() {
  const std::vector<int> allowed = topo::current_cpu_binding();
  const int cpu = sched_getcpu();
  if (cpu < 0 || std::find(allowed.begin(), allowed.end(), cpu) == allowed.end()) return 0;
  return time_process_handoff_us(cpu);
}

// Moves n bytes, polling without blocking as the executor polls its
// links. A blocked receiver sleeps and is woken for every segment: on this
// kind of VM its core halts, and waking it costs what no spinning rank
// pays. Blocking, the 1-byte ping-pong read 28-57 us in 5 calibrations of
// 5 on an idle machine and 2.5 us on a busy one (polled, 2.8-2.9 us in 4 of
// 4), and the stream 5.2-5.7 GB/s against 6.6-6.9 polled (three
// calibrations each; a 2-rank loopback chain Broadcast carries 7-8 GB/s).
bool full_io(int fd, char* p, size_t n, bool send) {
  for (int polls = 1; n > 0; ++polls) {
    ssize_t r = send ? ::send(fd, p, n, MSG_NOSIGNAL | MSG_DONTWAIT) : ::recv(fd, p, n, MSG_DONTWAIT);
    if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) {
      if (polls % 1024 == 0) sched_yield();  // both threads on one core: let the other run
      continue;
    }
    if (r <= 0) return false;
    p += r;
    n -= size_t(r);
  }
  return true;
}

// Loopback TCP: ping-pong latency (polled; the median of batches after a
// warm-up) and streaming bandwidth between two threads on two cores.
std::optional<sim::LinkParams> measure_tcp(CoreShares& shares) {
  int lfd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (lfd < 0) return std::nullopt;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  if (::bind(lfd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 || ::listen(lfd, 1) != 0 ||
      ::getsockname(lfd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    ::close(lfd);
    return std::nullopt;
  }
  // The transport's socket settings (CONFLUX_SOCKET_BUFSIZE), so the stream
  // is timed as its connections run.
  auto like_the_transport = [](int fd) { Socket::tune_for_bulk(fd, config().tcp_buffer_bytes); };
  like_the_transport(lfd);  // an accepted socket starts with its listener's buffers
  constexpr int kBatches = 5, kPerBatch = 50;
  const int pings = (kBatches + 1) * kPerBatch;  // the first batch warms up
  const size_t stream = 16 << 20, piece = 256 << 10;
  const TwoCores cores;
  std::thread server([&] {
    cores.pin(1);
    int fd = ::accept(lfd, nullptr, nullptr);
    if (fd < 0) return;
    like_the_transport(fd);
    char c = 0;
    for (int i = 0; i < pings; ++i)
      if (!full_io(fd, &c, 1, false) || !full_io(fd, &c, 1, true)) break;
    std::vector<char> buf(piece);
    for (int rep = 0; rep < 3; ++rep) {
      for (size_t got = 0; got < stream; got += piece)
        if (!full_io(fd, buf.data(), piece, false)) break;
      full_io(fd, &c, 1, true);
    }
    ::close(fd);
  });
  bool ok = false;
  double measured_lat = 0, measured_gbps = 0;
  std::thread client([&] {
    cores.pin(0);
    int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    if (fd >= 0) like_the_transport(fd);
    ok = fd >= 0 && ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
    if (!ok) {
      if (fd >= 0) ::close(fd);
      ::shutdown(lfd, SHUT_RDWR);  // the server's accept() returns
      return;
    }
    char c = 1;
    std::vector<double> batches;
    const CoreShares::Stretch ran;  // the ping-pong polls; the stream may wait in the kernel
    for (int b = 0; b <= kBatches && ok; ++b) {
      auto t0 = Clock::now();
      for (int i = 0; i < kPerBatch && ok; ++i) ok = full_io(fd, &c, 1, true) && full_io(fd, &c, 1, false);
      if (b > 0) batches.push_back(us_since(t0) / kPerBatch / 2);
    }
    if (ok) measured_lat = median_of(std::move(batches));
    if (ok) shares.note(ran, cores.due());
    std::vector<char> buf(piece, 3);
    double best = 1e300;
    for (int rep = 0; rep < 3 && ok; ++rep) {
      auto t1 = Clock::now();
      for (size_t sent = 0; sent < stream && ok; sent += piece) ok = full_io(fd, buf.data(), piece, true);
      ok = ok && full_io(fd, &c, 1, false);
      best = std::min(best, us_since(t1));
    }
    measured_gbps = double(stream) / 1e3 / best;
    ::close(fd);
  });
  client.join();
  server.join();
  ::close(lfd);
  if (!ok) return std::nullopt;
  return sim::LinkParams{measured_lat, measured_gbps};
}

}  // namespace

namespace {
// `name` as part of a cache directory's file name: letters, digits, '-'
// and '.' kept, anything else '_'.
std::string file_name_part(std::string name) {
  for (char& ch : name)
    if (!std::isalnum(static_cast<unsigned char>(ch)) && ch != '-' && ch != '.') ch = '_';
  return name;
}
}  // namespace

std::string host_key() {
  char host[256] = {};
  gethostname(host, sizeof host - 1);
  const std::string& hostid = config().hostid;
  return file_name_part(!hostid.empty() ? hostid : std::string(host));
}

void mkdirs(const std::string& path) {
  for (size_t i = 1; i <= path.size(); ++i)
    if (i == path.size() || path[i] == '/') ::mkdir(path.substr(0, i).c_str(), 0755);
}

FileLock::FileLock(const std::string& path) : fd_(::open((path + ".lock").c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644)) {
  if (fd_ >= 0) ::flock(fd_, LOCK_EX);
}

FileLock::~FileLock() {
  if (fd_ >= 0) ::close(fd_);  // closing releases the lock
}

namespace {

// CONFLUX_TUNE_NET="lat_us,GB/s" replaces the network constants.
void apply_net_override(Constants* c) {
  const char* v = config().tune_net.c_str();
  if (!*v) return;
  double lat = 0, bw = 0;
  if (std::sscanf(v, "%lf,%lf", &lat, &bw) == 2 && lat >= 0 && bw > 0) {
    c->net = {lat, bw};
    c->source += " + CONFLUX_TUNE_NET";
  } else {
    CFX_WARN(kTune, "CONFLUX_TUNE_NET=\"%s\" ignored: expected \"latency_us,GB/s\"", v);
  }
}

}  // namespace

namespace {
// The version of the measurements below; a cache written by another
// version is measured again, so raise it whenever a measurement changes
// what it times. What they do, with the readings that decided it:
// - A call's fixed cost on one host comes from real shm links driven by
//   the executor (calibrate_call.h). Without it, 2-rank calls of
//   64 B-16 KiB priced 0.61-0.85 of their measured time.
// - process_vm_readv is timed on another process's memory while that
//   process reads this one's, as the ranks of a single-copy call do (an
//   idle process's memory reads 0.7 us a call cheaper, the own process's
//   0.4-0.6 us cheaper still), on freshly written buffers, with the rate
//   of a call's first 256 KiB kept apart.
// - Switches are two threads, and two processes, yielding one core to
//   each other (a byte bounced over pipes sleeps and wakes each way: 1.5x
//   the switch a waiting rank makes).
// - Copies run between page-aligned buffers with the data path's
//   copy_bytes (heap buffers' offsets put copies and process_vm_readv on
//   the CPU's slow short distance: 1.4-2.3 GB/s against 8.5-9.3).
// - Loopback TCP is polled as the executor polls, through sockets with
//   the transport's buffer sizes (left to the kernel's autotuning, 12
//   calibrations read 3.3-8.5 GB/s, 5 of them below 4.1).
// - A same-host message's bandwidth is a slot stream between two cores;
//   two-thread measurements pin two cores (a bound rank's own binding is
//   often one core).
// - Each constant is the median of three passes, and the cache records
//   how much of their cores the measuring threads held and when, so a
//   calibration among other work is measured again (one such read a flag
//   hand-off of 1240 us).
constexpr double kCalibrationMethod = 13;
}  // namespace

std::string Constants::to_text() const {
  std::ostringstream o;
  o << "method " << kCalibrationMethod << "\nshm_lat_us " << shm.lat_us << "\nshm_gbps " << shm.gbps << "\ntcp_lat_us " << tcp.lat_us << "\ntcp_gbps "
    << tcp.gbps << "\nnet_lat_us " << net.lat_us << "\nnet_gbps " << net.gbps << "\nreduce_gbps " << reduce_gbps
    << "\nswitch_us " << switch_us << "\nprocess_switch_us " << process_switch_us << "\ncopy_gbps " << copy_gbps
    << "\ncopy_cached_gbps " << copy_cached_gbps
    << "\nflag_us " << flag_us << "\ncma_us " << cma_us << "\ncma_gbps " << cma_gbps << "\ncma_cached_gbps "
    << cma_cached_gbps << "\ncall_us " << call_us << "\nheld " << held << "\nmeasured_at " << static_cast<long long>(measured_at) << "\n";
  return o.str();
}

bool Constants::from_text(const std::string& text, Constants* out) {
  std::istringstream in(text);
  std::string key;
  double v = 0;
  int seen = 0;
  Constants c;
  bool current = false;
  while (in >> key >> v) {
    const bool may_be_zero = key == "switch_us" || key == "process_switch_us" || key == "cma_cached_gbps" ||
                             key == "copy_cached_gbps" || key == "call_us" || key == "held" ||
                             key == "measured_at";
    if (!(v > 0) && !(may_be_zero && v == 0)) return false;
    if (key == "method") current = v == kCalibrationMethod;
    else if (key == "shm_lat_us") c.shm.lat_us = v, ++seen;
    else if (key == "shm_gbps") c.shm.gbps = v, ++seen;
    else if (key == "tcp_lat_us") c.tcp.lat_us = v, ++seen;
    else if (key == "tcp_gbps") c.tcp.gbps = v, ++seen;
    else if (key == "net_lat_us") c.net.lat_us = v, ++seen;
    else if (key == "net_gbps") c.net.gbps = v, ++seen;
    else if (key == "reduce_gbps") c.reduce_gbps = v, ++seen;
    else if (key == "switch_us") c.switch_us = v, ++seen;
    else if (key == "process_switch_us") c.process_switch_us = v, ++seen;
    else if (key == "copy_gbps") c.copy_gbps = v, ++seen;
    else if (key == "copy_cached_gbps") c.copy_cached_gbps = v, ++seen;
    else if (key == "flag_us") c.flag_us = v, ++seen;
    else if (key == "cma_us") c.cma_us = v, ++seen;
    else if (key == "cma_gbps") c.cma_gbps = v, ++seen;
    else if (key == "cma_cached_gbps") c.cma_cached_gbps = v, ++seen;
    else if (key == "call_us") c.call_us = v, ++seen;
    else if (key == "held") c.held = v, ++seen;
    else if (key == "measured_at") c.measured_at = v, ++seen;
  }
  if (seen != 18 || !current) return false;  // a cache from an older version: measure again
  *out = c;
  return true;
}

void Constants::apply_to(sim::ClusterModel* m) const {
  m->link[static_cast<int>(sim::PathClass::kShm)] = shm;
  m->link[static_cast<int>(sim::PathClass::kTcpLocal)] = tcp;
  m->link[static_cast<int>(sim::PathClass::kNet)] = net;
  m->reduce_gbps = reduce_gbps;
  m->call_us = call_us;
  m->switch_us = switch_us;
  m->process_switch_us = process_switch_us;
  m->copy_gbps = copy_gbps;
  m->copy_cached_gbps = copy_cached_gbps;
  m->flag_us = flag_us;
  m->shm_piece_bytes = config().shm_slot_bytes;
  m->cma_us = cma_us;
  m->cma_gbps = cma_gbps;
  m->cma_cached_gbps = cma_cached_gbps;
  // CONFLUX_TUNE_OVERHEAD: the share of alpha that is per-message work on
  // the sending rank (0..1) for shared-memory and network messages, for
  // experiments with the model (loopback TCP's is all of alpha).
  if (config().tune_overhead >= 0) m->overhead_share = config().tune_overhead;
}

namespace {

// One pass over every measurement (about 0.2 s), with the least share of
// their cores its measuring threads held.
Constants measure_once() {
  CoreShares shares;
  Constants c;
  double memcpy_gbps = measure_memcpy_gbps(8 << 20);
  c.copy_cached_gbps = measure_memcpy_gbps(256 << 10);
  c.flag_us = std::max(0.02, measure_thread_handoff_us(shares));
  c.held = shares.least();
  if (c.busy()) return c;  // the rest would time the other work too, and slowly
  c.shm = {std::max(0.05, c.flag_us), measure_slot_stream_gbps(shares)};
  c.copy_gbps = memcpy_gbps;
  measure_cma(shares, &c);
  c.reduce_gbps = measure_reduce_gbps();
  c.switch_us = measure_switch_us(shares);
  c.process_switch_us = measure_process_switch_us();
  if (const std::vector<int> cores = calibration_cores(); cores.size() == 2)
    c.call_us = measure_shm_call_us(cores[0], cores[1]).value_or(0);
  if (const auto tcp = measure_tcp(shares)) c.tcp = *tcp;
  c.net = c.tcp;
  c.held = shares.least();
  return c;
}

// Each constant's median over passes.
Constants median_of_passes(const std::vector<Constants>& passes) {
  ConstantsArray median{};
  for (size_t k = 0; k < median.size(); ++k) {
    std::vector<double> values;
    values.reserve(passes.size());
    for (const Constants& p : passes) values.push_back(to_array(p)[k]);
    median[k] = median_of(std::move(values));
  }
  Constants c = from_array(median, "measured");
  c.held = 1;
  for (const Constants& p : passes) c.held = std::min(c.held, p.held);
  return c;
}

}  // namespace

bool Constants::busy() const { return held < kCoresHeldEnough; }

std::string Constants::busy_note() const {
  if (!busy()) return "";
  char text[160];
  std::snprintf(text, sizeof text, "other work shared the cores: the calibration's threads ran %.0f%% of their time",
                100 * held);
  return text;
}

std::string Constants::busy_source() const { return "defaults (" + busy_note() + ")"; }

std::vector<int> calibration_cores() {
  std::vector<int> cores = topo::current_cpu_binding();
  cores.resize(std::min<size_t>(cores.size(), 2));
  const long online = sysconf(_SC_NPROCESSORS_ONLN);
  for (int c = 0; c < online && c < CPU_SETSIZE && cores.size() < 2; ++c)
    if (cores.empty() || cores[0] != c) cores.push_back(c);
  return cores;
}

// Each constant is the median of three passes: one pass is as noisy as this
// machine's moments (four single passes within minutes read loopback TCP's
// latency at 3.5-7.0 us and process_vm_readv's cached rate at 7.5-23.8
// GB/s, and priced one stored run at 144 to 187 of 269 points within 25%),
// and the cache keeps what the first communicator measured. A pass whose
// threads did not hold their cores timed the other work, not the machine:
// it is set aside and, after a pause, measured again. Three busy passes
// end the measuring with fewer than two clean ones: the machine is busy
// now, and the constants are the built-in defaults, marked busy
// (Constants::held) so that machine_constants measures again later.
Constants measure_constants(const std::function<Constants()>& pass) {
  constexpr size_t kPasses = 3;
  std::vector<Constants> clean;
  double least = 1;
  for (size_t busy = 0; clean.size() < kPasses && busy < kPasses;) {
    Constants p = pass();
    least = std::min(least, p.held);
    if (!p.busy()) {
      clean.push_back(p);
    } else if (++busy < kPasses) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  }
  if (clean.size() >= 2) return median_of_passes(clean);
  Constants defaults;
  defaults.held = least;
  defaults.source = defaults.busy_source();
  return defaults;
}

Constants measure_constants() { return measure_constants(measure_once); }

std::string cache_dir() { return config().tune_cache_dir; }

namespace {
// This kernel's boot id: the same in every namespace and container it runs.
std::string boot_id() {
  std::ifstream in("/proc/sys/kernel/random/boot_id");
  std::string id;
  std::getline(in, id);
  return id.empty() ? "unknown" : file_name_part(id);
}

double unix_seconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}
// A cache measured while other work shared the cores serves the processes
// of the next minute (a job's ranks, a test suite's processes) and is then
// measured again, so one busy moment does not set the model for good.
constexpr double kBusyCacheSeconds = 60;
}  // namespace

std::string cache_file() {
  const std::string d = cache_dir();
  return d.empty() ? "" : d + "/tune-" + host_key() + ".txt";
}

Constants machine_constants() {
  static std::mutex mutex;
  static bool have = false;
  static Constants memo;
  std::lock_guard lock(mutex);
  if (have) return memo;
  have = true;
  if (!config().tune_calibrate) {
    apply_net_override(&memo);
    return memo;
  }
  std::string path = cache_file();
  if (path.empty()) {
    memo = measure_constants();
    apply_net_override(&memo);
    return memo;
  }
  mkdirs(path.substr(0, path.rfind('/')));
  {
    // One process per host measures; the others wait on the lock and read.
    FileLock host_lock(path);
    std::ifstream in(path);
    std::stringstream text;
    text << in.rdbuf();
    const bool cached = Constants::from_text(text.str(), &memo);
    if (cached && (!memo.busy() || unix_seconds() - memo.measured_at < kBusyCacheSeconds)) {
      memo.source = memo.busy() ? memo.busy_source() + ", cached in " + path : "cache " + path;
    } else {
      // Hosts emulated on one machine (network namespaces, containers)
      // have host keys of their own but share the cores: measuring at the
      // same moment, they timed each other (shared memory at 6.7 us and
      // 12 GB/s against 0.7 us and 25-30 alone). One kernel measures one
      // at a time; separate machines sharing a cache directory do not wait.
      FileLock machine_lock(cache_dir() + "/measuring-" + boot_id());
      memo = measure_constants();
      memo.measured_at = unix_seconds();
      std::ofstream out(path + ".tmp");
      out << memo.to_text();
      out.close();
      if (out) std::rename((path + ".tmp").c_str(), path.c_str());
      if (memo.busy())
        CFX_WARN(kTune,
                 "could not calibrate this host: %s; the tuner uses built-in constants, cached in %s for %.0f s "
                 "and then measured again",
                 memo.busy_note().c_str(), path.c_str(), kBusyCacheSeconds);
      else
        CFX_INFO(kTune, "calibrated this host, cached in %s", path.c_str());
    }
  }
  apply_net_override(&memo);
  return memo;
}

}  // namespace conflux::tune
