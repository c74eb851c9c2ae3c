#include "topo/vm_check.h"

#include "topo/vm_plan.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <functional>
#include <map>
#include <set>
#include <sstream>

namespace conflux::topo {
namespace {

using Severity = CheckFinding::Severity;

// Per-item findings of one kind beyond this many are summed up in one line,
// so a file for another machine does not bury the rest.
constexpr int kMaxPerCode = 8;

void add(CheckReport& r, Severity s, const std::string& code, std::string message) {
  int same = static_cast<int>(std::count_if(r.findings.begin(), r.findings.end(),
                                            [&](const CheckFinding& f) { return f.code == code; }));
  if (same == kMaxPerCode) {
    r.findings.push_back({s, code, "... and more of the same (" + code + ")"});
    return;
  }
  if (same > kMaxPerCode) return;
  r.findings.push_back({s, code, std::move(message)});
}

bool known_link_speed(const std::string& speed) {
  // NCCL's kvDictPciGen prefixes (src/graph/topo.cc).
  static const char* kKnown[] = {"2.5 GT/s", "5 GT/s", "8 GT/s", "16 GT/s", "32 GT/s", "64 GT/s",
                                 "5.0 GT/s", "8.0 GT/s", "16.0 GT/s", "32.0 GT/s", "64.0 GT/s"};
  for (const char* k : kKnown)
    if (speed.compare(0, std::strlen(k), k) == 0) return true;
  return false;
}

std::string cell(PathType t) { return to_string(t); }

// Rows and columns: the devices; each row shows the guest's classes, then the host's.
std::string side_by_side(const std::vector<std::string>& names, const std::vector<std::vector<std::string>>& guest,
                         const std::vector<std::vector<std::string>>& host) {
  std::ostringstream o;
  size_t w = 6;
  for (const auto& n : names) w = std::max(w, n.size() + 1);
  auto pad = [&](const std::string& s) { return s + std::string(w > s.size() ? w - s.size() : 1, ' '); };
  std::string head = pad("");
  for (const auto& n : names) head += pad(n);
  o << pad("guest") << std::string(head.size() > w ? head.size() - w : 0, ' ');
  if (!host.empty()) o << "   " << "host (plan)";
  o << "\n" << head;
  if (!host.empty()) o << "   " << head;
  o << "\n";
  for (size_t r = 0; r < names.size(); ++r) {
    std::string row = pad(names[r]);
    for (size_t c = 0; c < names.size(); ++c) row += pad(guest[r][c]);
    o << row;
    if (!host.empty()) {
      std::string hrow = pad(names[r]);
      for (size_t c = 0; c < names.size(); ++c) hrow += pad(host[r][c]);
      o << "   " << hrow;
    }
    o << "\n";
  }
  return o.str();
}

void check_against_plan(const SysfsSnapshot& guest, const VmExpectation& e, CheckReport& r) {
  std::vector<Endpoint> eps;
  int link_differs = 0;
  for (const auto& d : e.devices) {
    const PciFunction* f = guest.find(d.guest);
    if (!f) {
      add(r, Severity::kMismatch, "device-missing",
          d.qemu_id + " (host " + d.host + "): the guest has no PCI device at " + d.guest);
      continue;
    }
    eps.push_back({d.guest, d.kind});
    DeviceKind k = kind_of_class(f->pci_class);
    if (k != d.kind)
      add(r, Severity::kMismatch, "wrong-class",
          d.qemu_id + " at " + d.guest + " has class " + f->pci_class + ", not a " +
              (d.kind == DeviceKind::kGpu ? "GPU (0x03...)" : "NIC (0x02...)"));
    std::string parent = nccl_parent(guest, d.guest);
    if (parent != d.guest_switch)
      add(r, Severity::kMismatch, "wrong-switch",
          d.qemu_id + " at " + d.guest + " is under " + (parent.empty() ? "the CPU" : "switch " + parent) +
              " in the guest (NCCL's view of /sys), planned under " +
              (d.guest_switch.empty() ? "the CPU" : "switch " + d.guest_switch));
    if (f->numa != d.guest_numa)
      add(r, Severity::kMismatch, "wrong-numa",
          d.qemu_id + " at " + d.guest + " is on NUMA node " + std::to_string(f->numa) + " in the guest, planned " +
              std::to_string(d.guest_numa));
    if (!d.link_speed.empty() &&
        (nccl_link_speed(f->link_speed) != d.link_speed || (d.link_width > 0 && f->link_width != d.link_width)))
      ++link_differs;
  }
  if (link_differs > 0)
    add(r, Severity::kInfo, "link-speed",
        std::to_string(link_differs) + " device(s) report a PCIe link other than the host's (virtual ports, "
        "stand-in devices): the guest topology file states the host's, and NCCL takes the file's");

  XmlNode tree = nccl_tree_from_sysfs(guest, eps);
  Result<System> sys = build_system(std::move(tree), "guest /sys");
  if (!sys.ok()) {
    add(r, Severity::kMismatch, "guest-model", sys.status().message());
    return;
  }
  std::vector<std::string> names;
  for (const auto& d : e.devices) names.push_back(d.qemu_id);
  const size_t n = names.size();
  std::vector<std::vector<std::string>> gm(n, std::vector<std::string>(n, "-")), hm = gm;
  std::map<std::string, size_t> index;
  for (size_t i = 0; i < n; ++i) {
    index[names[i]] = i;
    gm[i][i] = hm[i][i] = "X";
  }
  int planned_changes = 0, off_plan = 0, checked = 0;
  for (const auto& p : e.pairs) {
    const ExpectedDevice* a = e.find(p.a);
    const ExpectedDevice* b = e.find(p.b);
    size_t ia = index[p.a], ib = index[p.b];
    hm[ia][ib] = hm[ib][ia] = cell(p.host);
    if (p.guest != p.host) ++planned_changes;
    int ga = sys->find_busid(a->guest), gb = sys->find_busid(b->guest);
    if (ga < 0 || gb < 0) continue;
    ++checked;
    PathType t = sys->path(ga, gb).type;
    gm[ia][ib] = gm[ib][ia] = cell(t);
    if (t != p.guest) {
      ++off_plan;
      add(r, Severity::kMismatch, "path-class",
          p.a + "-" + p.b + ": " + to_string(t) + " in the guest, planned " + to_string(p.guest) + " (host " +
              to_string(p.host) + ")");
    }
  }
  r.matrix = side_by_side(names, gm, hm);
  if (planned_changes > 0)
    add(r, Severity::kDegraded, "flat",
        std::string(e.layout == "flat" ? "flat tree: " : "") + "the plan itself changes " +
            std::to_string(planned_changes) + " of " + std::to_string(e.pairs.size()) +
            " GPU-GPU and GPU-NIC pairs from the host's path class (" + e.layout + " layout)");
  if (off_plan == 0 && planned_changes == 0 && checked == static_cast<int>(e.pairs.size()))
    add(r, Severity::kInfo, "as-planned",
        "all " + std::to_string(e.devices.size()) + " devices and " + std::to_string(e.pairs.size()) +
            " pairs are as planned: the guest groups them as the host does");
}

void check_without_plan(const SysfsSnapshot& guest, CheckReport& r) {
  std::vector<Endpoint> eps;
  for (const auto& f : guest.functions)
    if (is_gpu_or_nic(f)) eps.push_back({f.busid, kind_of_class(f.pci_class)});
  if (eps.empty()) {
    add(r, Severity::kInfo, "no-devices", "the guest has no GPU or NIC (by PCI class); pass --expect plan.json "
                                          "to check stand-in devices");
    return;
  }
  Result<System> sys = build_system(nccl_tree_from_sysfs(guest, eps), "guest /sys");
  if (!sys.ok()) {
    add(r, Severity::kMismatch, "guest-model", sys.status().message());
    return;
  }
  std::vector<int> devs = sys->of_kind(DeviceKind::kGpu);
  for (int nic : sys->of_kind(DeviceKind::kNic)) devs.push_back(nic);
  std::vector<std::string> names;
  names.reserve(devs.size());
  for (int d : devs) names.push_back(sys->devices[d].id);
  std::vector<std::vector<std::string>> gm(devs.size(), std::vector<std::string>(devs.size(), "X"));
  for (size_t a = 0; a < devs.size(); ++a)
    for (size_t b = 0; b < devs.size(); ++b)
      if (a != b) gm[a][b] = cell(sys->path(devs[a], devs[b]).type);
  r.matrix = side_by_side(names, gm, {});
  // Grouping matters once a GPU has a peer: another GPU or a NIC.
  const bool pairs = !sys->of_kind(DeviceKind::kGpu).empty() && devs.size() > 1;
  if (!pairs)
    add(r, Severity::kInfo, "no-pairs", "no GPU with a GPU or NIC peer: nothing for the PCI tree to group");
  else if (sys->of_kind(DeviceKind::kPciSwitch).empty())
    add(r, Severity::kDegraded, "flat",
        "flat tree: every one of the guest's " + std::to_string(devs.size()) +
            " GPUs and NICs hangs off a root complex, so GPU-NIC pairs are PHB or SYS to NCCL (GPUDirect RDMA off). "
            "Give the guest the host's grouping (`conflux vm plan`) or a topology file (`conflux vm xml`)");
}

void walk_file(const XmlNode& n, int numa, const SysfsSnapshot& guest, CheckReport& r) {
  if (n.name == "cpu") numa = static_cast<int>(parse_int(n.attr("numaid")).value_or(-1));
  if (n.name == "pci") {
    std::string raw = n.attr_or("busid", "");
    std::string b = normalize_busid(raw);
    bool synthetic = b.rfind("ffff:", 0) == 0 || n.attr_or("vendor", "") == "0xffff";
    const PciFunction* f = guest.find(b);
    if (!is_canonical_busid(raw)) {
      add(r, Severity::kMismatch, "busid-format",
          "the file's bus id \"" + raw + "\" is not the 12-character lower-case dddd:bb:dd.f NCCL matches /sys with");
    } else if (synthetic) {
      if (f)
        add(r, Severity::kMismatch, "synthetic-id-exists",
            "the file's synthetic switch " + b + " has the id of a real guest device: NCCL merges the two");
    } else if (!f) {
      add(r, Severity::kMismatch, "busid-missing", "the file names " + b + ", which this machine lacks");
    } else {
      std::string cls = n.attr_or("class", "");
      if (!cls.empty() && kind_of_class(cls) != kind_of_class(f->pci_class))
        add(r, Severity::kMismatch, "class-mismatch",
            b + ": the file says class " + cls + ", this machine has " + f->pci_class);
      if (numa >= 0 && f->numa >= 0 && numa != f->numa)
        add(r, Severity::kMismatch, "wrong-numa",
            b + ": the file puts it under NUMA node " + std::to_string(numa) + ", the kernel says node " +
                std::to_string(f->numa));
    }
    std::string speed = n.attr_or("link_speed", "");
    if (!speed.empty() && !known_link_speed(speed))
      add(r, Severity::kWarn, "link-speed-unknown",
          b + ": link_speed \"" + speed + "\" is not a speed NCCL knows; it assumes Gen3 (8 GT/s)");
  }
  for (const auto& c : n.children) walk_file(c, numa, guest, r);
}

}  // namespace

int CheckReport::exit_code() const {
  auto any = [&](Severity s) {
    return std::any_of(findings.begin(), findings.end(), [&](const CheckFinding& f) { return f.severity == s; });
  };
  if (any(Severity::kMismatch)) return 1;
  if (any(Severity::kDegraded)) return 2;
  return 0;
}

bool CheckReport::has(const std::string& code) const {
  return std::any_of(findings.begin(), findings.end(), [&](const CheckFinding& f) { return f.code == code; });
}

CheckReport check_guest(const SysfsSnapshot& guest, const VmExpectation* expect) {
  CheckReport r;
  if (expect)
    check_against_plan(guest, *expect, r);
  else
    check_without_plan(guest, r);
  return r;
}

void check_topo_file(const XmlNode& file, const SysfsSnapshot& guest, CheckReport& r) {
  std::set<int> online(guest.online_cpus.begin(), guest.online_cpus.end());
  for (const auto& cpu : file.children) {
    if (cpu.name != "cpu" || !cpu.has("affinity")) continue;
    std::string numa = cpu.attr_or("numaid", "?");
    Result<std::vector<int>> cpus = cpus_of_mask(cpu.attr_or("affinity", ""));
    if (!cpus.ok()) {
      add(r, Severity::kMismatch, "cpumask-malformed", "<cpu numaid=\"" + numa + "\">: " + cpus.status().message());
      continue;
    }
    std::vector<int> outside;
    for (int c : *cpus)
      if (!online.count(c)) outside.push_back(c);
    if (!online.empty() && !outside.empty())
      add(r, Severity::kMismatch, "cpumask-outside",
          "<cpu numaid=\"" + numa + "\"> affinity names CPUs " + cpulist_of(outside) +
              ", outside this machine's online CPUs " + cpulist_of(guest.online_cpus) +
              ": NCCL would pin ranks to CPUs that do not exist");
  }
  size_t before = r.findings.size();
  walk_file(file, -1, guest, r);
  int missing = 0, named = 0;
  std::function<void(const XmlNode&)> count = [&](const XmlNode& n) {
    if (n.name == "pci") {
      std::string b = normalize_busid(n.attr_or("busid", ""));
      if (b.rfind("ffff:", 0) != 0 && n.attr_or("vendor", "") != "0xffff") {
        ++named;
        if (!guest.find(b)) ++missing;
      }
    }
    for (const auto& c : n.children) count(c);
  };
  count(file);
  // A file for another machine: one line says so instead of a line per device.
  if (named > 0 && missing == named) {
    r.findings.erase(std::remove_if(r.findings.begin() + static_cast<std::ptrdiff_t>(before), r.findings.end(),
                                    [](const CheckFinding& f) { return f.code == "busid-missing"; }),
                     r.findings.end());
    r.findings.push_back({Severity::kMismatch, "file-for-another-machine",
                          "none of the " + std::to_string(named) +
                              " PCI devices the file names exists here: it describes another machine"});
  }
}

std::string to_text(const CheckReport& report) {
  std::ostringstream o;
  if (!report.matrix.empty()) o << "Path classes (GPU-GPU, GPU-NIC; NVLink left to the driver):\n" << report.matrix << "\n";
  static const char* kLabel[] = {"MISMATCH", "DEGRADED", "WARN", "info"};
  for (const auto& f : report.findings)
    o << "  [" << kLabel[static_cast<int>(f.severity)] << "] " << f.code << ": " << f.message << "\n";
  int code = report.exit_code();
  o << (code == 0 ? "result: ok (exit 0)\n"
                  : code == 1 ? "result: mismatch (exit 1)\n" : "result: degraded (exit 2)\n");
  return o.str();
}

}  // namespace conflux::topo
