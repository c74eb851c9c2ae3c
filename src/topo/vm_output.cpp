#include "topo/vm_output.h"

#include "topo/vm_guest_xml.h"

#include <nlohmann/json.hpp>

#include <cerrno>
#include <cstdio>
#include <fstream>
#include <sstream>

namespace conflux::topo {
namespace {

using Kind = VmController::Kind;
using ordered_json = nlohmann::ordered_json;

std::string hex(int v, int digits) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "0x%0*x", digits, v);
  return buf;
}

std::string parent_bus(const VmPlan& plan, const VmController& c) {
  return c.parent < 0 ? "pcie.0" : plan.controllers[static_cast<size_t>(c.parent)].id;
}

std::string addr(int slot, int function) {
  return function == 0 ? hex(slot, 1) : hex(slot, 1) + "." + hex(function, 1);
}

// libvirt's <address> of a device: bus is the parent controller's index
// (pcie.0 is index 0; our controllers follow from 1 in plan order).
std::string libvirt_address(int parent, int slot, int function, bool multifunction) {
  std::string out = "<address type='pci' domain='0x0000' bus='" + hex(parent + 1, 2) + "' slot='" + hex(slot, 2) +
                    "' function='" + hex(function, 1) + "'";
  if (multifunction) out += " multifunction='on'";
  return out + "/>";
}

const ordered_json* member(const ordered_json& j, const char* key) {
  if (!j.is_object()) return nullptr;
  auto it = j.find(key);
  return it == j.end() ? nullptr : &*it;
}

std::string string_of(const ordered_json& j, const char* key) {
  const ordered_json* m = member(j, key);
  return m && m->is_string() ? m->get<std::string>() : "";
}

int int_of(const ordered_json& j, const char* key, int fallback) {
  const ordered_json* m = member(j, key);
  return m && m->is_number_integer() ? m->get<int>() : fallback;
}

}  // namespace

PathType path_type_of(const std::string& name) {
  for (int t = 0; t <= static_cast<int>(PathType::kDis); ++t)
    if (name == to_string(static_cast<PathType>(t))) return static_cast<PathType>(t);
  return PathType::kDis;
}

const ExpectedDevice* VmExpectation::find(const std::string& qemu_id) const {
  for (const auto& d : devices)
    if (d.qemu_id == qemu_id) return &d;
  return nullptr;
}

std::vector<std::string> qemu_args(const VmPlan& plan, bool standin) {
  std::vector<std::string> a;
  auto arg = [&](std::string opt, std::string value) {
    a.push_back(std::move(opt));
    a.push_back(std::move(value));
  };
  arg("-machine", "q35");
  size_t vcpus = 0;
  for (const auto& n : plan.numa) vcpus += n.cpus.size();
  arg("-smp", std::to_string(vcpus));
  int mem = 0;
  for (const auto& n : plan.numa) mem += n.mem_mib;
  arg("-m", std::to_string(mem) + "M");
  for (const auto& n : plan.numa) {
    std::string backend = "memory-backend-ram,id=mem" + std::to_string(n.node) + ",size=" + std::to_string(n.mem_mib) + "M";
    if (!standin && n.host_node >= 0) backend += ",host-nodes=" + std::to_string(n.host_node) + ",policy=bind";
    arg("-object", backend);
    std::string node = "node,nodeid=" + std::to_string(n.node) + ",memdev=mem" + std::to_string(n.node);
    if (!n.cpus.empty())
      node += ",cpus=" + std::to_string(n.cpus.front()) +
              (n.cpus.size() > 1 ? "-" + std::to_string(n.cpus.back()) : std::string());
    arg("-numa", node);
  }
  for (const auto& c : plan.controllers) {
    std::string d;
    switch (c.kind) {
      case Kind::kExpander:
        d = "pxb-pcie,id=" + c.id + ",bus_nr=" + std::to_string(c.bus_nr) +
            (c.numa >= 0 ? ",numa_node=" + std::to_string(c.numa) : std::string()) + ",bus=pcie.0";
        break;
      case Kind::kRootPort:
        d = "pcie-root-port,id=" + c.id + ",bus=" + parent_bus(plan, c) + ",chassis=" + std::to_string(c.chassis) +
            ",slot=0,port=" + std::to_string(c.port);
        break;
      case Kind::kUpstream: d = "x3130-upstream,id=" + c.id + ",bus=" + parent_bus(plan, c); break;
      case Kind::kDownstream:
        d = "xio3130-downstream,id=" + c.id + ",bus=" + parent_bus(plan, c) + ",chassis=" + std::to_string(c.chassis) +
            ",slot=0,port=" + std::to_string(c.port);
        break;
    }
    d += ",addr=" + addr(c.slot, c.function);
    if (c.multifunction) d += ",multifunction=on";
    arg("-device", d);
  }
  for (const auto& dev : plan.devices) {
    const std::string& port = plan.controllers[static_cast<size_t>(dev.port)].id;
    std::string model = !standin ? "vfio-pci,host=" + dev.host_busid
                        : dev.kind == DeviceKind::kGpu ? std::string("virtio-gpu-pci")
                                                       : std::string("virtio-net-pci");
    std::string d = model + ",id=" + dev.qemu_id + ",bus=" + port + ",addr=0x0";
    if (standin && dev.kind == DeviceKind::kNic) d += ",romfile=";  // no iPXE ROM: nothing boots from it
    arg("-device", d);
  }
  return a;
}

