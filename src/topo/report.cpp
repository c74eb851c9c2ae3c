#include "topo/report.h"

#include <algorithm>
#include <cstdio>
#include <sstream>

namespace conflux::topo {
namespace {

std::string fmt_bw(double bw) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.4g", bw);
  return buf;
}

std::string json_str(const std::string& s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      out += buf;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out + "\"";
}

std::string json_num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.4f", v);
  std::string s = buf;
  while (s.size() > 1 && s.back() == '0' && s[s.size() - 2] != '.') s.pop_back();
  return s;
}

// The GPUs and NICs, in nvidia-smi order: the rows/columns of the matrix.
std::vector<int> endpoints(const System& sys) {
  std::vector<int> out = sys.of_kind(DeviceKind::kGpu);
  for (int n : sys.of_kind(DeviceKind::kNic)) out.push_back(n);
  return out;
}

}  // namespace

std::string to_text(const System& sys, const std::vector<Diagnostic>& advice) {
  std::ostringstream o;
  o << "Topology: " << sys.source << "\n";
  if (!sys.virtualization.empty()) o << "Virtual machine: " << sys.virtualization << "\n";
  o << "\nDevices:\n";
  for (int c : sys.of_kind(DeviceKind::kCpu)) {
    const Device& d = sys.devices[c];
    o << "  " << d.id << "  NUMA " << d.numa << "  affinity " << (d.affinity.empty() ? "?" : d.affinity)
      << "  " << d.vendor << "\n";
  }
  for (DeviceKind k : {DeviceKind::kGpu, DeviceKind::kNic, DeviceKind::kPciSwitch}) {
    for (int i : sys.of_kind(k)) {
      const Device& d = sys.devices[i];
      o << "  " << d.id << "  " << (d.busid.empty() ? "-" : d.busid) << "  NUMA " << d.numa;
      if (k == DeviceKind::kNic) o << "  " << d.name << (d.ifname.empty() ? "" : " (" + d.ifname + ")");
      if (d.parent >= 0) {
        const Device& p = sys.devices[d.parent];
        double up = 0;
        for (const Link& l : d.links)
          if (l.to == d.parent) up = l.bw;
        o << "  under " << p.id << "  PCIe " << fmt_bw(up) << " GB/s";
      }
      if (k == DeviceKind::kNic && d.net_speed_gbs > 0) o << "  net " << fmt_bw(d.net_speed_gbs) << " GB/s";
      if (k == DeviceKind::kGpu) {
        double nvl = 0;
        for (const Link& l : d.links)
          if (l.type == LinkType::kNvl) nvl += l.bw;
        if (nvl > 0) o << "  NVLink " << fmt_bw(nvl) << " GB/s";
      }
      o << "\n";
    }
  }

  std::vector<int> ep = endpoints(sys);
  if (!ep.empty()) {
    o << "\nMatrix (path class / bandwidth GB/s):\n" << "        ";
    for (int c : ep) {
      char buf[16];
      std::snprintf(buf, sizeof buf, "%-11s", sys.devices[c].id.c_str());
      o << buf;
    }
    size_t aff_width = 14;
    for (int r : ep) {
      int cpu = sys.devices[r].cpu;
      if (cpu >= 0) aff_width = std::max(aff_width, sys.devices[cpu].affinity.size() + 2);
    }
    std::string aff_head = "CPU Affinity";
    aff_head.resize(aff_width, ' ');
    o << aff_head << "NUMA Affinity\n";
    for (int r : ep) {
      char buf[32];
      std::snprintf(buf, sizeof buf, "%-8s", sys.devices[r].id.c_str());
      o << buf;
      for (int c : ep) {
        std::string cell = r == c ? "X" : std::string(to_string(sys.path(r, c).type)) + "/" + fmt_bw(sys.path(r, c).bw);
        std::snprintf(buf, sizeof buf, "%-11s", cell.c_str());
        o << buf;
      }
      int cpu = sys.devices[r].cpu;
      std::string aff = cpu >= 0 && !sys.devices[cpu].affinity.empty() ? sys.devices[cpu].affinity : "N/A";
      aff.resize(aff_width, ' ');
      o << aff << sys.devices[r].numa << "\n";
    }
    o << "\nLegend: X self; NVL NVLink; NVB NVLink through a GPU; C2C chip-to-chip; PIX one PCIe switch;\n"
         "        PXB several switches; P2C C2C then PCIe; PXN NVLink peer then PCIe; PHB through a CPU\n"
         "        root complex; SYS across the inter-socket link.\n";
  }
  o << "\nAdvice:\n";
  if (advice.empty()) o << "  none: nothing in this topology looks wrong.\n";
  for (const auto& a : advice)
    o << "  [" << (a.level == Diagnostic::Level::kWarn ? "WARN" : "info") << "] " << a.message << "\n";
  return o.str();
}

std::string to_json(const System& sys, const std::vector<Diagnostic>& advice) {
  std::ostringstream o;
  o << "{\n  \"source\": " << json_str(sys.source) << ",\n";
  o << "  \"virtualization\": " << json_str(sys.virtualization) << ",\n";
  o << "  \"devices\": [";
  bool first = true;
  for (DeviceKind k : {DeviceKind::kCpu, DeviceKind::kGpu, DeviceKind::kNic, DeviceKind::kPciSwitch}) {
    for (int i : sys.of_kind(k)) {
      const Device& d = sys.devices[i];
      o << (first ? "\n" : ",\n") << "    {\"id\": " << json_str(d.id) << ", \"kind\": " << json_str(to_string(d.kind));
      first = false;
      if (!d.busid.empty()) o << ", \"busid\": " << json_str(d.busid);
      o << ", \"numa\": " << d.numa;
      if (k == DeviceKind::kCpu) o << ", \"affinity\": " << json_str(d.affinity);
      if (k == DeviceKind::kNic) {
        o << ", \"name\": " << json_str(d.name);
        if (!d.ifname.empty()) o << ", \"ifname\": " << json_str(d.ifname);
      }
      if (d.parent >= 0) o << ", \"parent\": " << json_str(sys.devices[d.parent].id);
      o << "}";
    }
  }
  o << "\n  ],\n  \"paths\": {";
  std::vector<int> ep = endpoints(sys);
  for (size_t r = 0; r < ep.size(); ++r) {
    o << (r ? ",\n" : "\n") << "    " << json_str(sys.devices[ep[r]].id) << ": {";
    bool f = true;
    for (int c : ep) {
      if (c == ep[r]) continue;
      const Path& p = sys.path(ep[r], c);
      o << (f ? "" : ", ") << json_str(sys.devices[c].id) << ": {\"type\": " << json_str(to_string(p.type))
        << ", \"bw\": " << json_num(p.bw) << "}";
      f = false;
    }
    o << "}";
  }
  o << "\n  },\n  \"warnings\": [";
  for (size_t i = 0; i < advice.size(); ++i) {
    o << (i ? ",\n" : "\n") << "    {\"level\": " << json_str(advice[i].level == Diagnostic::Level::kWarn ? "warn" : "info")
      << ", \"code\": " << json_str(advice[i].code) << ", \"message\": " << json_str(advice[i].message) << "}";
  }
  o << "\n  ]\n}\n";
  return o.str();
}

}  // namespace conflux::topo
