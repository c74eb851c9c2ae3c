#include "topo/vm_guest_xml.h"

#include "topo/vm_plan.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <map>
#include <set>

namespace conflux::topo {
namespace {

constexpr const char* kIdAttrs[] = {"vendor", "device", "subsystem_vendor", "subsystem_device"};

const XmlNode* find_cpu_element(const XmlNode& tree, int numa) {
  for (const auto& c : tree.children)
    if (c.name == "cpu" && parse_int(c.attr("numaid")).value_or(-2) == numa) return &c;
  return nullptr;
}

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

std::string describe(const System& host, int d) {
  const Device& dev = host.devices[d];
  std::string ids;
  if (const XmlNode* n = find_pci_element(host.tree, dev.busid)) {
    ids = n->attr_or("vendor", "?") + ":" + n->attr_or("device", "?");
  }
  return dev.id + " " + dev.busid + (ids.empty() ? "" : " (" + ids + ")");
}

// The host switches above `dev`, top (under the CPU) first.
std::vector<int> switches_above(const System& host, int dev) {
  std::vector<int> chain;
  for (int p = host.devices[dev].parent; p >= 0 && host.devices[p].kind != DeviceKind::kCpu; p = host.devices[p].parent)
    chain.push_back(p);
  std::reverse(chain.begin(), chain.end());
  return chain;
}

}  // namespace

const XmlNode* find_pci_element(const XmlNode& tree, const std::string& busid) {
  if (tree.name == "pci" && normalize_busid(tree.attr_or("busid", "")) == busid) return &tree;
  for (const auto& c : tree.children)
    if (const XmlNode* hit = find_pci_element(c, busid)) return hit;
  return nullptr;
}

void copy_host_link(XmlNode& guest_pci, const System& host, int host_device) {
  const Device& d = host.devices[host_device];
  guest_pci.set("link_speed", nccl_link_speed(d.link_speed));
  guest_pci.set("link_width", std::to_string(d.link_width <= 0 ? 16 : d.link_width));
}

void copy_host_pci_attrs(XmlNode& guest_pci, const System& host, int host_device) {
  const Device& d = host.devices[host_device];
  if (!d.pci_class.empty()) guest_pci.set("class", d.pci_class);
  if (const XmlNode* h = find_pci_element(host.tree, d.busid)) {
    for (const char* k : kIdAttrs)
      if (const std::string* v = h->attr(k)) guest_pci.set(k, *v);
  }
  copy_host_link(guest_pci, host, host_device);
}

void copy_host_cpu_attrs(XmlNode& cpu, const System& host, int host_numa) {
  const XmlNode* h = find_cpu_element(host.tree, host_numa);
  if (!h)
    for (const auto& c : host.tree.children)
      if (c.name == "cpu" && !h) h = &c;
  if (!h) return;
  for (const char* k : {"arch", "vendor", "familyid", "modelid"})
    if (const std::string* v = h->attr(k)) cpu.set(k, *v);
}

Result<std::vector<GuestMatch>> match_guest_devices(const System& host, const SysfsSnapshot& guest) {
  std::vector<const PciFunction*> candidates;
  for (const auto& f : guest.functions)
    if (is_gpu_or_nic(f)) candidates.push_back(&f);
  std::vector<bool> used(candidates.size(), false);
  std::vector<GuestMatch> out;
  std::vector<int> wanted;
  for (DeviceKind k : {DeviceKind::kGpu, DeviceKind::kNic})
    for (int d : host.of_kind(k))
      if (!host.devices[d].busid.empty()) wanted.push_back(d);
  std::sort(wanted.begin(), wanted.end(),
            [&](int a, int b) { return host.devices[a].busid < host.devices[b].busid; });
  for (int d : wanted) {
    const XmlNode* h = find_pci_element(host.tree, host.devices[d].busid);
    int pick = -1;
    for (size_t c = 0; c < candidates.size() && pick < 0; ++c) {
      if (used[c] || kind_of_class(candidates[c]->pci_class) != host.devices[d].kind) continue;
      bool same = true;
      const std::string* gids[] = {&candidates[c]->vendor, &candidates[c]->device, &candidates[c]->subsystem_vendor,
                                   &candidates[c]->subsystem_device};
      for (size_t i = 0; i < 4 && h; ++i) {
        const std::string* hv = h->attr(kIdAttrs[i]);
        if (hv && !hv->empty() && lower(*hv) != lower(*gids[i])) same = false;
      }
      if (same) pick = static_cast<int>(c);
    }
    if (pick < 0) {
      std::string have;
      for (size_t c = 0; c < candidates.size(); ++c)
        if (!used[c]) have += (have.empty() ? "" : ", ") + candidates[c]->busid + " (" + candidates[c]->vendor + ":" +
                              candidates[c]->device + ")";
      return invalid_usage("no guest device matches host " + describe(host, d) + " by vendor, device and subsystem "
                           "ids; unmatched guest GPUs and NICs: " + (have.empty() ? std::string("none") : have));
    }
    used[static_cast<size_t>(pick)] = true;
    out.push_back({d, candidates[static_cast<size_t>(pick)]->busid});
  }
  return out;
}

Result<XmlNode> guest_xml_from_host(const System& host_in, const SysfsSnapshot& guest, std::vector<Diagnostic>* notes) {
  CFX_ASSIGN_OR_RETURN(System host, pci_only(host_in));
  CFX_ASSIGN_OR_RETURN(std::vector<GuestMatch> matches, match_guest_devices(host, guest));
  auto note = [&](Diagnostic::Level level, const char* code, std::string msg) {
    if (notes) notes->push_back({level, code, std::move(msg)});
  };
  // Guest NUMA node per device: what the guest kernel says, else the host
  // node's rank when the guest has that many nodes, else none (-1).
  std::set<int> host_nodes;
  for (const auto& m : matches) host_nodes.insert(host.devices[m.host].numa);
  std::map<int, int> rank;
  for (int h : host_nodes) rank[h] = static_cast<int>(rank.size());
  const int guest_nodes = static_cast<int>(guest.node_cpus.size());
  std::map<int, int> numa_of;  // match index -> guest node
  // Too few guest nodes: every device on the guest's first node (one CPU),
  // rather than some on a node and some on none.
  const bool enough = guest_nodes >= static_cast<int>(host_nodes.size());
  const int first_node = guest.node_cpus.empty() ? -1 : guest.node_cpus.begin()->first;
  bool lost = false, inferred = false;
  for (size_t i = 0; i < matches.size(); ++i) {
    const PciFunction* f = guest.find(matches[i].guest_busid);
    int n = f ? f->numa : -1;
    if (n < 0) {
      n = enough ? rank[host.devices[matches[i].host].numa] : first_node;
      inferred |= enough;
      lost |= !enough && host_nodes.size() > 1;
    }
    numa_of[static_cast<int>(i)] = n;
  }
  if (inferred)
    note(Diagnostic::Level::kInfo, "guest-numa-inferred",
         "the guest kernel gives some devices no NUMA node (numa_node -1): the file puts them on the guest node of "
         "the same rank as their host node; bind each guest node's vCPUs and memory to that host node");
  if (lost)
    note(Diagnostic::Level::kWarn, "guest-numa-missing",
         "the host's devices span " + std::to_string(host_nodes.size()) + " NUMA nodes but the guest has " +
             std::to_string(guest_nodes) + ": they all go under one CPU, and pairs across the host's sockets look local");

  // Synthetic switch ids in domain ffff, which no guest has.
  std::set<std::string> taken;
  for (const auto& f : guest.functions) taken.insert(f.busid);
  int next_fake = 0;
  auto fake_id = [&]() -> Result<std::string> {
    while (next_fake < 256) {
      char buf[32];
      std::snprintf(buf, sizeof buf, "ffff:ff:%02x.0", next_fake++);
      if (!taken.count(buf)) return std::string(buf);
    }
    return invalid_usage("more than 256 host switches to describe");
  };

  XmlNode root{"system", {{"version", "1"}}, {}};
  std::set<int> nodes;
  for (const auto& [i, n] : numa_of) nodes.insert(n);
  std::map<int, int> host_node_of;  // guest node -> a host node
  for (const auto& [i, n] : numa_of) host_node_of.emplace(n, host.devices[matches[static_cast<size_t>(i)].host].numa);
  for (int n : nodes) {
    XmlNode& cpu = root.add("cpu");
    cpu.set("numaid", std::to_string(n));
    auto it = guest.node_cpus.find(n);
    const std::vector<int>& cpus = it != guest.node_cpus.end() ? it->second : guest.online_cpus;
    if (!cpus.empty()) cpu.set("affinity", cpumask_of(cpus));
    copy_host_cpu_attrs(cpu, host, host_node_of[n]);
    // (host switch) -> its element, for devices of this node in host bus order.
    std::map<int, std::string> fake_of;
    std::vector<size_t> order;
    for (size_t i = 0; i < matches.size(); ++i)
      if (numa_of[static_cast<int>(i)] == n) order.push_back(i);
    std::sort(order.begin(), order.end(),
              [&](size_t a, size_t b) { return host.devices[matches[a].host].busid < host.devices[matches[b].host].busid; });
    for (size_t i : order) {
      XmlNode* at = &cpu;
      for (int sw : switches_above(host, matches[i].host)) {
        if (!fake_of.count(sw)) {
          CFX_ASSIGN_OR_RETURN(std::string id, fake_id());
          fake_of[sw] = id;
          XmlNode& s = at->add("pci");
          s.set("busid", id);
          s.set("class", "0x060400");
          for (const char* k : kIdAttrs) s.set(k, "0xffff");
          copy_host_link(s, host, sw);
        }
        for (auto& c : at->children)
          if (c.name == "pci" && c.attr_or("busid", "") == fake_of[sw]) at = &c;
      }
      XmlNode& dev = at->add("pci");
      dev.set("busid", matches[i].guest_busid);
      copy_host_pci_attrs(dev, host, matches[i].host);
    }
  }
  return root;
}

}  // namespace conflux::topo
