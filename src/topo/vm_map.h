// What `conflux vm plan` passes through: a passthrough map (one host PCI
// address per line, optionally followed by the guest NUMA node; or the
// single word `all`) or the <hostdev> elements of an existing libvirt q35
// domain. Errors name the line or the element.
#pragma once

#include "core/status.h"

#include <string>
#include <string_view>
#include <vector>

namespace conflux::topo {

struct PassthroughEntry {
  std::string host_busid;  // normalised "0000:1b:00.0"
  int guest_numa = -1;     // -1: the host device's NUMA node, renumbered for the guest
  std::string where;       // "map.txt:3" or "domain.xml: <hostdev> 2", for messages
};

struct PassthroughMap {
  bool all = false;  // every GPU and NIC of the host
  std::vector<PassthroughEntry> entries;
};

// Text of a map file; `origin` names it in errors.
Result<PassthroughMap> parse_passthrough_map(std::string_view text, const std::string& origin);

// The word "all", or a file to read and parse.
Result<PassthroughMap> read_passthrough_map(const std::string& arg);

// The PCI <hostdev> sources of a libvirt domain. Refuses a domain whose
// machine is not q35 (pcie-expander-bus and PCIe switches need PCIe), and a
// domain in which two devices claim one guest PCI address.
Result<PassthroughMap> parse_libvirt_domain(std::string_view text, const std::string& origin);
Result<PassthroughMap> read_libvirt_domain(const std::string& path);

// "0000:1b:00.0" or "1b:00.0" (any case) -> normalised; "" when malformed.
std::string parse_pci_address(const std::string& text);

}  // namespace conflux::topo
