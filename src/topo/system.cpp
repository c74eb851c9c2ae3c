#include "topo/system.h"

#include <algorithm>

namespace conflux::topo {

const char* to_string(DeviceKind kind) {
  switch (kind) {
    case DeviceKind::kCpu: return "cpu";
    case DeviceKind::kPciSwitch: return "pci";
    case DeviceKind::kPciOther: return "pcidev";
    case DeviceKind::kGpu: return "gpu";
    case DeviceKind::kNic: return "nic";
    case DeviceKind::kNet: return "net";
    case DeviceKind::kNvSwitch: return "nvswitch";
  }
  return "?";
}

const char* to_string(PathType type) {
  static const char* kNames[] = {"LOC", "NVL", "NVB", "C2C", "PIX", "PXB", "P2C", "PXN", "PHB", "SYS", "NET", "DIS"};
  return kNames[static_cast<int>(type)];
}

const char* to_string(LinkType type) {
  switch (type) {
    case LinkType::kLoc: return "LOC";
    case LinkType::kNvl: return "NVL";
    case LinkType::kC2c: return "C2C";
    case LinkType::kPci: return "PCI";
    case LinkType::kSys: return "SYS";
    case LinkType::kNet: return "NET";
  }
  return "?";
}

std::vector<int> System::of_kind(DeviceKind kind) const {
  std::vector<int> out;
  for (size_t i = 0; i < devices.size(); ++i)
    if (devices[i].kind == kind) out.push_back(static_cast<int>(i));
  // Ids carry the numbering ("GPU10" after "GPU9"): sort by the number.
  auto num = [&](int i) {
    const std::string& id = devices[i].id;
    size_t p = id.find_first_of("0123456789");
    return p == std::string::npos ? 0 : std::stoi(id.substr(p));
  };
  std::sort(out.begin(), out.end(), [&](int a, int b) { return num(a) < num(b); });
  return out;
}

int System::find_busid(const std::string& busid) const {
  std::string want = normalize_busid(busid);
  for (size_t i = 0; i < devices.size(); ++i)
    if (devices[i].kind != DeviceKind::kNet && devices[i].busid == want) return static_cast<int>(i);
  return -1;
}

int System::find_id(const std::string& id) const {
  for (size_t i = 0; i < devices.size(); ++i)
    if (devices[i].id == id) return static_cast<int>(i);
  return -1;
}

int System::find_net(const std::string& name) const {
  for (size_t i = 0; i < devices.size(); ++i)
    if (devices[i].kind == DeviceKind::kNet && (devices[i].name == name || devices[i].ifname == name))
      return static_cast<int>(i);
  for (size_t i = 0; i < devices.size(); ++i)
    if (devices[i].kind == DeviceKind::kNic && devices[i].name == name) return static_cast<int>(i);
  return -1;
}

bool System::has_warning(const std::string& code) const {
  return std::any_of(diagnostics.begin(), diagnostics.end(),
                     [&](const Diagnostic& d) { return d.code == code; });
}

}  // namespace conflux::topo
