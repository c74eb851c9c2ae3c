#include "topo/vm_plan.h"

#include "topo/vm_guest_xml.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <map>
#include <set>

namespace conflux::topo {
namespace {

using Kind = VmController::Kind;

// Slots on pcie.0 for expanders and flat root ports: clear of q35's own
// devices (00:00.0 host bridge, 00:1f.x ICH9) and of what QEMU and libvirt
// put at the low slots by default (VGA, the default NIC).
constexpr int kFirstRootSlot = 0x10;
constexpr int kLastRootSlot = 0x1e;
constexpr int kSlotsPerBus = 32;
constexpr int kMaxBus = 255;      // one PCI domain: buses 0-255
constexpr int kMaxChassis = 255;  // QEMU's chassis property is 8-bit

std::string busid_at(int bus, int slot, int function) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "0000:%02x:%02x.%x", bus, slot, function);
  return buf;
}

void strip_links(XmlNode& n) {
  n.children.erase(std::remove_if(n.children.begin(), n.children.end(),
                                  [](const XmlNode& c) { return c.name == "nvlink" || c.name == "c2c"; }),
                   n.children.end());
  for (auto& c : n.children) strip_links(c);
}

// The host switches above `dev`, top (under the CPU) first.
std::vector<int> switch_chain(const System& host, int dev) {
  std::vector<int> chain;
  for (int p = host.devices[dev].parent; p >= 0 && host.devices[p].kind != DeviceKind::kCpu; p = host.devices[p].parent)
    chain.push_back(p);
  std::reverse(chain.begin(), chain.end());
  return chain;
}

struct Planner {
  const System& host;
  const VmPlanOptions& opt;
  VmPlan plan;
  int chassis = 0;

  Planner(const System& h, const VmPlanOptions& o) : host(h), opt(o) {}

  Status select(const PassthroughMap& map) {
    std::vector<std::pair<int, int>> chosen;  // host index, guest numa
    if (map.all) {
      for (DeviceKind k : {DeviceKind::kGpu, DeviceKind::kNic}) {
        for (int i : host.of_kind(k)) {
          if (host.devices[i].busid.empty()) {
            plan.warnings.push_back({Diagnostic::Level::kWarn, "no-busid",
                                     host.devices[i].id + " (" + host.devices[i].name +
                                         ") has no PCI bus id in the host topology: it cannot be passed through"});
            continue;
          }
          chosen.emplace_back(i, -1);
        }
      }
      if (chosen.empty()) return invalid_usage(host.source + ": the host has no GPU or NIC with a PCI bus id to pass through");
    } else {
      for (const auto& e : map.entries) {
        int i = host.find_busid(e.host_busid);
        if (i < 0) {
          std::string have;
          int n = 0;
          for (DeviceKind k : {DeviceKind::kGpu, DeviceKind::kNic})
            for (int d : host.of_kind(k))
              if (!host.devices[d].busid.empty() && n++ < 6) have += (have.empty() ? "" : ", ") + host.devices[d].busid;
          return invalid_usage(e.where + ": the host has no PCI device " + e.host_busid +
                               (have.empty() ? std::string(" (and no GPU or NIC at all)")
                                             : " (its GPUs and NICs include " + have + ")"));
        }
        DeviceKind k = host.devices[i].kind;
        if (k != DeviceKind::kGpu && k != DeviceKind::kNic)
          return invalid_usage(e.where + ": " + e.host_busid + " is a " +
                               (k == DeviceKind::kPciSwitch ? std::string("PCI switch")
                                                            : "PCI device of class '" + host.devices[i].pci_class + "'") +
                               " on the host, not a GPU or NIC");
        chosen.emplace_back(i, e.guest_numa);
      }
    }
    // Guest NUMA nodes: the host's nodes in order, renumbered from 0, unless
    // the map names one.
    std::set<int> host_nodes;
    for (auto [i, numa] : chosen)
      if (numa < 0) host_nodes.insert(host.devices[i].numa);
    std::map<int, int> renumber;
    for (int h : host_nodes) renumber[h] = static_cast<int>(renumber.size());
    int counts[2] = {0, 0};
    for (auto [i, numa] : chosen) {
      VmDevice d;
      d.host = i;
      d.kind = host.devices[i].kind;
      d.host_busid = host.devices[i].busid;
      d.host_numa = host.devices[i].numa;
      d.guest_numa = numa >= 0 ? numa : renumber[d.host_numa];
      int& c = counts[d.kind == DeviceKind::kGpu ? 0 : 1];
      d.qemu_id = (d.kind == DeviceKind::kGpu ? "gpu" : "nic") + std::to_string(c++);
      int p = host.devices[i].parent;
      d.host_switch = p >= 0 && host.devices[p].kind != DeviceKind::kCpu ? host.devices[p].busid : "";
      plan.devices.push_back(std::move(d));
    }
    return Status::Ok();
  }

