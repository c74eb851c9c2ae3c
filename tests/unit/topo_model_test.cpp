// Bandwidth rules, bridge folding, fusion and planning helpers.
#include "core/config.h"
#include "support/test_env.h"
#include "topo/discover.h"
#include "topo/load_system.h"
#include "topo/nccl_xml.h"
#include "topo/plan.h"
#include "topo/report.h"
#include "topo/advice.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <set>

namespace conflux::topo {
namespace {

TEST(TopoBandwidth, PciGenerations) {
  EXPECT_DOUBLE_EQ(pci_bw("8 GT/s", 16), 12);
  EXPECT_DOUBLE_EQ(pci_bw("16.0 GT/s PCIe", 16), 24);
  EXPECT_DOUBLE_EQ(pci_bw("32 GT/s PCIe/s", 16), 48);  // AWS p5 quirk, prefix match
  EXPECT_DOUBLE_EQ(pci_bw("", 0), 12);                 // missing speed Gen3, width 0 -> 16
  EXPECT_DOUBLE_EQ(pci_bw("2.5 GT/s PCIe", 1), 0.1875);
}

TEST(TopoBandwidth, NvlinkCpuNet) {
  EXPECT_NEAR(18 * nvlink_bw_per_link(90), 370.8, 1e-9);
  EXPECT_DOUBLE_EQ(12 * nvlink_bw_per_link(80), 240);
  EXPECT_DOUBLE_EQ(inter_cpu_bw("x86_64", "GenuineIntel", 6, 0x8F), 22);
  EXPECT_DOUBLE_EQ(inter_cpu_bw("x86_64", "GenuineIntel", 6, 0xCF), 40);
  EXPECT_DOUBLE_EQ(inter_cpu_bw("x86_64", "GenuineIntel", 6, 0x4F), 6);
  EXPECT_DOUBLE_EQ(inter_cpu_bw("x86_64", "AuthenticAMD", 23, 49), 16);
  EXPECT_DOUBLE_EQ(net_bw(400000), 50);
  EXPECT_DOUBLE_EQ(net_bw(0), 1.25);
}

TEST(TopoDiscover, NcclSkipsEveryOtherBridge) {
  // device <- downstream port <- switch upstream port <- root port
  std::vector<std::string> chain = {"0000:46:02.2", "0000:45:00.0", "0000:44:00.0"};
  EXPECT_EQ(nccl_bridges(chain), std::vector<std::string>{"0000:45:00.0"});
  EXPECT_TRUE(nccl_bridges({"0000:00:01.0"}).empty());  // directly under a root port: the CPU
  EXPECT_TRUE(nccl_bridges({}).empty());
  EXPECT_EQ(nccl_bridges({"a", "b", "c", "d", "e"}), (std::vector<std::string>{"b", "d"}));
}

TEST(TopoDiscover, HwlocSpeedToGenWidth) {
  EXPECT_EQ(pcie_from_hwloc_speed(15.753846), (std::pair<std::string, int>{"8.0 GT/s PCIe", 16}));
  EXPECT_EQ(pcie_from_hwloc_speed(31.507692), (std::pair<std::string, int>{"16.0 GT/s PCIe", 16}));
  EXPECT_EQ(pcie_from_hwloc_speed(63.015385), (std::pair<std::string, int>{"32.0 GT/s PCIe", 16}));
  EXPECT_EQ(pcie_from_hwloc_speed(0), (std::pair<std::string, int>{"", 0}));
}

struct HwlocCase {
  const char* file;
  const char* gpu;
  const char* nic;
  PathType type;
};

TEST(TopoDiscover, HwlocDumpsMatchTheirReadme) {
  const HwlocCase cases[] = {
      {"aws-p5en.48xlarge-hwloc.xml", "0000:59:00.0", "0000:55:00.0", PathType::kPix},
      {"aws-p5en.48xlarge-hwloc.xml", "0000:a5:00.0", "0000:a3:00.0", PathType::kPix},
      {"aws-p6-b200.48xlarge-hwloc.xml", "0000:75:00.0", "0000:73:00.0", PathType::kPix},
      {"aws-p6-b200.48xlarge-hwloc.xml", "0000:51:00.0", "0000:4f:00.0", PathType::kPix},
      {"aws-p4d.24xlarge-hwloc.xml", "0000:10:1c.0", "0000:10:1b.0", PathType::kPhb},
      {"jsc-jurecadc-gpu-jrc0323-hwloc.xml", "0000:44:00.0", "0000:43:00.0", PathType::kPix},
      {"jsc-juwelsbooster-jwb0004-hwloc.xml", "0000:84:00.0", "0000:83:00.0", PathType::kPix},
      {"jsc-juwelscluster-gpu-jwc09n003-hwloc.xml", "0000:5e:00.0", "0000:5f:00.0", PathType::kPix},
      {"jsc-juwelscluster-gpu-jwc09n003-hwloc.xml", "0000:88:00.0", "0000:5f:00.0", PathType::kSys},
  };
  for (const auto& c : cases) {
    Result<System> s = discover_hwloc_xml(conflux::test::topology_dir() + "/hwloc/" + c.file);
    ASSERT_TRUE(s.ok()) << c.file << ": " << s.status().message();
    EXPECT_EQ(s->of_kind(DeviceKind::kGpu).size(), std::string(c.file).find("jsc") == 0 ? 4u : 8u) << c.file;
    int g = s->find_busid(c.gpu), n = s->find_busid(c.nic);
    ASSERT_GE(g, 0) << c.file << " " << c.gpu;
    ASSERT_GE(n, 0) << c.file << " " << c.nic;
    EXPECT_STREQ(to_string(s->path(g, n).type), to_string(c.type)) << c.file << " " << c.gpu << " " << c.nic;
  }
}

TEST(TopoDiscover, HwlocP4dIsFlatAndAdvised) {
  const std::string dump = conflux::test::topology_dir() + "/hwloc/aws-p4d.24xlarge-hwloc.xml";
  Result<System> s = discover_hwloc_xml(dump);
  ASSERT_TRUE(s.ok()) << dump << ": " << s.status().message();
  std::set<std::string> codes;
  for (const auto& d : advise(s.value())) codes.insert(d.code);
  EXPECT_TRUE(codes.count("vm-flat-pci") || codes.count("flat-pci"));
  EXPECT_TRUE(codes.count("gpu-nic-no-switch"));
  // Fusing the vendor file restores the switches: GPU and EFA become PIX.
  const std::string vendor = conflux::test::topology_dir() + "/aws-p4d.24xlarge-topo.xml";
  Result<XmlNode> file = read_nccl_xml(vendor);
  ASSERT_TRUE(file.ok()) << vendor << ": " << file.status().message();
  Result<System> fused = build_system(fuse(std::move(file).value(), s->tree), "fused");
  ASSERT_TRUE(fused.ok());
  int g = fused->find_busid("0000:10:1c.0"), n = fused->find_busid("0000:10:1b.0");
  ASSERT_GE(g, 0);
  ASSERT_GE(n, 0);
  EXPECT_EQ(fused->path(g, n).type, PathType::kPix);
  EXPECT_EQ(fused->devices[n].name, "rdmap16s27");  // the name came from discovery
}

TEST(TopoLoad, TopoFileErrorsAreLoud) {
  ::setenv("CONFLUX_TOPO_FILE", "/nonexistent/file.xml", 1);
  reload_config();  // configuration is read once; tests re-read it
  reset_system_cache();
  Result<System> r = load_system();
  EXPECT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("CONFLUX_TOPO_FILE"), std::string::npos);
  std::string v2 = conflux::test::topology_dir() + "/rccl-hygon-dcu-8gpu-topo-v2.xml";
  ::setenv("CONFLUX_TOPO_FILE", v2.c_str(), 1);
  reload_config();
  r = load_system();
  EXPECT_FALSE(r.ok());
  ::unsetenv("CONFLUX_TOPO_FILE");
  reload_config();
  r = load_system();
  EXPECT_TRUE(r.ok()) << r.status().message();
  reset_system_cache();
}

TEST(TopoPlan, NumaAndNearestNic) {
  Result<System> s = load_nccl_xml(conflux::test::topology_dir() + "/azure-ndv4-topo.xml");
  ASSERT_TRUE(s.ok()) << s.status().message();
  EXPECT_EQ(numa_of_cpus(s.value(), {0, 1, 2}), 0);
  EXPECT_EQ(numa_of_cpus(s.value(), {30}), 1);
  EXPECT_EQ(numa_of_cpus(s.value(), {95}), 3);
  NicChoice a = nearest_nic(s.value(), 1, 0);
  NicChoice b = nearest_nic(s.value(), 1, 1);
  EXPECT_EQ(a.name, "0101:00:00.0");
  EXPECT_EQ(b.name, "0102:00:00.0");  // local ranks spread over the node's rails
  EXPECT_EQ(a.type, PathType::kPhb);  // a hop from the CPU root complex
}

TEST(TopoPlan, RingKeepsHostsContiguousAndSpreadsRails) {
  std::vector<RankLocation> ranks;
  for (int r = 0; r < 12; ++r)  // interleaved hosts, 2 NICs per host
    ranks.push_back({"host" + std::to_string(r % 3), (r / 3) % 2, "mlx5_" + std::to_string((r / 3) % 2)});
  std::vector<int> order = order_ring(ranks);
  ASSERT_EQ(order.size(), 12u);
  EXPECT_EQ(std::set<int>(order.begin(), order.end()).size(), 12u);
  std::set<std::string> seen;
  std::string prev;
  std::set<std::string> entry_nics;
  for (size_t i = 0; i < order.size(); ++i) {
    const std::string& h = ranks[order[i]].host;
    if (h != prev) {
      EXPECT_FALSE(seen.count(h)) << "host " << h << " is split";
      seen.insert(h);
      entry_nics.insert(ranks[order[i]].nic);
    }
    prev = h;
  }
  EXPECT_GT(entry_nics.size(), 1u);  // cross-host edges do not all land on one rail
}

TEST(TopoReport, JsonHasDevicesPathsWarnings) {
  Result<System> s = load_nccl_xml(conflux::test::topology_dir() + "/ibmcloud-gx3d-h100-vsi-topo.xml");
  ASSERT_TRUE(s.ok()) << s.status().message();
  std::string j = to_json(s.value(), advise(s.value()));
  EXPECT_NE(j.find("\"id\": \"GPU0\", \"kind\": \"gpu\", \"busid\": \"0000:a4:00.0\", \"numa\": 0"), std::string::npos);
  EXPECT_NE(j.find("\"GPU1\": {\"type\": \"NVL\", \"bw\": 370.8}"), std::string::npos) << j.substr(0, 3000);
  EXPECT_NE(j.find("\"NIC0\": {\"type\": \"PIX\", \"bw\": 48.0}"), std::string::npos);
  EXPECT_NE(j.find("\"warnings\""), std::string::npos);
  std::string t = to_text(s.value(), advise(s.value()));
  EXPECT_NE(t.find("NVL/370.8"), std::string::npos);
}

TEST(TopoXml, HostileInputIsRefusedNotCrashed) {
  EXPECT_FALSE(parse_nccl_xml("", "x").ok());
  EXPECT_FALSE(parse_nccl_xml("<system version=\"1\"><cpu", "x").ok());
  std::string deep = "<system version=\"1\"><cpu numaid=\"0\">";
  for (int i = 0; i < 100; ++i) deep += "<pci busid=\"0000:00:00.0\">";
  EXPECT_FALSE(parse_nccl_xml(deep, "x").ok());
  Result<XmlNode> t = parse_nccl_xml("<system version=\"1\"><cpu/></system>", "x");
  ASSERT_TRUE(t.ok());
  EXPECT_FALSE(build_system(t.value(), "x").ok());  // cpu without numaid
}

}  // namespace
}  // namespace conflux::topo
