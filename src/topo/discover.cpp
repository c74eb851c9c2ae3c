#include "topo/discover.h"

#include "core/log.h"

#include <hwloc.h>

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <memory>
#include <set>

namespace conflux::topo {
namespace {

struct TopologyDeleter {
  void operator()(hwloc_topology* t) const { hwloc_topology_destroy(t); }
};
using Topology = std::unique_ptr<hwloc_topology, TopologyDeleter>;

std::string hex(unsigned v, int digits) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "0x%0*x", digits, v);
  return buf;
}

std::string busid_of(const hwloc_obj_attr_u::hwloc_pcidev_attr_s& p) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%04x:%02x:%02x.%01x", p.domain, p.bus, p.dev, p.func);
  return buf;
}

// NCCL's cpumask layout, as in /sys/devices/system/node/nodeN/cpumap:
// 32-bit hex words, most significant first, comma separated.
std::string cpumask(hwloc_const_bitmap_t set) {
  int last = hwloc_bitmap_last(set);
  if (last < 0) return "";
  std::vector<unsigned> words(static_cast<size_t>(last / 32 + 1), 0);
  for (int b = hwloc_bitmap_first(set); b >= 0; b = hwloc_bitmap_next(set, b))
    words[static_cast<size_t>(b / 32)] |= 1u << (b % 32);
  std::string out;
  for (size_t i = words.size(); i-- > 0;) {
    char buf[16];
    std::snprintf(buf, sizeof buf, "%08x", words[i]);
    if (!out.empty()) out += ',';
    out += buf;
  }
  return out;
}

std::string read_first_line(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  if (in) std::getline(in, line);
  while (!line.empty() && (line.back() == '\n' || line.back() == ' ')) line.pop_back();
  return line;
}

bool is_gpu(const hwloc_obj_attr_u::hwloc_pcidev_attr_s& p) {
  if (p.class_id == 0x0302) return true;  // 3D controller
  bool gpu_vendor = p.vendor_id == 0x10de || p.vendor_id == 0x1002 || p.vendor_id == 0x1d94;
  return (p.class_id >> 8) == 0x03 && gpu_vendor;  // a VGA/display function of a GPU vendor
}

bool is_nic(const hwloc_obj_attr_u::hwloc_pcidev_attr_s& p) { return (p.class_id >> 8) == 0x02; }

struct PciEntry {
  XmlNode node;                  // <pci> with attributes and its <nic> if any
  std::string parent;            // bus id of the NCCL parent, "" for the CPU
  int numa = 0;
  std::vector<std::string> kids; // bus ids, discovery order
};

class Discovery {
 public:
  Discovery(hwloc_topology_t topo, bool live) : topo_(topo), live_(live) {
    if (const char* root = std::getenv("HWLOC_FSROOT")) fsroot_ = root;
  }

  Discovered run() {
    Discovered out;
    out.tree.name = "system";
    out.tree.set("version", "1");
    add_cpus(out.tree);
    for (hwloc_obj_t o = hwloc_get_next_pcidev(topo_, nullptr); o; o = hwloc_get_next_pcidev(topo_, o)) {
      const auto& p = o->attr->pcidev;
      if (p.vendor_id == 0x1af4) virtio_ = true;
      if (!is_gpu(p) && !is_nic(p)) continue;
      add_device(o);
    }
    // Assemble: each CPU gets its top-level entries, each entry its kids.
    for (auto& cpu : out.tree.children) {
      int numa = static_cast<int>(parse_int(cpu.attr("numaid")).value_or(0));
      for (const auto& busid : top_order_)
        if (entries_[busid].numa == numa && entries_[busid].parent.empty()) cpu.children.push_back(emit(busid));
    }
    out.virtualization = virtualization();
    return out;
  }