  Status numa_nodes() {
    int nodes = 0;
    for (const auto& d : plan.devices) nodes = std::max(nodes, d.guest_numa + 1);
    std::map<int, std::set<int>> host_of;   // guest node -> host nodes
    std::map<int, std::set<int>> guest_of;  // host node -> guest nodes
    for (const auto& d : plan.devices) {
      host_of[d.guest_numa].insert(d.host_numa);
      guest_of[d.host_numa].insert(d.guest_numa);
    }
    int next_cpu = 0;
    for (int n = 0; n < nodes; ++n) {
      VmNumaNode node;
      node.node = n;
      node.host_node = host_of[n].empty() ? -1 : *host_of[n].begin();
      int vcpus = opt.vcpus_per_node;
      if (vcpus <= 0) {
        vcpus = 1;
        for (int c : host.of_kind(DeviceKind::kCpu)) {
          if (host.devices[c].numa != node.host_node) continue;
          Result<std::vector<int>> cpus = cpus_of_mask(host.devices[c].affinity);
          if (cpus.ok() && !cpus->empty()) vcpus = static_cast<int>(cpus->size());
        }
      }
      for (int v = 0; v < vcpus; ++v) node.cpus.push_back(next_cpu++);
      node.mem_mib = opt.mem_mib_per_node;
      plan.numa.push_back(std::move(node));
    }
    for (const auto& [g, hs] : host_of) {
      if (hs.size() > 1)
        plan.warnings.push_back({Diagnostic::Level::kWarn, "numa-merged",
                                 "the map puts devices of " + std::to_string(hs.size()) +
                                     " host NUMA nodes on guest node " + std::to_string(g) +
                                     ": pairs that cross the host's inter-socket link look local in the guest"});
    }
    for (const auto& [h, gs] : guest_of) {
      if (gs.size() > 1)
        plan.warnings.push_back({Diagnostic::Level::kWarn, "numa-split",
                                 "the map spreads devices of host NUMA node " + std::to_string(h) + " over " +
                                     std::to_string(gs.size()) + " guest nodes: local pairs look remote in the guest"});
    }
    return Status::Ok();
  }

  int add(VmController c) {
    plan.controllers.push_back(std::move(c));
    return static_cast<int>(plan.controllers.size()) - 1;
  }

  Result<int> port(Kind kind, const std::string& id, int parent, int slot, int function, int sibling) {
    if (++chassis > kMaxChassis)
      return invalid_usage("the layout needs more than " + std::to_string(kMaxChassis) +
                           " PCIe ports, and QEMU's chassis numbers (unique per port) are 8-bit");
    VmController c;
    c.kind = kind;
    c.id = id;
    c.parent = parent;
    c.slot = slot;
    c.function = function;
    c.chassis = chassis;
    c.port = sibling;
    return add(std::move(c));
  }

