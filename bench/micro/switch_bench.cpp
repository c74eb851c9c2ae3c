// The switch a waiting rank makes where ranks outnumber cores: two players
// pinned to one core hand a flag back and forth, each yielding the core
// until the flag is its own, as the executor's wait yields to the rank
// queued on its core. Threads of one process against two processes (a
// forked child plays the other side through a shared page): ranks are
// processes, and switching between processes also switches the address
// space, which the calibration's thread hand-off (switch_us) does not.
//
// Time per switch (two per round trip). On the 2-vCPU KVM guest this
// project is developed on, with page-table isolation (Meltdown mitigation
// "PTI"): threads 1.8-1.9 us, processes 5.0-5.2 us.
#include <benchmark/benchmark.h>

#include <sched.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <new>
#include <thread>

namespace conflux {
namespace {

constexpr int kRoundTrips = 20000;

bool pin_to(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  return sched_setaffinity(0, sizeof set, &set) == 0;
}

// Plays `me` (0 or 1) for kRoundTrips: waits for the flag by yielding, then
// passes it on.
void play(std::atomic<int>& turn, int me) {
  for (int i = 0; i < kRoundTrips; ++i) {
    while (turn.load(std::memory_order_acquire) != me) sched_yield();
    turn.store(1 - me, std::memory_order_release);
  }
}

// Wall time per switch: two switches per round trip.
void report_switches(benchmark::State& state, double seconds) {
  const double switches = 2.0 * kRoundTrips * static_cast<double>(state.iterations());
  if (switches > 0) state.counters["us_per_switch"] = seconds * 1e6 / switches;
}

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

class SharedFlag {
 public:
  SharedFlag() {
    void* p = mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    flag_ = p == MAP_FAILED ? nullptr : new (p) std::atomic<int>(0);
  }
  ~SharedFlag() {
    if (flag_ != nullptr) munmap(flag_, 4096);
  }
  std::atomic<int>* get() const { return flag_; }

 private:
  std::atomic<int>* flag_ = nullptr;
};

// Times kRoundTrips hand-offs per iteration between this thread and a
// second player, both pinned to the core this thread runs on:
// `start_other(flag, cpu)` launches the second player (it plays 1 and
// pins itself), `finish_other()` waits for it; a false return stops the run.
template <class StartOther, class FinishOther>
void time_switches(benchmark::State& state, StartOther start_other, FinishOther finish_other) {
  const int cpu = sched_getcpu();
  SharedFlag flag;
  if (flag.get() == nullptr) {
    state.SkipWithError("mmap of the shared flag failed");
    return;
  }
  double seconds = 0;
  for (auto _ : state) {
    flag.get()->store(0);
    cpu_set_t before;
    sched_getaffinity(0, sizeof before, &before);
    pin_to(cpu);
    const auto start = std::chrono::steady_clock::now();
    if (!start_other(*flag.get(), cpu)) {
      state.SkipWithError("could not start the second player");
      break;
    }
    play(*flag.get(), 0);
    finish_other();
    seconds += seconds_since(start);
    sched_setaffinity(0, sizeof before, &before);
  }
  report_switches(state, seconds);
}

void BM_SwitchBetweenThreads(benchmark::State& state) {
  std::thread other;
  time_switches(
      state,
      [&](std::atomic<int>& flag, int cpu) {
        other = std::thread([&flag, cpu] {
          pin_to(cpu);
          play(flag, 1);
        });
        return true;
      },
      [&] { other.join(); });
}
BENCHMARK(BM_SwitchBetweenThreads)->UseRealTime()->Unit(benchmark::kMillisecond);

void BM_SwitchBetweenProcesses(benchmark::State& state) {
  pid_t child = -1;
  time_switches(
      state,
      [&](std::atomic<int>& flag, int) {
        child = fork();  // inherits this thread's pinning
        if (child == 0) {
          // Only system calls and atomics here: safe in the child of a
          // threaded process.
          play(flag, 1);
          _exit(0);
        }
        return child > 0;
      },
      [&] { waitpid(child, nullptr, 0); });
}
BENCHMARK(BM_SwitchBetweenProcesses)->UseRealTime()->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace conflux
