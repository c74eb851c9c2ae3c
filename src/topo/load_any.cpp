// `conflux vm --host`: one option for the three sources of a host topology.
#include "topo/discover.h"
#include "topo/load_system.h"
#include "topo/nccl_xml.h"

#include <pugixml.hpp>

#include <cerrno>
#include <fstream>
#include <sstream>

namespace conflux::topo {

Result<System> load_any_topology(const std::string& arg) {
  if (arg == "live") return discover();
  std::ifstream in(arg, std::ios::binary);
  if (!in) return system_error("cannot open topology file " + arg, errno ? errno : ENOENT);
  std::ostringstream buf;
  buf << in.rdbuf();
  std::string text = buf.str();
  pugi::xml_document doc;
  pugi::xml_parse_result r = doc.load_buffer(text.data(), text.size());
  if (!r)
    return invalid_usage(arg + ": not well-formed XML (" + r.description() + " at " + text_position(text, r.offset) +
                         "): a truncated or damaged topology file");
  std::string root = doc.document_element().name();
  if (root == "topology") return discover_hwloc_xml(arg);  // hwloc's own reader, as `conflux topo --hwloc-xml`
  CFX_ASSIGN_OR_RETURN(XmlNode tree, parse_nccl_xml(text, arg));
  return build_system(std::move(tree), "file:" + arg);
}

}  // namespace conflux::topo