std::string libvirt_xml(const VmPlan& plan) {
  std::ostringstream o;
  o << "<!-- conflux vm plan (" << to_string(plan.layout) << " layout) for a q35 domain: put these in <devices>.\n"
    << "     The pcie-expander-bus NUMA nodes need these cells in <cpu><numa>:\n";
  for (const auto& n : plan.numa) {
    std::string cpus = n.cpus.empty() ? "" : std::to_string(n.cpus.front()) + "-" + std::to_string(n.cpus.back());
    o << "       <cell id='" << n.node << "' cpus='" << cpus << "' memory='" << n.mem_mib << "' unit='MiB'/>"
      << (n.host_node >= 0 ? "  (host node " + std::to_string(n.host_node) + ")" : std::string()) << "\n";
  }
  o << "     Addresses: bus='N' names controller index N (pcie.0 is 0), not the bus number the firmware gives it. -->\n";
  for (size_t i = 0; i < plan.controllers.size(); ++i) {
    const VmController& c = plan.controllers[i];
    const int index = static_cast<int>(i) + 1;
    o << "<controller type='pci' index='" << index << "' model='";
    switch (c.kind) {
      case Kind::kExpander:
        o << "pcie-expander-bus'>\n  <model name='pxb-pcie'/>\n  <target busNr='" << c.bus_nr << "'>\n";
        if (c.numa >= 0) o << "    <node>" << c.numa << "</node>\n";
        o << "  </target>\n";
        break;
      case Kind::kRootPort:
        o << "pcie-root-port'>\n  <model name='pcie-root-port'/>\n  <target chassis='" << c.chassis << "' port='"
          << hex(c.port, 1) << "'/>\n";
        break;
      case Kind::kUpstream: o << "pcie-switch-upstream-port'>\n  <model name='x3130-upstream'/>\n"; break;
      case Kind::kDownstream:
        o << "pcie-switch-downstream-port'>\n  <model name='xio3130-downstream'/>\n  <target chassis='" << c.chassis
          << "' port='" << hex(c.port, 1) << "'/>\n";
        break;
    }
    o << "  " << libvirt_address(c.parent, c.slot, c.function, c.multifunction) << "\n</controller>\n";
  }
  for (const auto& d : plan.devices) {
    const std::string& b = d.host_busid;  // dddd:bb:dd.f
    o << "<hostdev mode='subsystem' type='pci' managed='yes'>\n  <alias name='ua-" << d.qemu_id << "'/>\n"
      << "  <source>\n    <address domain='0x" << b.substr(0, 4) << "' bus='0x" << b.substr(5, 2) << "' slot='0x"
      << b.substr(8, 2) << "' function='0x" << b.substr(11, 1) << "'/>\n  </source>\n"
      << "  " << libvirt_address(d.port, 0, 0, false) << "\n</hostdev>\n";
  }
  return o.str();
}