 private:
  void add_cpus(XmlNode& root) {
    std::string arch, vendor, family, model;
    hwloc_obj_t top = hwloc_get_root_obj(topo_);
    if (const char* a = hwloc_obj_get_info_by_name(top, "Architecture")) arch = a;
    if (hwloc_obj_t pkg = hwloc_get_obj_by_type(topo_, HWLOC_OBJ_PACKAGE, 0)) {
      if (const char* v = hwloc_obj_get_info_by_name(pkg, "CPUVendor")) vendor = v;
      if (const char* v = hwloc_obj_get_info_by_name(pkg, "CPUFamilyNumber")) family = v;
      if (const char* v = hwloc_obj_get_info_by_name(pkg, "CPUModelNumber")) model = v;
    }
    int n = hwloc_get_nbobjs_by_type(topo_, HWLOC_OBJ_NUMANODE);
    for (int i = 0; i < n; ++i) {
      hwloc_obj_t node = hwloc_get_obj_by_type(topo_, HWLOC_OBJ_NUMANODE, static_cast<unsigned>(i));
      XmlNode& cpu = root.add("cpu");
      cpu.set("numaid", std::to_string(node->os_index));
      std::string mask = cpumask(node->cpuset);
      if (!mask.empty()) cpu.set("affinity", mask);
      if (!arch.empty()) cpu.set("arch", arch);
      if (!vendor.empty()) cpu.set("vendor", vendor);
      if (!family.empty()) cpu.set("familyid", family);
      if (!model.empty()) cpu.set("modelid", model);
    }
    if (n == 0) root.add("cpu").set("numaid", "0");
  }

  int numa_of(hwloc_obj_t o) {
    hwloc_obj_t anc = hwloc_get_non_io_ancestor_obj(topo_, o);
    if (!anc || !anc->nodeset) return first_numa();
    int first = hwloc_bitmap_first(anc->nodeset);
    return first < 0 ? first_numa() : first;
  }

  int first_numa() {
    hwloc_obj_t node = hwloc_get_obj_by_type(topo_, HWLOC_OBJ_NUMANODE, 0);
    return node ? static_cast<int>(node->os_index) : 0;
  }

  XmlNode pci_node(hwloc_obj_t o, const hwloc_obj_attr_u::hwloc_pcidev_attr_s& p) {
    XmlNode n{"pci", {}, {}};
    std::string busid = busid_of(p);
    n.set("busid", busid);
    n.set("class", hex(p.class_id, 4) + "00");
    n.set("vendor", hex(p.vendor_id, 4));
    n.set("device", hex(p.device_id, 4));
    n.set("subsystem_vendor", hex(p.subvendor_id, 4));
    n.set("subsystem_device", hex(p.subdevice_id, 4));
    auto [speed, width] = link_of(busid, p.linkspeed);
    n.set("link_speed", speed);
    n.set("link_width", std::to_string(width));
    (void)o;
    return n;
  }

  // NCCL reads max_link_speed/max_link_width (an idle GPU trains down to
  // Gen1; the maximum is what it can do). hwloc only has the current speed.
  std::pair<std::string, int> link_of(const std::string& busid, float hwloc_speed) {
    if (live_) {
      std::string dir = fsroot_ + "/sys/bus/pci/devices/" + busid + "/";
      std::string speed = read_first_line(dir + "max_link_speed");
      std::string width = read_first_line(dir + "max_link_width");
      if (!speed.empty() && !width.empty()) {
        auto w = parse_int(&width);
        if (w) return {speed, static_cast<int>(*w)};
      }
    }
    return pcie_from_hwloc_speed(hwloc_speed);
  }

