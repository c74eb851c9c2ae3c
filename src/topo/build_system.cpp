// NCCL-dialect tree -> devices and links (NCCL's ncclTopoGetSystemFromXml),
// then paths. Where NCCL would stop with an error because detection did not
// fill a gap (a <pci> without class, a <cpu> without arch), we keep going and
// record the gap as a diagnostic: a file describes a machine we are not on.
#include "core/log.h"
#include "topo/system.h"

#include <algorithm>
#include <cstdint>
#include <map>

namespace conflux::topo {
namespace {

constexpr double kLocBw = 5000.0;  // NCCL's LOC_BW: a NIC hanging directly off a CPU

struct Builder {
  System sys;
  std::map<int, int> cpu_by_numa;
  int nvswitch = -1;
  int unknown_class = 0;
  int gpus_without_gpu_tag = 0;
  int nics_without_nic_tag = 0;

  void diag(Diagnostic::Level level, std::string code, std::string message) {
    sys.diagnostics.push_back({level, std::move(code), std::move(message)});
  }

  int add(Device d) {
    sys.devices.push_back(std::move(d));
    return static_cast<int>(sys.devices.size()) - 1;
  }

  // A second link of the same type between the same two devices adds its
  // bandwidth (NCCL's ncclTopoConnectNodes): a GPU's NVLinks to the four
  // NVSwitch chips become one GPU->NVSwitch link of the summed bandwidth.
  void connect(int a, int b, LinkType type, double bw) {
    for (Link& l : sys.devices[a].links) {
      if (l.to == b && l.type == type) {
        l.bw += bw;
        return;
      }
    }
    sys.devices[a].links.push_back({b, type, bw});
  }

  Status add_cpu(const XmlNode& x) {
    Device d;
    d.kind = DeviceKind::kCpu;
    auto numa = parse_int(x.attr("numaid"));
    if (!numa) return invalid_usage("<cpu> without a numeric numaid attribute");
    d.numa = static_cast<int>(*numa);
    if (cpu_by_numa.count(d.numa))
      return invalid_usage("two <cpu> elements with numaid " + std::to_string(d.numa));
    d.affinity = x.attr_or("affinity", "");
    d.vendor = x.attr_or("vendor", "");
    int idx = add(d);
    sys.devices[idx].cpu = idx;
    cpu_by_numa[d.numa] = idx;
    for (const auto& c : x.children) {
      if (c.name == "pci") {
        CFX_RETURN_IF_ERROR(add_pci(c, idx, idx));
      } else if (c.name == "nic") {
        // A NIC known only by its network name, attached to the CPU (NCCL
        // links it at LOC bandwidth): Azure NCv4's eth0.
        Device nic;
        nic.kind = DeviceKind::kNic;
        nic.numa = d.numa;
        nic.parent = idx;
        nic.cpu = idx;
        int n = add(nic);
        connect(n, idx, LinkType::kPci, kLocBw);
        connect(idx, n, LinkType::kPci, kLocBw);
        add_nets(c, n);
      }
    }
    return Status::Ok();
  }

  void add_nets(const XmlNode& nic_x, int nic) {
    for (const auto& net_x : nic_x.children) {
      if (net_x.name != "net") continue;
      Device net;
      net.kind = DeviceKind::kNet;
      net.name = net_x.attr_or("name", "");
      net.ifname = net_x.attr_or("ifname", "");
      net.numa = sys.devices[nic].numa;
      net.cpu = sys.devices[nic].cpu;
      net.parent = nic;
      net.nic = nic;
      net.busid = sys.devices[nic].busid;
      net.net_speed_gbs = net_bw(parse_int(net_x.attr("speed")).value_or(0));
      int n = add(net);
      connect(nic, n, LinkType::kNet, sys.devices[n].net_speed_gbs);
      connect(n, nic, LinkType::kNet, sys.devices[n].net_speed_gbs);
      Device& nd = sys.devices[nic];
      if (nd.name.empty()) {
        nd.name = sys.devices[n].name;
        nd.ifname = sys.devices[n].ifname;
      }
      nd.net_speed_gbs = std::max(nd.net_speed_gbs, sys.devices[n].net_speed_gbs);
    }
  }

