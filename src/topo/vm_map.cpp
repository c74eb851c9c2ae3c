#include "topo/vm_map.h"

#include "topo/xml_tree.h"

#include <pugixml.hpp>

#include <cctype>
#include <cerrno>
#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>

namespace conflux::topo {
namespace {

Result<std::string> slurp(const std::string& path, const char* what) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return system_error(std::string("cannot open ") + what + " " + path, errno ? errno : ENOENT);
  std::ostringstream buf;
  buf << in.rdbuf();
  if (in.bad()) return system_error(std::string("cannot read ") + what + " " + path, errno ? errno : EIO);
  return buf.str();
}

bool all_hex(const std::string& s) {
  if (s.empty()) return false;
  for (char c : s)
    if (!std::isxdigit(static_cast<unsigned char>(c))) return false;
  return true;
}

// libvirt writes each address field as 0x-hex; a missing field is 0.
Result<unsigned> address_field(const pugi::xml_node& addr, const char* name, unsigned max, const std::string& where) {
  pugi::xml_attribute a = addr.attribute(name);
  if (!a) return 0u;
  std::string text = a.value();
  std::optional<long long> v = parse_int(&text);
  if (!v || *v < 0 || *v > max)
    return invalid_usage(where + ": <address " + name + "='" + text + "'> is not a number from 0 to " +
                         std::to_string(max));
  return static_cast<unsigned>(*v);
}

Result<std::string> pci_address_of(const pugi::xml_node& addr, const std::string& where) {
  CFX_ASSIGN_OR_RETURN(unsigned domain, address_field(addr, "domain", 0xffff, where));
  CFX_ASSIGN_OR_RETURN(unsigned bus, address_field(addr, "bus", 0xff, where));
  CFX_ASSIGN_OR_RETURN(unsigned slot, address_field(addr, "slot", 0x1f, where));
  CFX_ASSIGN_OR_RETURN(unsigned function, address_field(addr, "function", 7, where));
  char buf[32];
  std::snprintf(buf, sizeof buf, "%04x:%02x:%02x.%x", domain, bus, slot, function);
  return std::string(buf);
}

}  // namespace

std::string parse_pci_address(const std::string& text) {
  std::string s = normalize_busid(text);
  // dddd:bb:dd.f
  if (s.size() != 12 || s[4] != ':' || s[7] != ':' || s[10] != '.') return "";
  if (!all_hex(s.substr(0, 4)) || !all_hex(s.substr(5, 2)) || !all_hex(s.substr(8, 2)) || !all_hex(s.substr(11, 1)))
    return "";
  if (std::stoi(s.substr(8, 2), nullptr, 16) > 0x1f || s[11] > '7') return "";
  return s;
}

Result<PassthroughMap> parse_passthrough_map(std::string_view text, const std::string& origin) {
  PassthroughMap map;
  std::map<std::string, std::string> seen;  // bus id -> where first listed
  std::istringstream in{std::string(text)};
  std::string line;
  int number = 0;
  bool saw_all = false;
  while (std::getline(in, line)) {
    ++number;
    std::string where = origin + ":" + std::to_string(number);
    if (size_t hash = line.find('#'); hash != std::string::npos) line.resize(hash);
    std::istringstream fields(line);
    std::vector<std::string> f;
    for (std::string w; fields >> w;) f.push_back(w);
    if (f.empty()) continue;
    if (f.size() == 1 && f[0] == "all") {
      if (!map.entries.empty() || saw_all)
        return invalid_usage(where + ": \"all\" must be the only entry of a passthrough map");
      saw_all = true;
      map.all = true;
      continue;
    }
    if (saw_all) return invalid_usage(where + ": \"all\" must be the only entry of a passthrough map");
    if (f.size() > 2)
      return invalid_usage(where + ": expected \"HOST_PCI_ADDRESS [GUEST_NUMA_NODE]\", found " +
                           std::to_string(f.size()) + " fields");
    PassthroughEntry e;
    e.where = where;
    e.host_busid = parse_pci_address(f[0]);
    if (e.host_busid.empty())
      return invalid_usage(where + ": \"" + f[0] + "\" is not a PCI address (dddd:bb:dd.f or bb:dd.f)");
    if (f.size() == 2) {
      std::optional<long long> numa = parse_int(&f[1]);
      if (!numa || *numa < 0 || *numa > 63)
        return invalid_usage(where + ": guest NUMA node \"" + f[1] + "\" is not a number from 0 to 63");
      e.guest_numa = static_cast<int>(*numa);
    }
    if (auto it = seen.find(e.host_busid); it != seen.end())
      return invalid_usage(where + ": " + e.host_busid + " is already listed at " + it->second);
    seen[e.host_busid] = where;
    map.entries.push_back(std::move(e));
  }
  if (!map.all && map.entries.empty())
    return invalid_usage(origin + ": the passthrough map names no device (one host PCI address per line, or \"all\")");
  return map;
}

