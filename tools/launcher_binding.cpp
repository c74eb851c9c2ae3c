#include "launcher_binding.h"

#include <algorithm>
#include <fstream>
#include <tuple>

namespace conflux::tools::launcher {
namespace {

// A topology field of a CPU from sysfs; -1 when the file is missing (then
// every CPU compares equal on it and the logical id orders them).
int SysfsTopology(int cpu, const char* field) {
  std::ifstream in("/sys/devices/system/cpu/cpu" + std::to_string(cpu) + "/topology/" + field);
  int value = -1;
  if (!(in >> value)) return -1;
  return value;
}

// The CPUs this process may run on, whole cores of one package together.
std::vector<int> AllowedCpusInTopologyOrder() {
  cpu_set_t mask;
  CPU_ZERO(&mask);
  std::vector<int> cpus;
  if (sched_getaffinity(0, sizeof mask, &mask) != 0) return cpus;
  std::vector<std::tuple<int, int, int>> keyed;  // package, core, cpu
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu)
    if (CPU_ISSET(cpu, &mask))
      keyed.emplace_back(SysfsTopology(cpu, "physical_package_id"), SysfsTopology(cpu, "core_id"), cpu);
  std::sort(keyed.begin(), keyed.end());
  cpus.reserve(keyed.size());
  for (const auto& [package, core, cpu] : keyed) cpus.push_back(cpu);
  return cpus;
}

}  // namespace

bool ParseBindPolicy(const std::string& text, BindPolicy* policy) {
  if (text == "auto") *policy = BindPolicy::kAuto;
  else if (text == "core") *policy = BindPolicy::kCore;
  else if (text == "none") *policy = BindPolicy::kNone;
  else return false;
  return true;
}

std::vector<cpu_set_t> RankCpuSets(BindPolicy policy, int nprocs, std::string* note) {
  std::vector<cpu_set_t> sets;
  if (policy == BindPolicy::kNone) {
    *note = "ranks unbound (--bind-to none)";
    return sets;
  }
  const std::vector<int> cpus = AllowedCpusInTopologyOrder();
  const int ncpus = static_cast<int>(cpus.size());
  if (ncpus == 0 || nprocs < 1) {
    *note = "ranks unbound (this process's CPU mask is unreadable)";
    return sets;
  }
  if (policy == BindPolicy::kAuto && nprocs > ncpus) {
    // Oversubscribed: binding would pin ranks that must take turns to fixed
    // cores and stop the scheduler from evening out their waits.
    *note = "ranks unbound: " + std::to_string(nprocs) + " ranks on " + std::to_string(ncpus) + " CPUs";
    return sets;
  }
  sets.resize(static_cast<size_t>(nprocs));
  for (int r = 0; r < nprocs; ++r) {
    cpu_set_t& set = sets[static_cast<size_t>(r)];
    CPU_ZERO(&set);
    if (nprocs <= ncpus) {
      // Equal blocks; the first ncpus % nprocs ranks get one CPU more.
      const int base = ncpus / nprocs, extra = ncpus % nprocs;
      const int first = r * base + std::min(r, extra);
      const int count = base + (r < extra ? 1 : 0);
      for (int i = first; i < first + count; ++i) CPU_SET(cpus[static_cast<size_t>(i)], &set);
    } else {
      CPU_SET(cpus[static_cast<size_t>(r % ncpus)], &set);  // --bind-to core, oversubscribed: round robin
    }
  }
  *note = "ranks bound to blocks of " + std::to_string(std::max(1, ncpus / nprocs)) + " of " +
          std::to_string(ncpus) + " CPUs";
  return sets;
}

std::string CpuListOf(const cpu_set_t& set) {
  std::string out;
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (!CPU_ISSET(cpu, &set)) continue;
    int last = cpu;
    while (last + 1 < CPU_SETSIZE && CPU_ISSET(last + 1, &set)) ++last;
    if (!out.empty()) out += ',';
    out += std::to_string(cpu);
    if (last > cpu) out += '-' + std::to_string(last);
    cpu = last;
  }
  return out;
}

}  // namespace conflux::tools::launcher