  // A host switch: an upstream port under `below`, a downstream port per child.
  Status build_switch(int host_switch, int below, const std::map<int, std::vector<int>>& kids,
                      const std::map<int, int>& device_of_host, int& switches) {
    const int k = switches++;
    VmController up;
    up.kind = Kind::kUpstream;
    up.id = "sw" + std::to_string(k);
    up.parent = below;
    up.host_switch = host_switch;
    int u = add(std::move(up));
    const std::vector<int>& children = kids.at(host_switch);
    if (static_cast<int>(children.size()) > kSlotsPerBus)
      return invalid_usage("host switch " + host.devices[host_switch].busid + " has " +
                           std::to_string(children.size()) + " passed-through children; a guest switch has at most " +
                           std::to_string(kSlotsPerBus) + " downstream ports");
    for (size_t i = 0; i < children.size(); ++i) {
      std::string id = "sw" + std::to_string(k) + "p" + std::to_string(i);
      CFX_ASSIGN_OR_RETURN(int dp, port(Kind::kDownstream, id, u, static_cast<int>(i), 0, static_cast<int>(i)));
      CFX_RETURN_IF_ERROR(attach(children[i], dp, kids, device_of_host, switches));
    }
    return Status::Ok();
  }

  // A child of the host tree (switch or passed device) under port `p`.
  Status attach(int host_node, int p, const std::map<int, std::vector<int>>& kids,
                const std::map<int, int>& device_of_host, int& switches) {
    if (auto it = device_of_host.find(host_node); it != device_of_host.end()) {
      plan.devices[static_cast<size_t>(it->second)].port = p;
      return Status::Ok();
    }
    return build_switch(host_node, p, kids, device_of_host, switches);
  }

  Status layout_switch() {
    // The host forest the passed devices span: children by host bus id.
    std::map<int, std::vector<int>> kids;       // host switch -> children (switches, devices)
    std::map<int, std::vector<int>> tops;       // guest node -> top-level host nodes
    std::map<int, int> top_numa;                // top-level host node -> guest node
    std::map<int, int> device_of_host;          // host index -> plan device
    for (size_t i = 0; i < plan.devices.size(); ++i) {
      const VmDevice& d = plan.devices[i];
      device_of_host[d.host] = static_cast<int>(i);
      std::vector<int> chain = switch_chain(host, d.host);
      chain.push_back(d.host);
      int top = chain.front();
      if (auto it = top_numa.find(top); it != top_numa.end() && it->second != d.guest_numa)
        return invalid_usage(d.host_busid + " shares host switch " + host.devices[top].busid +
                             " with a device the map puts on guest NUMA node " + std::to_string(it->second) +
                             ", but the map puts it on node " + std::to_string(d.guest_numa) +
                             ": a guest switch hangs off one expander bus, so one node");
      if (!top_numa.count(top)) {
        top_numa[top] = d.guest_numa;
        tops[d.guest_numa].push_back(top);
      }
      for (size_t c = 0; c + 1 < chain.size(); ++c) {
        auto& v = kids[chain[c]];
        if (std::find(v.begin(), v.end(), chain[c + 1]) == v.end()) v.push_back(chain[c + 1]);
      }
    }
    auto by_busid = [&](int a, int b) { return host.devices[a].busid < host.devices[b].busid; };
    for (auto& [s, v] : kids) std::sort(v.begin(), v.end(), by_busid);
    // Expanders in the order of their first host bus id, so guest bus order
    // follows the host's (and nvidia-smi numbers the GPUs the same way).
    std::vector<int> nodes;
    for (auto& [n, v] : tops) {
      std::sort(v.begin(), v.end(), by_busid);
      nodes.push_back(n);
    }
    std::sort(nodes.begin(), nodes.end(), [&](int a, int b) { return by_busid(tops[a].front(), tops[b].front()); });
    // A node with more top-level groups than an expander bus has slots gets
    // a second expander with the same numa_node.
    std::vector<std::pair<int, std::vector<int>>> expanders;  // guest node, its top-level host nodes
    for (int n : nodes)
      for (size_t at = 0; at < tops[n].size(); at += kSlotsPerBus)
        expanders.emplace_back(n, std::vector<int>(tops[n].begin() + static_cast<std::ptrdiff_t>(at),
                                                   tops[n].begin() + static_cast<std::ptrdiff_t>(
                                                                         std::min(at + kSlotsPerBus, tops[n].size()))));
    if (static_cast<int>(expanders.size()) > kLastRootSlot - kFirstRootSlot + 1)
      return invalid_usage("the layout needs " + std::to_string(expanders.size()) +
                           " expander buses; pcie.0 has room for " + std::to_string(kLastRootSlot - kFirstRootSlot + 1));
    int switches = 0, root_ports = 0;
    for (size_t e = 0; e < expanders.size(); ++e) {
      VmController pxb;
      pxb.kind = Kind::kExpander;
      pxb.id = "pxb" + std::to_string(e);
      pxb.slot = kFirstRootSlot + static_cast<int>(e);
      pxb.numa = expanders[e].first;
      int x = add(std::move(pxb));
      const std::vector<int>& top = expanders[e].second;
      for (size_t t = 0; t < top.size(); ++t) {
        CFX_ASSIGN_OR_RETURN(int rp, port(Kind::kRootPort, "rp" + std::to_string(root_ports++), x,
                                          static_cast<int>(t), 0, static_cast<int>(t)));
        CFX_RETURN_IF_ERROR(attach(top[t], rp, kids, device_of_host, switches));
      }
    }
    return Status::Ok();
  }