  Status add_pci(const XmlNode& x, int parent, int cpu) {
    Device d;
    d.busid = normalize_busid(x.attr_or("busid", ""));
    if (d.busid.empty()) return invalid_usage("<pci> without a busid attribute");
    d.pci_class = x.attr_or("class", "");
    d.vendor = x.attr_or("vendor", "");
    d.link_speed = x.attr_or("link_speed", "");
    d.link_width = static_cast<int>(parse_int(x.attr("link_width")).value_or(-1));
    d.numa = sys.devices[cpu].numa;
    d.cpu = cpu;
    d.parent = parent;
    const XmlNode* gpu_x = x.child("gpu");
    const XmlNode* nic_x = x.child("nic");
    bool has_pci_children = false;
    for (const auto& c : x.children) has_pci_children |= c.name == "pci";
    if (gpu_x) {
      d.kind = DeviceKind::kGpu;
      d.sm = static_cast<int>(parse_int(gpu_x->attr("sm")).value_or(0));
      d.gpu_dev = static_cast<int>(parse_int(gpu_x->attr("dev")).value_or(-1));
    } else if (nic_x) {
      d.kind = DeviceKind::kNic;
    } else if (d.pci_class.rfind("0x0604", 0) == 0) {
      d.kind = DeviceKind::kPciSwitch;
    } else if (d.pci_class.rfind("0x03", 0) == 0) {
      // NCCL would ask NVML for the <gpu>; an injection file lists only the
      // PCI function, which is enough to place the GPU.
      d.kind = DeviceKind::kGpu;
      ++gpus_without_gpu_tag;
    } else if (d.pci_class.rfind("0x02", 0) == 0) {
      d.kind = DeviceKind::kNic;
      d.name = d.busid;  // no <net> name: the bus id identifies it
      ++nics_without_nic_tag;
    } else {
      if (d.pci_class.empty()) ++unknown_class;
      // NCCL's fallback: a PCI node; with children it is a switch.
      d.kind = has_pci_children ? DeviceKind::kPciSwitch : DeviceKind::kPciOther;
    }
    int idx = add(d);
    pci_id_of_[idx] = pci_id(x);  // the 64-bit id NCCL matches Broadcom switches on
    double bw = pci_bw(d.link_speed, d.link_width);
    connect(idx, parent, LinkType::kPci, bw);
    connect(parent, idx, LinkType::kPci, bw);
    if (nic_x) add_nets(*nic_x, idx);
    if (d.kind == DeviceKind::kPciSwitch || d.kind == DeviceKind::kPciOther) {
      for (const auto& c : x.children)
        if (c.name == "pci") CFX_RETURN_IF_ERROR(add_pci(c, idx, cpu));
    }
    if (gpu_x) gpu_elems_.push_back({idx, gpu_x});
    return Status::Ok();
  }

  static uint64_t pci_id(const XmlNode& x) {
    auto field = [&](const char* k) {
      return static_cast<uint64_t>(parse_int(x.attr(k)).value_or(0)) & 0xffff;
    };
    return field("vendor") << 48 | field("device") << 32 | field("subsystem_vendor") << 16 |
           field("subsystem_device");
  }

  void add_gpu_links() {
    for (auto [gpu, x] : gpu_elems_) {
      const int sm = sys.devices[gpu].sm;
      const int gpu_cpu = sys.devices[gpu].cpu;
      for (const auto& c : x->children) {
        if (c.name == "nvlink") {
          std::string target = normalize_busid(c.attr_or("target", ""));
          int count = static_cast<int>(parse_int(c.attr("count")).value_or(0));
          std::string tclass = c.attr_or("tclass", "");
          double bw = count * nvlink_bw_per_link(sm);
          int remote = -1;
          if (tclass.rfind("0x068000", 0) == 0) {
            if (nvswitch < 0) {
              Device nvs;
              nvs.kind = DeviceKind::kNvSwitch;
              nvswitch = add(nvs);
            }
            remote = nvswitch;
          } else if (tclass.rfind("0x068001", 0) == 0) {
            remote = gpu_cpu;
          } else {
            if (target == sys.devices[gpu].busid) {
              diag(Diagnostic::Level::kInfo, "nvlink-to-self",
                   "GPU " + target + " lists an NVLink to itself (ignored; NCCL ignores it too)");
              continue;
            }
            remote = sys.find_busid(target);
            if (remote < 0 || sys.devices[remote].kind != DeviceKind::kGpu) {
              diag(Diagnostic::Level::kWarn, "nvlink-unknown-target",
                   "GPU " + sys.devices[gpu].busid + " has an NVLink to " + target +
                       ", which is not a GPU in this topology (ignored)");
              continue;
            }
          }
          if (count <= 0) continue;
          connect(gpu, remote, LinkType::kNvl, bw);
          if (sys.devices[remote].kind != DeviceKind::kGpu) connect(remote, gpu, LinkType::kNvl, bw);
        } else if (c.name == "c2c") {
          // bw is per link in MB/s.
          double count = static_cast<double>(parse_int(c.attr("count")).value_or(0));
          double per = static_cast<double>(parse_int(c.attr("bw")).value_or(0));
          double bw = count * per / 1000.0;
          if (bw <= 0) continue;
          connect(gpu, gpu_cpu, LinkType::kC2c, bw);
          connect(gpu_cpu, gpu, LinkType::kC2c, bw);
        }
      }
    }
  }

