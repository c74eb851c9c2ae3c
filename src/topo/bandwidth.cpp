// NCCL's bandwidth rules (src/graph/topo.h, topo.cc): the numbers its search
// and tuner use, so our plans rank links the way NCCL would.
#include "topo/system.h"

#include <cstring>

namespace conflux::topo {

double pci_bw(const std::string& link_speed, int link_width) {
  // Per-lane speed in units of 100 Mb/s; prefix-matched in this order, like
  // NCCL's kvDictPciGen, so "32 GT/s PCIe/s" (AWS p5) still reads as Gen5.
  static const struct { const char* prefix; int per_lane; } kGens[] = {
      {"2.5 GT/s", 15},       {"5 GT/s", 30},          {"8 GT/s", 60},
      {"16 GT/s", 120},       {"32 GT/s", 240},        {"5.0 GT/s PCIe", 30},
      {"8.0 GT/s PCIe", 60},  {"16.0 GT/s PCIe", 120}, {"32.0 GT/s PCIe", 240},
      {"64.0 GT/s PCIe", 480}, {"64 GT/s", 480},
  };
  int per_lane = 60;  // unknown or empty speed: Gen3
  for (const auto& g : kGens) {
    if (link_speed.compare(0, std::strlen(g.prefix), g.prefix) == 0) {
      per_lane = g.per_lane;
      break;
    }
  }
  int width = link_width <= 0 ? 16 : link_width;  // width 0 (VF, virtual device) means x16
  return width * per_lane / 80.0;
}

double nvlink_bw_per_link(int sm) {
  if (sm >= 100) return 40.1;
  if (sm >= 90) return 20.6;
  if (sm == 86) return 12.0;
  if (sm >= 80) return 20.0;
  if (sm >= 70) return 20.0;
  if (sm >= 60) return 18.0;
  return 20.0;  // unknown: NCCL's SM80 default
}

double inter_cpu_bw(const std::string& arch, const std::string& vendor, int family, int model) {
  if (arch.rfind("ppc64", 0) == 0) return 32.0;
  if (arch == "arm64" || arch == "aarch64") return 6.0;
  if (arch == "x86_64") {
    if (vendor == "GenuineIntel") {
      if (family == 6 && model >= 0xCF) return 40.0;  // Emerald Rapids
      if (family == 6 && model >= 0x8F) return 22.0;  // Sapphire Rapids
      if (family == 6 && model >= 0x55) return 10.0;  // Skylake .. Ice Lake
      return 6.0;                                     // Broadwell and older
    }
    if (vendor == "AuthenticAMD") return 16.0;
    if (vendor == "CentaurHauls" || vendor == "  Shanghai  ") return family == 7 && model == 0x5B ? 9.0 : 6.0;
  }
  return 6.0;  // unknown CPU: assume the slowest interconnect rather than a fast one
}

double net_bw(long long speed_mbps) {
  if (speed_mbps <= 0) speed_mbps = 10000;
  return speed_mbps / 8000.0;
}

}  // namespace conflux::topo