  Status layout_flat() {
    std::vector<int> order(plan.devices.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int>(i);
    std::sort(order.begin(), order.end(),
              [&](int a, int b) { return plan.devices[a].host_busid < plan.devices[b].host_busid; });
    const int capacity = (kLastRootSlot - kFirstRootSlot + 1) * 8;
    if (static_cast<int>(order.size()) > capacity)
      return invalid_usage(std::to_string(order.size()) + " devices need as many root ports; pcie.0 has room for " +
                           std::to_string(capacity));
    for (size_t i = 0; i < order.size(); ++i) {
      int slot = kFirstRootSlot + static_cast<int>(i / 8);
      int function = static_cast<int>(i % 8);
      CFX_ASSIGN_OR_RETURN(int rp, port(Kind::kRootPort, "rp" + std::to_string(i), -1, slot, function,
                                        static_cast<int>(i)));
      // libvirt's layout: eight root ports per slot of pcie.0.
      plan.controllers[rp].multifunction = function == 0 && i + 1 < order.size() && (i + 1) / 8 == i / 8;
      plan.devices[static_cast<size_t>(order[i])].port = rp;
      plan.devices[static_cast<size_t>(order[i])].guest_numa = -1;
    }
    return Status::Ok();
  }

  // The firmware's numbering (SeaBIOS pci_bios_init_bus, OVMF PciBusDxe):
  // bus 0 first, then each expander's root bus at its bus_nr; below a bus,
  // bridges in slot.function order, each takes the next number for its
  // link and the numbers of everything below it, depth first.
  Status number_buses() {
    int next = 0;
    std::function<Status(int, int)> number = [&](int parent, int bus) -> Status {
      std::vector<int> on_bus;
      for (size_t c = 0; c < plan.controllers.size(); ++c)
        if (plan.controllers[c].parent == parent && plan.controllers[c].kind != Kind::kExpander)
          on_bus.push_back(static_cast<int>(c));
      std::sort(on_bus.begin(), on_bus.end(), [&](int a, int b) {
        const VmController& ca = plan.controllers[a];
        const VmController& cb = plan.controllers[b];
        return std::pair(ca.slot, ca.function) < std::pair(cb.slot, cb.function);
      });
      for (int c : on_bus) {
        VmController& ctl = plan.controllers[c];
        ctl.busid = busid_at(bus, ctl.slot, ctl.function);
        if (++next > kMaxBus) return Status(cfxInvalidUsage, "");
        plan.controllers[c].secondary = next;
        CFX_RETURN_IF_ERROR(number(c, next));
        plan.controllers[c].subordinate = next;
      }
      return Status::Ok();
    };
    Status s = number(-1, 0);
    for (size_t c = 0; s.ok() && c < plan.controllers.size(); ++c) {
      VmController& x = plan.controllers[c];
      if (x.kind != Kind::kExpander) continue;
      x.busid = busid_at(0, x.slot, 0);
      if (next + 1 > kMaxBus) {
        s = Status(cfxInvalidUsage, "");
        break;
      }
      x.bus_nr = ++next;
      s = number(static_cast<int>(c), x.bus_nr);
    }
    if (!s.ok()) {
      // Count what the layout would need, for the message.
      const int buses = 1 + static_cast<int>(plan.controllers.size());
      return invalid_usage(std::to_string(plan.devices.size()) + " devices in this layout need " +
                           std::to_string(buses) + " PCI buses (each expander, root port, switch and downstream "
                           "port opens one), more than the 256 of one PCI domain: pass fewer devices");
    }
    plan.buses_used = next + 1;
    for (auto& d : plan.devices) d.guest_busid = busid_at(plan.controllers[d.port].secondary, 0, 0);
    // Every guest address once: a bug here would put two devices on one slot.
    std::set<std::string> seen;
    for (const auto& c : plan.controllers)
      if (!seen.insert(c.busid).second) return internal_error("vm plan: two controllers at " + c.busid);
    for (const auto& d : plan.devices)
      if (!seen.insert(d.guest_busid).second) return internal_error("vm plan: two devices at " + d.guest_busid);
    return Status::Ok();
  }

  // The /sys the guest will show for these controllers and devices.
  void predict_sysfs() {
    SysfsSnapshot& s = plan.guest_sysfs;
    auto root_of = [&](int c) {  // the root bus and NUMA node above controller c (-1: pcie.0)
      while (c >= 0 && plan.controllers[c].kind != Kind::kExpander) c = plan.controllers[c].parent;
      return c < 0 ? std::pair(0, -1) : std::pair(plan.controllers[c].bus_nr, plan.controllers[c].numa);
    };
    auto path_of = [&](int c) {  // sysfs components down to controller c
      std::vector<std::string> p;
      for (int at = c; at >= 0 && plan.controllers[at].kind != Kind::kExpander; at = plan.controllers[at].parent)
        p.push_back(plan.controllers[at].busid);
      char root[16];
      std::snprintf(root, sizeof root, "pci0000:%02x", root_of(c).first);
      p.emplace_back(root);
      std::reverse(p.begin(), p.end());
      return p;
    };
    for (size_t c = 0; c < plan.controllers.size(); ++c) {
      const VmController& ctl = plan.controllers[c];
      PciFunction f;
      f.busid = ctl.busid;
      switch (ctl.kind) {
        case Kind::kExpander:  // a host bridge on pcie.0
          f.path = {"pci0000:00", ctl.busid};
          f.pci_class = "0x060000", f.vendor = "0x1b36", f.device = "0x000b";
          break;
        case Kind::kRootPort:
          f.path = path_of(static_cast<int>(c));
          f.pci_class = "0x060400", f.vendor = "0x1b36", f.device = "0x000c";
          f.link_speed = "16.0 GT/s PCIe", f.link_width = 32;
          f.numa = root_of(static_cast<int>(c)).second;
          break;
        case Kind::kUpstream:
          f.path = path_of(static_cast<int>(c));
          f.pci_class = "0x060400", f.vendor = "0x104c", f.device = "0x8232";
          f.link_speed = "2.5 GT/s PCIe", f.link_width = 1;
          f.numa = root_of(static_cast<int>(c)).second;
          break;
        case Kind::kDownstream:
          f.path = path_of(static_cast<int>(c));
          f.pci_class = "0x060400", f.vendor = "0x104c", f.device = "0x8233";
          f.numa = root_of(static_cast<int>(c)).second;
          break;
      }
      s.functions.push_back(std::move(f));
    }
    for (const auto& d : plan.devices) {
      const Device& h = host.devices[d.host];
      PciFunction f;
      f.busid = d.guest_busid;
      f.path = path_of(d.port);
      f.path.push_back(d.guest_busid);
      f.pci_class = h.pci_class.empty() ? (d.kind == DeviceKind::kGpu ? "0x030200" : "0x020000") : h.pci_class;
      f.vendor = h.vendor;
      // vfio-pci shows the guest the device's own ids.
      if (const XmlNode* x = find_pci_element(host.tree, h.busid)) {
        f.device = x->attr_or("device", "");
        f.subsystem_vendor = x->attr_or("subsystem_vendor", "");
        f.subsystem_device = x->attr_or("subsystem_device", "");
      }
      f.link_speed = h.link_speed;
      f.link_width = h.link_width;
      f.numa = root_of(d.port).second;
      s.functions.push_back(std::move(f));
    }
    std::sort(s.functions.begin(), s.functions.end(),
              [](const PciFunction& a, const PciFunction& b) { return a.busid < b.busid; });
    for (const auto& n : plan.numa) {
      s.node_cpus[n.node] = n.cpus;
      s.online_cpus.insert(s.online_cpus.end(), n.cpus.begin(), n.cpus.end());
    }
  }

  Status guest_topology(const System& host_pci) {
    std::vector<Endpoint> eps;
    for (const auto& d : plan.devices) eps.push_back({d.guest_busid, d.kind});
    XmlNode tree = nccl_tree_from_sysfs(plan.guest_sysfs, eps);
    std::map<std::string, int> host_of_guest;
    for (const auto& d : plan.devices) host_of_guest[d.guest_busid] = d.host;
    std::map<std::string, int> switch_of_guest;
    for (const auto& c : plan.controllers)
      if (c.kind == Kind::kUpstream) switch_of_guest[c.busid] = c.host_switch;
    std::map<int, int> host_node_of;
    for (const auto& n : plan.numa) host_node_of[n.node] = n.host_node;
    std::function<void(XmlNode&)> decorate = [&](XmlNode& n) {
      if (n.name == "cpu") {
        int numa = static_cast<int>(parse_int(n.attr("numaid")).value_or(-1));
        copy_host_cpu_attrs(n, host, host_node_of.count(numa) ? host_node_of[numa] : -1);
      } else if (n.name == "pci") {
        std::string b = n.attr_or("busid", "");
        if (auto it = host_of_guest.find(b); it != host_of_guest.end()) copy_host_pci_attrs(n, host, it->second);
        if (auto it = switch_of_guest.find(b); it != switch_of_guest.end()) copy_host_link(n, host, it->second);
      }
      for (auto& c : n.children) decorate(c);
    };
    decorate(tree);
    plan.guest_topo = tree;
    CFX_ASSIGN_OR_RETURN(System guest, build_system(std::move(tree), "guest"));
    for (auto& d : plan.devices) d.guest_switch = nccl_parent(plan.guest_sysfs, d.guest_busid);
    for (size_t a = 0; a < plan.devices.size(); ++a) {
      if (plan.devices[a].kind != DeviceKind::kGpu) continue;
      for (size_t b = 0; b < plan.devices.size(); ++b) {
        if (a == b || (plan.devices[b].kind == DeviceKind::kGpu && b < a)) continue;
        int ha = host_pci.find_busid(plan.devices[a].host_busid), hb = host_pci.find_busid(plan.devices[b].host_busid);
        int ga = guest.find_busid(plan.devices[a].guest_busid), gb = guest.find_busid(plan.devices[b].guest_busid);
        if (ha < 0 || hb < 0 || ga < 0 || gb < 0) return internal_error("vm plan: a planned device left the model");
        plan.pairs.push_back({static_cast<int>(a), static_cast<int>(b), host_pci.path(ha, hb).type,
                              guest.path(ga, gb).type});
      }
    }
    return Status::Ok();
  }

  void warn_what_no_layout_carries() {
    bool switches = std::any_of(plan.controllers.begin(), plan.controllers.end(),
                                [](const VmController& c) { return c.kind == Kind::kUpstream; });
    if (switches)
      plan.warnings.push_back({Diagnostic::Level::kWarn, "xio3130-link",
                               "QEMU's xio3130 switch ports report 2.5 GT/s x1 to the guest, so NCCL reading /sys "
                               "rates every path through a guest switch at 0.19 GB/s: give the guest guest-topo.xml "
                               "as NCCL_TOPO_FILE (it states the host's link speeds and widths)"});
    plan.warnings.push_back({Diagnostic::Level::kWarn, "acs-ats",
                             "the guest cannot see the host's ACS and ATS settings: with ACS redirect on the host "
                             "switches' downstream ports (the IOMMU default) peer traffic between devices of one "
                             "switch still climbs to the host root complex, whatever the guest tree says; check "
                             "ACSCtl in `lspci -vvv` on the host and enable ATS on the NICs for GPUDirect RDMA"});
    std::map<std::string, std::vector<std::string>> cliques;  // host switch -> GPUs
    for (const auto& d : plan.devices)
      if (d.kind == DeviceKind::kGpu && host.devices[d.host].vendor == "0x10de")
        cliques[d.host_switch.empty() ? "numa" + std::to_string(d.host_numa) : d.host_switch].push_back(d.qemu_id);
    if (!cliques.empty()) {
      std::string text;
      int id = 0;
      for (const auto& [sw, gpus] : cliques) {
        std::string list;
        for (const auto& g : gpus) list += (list.empty() ? "" : ",") + g;
        text += (text.empty() ? "" : "; ") + list + " -> " + std::to_string(id++ % 16);
      }
      plan.warnings.push_back({Diagnostic::Level::kWarn, "gpudirect-clique",
                               "the NVIDIA guest driver enables GPU peer-to-peer only between GPUs that vfio-pci "
                               "tags with the same x-nv-gpudirect-clique (0-15); no PCI layout carries it. Suggested, "
                               "one clique per host switch: " + text});
    }
    plan.warnings.push_back({Diagnostic::Level::kInfo, "vcpu-pinning",
                             "pin each guest node's vCPUs to the CPUs of its host node (libvirt <vcpupin>, or "
                             "taskset on the vCPU threads); qemu-args.txt binds the memory (host-nodes, policy=bind)"});
  }
};

}  // namespace