std::string plan_json(const VmPlan& plan) {
  ordered_json j;
  j["layout"] = to_string(plan.layout);
  j["host_topology"] = plan.host_source;
  ordered_json devices = ordered_json::array();
  for (const auto& d : plan.devices) {
    const VmController& port = plan.controllers[static_cast<size_t>(d.port)];
    const XmlNode* g = find_pci_element(plan.guest_topo, d.guest_busid);
    devices.push_back({{"kind", d.kind == DeviceKind::kGpu ? "gpu" : "nic"},
                       {"host", d.host_busid},
                       {"guest", d.guest_busid},
                       {"qemu_id", d.qemu_id},
                       {"host_numa", d.host_numa},
                       {"guest_numa", d.guest_numa},
                       {"host_switch", d.host_switch},
                       {"guest_switch", d.guest_switch},
                       {"port", port.id},
                       {"link_speed", g ? g->attr_or("link_speed", "") : ""},
                       {"link_width", g ? static_cast<int>(parse_int(g->attr("link_width")).value_or(-1)) : -1}});
  }
  j["devices"] = devices;
  ordered_json pairs = ordered_json::array();
  for (const auto& p : plan.pairs)
    pairs.push_back({{"a", plan.devices[static_cast<size_t>(p.a)].qemu_id},
                     {"b", plan.devices[static_cast<size_t>(p.b)].qemu_id},
                     {"host", to_string(p.host)},
                     {"guest", to_string(p.guest)}});
  j["pairs"] = pairs;
  j["changed_pairs"] = plan.changed_pairs();
  j["numa_preserved"] = plan.numa_preserved();
  ordered_json numa = ordered_json::array();
  for (const auto& n : plan.numa)
    numa.push_back({{"node", n.node}, {"host_node", n.host_node}, {"cpus", cpulist_of(n.cpus)}, {"mem_mib", n.mem_mib}});
  j["numa"] = numa;
  ordered_json ctl = ordered_json::array();
  for (const auto& c : plan.controllers) {
    static const char* kKinds[] = {"pxb-pcie", "pcie-root-port", "x3130-upstream", "xio3130-downstream"};
    ordered_json e = {{"id", c.id}, {"model", kKinds[static_cast<int>(c.kind)]}, {"guest", c.busid}};
    if (c.kind == Kind::kExpander) {
      e["bus_nr"] = c.bus_nr;
      e["numa_node"] = c.numa;
    } else {
      e["secondary_bus"] = c.secondary;
      e["subordinate_bus"] = c.subordinate;
    }
    ctl.push_back(e);
  }
  j["controllers"] = ctl;
  j["buses"] = {{"used", plan.buses_used}, {"limit", 256}};
  ordered_json warnings = ordered_json::array();
  for (const auto& w : plan.warnings)
    warnings.push_back({{"level", w.level == Diagnostic::Level::kWarn ? "warn" : "info"}, {"code", w.code},
                        {"message", w.message}});
  j["warnings"] = warnings;
  return j.dump(2) + "\n";
}

Result<VmExpectation> parse_plan_json(std::string_view text, const std::string& origin) {
  try {
    ordered_json j = ordered_json::parse(text.begin(), text.end(), nullptr, false);
    if (j.is_discarded()) return invalid_usage(origin + ": not valid JSON (truncated or malformed)");
    const ordered_json* devices = member(j, "devices");
    if (!devices || !devices->is_array() || devices->empty())
      return invalid_usage(origin + ": no \"devices\" array: not a plan.json written by `conflux vm plan`");
    VmExpectation e;
    e.layout = string_of(j, "layout");
    size_t n = 0;
    for (const auto& d : *devices) {
      ++n;
      ExpectedDevice x;
      std::string kind = string_of(d, "kind");
      if (kind != "gpu" && kind != "nic")
        return invalid_usage(origin + ": devices[" + std::to_string(n - 1) + "] has kind \"" + kind +
                             "\", expected \"gpu\" or \"nic\"");
      x.kind = kind == "gpu" ? DeviceKind::kGpu : DeviceKind::kNic;
      x.host = string_of(d, "host");
      x.guest = normalize_busid(string_of(d, "guest"));
      x.qemu_id = string_of(d, "qemu_id");
      if (x.guest.empty() || x.qemu_id.empty())
        return invalid_usage(origin + ": devices[" + std::to_string(n - 1) + "] lacks \"guest\" or \"qemu_id\"");
      for (const auto& prev : e.devices)
        if (prev.guest == x.guest || prev.qemu_id == x.qemu_id)
          return invalid_usage(origin + ": devices[" + std::to_string(n - 1) + "] (" + x.qemu_id + " at " + x.guest +
                               ") repeats the guest address or id of " + prev.qemu_id + " at " + prev.guest);
      x.guest_numa = int_of(d, "guest_numa", -1);
      x.guest_switch = string_of(d, "guest_switch");
      x.link_speed = string_of(d, "link_speed");
      x.link_width = int_of(d, "link_width", -1);
      e.devices.push_back(std::move(x));
    }
    if (const ordered_json* pairs = member(j, "pairs"); pairs && pairs->is_array()) {
      for (const auto& p : *pairs) {
        ExpectedPair x{string_of(p, "a"), string_of(p, "b"), path_type_of(string_of(p, "host")),
                       path_type_of(string_of(p, "guest"))};
        if (!e.find(x.a) || !e.find(x.b))
          return invalid_usage(origin + ": pair " + x.a + "-" + x.b + " names a device the plan lacks");
        e.pairs.push_back(std::move(x));
      }
    }
    return e;
  } catch (const std::exception& ex) {
    return invalid_usage(origin + ": unreadable plan: " + ex.what());
  }
}

Result<VmExpectation> read_plan_json(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return system_error("cannot open plan " + path, errno ? errno : ENOENT);
  std::ostringstream buf;
  buf << in.rdbuf();
  return parse_plan_json(buf.str(), path);
}

}  // namespace conflux::topo