  void add_device(hwloc_obj_t dev) {
    const auto& p = dev->attr->pcidev;
    std::string busid = busid_of(p);
    if (placed_.count(busid)) return;
    // The PCI-PCI bridges above it, nearest first.
    std::vector<hwloc_obj_t> bridges;
    for (hwloc_obj_t b = dev->parent; b && b->type == HWLOC_OBJ_BRIDGE; b = b->parent) {
      if (b->attr->bridge.upstream_type != HWLOC_OBJ_BRIDGE_PCI) break;  // host bridge: the CPU
      bridges.push_back(b);
    }
    std::vector<std::string> chain;
    for (hwloc_obj_t b : bridges) chain.push_back(busid_of(b->attr->bridge.upstream.pci));
    std::vector<std::string> kept = nccl_bridges(chain);
    int numa = numa_of(dev);

    PciEntry e;
    e.node = pci_node(dev, p);
    e.numa = numa;
    e.parent = kept.empty() ? "" : kept.front();
    if (is_nic(p)) add_nic(dev, e.node);
    insert(busid, std::move(e));
    // The kept bridges, each under the next one up.
    for (size_t i = 0; i < kept.size(); ++i) {
      if (placed_.count(kept[i])) break;  // already placed, and so is everything above
      hwloc_obj_t b = nullptr;
      for (size_t j = 0; j < chain.size(); ++j)
        if (chain[j] == kept[i]) b = bridges[j];
      PciEntry be;
      be.node = pci_node(b, b->attr->bridge.upstream.pci);
      be.numa = numa;
      be.parent = i + 1 < kept.size() ? kept[i + 1] : "";
      insert(kept[i], std::move(be));
    }
  }

  void insert(const std::string& busid, PciEntry e) {
    std::string parent = e.parent;
    placed_.insert(busid);
    PciEntry& slot = entries_[busid];
    e.kids = std::move(slot.kids);  // children inserted before their parent was
    slot = std::move(e);
    if (parent.empty()) {
      top_order_.push_back(busid);
    } else {
      entries_[parent].kids.push_back(busid);  // the parent entry is filled in right after
    }
  }

  void add_nic(hwloc_obj_t dev, XmlNode& pci) {
    std::string fabric, netdev;
    for (hwloc_obj_t c = dev->io_first_child; c; c = c->next_sibling) {
      if (c->type != HWLOC_OBJ_OS_DEVICE || !c->name) continue;
      if (c->attr->osdev.type == HWLOC_OBJ_OSDEV_OPENFABRICS && fabric.empty()) fabric = c->name;
      if (c->attr->osdev.type == HWLOC_OBJ_OSDEV_NETWORK && netdev.empty()) netdev = c->name;
    }
    if (fabric.empty() && netdev.empty()) return;  // no driver bound: known by class only
    XmlNode& net = pci.add("nic").add("net");
    net.set("name", fabric.empty() ? netdev : fabric);
    net.set("dev", std::to_string(net_dev_++));
    if (live_ && !netdev.empty()) {
      std::string speed = read_first_line(fsroot_ + "/sys/class/net/" + netdev + "/speed");
      auto mbps = parse_int(&speed);
      if (mbps && *mbps > 0) net.set("speed", std::to_string(*mbps));
    }
    net.set("port", "1");
    net.set("gdr", "0");
    if (!fabric.empty() && !netdev.empty()) net.set("ifname", netdev);
  }

  XmlNode emit(const std::string& busid) {
    PciEntry& e = entries_[busid];
    XmlNode n = e.node;
    for (const auto& k : e.kids) n.children.push_back(emit(k));
    return n;
  }

  std::string virtualization() {
    hwloc_obj_t top = hwloc_get_root_obj(topo_);
    for (const char* key : {"DMIProductName", "DMISysVendor"}) {
      const char* v = hwloc_obj_get_info_by_name(top, key);
      if (!v) continue;
      std::string s = v;
      for (const char* vm : {"QEMU", "KVM", "VMware", "VirtualBox", "Xen", "Microsoft Corporation",
                             "Amazon EC2", "Google Compute Engine", "OpenStack", "Bochs"})
        if (s.find(vm) != std::string::npos) return std::string(key) + " \"" + s + "\"";
    }
    if (live_) {
      std::ifstream in(fsroot_ + "/proc/cpuinfo");
      std::string line;
      while (std::getline(in, line)) {
        if (line.rfind("flags", 0) == 0) {
          if (line.find(" hypervisor") != std::string::npos) return "CPU flag \"hypervisor\"";
          break;
        }
      }
    }
    if (virtio_) return "virtio PCI devices (vendor 0x1af4)";
    return "";
  }