const char* to_string(VmLayout layout) { return layout == VmLayout::kSwitch ? "switch" : "flat"; }

int VmPlan::changed_pairs() const {
  return static_cast<int>(std::count_if(pairs.begin(), pairs.end(), [](const VmPair& p) { return p.host != p.guest; }));
}

bool VmPlan::numa_preserved() const {
  for (const auto& p : pairs) {
    const VmDevice& a = devices[static_cast<size_t>(p.a)];
    const VmDevice& b = devices[static_cast<size_t>(p.b)];
    if ((a.host_numa == b.host_numa) != (a.guest_numa == b.guest_numa)) return false;
  }
  return true;
}

std::string nccl_link_speed(const std::string& speed) {
  switch (std::lround(pci_bw(speed, 1) * 80)) {  // per-lane speed, 100 Mb/s units
    case 15: return "2.5 GT/s PCIe";
    case 30: return "5.0 GT/s PCIe";
    case 120: return "16.0 GT/s PCIe";
    case 240: return "32.0 GT/s PCIe";
    case 480: return "64.0 GT/s PCIe";
    default: return "8.0 GT/s PCIe";
  }
}

Result<System> pci_only(const System& sys) {
  XmlNode tree = sys.tree;
  strip_links(tree);
  CFX_ASSIGN_OR_RETURN(System out, build_system(std::move(tree), sys.source));
  out.virtualization = sys.virtualization;
  return out;
}

