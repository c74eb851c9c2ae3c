// Command-line flags describing a modelled cluster, shared by `conflux sim`
// and `conflux plan` (header-only: only the tools, which link CLI11, use it).
// Unset flags take this machine's calibrated constants.
#pragma once

#include "core/config.h"
#include "sim/sim_model.h"
#include "tune/calibrate.h"

#include <CLI/CLI.hpp>

#include <cmath>

namespace conflux::sim {

struct ClusterFlags {
  int ranks = 0;           // total; 0: hosts * ranks_per_host
  int hosts = 1;
  int ranks_per_host = 0;  // 0: ranks / hosts (or 8 when neither is given)
  double intra_bw = 0, intra_lat = -1, net_bw = 0, net_lat = -1;
  bool tcp_local = false;
  int cores_per_host = 0;
  int machine_cores = 0;
  double machine_net_bw = 0;
  std::string net_curve;
  double call_overhead = -1;
  double switch_cost = -1;
  bool no_one_sided = false;
  bool registered = false;

  void add_to(CLI::App& app) {
    app.add_flag("--no-one-sided", no_one_sided,
                 "No one-sided access between the ranks of a host (as CONFLUX_SHM_COLL=0, or CONFLUX_TRANSPORT=tcp)");
    app.add_flag("--registered", registered,
                 "Every rank's buffers are registered cfxMemAlloc memory (cfxCommRegister): peers map them");
    app.add_option("--ranks,-n", ranks, "Total ranks (default hosts x ranks-per-host)");
    app.add_option("--hosts", hosts, "Hosts");
    app.add_option("--ranks-per-host", ranks_per_host, "Ranks per host");
    app.add_option("--intra-bw", intra_bw, "Intra-host bandwidth per rank, GB/s (default: calibrated)");
    app.add_option("--intra-lat", intra_lat, "Intra-host latency, us (default: calibrated)");
    app.add_option("--net-bw", net_bw, "Network bandwidth per host NIC, GB/s (default: calibrated)");
    app.add_option("--net-lat", net_lat, "Network latency, us (default: calibrated)");
    app.add_flag("--tcp-local", tcp_local,
                 "Ranks of one host talk over loopback TCP (the default with CONFLUX_TRANSPORT=tcp)");
    app.add_option("--cores-per-host", cores_per_host,
                   "Cores a host gives its ranks (default: one per rank); fewer makes message overheads queue");
    app.add_option("--machine-cores", machine_cores,
                   "All hosts are emulated on one machine with this many cores: every message overhead queues for them");
    app.add_option("--machine-net-bw", machine_net_bw,
                   "All hosts are emulated on one machine: inter-host bytes share this many GB/s in all");
    app.add_option("--net-curve", net_curve,
                   "Measured network message times, bytes:us,... ascending (the TUNE log's \"net curve\"): "
                   "message cost follows it instead of net-lat + bytes/net-bw")
        ->check([](const std::string& v) {
          std::vector<CurvePoint> c;
          return parse_curve(v, &c) ? std::string() : "expected bytes:us pairs, bytes ascending, e.g. 8:10,4096:16";
        });
    // Costs in microseconds; negative ones are refused, not read as "unset".
    const CLI::Validator us_cost(
        [](const std::string& v) {
          double x = -1;
          return CLI::detail::lexical_cast(v, x) && x >= 0 && std::isfinite(x) ? std::string()
                                                                                : "expected microseconds >= 0";
        },
        "US");
    app.add_option("--call-overhead", call_overhead, "Fixed cost of one collective call, us (default: calibrated)")
        ->check(us_cost);
    app.add_option("--switch-cost", switch_cost,
                   "Core time to switch a sleeping rank in where ranks outnumber cores, us (default: "
                   "calibrated, a switch between two processes); a wake-up soon after the rank's own work "
                   "pays the queued ranks' share of it")
        ->check(us_cost);
  }

  // The model, and a description of where its constants came from.
  ClusterModel model(std::string* source) const {
    ClusterModel m;
    int rph = ranks_per_host;
    if (rph <= 0) rph = ranks > 0 ? (ranks + hosts - 1) / std::max(1, hosts) : 8;
    m.ranks_per_host = std::max(1, rph);
    m.nranks = ranks > 0 ? ranks : std::max(1, hosts) * m.ranks_per_host;
    // As the communicator does: CONFLUX_TRANSPORT=tcp puts a host's ranks on loopback TCP.
    const bool tcp = tcp_local || config().transport == conflux::TransportChoice::kTcp;
    m.same_host_tcp = tcp;
    m.cores_per_host = cores_per_host;
    m.machine_cores = machine_cores;
    m.machine_net_gbps = machine_net_bw;
    bool all_given = intra_bw > 0 && intra_lat >= 0 && net_bw > 0 && net_lat >= 0;
    tune::Constants c;
    if (!all_given) c = tune::machine_constants();
    c.apply_to(&m);
    LinkParams& local = m.link[static_cast<int>(tcp ? PathClass::kTcpLocal : PathClass::kShm)];
    if (intra_bw > 0) local.gbps = intra_bw;
    if (intra_lat >= 0) local.lat_us = intra_lat;
    LinkParams& net = m.link[static_cast<int>(PathClass::kNet)];
    if (net_bw > 0) net.gbps = net_bw;
    if (net_lat >= 0) net.lat_us = net_lat;
    if (!net_curve.empty()) parse_curve(net_curve, &net.curve);  // validated by the option's check
    if (call_overhead >= 0) m.call_us = call_overhead;
    if (switch_cost >= 0) m.switch_us = switch_cost, m.process_switch_us = 0;  // the one cost a rank's switch takes
    if (all_given) m.reduce_gbps = m.copy_gbps = 0;  // a fully specified model is pure alpha-beta
    m.one_sided = !tcp && !no_one_sided && config().shm_collectives;
    m.reads_peer_buffers = m.one_sided;
    m.staging_bytes = m.one_sided ? config().shm_staging_bytes : 0;
    if (source) *source = all_given ? "flags" : "calibration (" + c.source + ") with flag overrides";
    return m;
  }
};

}  // namespace conflux::sim
