// `conflux vm`: give a VM guest the host's PCIe grouping, and check that it
// got it. plan (host side: QEMU/libvirt layout, guest topology file,
// plan.json), check (inside the guest: /sys against the plan and an injected
// topology file), xml (guest side, when the hypervisor cannot change: the
// host's grouping on the guest's bus ids), cores (inside the guest: does
// the host move its vCPUs?). The logic is in src/topo/vm_* and
// src/topo/core_distance.*.
#include "command_registry.h"

#include "topo/core_distance.h"
#include "topo/load_system.h"
#include "topo/nccl_xml.h"
#include "topo/plan.h"
#include "topo/sysfs_pci.h"
#include "topo/vm_check.h"
#include "topo/vm_guest_xml.h"
#include "topo/vm_map.h"
#include "topo/vm_output.h"
#include "topo/vm_plan.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <vector>

namespace {

using namespace conflux::topo;

struct VmOptions {
  // plan
  std::string host, map, domain, out, layout = "switch";
  int vcpus_per_node = 0;
  int mem_per_node = 1024;
  // check
  std::string expect, sysfs_root, topo_file;
  // xml
  std::string guest, xml_out;
  // cores
  std::vector<int> cpus;
  double seconds = 2;
  int gap_ms = 20;
};

int fail(const char* what, const conflux::Status& s) {
  std::fprintf(stderr, "conflux vm %s: %s\n", what, s.message().c_str());
  return 1;
}

bool write_file(const std::filesystem::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
  out.close();
  if (!out) std::fprintf(stderr, "conflux vm: cannot write %s\n", path.string().c_str());
  return static_cast<bool>(out);
}

std::string lines(const std::vector<std::string>& args) {
  std::string s;
  for (const auto& a : args) s += a + "\n";
  return s;
}

int run_plan(const VmOptions& o) {
  conflux::Result<System> host = load_any_topology(o.host);
  if (!host.ok()) return fail("plan", host.status());
  conflux::Result<PassthroughMap> map = !o.domain.empty() ? read_libvirt_domain(o.domain) : read_passthrough_map(o.map);
  if (!map.ok()) return fail("plan", map.status());
  VmPlanOptions opt;
  opt.layout = o.layout == "flat" ? VmLayout::kFlat : VmLayout::kSwitch;
  opt.vcpus_per_node = o.vcpus_per_node;
  opt.mem_mib_per_node = o.mem_per_node;
  conflux::Result<VmPlan> plan = plan_vm(host.value(), map.value(), opt);
  if (!plan.ok()) return fail("plan", plan.status());
  std::error_code ec;
  std::filesystem::create_directories(o.out, ec);
  if (ec) return fail("plan", conflux::system_error("cannot create " + o.out, ec.value()));
  std::filesystem::path dir(o.out);
  const VmPlan& p = plan.value();
  bool ok = write_file(dir / "qemu-args.txt", lines(qemu_args(p, false))) &&
            write_file(dir / "qemu-args-standin.txt", lines(qemu_args(p, true))) &&
            write_file(dir / "libvirt.xml", libvirt_xml(p)) &&
            write_file(dir / "guest-topo.xml", to_nccl_xml(p.guest_topo)) && write_file(dir / "plan.json", plan_json(p));
  if (!ok) return 1;
  std::printf("%s layout for %zu device(s) from %s: %d PCI buses of 256, %zu guest NUMA node(s)\n", to_string(p.layout),
              p.devices.size(), p.host_source.c_str(), p.buses_used, p.numa.size());
  for (const auto& d : p.devices)
    std::printf("  %-6s host %s (NUMA %d) -> guest %s (NUMA %d)%s%s\n", d.qemu_id.c_str(), d.host_busid.c_str(),
                d.host_numa, d.guest_busid.c_str(), d.guest_numa, d.guest_switch.empty() ? "" : " under switch ",
                d.guest_switch.c_str());
  std::printf("GPU-GPU and GPU-NIC pairs: %zu, %d with a path class other than the host's; NUMA %s\n", p.pairs.size(),
              p.changed_pairs(), p.numa_preserved() ? "preserved" : "not preserved");
  for (const auto& w : p.warnings)
    std::printf("  [%s] %s: %s\n", w.level == Diagnostic::Level::kWarn ? "WARN" : "info", w.code.c_str(),
                w.message.c_str());
  std::printf("wrote %s/{qemu-args.txt,qemu-args-standin.txt,libvirt.xml,guest-topo.xml,plan.json}\n", o.out.c_str());
  return 0;
}

int run_check(const VmOptions& o) {
  conflux::Result<SysfsSnapshot> snap = read_sysfs(o.sysfs_root);
  if (!snap.ok()) return fail("check", snap.status());
  VmExpectation expect;
  if (!o.expect.empty()) {
    conflux::Result<VmExpectation> e = read_plan_json(o.expect);
    if (!e.ok()) return fail("check", e.status());
    expect = std::move(e).value();
  }
  CheckReport report = check_guest(snap.value(), o.expect.empty() ? nullptr : &expect);
  if (!o.topo_file.empty()) {
    conflux::Result<conflux::topo::XmlNode> file = read_nccl_xml(o.topo_file);
    if (!file.ok()) return fail("check", file.status());
    check_topo_file(file.value(), snap.value(), report);
  }
  std::fputs(to_text(report).c_str(), stdout);
  return report.exit_code();
}

int run_xml(const VmOptions& o) {
  conflux::Result<System> host = load_any_topology(o.host);
  if (!host.ok()) return fail("xml", host.status());
  if (o.guest != "live" && o.sysfs_root.empty())
    return fail("xml", conflux::invalid_usage("say which guest: --guest live or --sysfs-root DIR"));
  conflux::Result<SysfsSnapshot> snap = read_sysfs(o.guest == "live" ? "" : o.sysfs_root);
  if (!snap.ok()) return fail("xml", snap.status());
  std::vector<Diagnostic> notes;
  conflux::Result<conflux::topo::XmlNode> xml = guest_xml_from_host(host.value(), snap.value(), &notes);
  if (!xml.ok()) return fail("xml", xml.status());
  for (const auto& n : notes) std::fprintf(stderr, "conflux vm xml: [%s] %s\n", n.code.c_str(), n.message.c_str());
  std::string text = to_nccl_xml(xml.value());
  if (o.xml_out.empty() || o.xml_out == "-") {
    std::fputs(text.c_str(), stdout);
    return 0;
  }
  return write_file(o.xml_out, text) ? 0 : 1;
}

int run_cores(const VmOptions& o) {
  std::vector<int> cpus = o.cpus;
  if (cpus.empty()) {  // the first two CPUs this process may run on
    cpus = current_cpu_binding();
    cpus.resize(std::min<size_t>(cpus.size(), 2));
  }
  if (cpus.size() != 2)
    return fail("cores", conflux::invalid_usage("two CPUs to measure, please (--cpus A,B; this process may run on " +
                                                std::to_string(cpus.size()) + ")"));
  auto r = measure_core_distance({cpus[0], cpus[1], o.seconds, o.gap_ms});
  if (!r.ok()) return fail("cores", r.status());
  std::fputs(to_text(*r).c_str(), stdout);
  return r->steady() ? 0 : 2;
}

const conflux::tools::RegisterCommand kVm{
    "vm", "Lay out a VM guest's PCIe tree like the host's (plan), check it inside the guest (check), write a "
          "guest topology file (xml), or see whether the host moves the guest's vCPUs (cores)",
    [](CLI::App& app) {
      auto o = std::make_shared<VmOptions>();
      app.require_subcommand(1);
      CLI::App* plan = app.add_subcommand("plan", "QEMU and libvirt layout, guest topology file and plan.json");
      plan->add_option("--host", o->host, "Host topology: live, an NCCL topology XML or an hwloc XML dump")->required();
      auto* map = plan->add_option("--map", o->map, "Passthrough map (host PCI address [guest NUMA node] per line) or all");
      auto* domain = plan->add_option("--domain", o->domain, "Take the <hostdev> devices of this libvirt q35 domain XML");
      map->excludes(domain);
      plan->add_option("--out", o->out, "Directory to write the plan into")->required();
      plan->add_option("--layout", o->layout, "switch: the host's grouping; flat: a root port per device on pcie.0")
          ->check(CLI::IsMember({"switch", "flat"}));
      plan->add_option("--vcpus-per-node", o->vcpus_per_node, "Guest vCPUs per NUMA node (default: the host node's)")
          ->check(CLI::Range(1, 1024));
      plan->add_option("--mem-per-node", o->mem_per_node, "Guest memory per NUMA node, MiB")->check(CLI::Range(16, 1 << 22));

      CLI::App* check = app.add_subcommand("check", "Inside a guest: /sys against plan.json and a topology file; "
                                                    "exit 0 as planned, 1 mismatch, 2 degraded");
      check->add_option("--expect", o->expect, "plan.json from conflux vm plan");
      check->add_option("--sysfs-root", o->sysfs_root, "Read DIR/sys instead of /sys");
      check->add_option("--topo-file", o->topo_file, "An NCCL topology file to check against /sys");

      CLI::App* xml = app.add_subcommand("xml", "Guest side: the host's grouping on the guest's bus ids, as NCCL_TOPO_FILE");
      xml->add_option("--host", o->host, "Host topology: an NCCL topology XML or an hwloc XML dump")->required();
      xml->add_option("--guest", o->guest, "live: this machine's /sys")->check(CLI::IsMember({"live"}));
      xml->add_option("--sysfs-root", o->sysfs_root, "The guest's /sys under DIR");
      xml->add_option("--out", o->xml_out, "Write the file here (default stdout)");

      CLI::App* cores = app.add_subcommand("cores", "Inside a guest: does the host move its vCPUs? Times a cache line "
                                                    "handed between two CPUs; exit 0 steady, 2 moving (degraded)");
      cores->add_option("--cpus", o->cpus, "The two CPUs (default: the first two this process may run on)")
          ->expected(2)
          ->delimiter(',');
      cores->add_option("--seconds", o->seconds, "How long to watch")->check(CLI::Range(0.05, 3600.0));
      cores->add_option("--gap-ms", o->gap_ms, "Sleep between measurements, ms (idle vCPUs are what a host moves)")
          ->check(CLI::Range(0, 10000));

      return [o, plan, check, cores, map, domain]() {
        if (plan->parsed()) {
          if (map->count() == 0 && domain->count() == 0) {
            std::fprintf(stderr, "conflux vm plan: say what to pass through: --map FILE|all or --domain libvirt.xml\n");
            return 1;
          }
          return run_plan(*o);
        }
        if (check->parsed()) return run_check(*o);
        if (cores->parsed()) return run_cores(*o);
        return run_xml(*o);
      };
    }};

}  // namespace
