#include "topo/nccl_xml.h"

#include <pugixml.hpp>

#include <cerrno>
#include <fstream>
#include <sstream>

namespace conflux::topo {
namespace {

// Real files nest six levels at most; the cap keeps hostile input from
// recursing deep into the converter and the builder.
constexpr int kMaxDepth = 32;

Status convert(const pugi::xml_node& in, XmlNode& out, int depth, const std::string& origin) {
  if (depth > kMaxDepth)
    return invalid_usage(origin + ": elements nested deeper than " + std::to_string(kMaxDepth) + " levels");
  out.name = in.name();
  for (const auto& a : in.attributes()) out.attrs.emplace_back(a.name(), a.value());
  for (const auto& c : in.children()) {
    if (c.type() != pugi::node_element) continue;
    out.children.emplace_back();
    CFX_RETURN_IF_ERROR(convert(c, out.children.back(), depth + 1, origin));
  }
  return Status::Ok();
}

void escape_into(std::string& out, const std::string& v) {
  for (char c : v) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      default: out.push_back(c);
    }
  }
}

void write(std::string& out, const XmlNode& n, int indent) {
  out.append(static_cast<size_t>(indent) * 2, ' ');
  out += '<';
  out += n.name;
  for (const auto& [k, v] : n.attrs) {
    out += ' ';
    out += k;
    out += "=\"";
    escape_into(out, v);
    out += '"';
  }
  if (n.children.empty()) {
    out += "/>\n";
    return;
  }
  out += ">\n";
  for (const auto& c : n.children) write(out, c, indent + 1);
  out.append(static_cast<size_t>(indent) * 2, ' ');
  out += "</" + n.name + ">\n";
}

}  // namespace

Result<XmlNode> parse_nccl_xml(std::string_view text, const std::string& origin) {
  pugi::xml_document doc;
  pugi::xml_parse_result r = doc.load_buffer(text.data(), text.size(), pugi::parse_default, pugi::encoding_utf8);
  if (!r)
    return invalid_usage(origin + ": not well-formed XML (" + r.description() + " at " +
                         text_position(text, r.offset) + ", byte " + std::to_string(r.offset) + ")");
  pugi::xml_node root = doc.document_element();
  if (!root) return invalid_usage(origin + ": empty XML document, expected <system version=\"1\">");
  std::string root_name = root.name();
  if (root_name == "graphs")
    return invalid_usage(origin +
                         ": this is an NCCL graph file (<graphs>, for NCCL_GRAPH_FILE: forced rings and "
                         "trees), not a topology file (<system>)");
  if (root_name != "system")
    return invalid_usage(origin + ": root element is <" + root_name + ">, expected <system version=\"1\">");
  pugi::xml_attribute version = root.attribute("version");
  if (!version)
    return invalid_usage(origin + ": <system> has no version attribute; NCCL's topology format is version 1");
  std::string v = version.value();
  if (v != "1")
    return invalid_usage(origin + ": XML topology has version " + v +
                         ", version 1 needed (NCCL refuses it too; version 2 is RCCL's dialect, with "
                         "extra GPU attributes such as gcn/arch: dump the topology with NCCL or set "
                         "version=\"1\" after checking the file)");
  XmlNode tree;
  CFX_RETURN_IF_ERROR(convert(root, tree, 0, origin));
  return tree;
}

Result<XmlNode> read_nccl_xml(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return system_error("cannot open topology file " + path, errno ? errno : ENOENT);
  std::ostringstream buf;
  buf << in.rdbuf();
  if (in.bad()) return system_error("cannot read topology file " + path, errno ? errno : EIO);
  return parse_nccl_xml(buf.str(), path);
}

Result<System> load_nccl_xml(const std::string& path) {
  CFX_ASSIGN_OR_RETURN(XmlNode tree, read_nccl_xml(path));
  return build_system(std::move(tree), "file:" + path);
}

std::string to_nccl_xml(const XmlNode& tree) {
  std::string out;
  write(out, tree, 0);
  return out;
}

std::string to_nccl_xml(const System& sys) { return to_nccl_xml(sys.tree); }

}  // namespace conflux::topo
