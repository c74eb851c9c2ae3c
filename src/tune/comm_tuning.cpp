#include "tune/comm_tuning.h"

#include "core/log.h"
#include "tune/measured_table.h"

#include <cstdlib>
#include <cstring>
#include <memory>
#include <unordered_map>

namespace conflux::tune {
namespace {

struct Slot {
  uint64_t comm_id = 0;
  std::unique_ptr<Tuner> tuner;
};

std::mutex& registry_mutex() {
  static std::mutex m;
  return m;
}

std::unordered_map<const void*, Slot>& registry() {
  static auto* r = new std::unordered_map<const void*, Slot>();  // leaked: outlives static destructors
  return *r;
}

}  // namespace

bool tuning_enabled() {
  const char* v = std::getenv("CONFLUX_TUNE");
  return !(v && (std::strcmp(v, "0") == 0 || std::strcmp(v, "off") == 0));
}

ConstantsArray to_array(const Constants& c) {
  return {c.shm.lat_us, c.shm.gbps, c.tcp.lat_us, c.tcp.gbps, c.net.lat_us, c.net.gbps, c.reduce_gbps, c.switch_us};
}

Constants from_array(const ConstantsArray& a, const std::string& source) {
  Constants c;
  c.shm = {a[0], a[1]};
  c.tcp = {a[2], a[3]};
  c.net = {a[kNetLatIndex], a[kNetGbpsIndex]};
  c.reduce_gbps = a[6];
  c.switch_us = a[7];
  c.source = source;
  return c;
}

Tuner* find_tuner(const void* comm, uint64_t comm_id) {
  std::lock_guard lock(registry_mutex());
  auto it = registry().find(comm);
  return it != registry().end() && it->second.comm_id == comm_id ? it->second.tuner.get() : nullptr;
}

Result<Tuner*> install_tuner(const void* comm, uint64_t comm_id, sim::ClusterModel model, const std::string& algo_spec,
                             const std::string& layout) {
  CFX_ASSIGN_OR_RETURN(AlgoFilter filter, AlgoFilter::parse(algo_spec));
  CFX_INFO(kTune, "tuner: %s%s%s", model.describe().c_str(), algo_spec.empty() ? "" : ", CONFLUX_ALGO=",
           algo_spec.c_str());
  AlgoFilter measured;
  const std::string table = tuning_enabled() ? measured_table_file() : "";
  if (!table.empty()) {
    // The table only speeds choices up: a damaged one is reported and
    // ignored rather than failing the job.
    auto loaded = load_measured_table(table, layout);
    if (!loaded.ok()) {
      CFX_WARN(kTune, "ignoring the measured table: %s (rerun `conflux tune --write` to replace the entry)",
               loaded.status().message().c_str());
    } else if (!loaded->rules.empty()) {
      measured = std::move(loaded).value();
      CFX_INFO(kTune, "tuner: measured table %s for %s: %s", table.c_str(), layout.c_str(), measured.spec.c_str());
    }
  }
  std::lock_guard lock(registry_mutex());
  Slot& slot = registry()[comm];
  slot.comm_id = comm_id;
  slot.tuner = std::make_unique<Tuner>(std::move(model), std::move(filter), tuning_enabled(), layout);
  if (!measured.rules.empty()) slot.tuner->set_measured(std::move(measured), "table " + table);
  return slot.tuner.get();
}

}  // namespace conflux::tune
