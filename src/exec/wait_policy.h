// How a rank waits for a message or a flag: it spins, handing its core
// over every kYieldEvery where ranks may share cores, for kSpinBudget;
// then it yields kYieldsBeforeSleep times before it sleeps. The executor
// waits this way, and the simulator prices a wait by it.
#pragma once

#include <chrono>

namespace conflux {

inline constexpr auto kSpinBudget = std::chrono::microseconds(50);
inline constexpr auto kYieldEvery = std::chrono::microseconds(2);
// Yields after the spin budget, before sleeping (about 50 us: a yield
// with nothing else to run costs 0.75 us here).
inline constexpr int kYieldsBeforeSleep = 64;

}  // namespace conflux
