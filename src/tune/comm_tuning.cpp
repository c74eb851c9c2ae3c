#include "tune/comm_tuning.h"

#include "core/config.h"
#include "core/log.h"
#include "tune/measured_table.h"

namespace conflux::tune {

ConstantsArray to_array(const Constants& c) {
  return {c.shm.lat_us, c.shm.gbps, c.tcp.lat_us, c.tcp.gbps, c.net.lat_us, c.net.gbps,
          c.reduce_gbps, c.switch_us, c.copy_gbps, c.flag_us, c.cma_us, c.cma_gbps,
          c.cma_cached_gbps, c.copy_cached_gbps, c.process_switch_us, c.call_us};
}

Constants from_array(const ConstantsArray& a, const std::string& source) {
  Constants c;
  c.shm = {a[0], a[1]};
  c.tcp = {a[2], a[3]};
  c.net = {a[kNetLatIndex], a[kNetGbpsIndex]};
  c.reduce_gbps = a[6];
  c.switch_us = a[7];
  c.copy_gbps = a[8];
  c.flag_us = a[9];
  c.cma_us = a[10];
  c.cma_gbps = a[11];
  c.cma_cached_gbps = a[12];
  c.copy_cached_gbps = a[13];
  c.process_switch_us = a[14];
  c.call_us = a[15];
  c.source = source;
  return c;
}

Result<std::unique_ptr<Tuner>> make_tuner(sim::ClusterModel model, const std::string& algo_spec,
                                          const std::string& layout) {
  CFX_ASSIGN_OR_RETURN(AlgoFilter filter, AlgoFilter::parse(algo_spec));
  CFX_INFO(kTune, "tuner: %s%s%s", model.describe().c_str(), algo_spec.empty() ? "" : ", CONFLUX_ALGO=",
           algo_spec.c_str());
  AlgoFilter measured;
  const std::string table = config().tune ? measured_table_file() : "";
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
  auto tuner = std::make_unique<Tuner>(std::move(model), std::move(filter), config().tune, layout);
  if (!measured.rules.empty()) tuner->set_measured(std::move(measured), "table " + table);
  return tuner;
}

}  // namespace conflux::tune