Result<VmPlan> plan_vm(const System& host_in, const PassthroughMap& map, const VmPlanOptions& opt) {
  CFX_ASSIGN_OR_RETURN(System host, pci_only(host_in));
  Planner p(host, opt);
  p.plan.layout = opt.layout;
  p.plan.host_source = host.source;
  CFX_RETURN_IF_ERROR(p.select(map));
  CFX_RETURN_IF_ERROR(p.numa_nodes());
  CFX_RETURN_IF_ERROR(opt.layout == VmLayout::kSwitch ? p.layout_switch() : p.layout_flat());
  CFX_RETURN_IF_ERROR(p.number_buses());
  p.predict_sysfs();
  CFX_RETURN_IF_ERROR(p.guest_topology(host));
  p.warn_what_no_layout_carries();
  if (opt.layout == VmLayout::kFlat && p.plan.changed_pairs() > 0)
    p.plan.warnings.push_back({Diagnostic::Level::kWarn, "flat-degrades",
                               "this flat layout changes the path class of " + std::to_string(p.plan.changed_pairs()) +
                                   " of " + std::to_string(p.plan.pairs.size()) +
                                   " GPU-GPU and GPU-NIC pairs from the host's (and loses their NUMA nodes)"});
  return std::move(p.plan);
}

}  // namespace conflux::topo
