#include "topo/sysfs_pci.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <set>
#include <system_error>

namespace conflux::topo {
namespace {

namespace fs = std::filesystem;

std::string first_line(const fs::path& p) {
  std::ifstream in(p);
  std::string line;
  if (in) std::getline(in, line);
  while (!line.empty() && std::isspace(static_cast<unsigned char>(line.back()))) line.pop_back();
  return line;
}

int int_or(const std::string& text, int fallback) {
  std::optional<long long> v = parse_int(&text);
  return v ? static_cast<int>(*v) : fallback;
}

// The components of `link`'s target below ".../sys/devices/". Guests and
// test trees link /sys/bus/pci/devices/X to ../../../devices/...; the chain
// of directories is the PCI ancestry.
std::vector<std::string> devices_path(const fs::path& link, const std::string& busid) {
  std::error_code ec;
  fs::path target = fs::weakly_canonical(link, ec);
  if (ec) return {busid};
  std::vector<std::string> parts;
  for (const auto& part : target) parts.push_back(part.string());
  for (size_t i = parts.size(); i-- > 1;) {
    if (parts[i] == "devices" && parts[i - 1] == "sys") {
      return {parts.begin() + static_cast<std::ptrdiff_t>(i) + 1, parts.end()};
    }
  }
  return {busid};
}

// NCCL's checkBDFFormat: "dddd:bb:dd.f" in hex.
bool looks_like_bdf(const std::string& s) {
  if (s.size() != 12 || s[4] != ':' || s[7] != ':' || s[10] != '.') return false;
  for (size_t i : {0, 1, 2, 3, 5, 6, 8, 9, 11})
    if (!std::isxdigit(static_cast<unsigned char>(s[i]))) return false;
  return true;
}

void set_pci_attrs(XmlNode& n, const PciFunction& f) {
  n.set("busid", f.busid);
  if (!f.pci_class.empty()) n.set("class", f.pci_class);
  if (!f.vendor.empty()) n.set("vendor", f.vendor);
  if (!f.device.empty()) n.set("device", f.device);
  if (!f.subsystem_vendor.empty()) n.set("subsystem_vendor", f.subsystem_vendor);
  if (!f.subsystem_device.empty()) n.set("subsystem_device", f.subsystem_device);
  if (!f.link_speed.empty()) n.set("link_speed", f.link_speed);
  if (f.link_width >= 0) n.set("link_width", std::to_string(f.link_width));
}

// NCCL's upward walk from one function: the chain of <pci> parents it
// creates, nearest first. A level that is not a bus id is the root complex.
std::vector<std::string> nccl_chain(const PciFunction& f) {
  std::vector<std::string> chain;
  const auto& p = f.path;
  // p.back() is the function itself; climb two levels at a time.
  size_t at = p.size() - 1;
  while (true) {
    if (at < 1 || !looks_like_bdf(p[at - 1])) break;       // one up is the root complex
    if (at < 2 || !looks_like_bdf(p[at - 2])) break;       // two up is the root complex
    at -= 2;
    chain.push_back(p[at]);
  }
  return chain;
}

}  // namespace

const PciFunction* SysfsSnapshot::find(const std::string& busid) const {
  std::string want = normalize_busid(busid);
  for (const auto& f : functions)
    if (f.busid == want) return &f;
  return nullptr;
}

Result<std::vector<int>> parse_cpulist(const std::string& text) {
  std::vector<int> out;
  std::string s;
  for (char c : text)
    if (!std::isspace(static_cast<unsigned char>(c))) s.push_back(c);
  if (s.empty()) return out;
  size_t pos = 0;
  while (pos <= s.size()) {
    size_t comma = s.find(',', pos);
    std::string item = s.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    size_t dash = item.find('-');
    std::string lo_s = item.substr(0, dash);
    std::string hi_s = dash == std::string::npos ? lo_s : item.substr(dash + 1);
    auto lo = parse_int(&lo_s);
    auto hi = parse_int(&hi_s);
    if (!lo || !hi || *lo < 0 || *hi < *lo || *hi > 65535)
      return invalid_argument("not a CPU list: \"" + text + "\"");
    for (long long c = *lo; c <= *hi; ++c) out.push_back(static_cast<int>(c));
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

std::string cpumask_of(const std::vector<int>& cpus) {
  int last = cpus.empty() ? 0 : *std::max_element(cpus.begin(), cpus.end());
  std::vector<unsigned> words(static_cast<size_t>(last / 32 + 1), 0);
  for (int c : cpus) words[static_cast<size_t>(c / 32)] |= 1u << (c % 32);
  std::string out;
  for (size_t i = words.size(); i-- > 0;) {
    char buf[16];
    std::snprintf(buf, sizeof buf, "%08x", words[i]);
    if (!out.empty()) out += ',';
    out += buf;
  }
  return out;
}

Result<std::vector<int>> cpus_of_mask(const std::string& mask) {
  std::vector<std::string> words;
  std::string cur;
  for (char c : mask) {
    if (c == ',') {
      words.push_back(cur);
      cur.clear();
    } else if (std::isxdigit(static_cast<unsigned char>(c))) {
      cur.push_back(c);
    } else {
      return invalid_argument("not a CPU mask: \"" + mask + "\"");
    }
  }
  words.push_back(cur);
  std::vector<int> out;
  int base = 0;
  for (size_t i = words.size(); i-- > 0; base += 32) {
    if (words[i].empty() || words[i].size() > 8) return invalid_argument("not a CPU mask: \"" + mask + "\"");
    unsigned long v = std::stoul(words[i], nullptr, 16);
    for (int b = 0; b < 32; ++b)
      if (v & (1ul << b)) out.push_back(base + b);
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::string cpulist_of(const std::vector<int>& cpus) {
  std::string out;
  for (size_t i = 0; i < cpus.size();) {
    size_t j = i;
    while (j + 1 < cpus.size() && cpus[j + 1] == cpus[j] + 1) ++j;
    if (!out.empty()) out += ',';
    out += std::to_string(cpus[i]);
    if (j > i) out += "-" + std::to_string(cpus[j]);
    i = j + 1;
  }
  return out;
}

bool is_canonical_busid(const std::string& busid) {
  if (!looks_like_bdf(busid)) return false;
  return std::none_of(busid.begin(), busid.end(), [](char c) { return std::isupper(static_cast<unsigned char>(c)); });
}

DeviceKind kind_of_class(const std::string& pci_class) {
  std::string c = pci_class;
  for (char& ch : c) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  if (c.rfind("0x0604", 0) == 0) return DeviceKind::kPciSwitch;
  if (c.rfind("0x03", 0) == 0) return DeviceKind::kGpu;
  if (c.rfind("0x02", 0) == 0) return DeviceKind::kNic;
  return DeviceKind::kPciOther;
}

bool is_gpu_or_nic(const PciFunction& f) {
  if (f.pci_class.rfind("0x0302", 0) == 0) return true;
  if (f.pci_class.rfind("0x02", 0) == 0) return true;
  bool gpu_vendor = f.vendor == "0x10de" || f.vendor == "0x1002" || f.vendor == "0x1d94";
  return f.pci_class.rfind("0x03", 0) == 0 && gpu_vendor;
}

Result<SysfsSnapshot> read_sysfs(const std::string& root) {
  fs::path base = root.empty() ? fs::path("/") : fs::path(root);
  fs::path bus = base / "sys/bus/pci/devices";
  std::error_code ec;
  if (!fs::is_directory(bus, ec))
    return invalid_usage("no PCI devices in " + bus.string() + " (is " + base.string() + " a Linux root with /sys?)");
  SysfsSnapshot snap;
  for (const auto& e : fs::directory_iterator(bus, ec)) {
    PciFunction f;
    f.busid = normalize_busid(e.path().filename().string());
    f.path = devices_path(e.path(), f.busid);
    const fs::path& dir = e.path();
    f.pci_class = first_line(dir / "class");
    f.vendor = first_line(dir / "vendor");
    f.device = first_line(dir / "device");
    f.subsystem_vendor = first_line(dir / "subsystem_vendor");
    f.subsystem_device = first_line(dir / "subsystem_device");
    f.link_speed = first_line(dir / "max_link_speed");
    f.link_width = int_or(first_line(dir / "max_link_width"), -1);
    f.numa = int_or(first_line(dir / "numa_node"), -1);
    snap.functions.push_back(std::move(f));
  }
  if (ec) return system_error("cannot list " + bus.string(), ec.value());
  std::sort(snap.functions.begin(), snap.functions.end(),
            [](const PciFunction& a, const PciFunction& b) { return a.busid < b.busid; });
  std::string online = first_line(base / "sys/devices/system/cpu/online");
  if (Result<std::vector<int>> cpus = parse_cpulist(online); cpus.ok()) snap.online_cpus = std::move(cpus).value();
  fs::path nodes = base / "sys/devices/system/node";
  if (fs::is_directory(nodes, ec)) {
    for (const auto& e : fs::directory_iterator(nodes, ec)) {
      std::string name = e.path().filename().string();
      if (name.rfind("node", 0) != 0) continue;
      std::string num = name.substr(4);
      std::optional<long long> id = parse_int(&num);
      if (!id) continue;
      Result<std::vector<int>> cpus = parse_cpulist(first_line(e.path() / "cpulist"));
      if (cpus.ok()) snap.node_cpus[static_cast<int>(*id)] = std::move(cpus).value();
    }
  }
  return snap;
}

std::string nccl_parent(const SysfsSnapshot& snap, const std::string& busid) {
  const PciFunction* f = snap.find(busid);
  if (!f) return "";
  std::vector<std::string> chain = nccl_chain(*f);
  return chain.empty() ? "" : chain.front();
}

XmlNode nccl_tree_from_sysfs(const SysfsSnapshot& snap, const std::vector<Endpoint>& endpoints) {
  XmlNode root{"system", {{"version", "1"}}, {}};
  // Built top-down at the end: each <pci>'s parent bus id ("" = its CPU).
  std::map<std::string, std::string> parent_of;
  std::map<std::string, int> numa_of;
  std::vector<std::string> order;  // first-seen order, for a stable document
  auto note = [&](const std::string& busid, const std::string& parent, int numa) {
    if (parent_of.count(busid)) return;
    parent_of[busid] = parent;
    numa_of[busid] = numa;
    order.push_back(busid);
  };
  for (const Endpoint& ep : endpoints) {
    const PciFunction* f = snap.find(ep.busid);
    if (!f) continue;
    std::vector<std::string> chain = nccl_chain(*f);
    note(f->busid, chain.empty() ? "" : chain.front(), f->numa);
    for (size_t i = 0; i < chain.size(); ++i) note(chain[i], i + 1 < chain.size() ? chain[i + 1] : "", f->numa);
  }
  std::map<std::string, DeviceKind> kind_of;
  for (const Endpoint& ep : endpoints) kind_of[normalize_busid(ep.busid)] = ep.kind;

  // Emit recursively: CPUs in NUMA order, then children in bus id order.
  std::set<int> numas;
  for (const auto& b : order)
    if (parent_of[b].empty()) numas.insert(numa_of[b]);
  auto emit = [&](auto&& self, const std::string& busid) -> XmlNode {
    XmlNode n{"pci", {}, {}};
    if (const PciFunction* f = snap.find(busid)) set_pci_attrs(n, *f);
    auto k = kind_of.find(busid);
    // A planned GPU or NIC whose guest function has another class (an
    // emulated stand-in) keeps the kind the plan gives it.
    if (k != kind_of.end() && kind_of_class(n.attr_or("class", "")) != k->second)
      n.set("class", k->second == DeviceKind::kGpu ? "0x030200" : "0x020000");
    std::vector<std::string> kids;
    for (const auto& b : order)
      if (parent_of[b] == busid) kids.push_back(b);
    std::sort(kids.begin(), kids.end());
    for (const auto& kid : kids) n.children.push_back(self(self, kid));
    return n;
  };
  for (int numa : numas) {
    XmlNode& cpu = root.add("cpu");
    cpu.set("numaid", std::to_string(numa));
    auto it = snap.node_cpus.find(numa);
    const std::vector<int>& cpus = it != snap.node_cpus.end() ? it->second : snap.online_cpus;
    if (!cpus.empty()) cpu.set("affinity", cpumask_of(cpus));
    std::vector<std::string> tops;
    for (const auto& b : order)
      if (parent_of[b].empty() && numa_of[b] == numa) tops.push_back(b);
    std::sort(tops.begin(), tops.end());
    for (const auto& t : tops) cpu.children.push_back(emit(emit, t));
  }
  return root;
}

}  // namespace conflux::topo