  void connect_cpus(const XmlNode& root) {
    std::vector<const XmlNode*> cpu_x;
    for (const auto& c : root.children)
      if (c.name == "cpu") cpu_x.push_back(&c);
    for (size_t i = 0; i < cpu_x.size(); ++i) {
      int numa = static_cast<int>(*parse_int(cpu_x[i]->attr("numaid")));
      int a = cpu_by_numa[numa];
      std::string arch = cpu_x[i]->attr_or("arch", "");
      std::string vendor = cpu_x[i]->attr_or("vendor", "");
      int family = static_cast<int>(parse_int(cpu_x[i]->attr("familyid")).value_or(0));
      int model = static_cast<int>(parse_int(cpu_x[i]->attr("modelid")).value_or(0));
      double bw = inter_cpu_bw(arch, vendor, family, model);
      if ((arch.empty() || vendor.empty()) && cpu_x.size() > 1)
        diag(Diagnostic::Level::kWarn, "cpu-no-arch",
             "CPU " + std::to_string(numa) +
                 " has no arch/vendor: inter-socket bandwidth assumed " + std::to_string(bw).substr(0, 4) +
                 " GB/s (discovery on the machine fills this)");
      for (size_t j = 0; j < cpu_x.size(); ++j) {
        if (i == j) continue;
        int b = cpu_by_numa[static_cast<int>(*parse_int(cpu_x[j]->attr("numaid")))];
        connect(a, b, LinkType::kSys, bw);
      }
    }
  }

  static int bcm_gen(uint64_t id, int level) {
    if ((id & 0xfffffffffffff000ull) == 0x1000c0101000a000ull) return 4;
    if ((id & 0xfffffffffffff000ull) == (0x1000c03010000000ull | static_cast<uint64_t>(level) * 0x1000))
      return 5;
    return 0;
  }

  // Broadcom PEX Gen4/Gen5 switches show up as a switch whose downstream
  // ports hold sub-switches of the same chip; NCCL folds the sub-switches into
  // the parent (ncclTopoFlattenBcmSwitches) so GPUs behind them are closer.
  void flatten_bcm_switches() {
    std::vector<uint64_t> ids(sys.devices.size(), 0);
    for (auto [i, id] : pci_id_of_) ids[i] = id;
    std::vector<bool> removed(sys.devices.size(), false);
    int merged = 0;
    for (size_t s = 0; s < sys.devices.size(); ++s) {
      Device& sw = sys.devices[s];
      if (removed[s] || sw.kind != DeviceKind::kPciSwitch) continue;
      int gen = bcm_gen(ids[s], 0);
      if (!gen) continue;
      std::vector<int> subs;
      for (const Link& l : sw.links) {
        const Device& r = sys.devices[l.to];
        if (r.parent == static_cast<int>(s) && r.kind == DeviceKind::kPciSwitch && bcm_gen(ids[l.to], 1) == gen)
          subs.push_back(l.to);
      }
      for (int sub : subs) {
        removed[sub] = true;
        ++merged;
        for (const Link& l : sys.devices[sub].links) {
          if (l.to == static_cast<int>(s)) continue;
          Device& child = sys.devices[l.to];
          child.parent = static_cast<int>(s);
          for (Link& back : child.links)
            if (back.to == sub) back.to = static_cast<int>(s);
          sys.devices[s].links.push_back(l);
        }
      }
      auto& links = sys.devices[s].links;
      links.erase(std::remove_if(links.begin(), links.end(), [&](const Link& l) { return removed[l.to]; }),
                  links.end());
    }
    if (!merged) return;
    // Compact the device vector.
    std::vector<int> remap(sys.devices.size(), -1);
    std::vector<Device> kept;
    for (size_t i = 0; i < sys.devices.size(); ++i) {
      if (removed[i]) continue;
      remap[i] = static_cast<int>(kept.size());
      kept.push_back(std::move(sys.devices[i]));
    }
    for (Device& d : kept) {
      if (d.parent >= 0) d.parent = remap[d.parent];
      if (d.cpu >= 0) d.cpu = remap[d.cpu];
      if (d.nic >= 0) d.nic = remap[d.nic];
      for (Link& l : d.links) l.to = remap[l.to];
    }
    sys.devices = std::move(kept);
    for (auto& [numa, idx] : cpu_by_numa) idx = remap[idx];
    for (auto& [idx, x] : gpu_elems_) idx = remap[idx];
    CFX_INFO(kTopo, "flattened %d Broadcom sub-switch(es) into their parent switch", merged);
  }