  hwloc_topology_t topo_;
  bool live_;
  bool virtio_ = false;
  std::string fsroot_;
  int net_dev_ = 0;
  std::map<std::string, PciEntry> entries_;
  std::vector<std::string> top_order_;
  std::set<std::string> placed_;
};

}  // namespace

std::vector<std::string> nccl_bridges(const std::vector<std::string>& chain) {
  std::vector<std::string> kept;
  for (size_t i = 1; i < chain.size(); i += 2) kept.push_back(chain[i]);
  return kept;
}

std::pair<std::string, int> pcie_from_hwloc_speed(double gbs) {
  if (gbs <= 0) return {"", 0};
  // hwloc: GT/s x width x encoding / 8. Try widths in the order servers use.
  static const struct { double gts; double enc; const char* text; } kGens[] = {
      {2.5, 0.8, "2.5 GT/s PCIe"},        {5.0, 0.8, "5.0 GT/s PCIe"},
      {8.0, 128.0 / 130, "8.0 GT/s PCIe"}, {16.0, 128.0 / 130, "16.0 GT/s PCIe"},
      {32.0, 128.0 / 130, "32.0 GT/s PCIe"}, {64.0, 242.0 / 256, "64.0 GT/s PCIe"},
  };
  for (int width : {16, 8, 4, 2, 1, 32, 12}) {
    for (const auto& g : kGens) {
      double expect = g.gts * g.enc * width / 8.0;
      if (std::fabs(expect - gbs) / expect < 0.02) return {g.text, width};
    }
  }
  return {"", 0};  // unrecognised: NCCL's defaults (Gen3 x16)
}

Result<Discovered> discover_tree(const std::string& hwloc_xml) {
  hwloc_topology_t raw = nullptr;
  if (hwloc_topology_init(&raw) != 0) return system_error("hwloc_topology_init failed", errno);
  Topology topo(raw);
  hwloc_topology_set_io_types_filter(raw, HWLOC_TYPE_FILTER_KEEP_IMPORTANT);
  // Only PCI devices and the network/OpenFabrics OS devices are read here
  // (GPUs are found by PCI class). hwloc's gl component otherwise loads
  // libX11 and tries to open X displays :0-:9, over unix sockets and TCP
  // ports 6000-6009, on every rank's init; opencl loads the ICD loader. The
  // GPU-runtime components would add OS devices we ignore.
  for (const char* unused : {"gl", "opencl", "cuda", "nvml", "rsmi", "levelzero"})
    hwloc_topology_set_components(raw, HWLOC_TOPOLOGY_COMPONENTS_FLAG_BLACKLIST, unused);
  const char* env_xml = std::getenv("HWLOC_XMLFILE");
  bool live = hwloc_xml.empty() && !(env_xml && *env_xml);
  if (!hwloc_xml.empty() && hwloc_topology_set_xml(raw, hwloc_xml.c_str()) != 0)
    return system_error("hwloc cannot read XML topology " + hwloc_xml, errno ? errno : EINVAL);
  if (hwloc_topology_load(raw) != 0)
    return system_error("hwloc topology discovery failed" + (hwloc_xml.empty() ? "" : " for " + hwloc_xml), errno);
  Discovery d(raw, live);
  return d.run();
}

Result<System> discover() {
  CFX_ASSIGN_OR_RETURN(Discovered d, discover_tree());
  CFX_ASSIGN_OR_RETURN(System sys, build_system(std::move(d.tree), "hwloc"));
  sys.virtualization = d.virtualization;
  return sys;
}

Result<System> discover_hwloc_xml(const std::string& hwloc_xml) {
  CFX_ASSIGN_OR_RETURN(Discovered d, discover_tree(hwloc_xml));
  CFX_ASSIGN_OR_RETURN(System sys, build_system(std::move(d.tree), "hwloc:" + hwloc_xml));
  sys.virtualization = d.virtualization;
  return sys;
}

}  // namespace conflux::topo
