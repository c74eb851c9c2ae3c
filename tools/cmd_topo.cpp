// `conflux topo`: what the library knows about this machine (or a topology
// file): devices, an `nvidia-smi topo -m` style matrix, link bandwidths and
// advice; --format json for scripts; --xml to export an NCCL_TOPO_FILE.
#include "command_registry.h"

#include "topo/advice.h"
#include "topo/discover.h"
#include "topo/load_system.h"
#include "topo/nccl_xml.h"
#include "topo/report.h"

#include <cstdio>
#include <fstream>
#include <memory>

namespace {

struct TopoOptions {
  std::string topo_file;
  std::string hwloc_xml;
  std::string format = "text";
  std::string xml_out;
  bool xml = false;
};

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
      return [opt] { return run_topo(*opt); };
    }};

}  // namespace