Result<PassthroughMap> read_passthrough_map(const std::string& arg) {
  if (arg == "all") return PassthroughMap{true, {}};
  CFX_ASSIGN_OR_RETURN(std::string text, slurp(arg, "passthrough map"));
  return parse_passthrough_map(text, arg);
}

Result<PassthroughMap> parse_libvirt_domain(std::string_view text, const std::string& origin) {
  pugi::xml_document doc;
  pugi::xml_parse_result r = doc.load_buffer(text.data(), text.size(), pugi::parse_default, pugi::encoding_utf8);
  if (!r)
    return invalid_usage(origin + ": not well-formed XML (" + r.description() + " at " +
                         text_position(text, r.offset) + ")");
  pugi::xml_node domain = doc.document_element();
  if (std::string(domain.name()) != "domain")
    return invalid_usage(origin + ": root element is <" + std::string(domain.name()) + ">, expected a libvirt <domain>");
  pugi::xml_node type = domain.child("os").child("type");
  std::string machine = type.attribute("machine").value();
  if (!type || machine.find("q35") == std::string::npos)
    return invalid_usage(origin + ": <os><type machine='" + machine +
                         "'> is not a q35 machine: expander buses and PCIe switches need q35 (machine='q35' or "
                         "'pc-q35-*'; libvirt's default for x86 is the i440fx 'pc' machine)");
  pugi::xml_node devices = domain.child("devices");
  if (!devices) return invalid_usage(origin + ": the domain has no <devices> element");

  PassthroughMap map;
  std::map<std::string, std::string> guest_taken;  // guest address -> element that takes it
  std::map<std::string, std::string> host_seen;
  int hostdevs = 0;
  for (pugi::xml_node dev : devices.children()) {
    if (dev.type() != pugi::node_element) continue;
    std::string name = dev.name();
    std::string element = "<" + name + ">";
    if (name == "hostdev") element = "<hostdev> " + std::to_string(hostdevs + 1);
    if (name == "controller") element = "<controller index='" + std::string(dev.attribute("index").value()) + "'>";
    std::string where = origin + ": " + element;
    // The guest address this device asks for, if any.
    pugi::xml_node guest = dev.child("address");
    if (guest && std::string(guest.attribute("type").value()) == "pci") {
      CFX_ASSIGN_OR_RETURN(std::string addr, pci_address_of(guest, where));
      if (auto it = guest_taken.find(addr); it != guest_taken.end())
        return invalid_usage(origin + ": " + it->second + " and " + element + " both take guest PCI address " + addr);
      guest_taken[addr] = element;
    }
    if (name != "hostdev") continue;
    ++hostdevs;
    if (std::string(dev.attribute("type").value()) != "pci") continue;  // USB, SCSI hostdevs
    pugi::xml_node src = dev.child("source").child("address");
    if (!src) return invalid_usage(where + ": a PCI <hostdev> without <source><address .../></source>");
    CFX_ASSIGN_OR_RETURN(std::string host, pci_address_of(src, where + " <source>"));
    if (auto it = host_seen.find(host); it != host_seen.end())
      return invalid_usage(where + ": host device " + host + " is already passed through by " + it->second);
    host_seen[host] = element;
    map.entries.push_back({host, -1, where});
  }
  if (map.entries.empty()) return invalid_usage(origin + ": the domain has no PCI <hostdev> to lay out");
  return map;
}

Result<PassthroughMap> read_libvirt_domain(const std::string& path) {
  CFX_ASSIGN_OR_RETURN(std::string text, slurp(path, "libvirt domain"));
  return parse_libvirt_domain(text, path);
}

}  // namespace conflux::topo