  std::map<int, uint64_t> pci_id_of_;
  std::vector<std::pair<int, const XmlNode*>> gpu_elems_;
};

// nvidia-smi numbering: GPUn and NICn in bus id order (devices without a bus
// id after), CPUn by NUMA id, the rest in the same spirit.
void assign_ids(System& sys) {
  auto number = [&](DeviceKind kind, const char* prefix) {
    std::vector<int> idx;
    for (size_t i = 0; i < sys.devices.size(); ++i)
      if (sys.devices[i].kind == kind) idx.push_back(static_cast<int>(i));
    std::stable_sort(idx.begin(), idx.end(), [&](int a, int b) {
      const Device& da = sys.devices[a];
      const Device& db = sys.devices[b];
      if (kind == DeviceKind::kCpu) return da.numa < db.numa;
      if (da.busid.empty() != db.busid.empty()) return db.busid.empty();
      return da.busid < db.busid;
    });
    for (size_t n = 0; n < idx.size(); ++n) sys.devices[idx[n]].id = prefix + std::to_string(n);
  };
  number(DeviceKind::kCpu, "CPU");
  number(DeviceKind::kGpu, "GPU");
  number(DeviceKind::kNic, "NIC");
  number(DeviceKind::kNet, "NET");
  number(DeviceKind::kPciSwitch, "PCI");
  number(DeviceKind::kPciOther, "DEV");
  number(DeviceKind::kNvSwitch, "NVS");
}

}  // namespace

Result<System> build_system(XmlNode tree, std::string source) {
  if (tree.name != "system") return invalid_usage("topology root element is <" + tree.name + ">, not <system>");
  Builder b;
  for (const auto& c : tree.children) {
    if (c.name == "cpu") {
      Status s = b.add_cpu(c);
      if (!s.ok()) return s.prepend(source + ": ");
    }
  }
  b.flatten_bcm_switches();
  b.add_gpu_links();
  b.connect_cpus(tree);
  if (b.unknown_class > 0)
    b.diag(Diagnostic::Level::kWarn, "pci-no-class",
           std::to_string(b.unknown_class) +
               " <pci> element(s) have no class attribute: their device type (GPU, NIC, switch) is "
               "unknown until discovery on the machine fills it; they take no part in paths");
  if (b.gpus_without_gpu_tag > 0)
    b.diag(Diagnostic::Level::kInfo, "gpu-from-class",
           std::to_string(b.gpus_without_gpu_tag) +
               " GPU(s) are known only by PCI class (no <gpu> element): NVLink is unknown, so "
               "GPU-GPU paths here use PCIe only");
  if (b.nics_without_nic_tag > 0)
    b.diag(Diagnostic::Level::kInfo, "nic-from-class",
           std::to_string(b.nics_without_nic_tag) +
               " NIC(s) are known only by PCI class (no <nic><net> element): named by bus id, speed unknown");
  if (b.sys.of_kind(DeviceKind::kGpu).empty())
    b.diag(Diagnostic::Level::kInfo, "no-gpus", "the topology lists no GPUs");
  b.sys.tree = std::move(tree);
  b.sys.source = std::move(source);
  assign_ids(b.sys);
  compute_paths(b.sys);
  return std::move(b.sys);
}

}  // namespace conflux::topo
