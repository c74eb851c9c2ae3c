// NCCL's topology XML dialect (NCCL_TOPO_FILE / NCCL_TOPO_DUMP_FILE):
// <system version="1"> with cpu, pci, gpu, nvlink, c2c, nic, net elements.
#pragma once

#include "core/status.h"
#include "topo/system.h"
#include "topo/xml_tree.h"

#include <string>
#include <string_view>

namespace conflux::topo {

// Parses the text of a topology file. `origin` names it in errors. Refuses,
// with the reason, anything that is not a version-1 <system> (an RCCL
// version-2 dump, an NCCL graph file, malformed XML).
Result<XmlNode> parse_nccl_xml(std::string_view text, const std::string& origin);

// Reads and parses a file: a missing or unreadable file is an error that
// names the path and the cause.
Result<XmlNode> read_nccl_xml(const std::string& path);

// read_nccl_xml + build_system.
Result<System> load_nccl_xml(const std::string& path);

// Writes the tree in NCCL's own layout: a file NCCL accepts as NCCL_TOPO_FILE
// and that load_nccl_xml reads back into the same model.
std::string to_nccl_xml(const XmlNode& tree);
std::string to_nccl_xml(const System& sys);

}  // namespace conflux::topo
