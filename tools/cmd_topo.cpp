// `conflux topo`: what the library knows about this machine (or a topology
// file): devices, an `nvidia-smi topo -m` style matrix, link bandwidths and
// advice; --format json for scripts; --xml to export an NCCL_TOPO_FILE.
#include "command_registry.h"

#include "topo/advice.h"
#include "topo/discover.h"
#include "topo/load_system.h"
#include "topo/nccl_xml.h"
#include "topo/report.h"
#include "topo/sysfs_pci.h"
#include "topo/vm_check.h"

#include "core/config.h"

#include <cstdio>
#include <fstream>
#include <memory>

namespace {

struct TopoOptions {
  std::string topo_file;
  std::string hwloc_xml;
  std::string format = "text";
  std::string xml_out;
  std::string sysfs_root;
  bool xml = false;
};

// An injected topology file (--topo-file or CONFLUX_TOPO_FILE) is checked
// against this machine's /sys, as `conflux vm check --topo-file` does: bus
// ids it names that are missing, classes and NUMA nodes that differ, CPU
// masks beyond the online CPUs.
void cross_check(const std::string& file, const std::string& sysfs_root, std::vector<conflux::topo::Diagnostic>& out) {
  using namespace conflux::topo;
  conflux::Result<XmlNode> tree = read_nccl_xml(file);
  conflux::Result<SysfsSnapshot> snap = read_sysfs(sysfs_root);
  if (!tree.ok() || !snap.ok()) {
    out.push_back({Diagnostic::Level::kInfo, "topo-file-unchecked",
                   "the topology file was not checked against /sys: " +
                       (tree.ok() ? snap.status().message() : tree.status().message())});
    return;
  }
  CheckReport report;
  check_topo_file(tree.value(), snap.value(), report);
  for (const auto& f : report.findings)
    out.push_back({f.severity == CheckFinding::Severity::kInfo ? Diagnostic::Level::kInfo : Diagnostic::Level::kWarn,
                   "topo-file-" + f.code, "topology file against this machine's /sys: " + f.message});
}

int run_topo(const TopoOptions& opt) {
  using namespace conflux::topo;
  conflux::Result<System> sys = !opt.topo_file.empty()   ? load_nccl_xml(opt.topo_file)
                                : !opt.hwloc_xml.empty() ? discover_hwloc_xml(opt.hwloc_xml)
                                                         : load_system();
  if (!sys.ok()) {
    std::fprintf(stderr, "conflux topo: %s\n", sys.status().message().c_str());
    return 1;
  }
  if (opt.xml || !opt.xml_out.empty()) {
    std::string text = to_nccl_xml(sys.value());
    if (opt.xml_out.empty() || opt.xml_out == "-") {
      std::fputs(text.c_str(), stdout);
    } else {
      std::ofstream out(opt.xml_out);
      out << text;
      if (!out) {
        std::fprintf(stderr, "conflux topo: cannot write %s\n", opt.xml_out.c_str());
        return 1;
      }
    }
    return 0;
  }
  std::vector<Diagnostic> advice = advise(sys.value());
  const std::string injected = !opt.topo_file.empty() ? opt.topo_file : conflux::config().topo_file;
  if (!injected.empty()) cross_check(injected, opt.sysfs_root, advice);
  std::string text = opt.format == "json" ? to_json(sys.value(), advice) : to_text(sys.value(), advice);
  std::fputs(text.c_str(), stdout);
  return 0;
}

const conflux::tools::RegisterCommand kTopo{
    "topo", "Show the topology: devices, path matrix, bandwidths and advice", [](CLI::App& app) {
      auto opt = std::make_shared<TopoOptions>();
      app.add_option("--topo-file", opt->topo_file, "Read an NCCL topology XML file instead of this machine")
          ->check(CLI::ExistingFile);
      app.add_option("--hwloc-xml", opt->hwloc_xml, "Discover from an hwloc XML dump instead of this machine")
          ->check(CLI::ExistingFile);
      app.add_option("--format", opt->format, "Output format")->check(CLI::IsMember({"text", "json"}));
      app.add_flag("--xml", opt->xml, "Export the topology as an NCCL_TOPO_FILE (to stdout)");
      app.add_option("--xml-out", opt->xml_out, "Export the topology as an NCCL_TOPO_FILE to this path");
      app.add_option("--sysfs-root", opt->sysfs_root,
                     "Cross-check an injected topology file against DIR/sys instead of /sys");
      return [opt] { return run_topo(*opt); };
    }};

}  // namespace
