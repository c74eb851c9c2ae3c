// Every real topology file in tests/data/topologies, checked against what its
// README says NCCL derives from it.
#include "support/test_env.h"
#include "topo/advice.h"
#include "topo/nccl_xml.h"
#include "topo/system.h"

#include <gtest/gtest.h>

#include <filesystem>

namespace conflux::topo {
namespace {

std::string file(const std::string& name) { return conflux::test::topology_dir() + "/" + name; }

void load_into(const std::string& name, System* out) {
  Result<System> r = load_nccl_xml(file(name));
  ASSERT_TRUE(r.ok()) << file(name) << ": " << r.status().message();
  *out = std::move(r).value();
}

// Loads a vendored file into `var`. A file that does not load ends the test
// here, naming the file, so no check below reads an empty model.
#define LOAD_OR_STOP(var, name) \
  System var;                   \
  ASSERT_NO_FATAL_FAILURE(load_into(name, &var))

// The device with id `id` in `s`; a missing one ends the test.
#define DEVICE_OR_STOP(var, s, id)  \
  const int var##_index = (s).find_id(id); \
  ASSERT_GE(var##_index, 0) << (id);       \
  const Device& var = (s).devices[static_cast<size_t>(var##_index)]

void expect_path(const System& s, const std::string& a, const std::string& b, PathType type, double bw) {
  int ia = s.find_id(a), ib = s.find_id(b);
  ASSERT_GE(ia, 0) << a;
  ASSERT_GE(ib, 0) << b;
  EXPECT_STREQ(to_string(s.path(ia, ib).type), to_string(type)) << a << " -> " << b;
  EXPECT_NEAR(s.path(ia, ib).bw, bw, 1e-3) << a << " -> " << b;
}

bool advised(const System& s, const std::string& code) {
  for (const auto& d : advise(s))
    if (d.code == code) return true;
  return false;
}

TEST(TopoFiles, EveryFileIsReadOrRefusedWithAReason) {
  int loaded = 0, refused = 0;
  ASSERT_TRUE(std::filesystem::is_directory(conflux::test::topology_dir())) << conflux::test::topology_dir();
  for (const auto& e : std::filesystem::directory_iterator(conflux::test::topology_dir())) {
    if (e.path().extension() != ".xml") continue;
    Result<System> r = load_nccl_xml(e.path().string());
    if (r.ok()) {
      ++loaded;
    } else {
      ++refused;
      EXPECT_NE(r.status().message().find(e.path().string()), std::string::npos) << r.status().message();
    }
  }
  EXPECT_EQ(loaded, 11);
  EXPECT_EQ(refused, 2);  // the RCCL v2 dump and the NCCL graph file
}

TEST(TopoFiles, AzureNdv2GpusUnderCpus) {
  LOAD_OR_STOP(s, "azure-ndv2-topo.xml");
  EXPECT_EQ(s.of_kind(DeviceKind::kGpu).size(), 8u);
  EXPECT_EQ(s.of_kind(DeviceKind::kNic).size(), 1u);
  expect_path(s, "GPU0", "NIC0", PathType::kPhb, 24);  // NUMA0: Gen4 x16
  expect_path(s, "GPU4", "NIC0", PathType::kSys, 10);  // NUMA1: Skylake UPI 10 GB/s
  expect_path(s, "GPU0", "GPU1", PathType::kPhb, 24);
  expect_path(s, "GPU0", "GPU5", PathType::kSys, 10);
  EXPECT_TRUE(advised(s, "gpu-nic-no-switch"));
}

TEST(TopoFiles, AzureNdv4TwoGpusTwoNicsPerSwitch) {
  LOAD_OR_STOP(s, "azure-ndv4-topo.xml");
  // GPU0 = 0001:00:00.0 shares ffff:ff:02.0 with NIC0 = 0101 and NIC1 = 0102.
  expect_path(s, "GPU0", "NIC0", PathType::kPix, 24);
  expect_path(s, "GPU0", "NIC1", PathType::kPix, 24);
  expect_path(s, "GPU0", "GPU1", PathType::kPix, 24);
  expect_path(s, "GPU0", "NIC2", PathType::kSys, 16);  // AMD inter-socket
  DEVICE_OR_STOP(gpu0, s, "GPU0");
  EXPECT_EQ(gpu0.numa, 1);
  EXPECT_FALSE(advised(s, "numa-affinity-identical"));
}

TEST(TopoFiles, AzureNdv4HistoricalFileDrawsNumaWarning) {
  LOAD_OR_STOP(s, "azure-ndv4-topo.2023-06-historical-swapped-numa.xml");
  EXPECT_TRUE(advised(s, "numa-affinity-identical"));
}

TEST(TopoFiles, AzureNdv5OneGpuOneNicPerSwitchGen5) {
  LOAD_OR_STOP(s, "azure-ndv5-topo.xml");
  for (int i = 0; i < 8; ++i) expect_path(s, "GPU" + std::to_string(i), "NIC" + std::to_string(i), PathType::kPix, 48);
  expect_path(s, "GPU0", "NIC7", PathType::kSys, 22);  // Sapphire Rapids
}

TEST(TopoFiles, AwsP4dVirtualSwitches) {
  LOAD_OR_STOP(s, "aws-p4d.24xlarge-topo.xml");
  expect_path(s, "GPU0", "NIC0", PathType::kPix, 12);  // 8 GT/s x16
  expect_path(s, "GPU1", "NIC0", PathType::kPix, 12);
  expect_path(s, "GPU0", "GPU1", PathType::kPix, 12);
  expect_path(s, "GPU0", "NIC1", PathType::kPhb, 12);
  expect_path(s, "GPU0", "NIC2", PathType::kSys, 10);
  EXPECT_TRUE(advised(s, "virtual-switches"));
  LOAD_OR_STOP(de, "aws-p4de.24xlarge-topo.xml");
  expect_path(de, "GPU7", "NIC3", PathType::kPix, 12);
}

TEST(TopoFiles, IbmCloudH100VsiSlowVirtualBridges) {
  LOAD_OR_STOP(s, "ibmcloud-gx3d-h100-vsi-topo.xml");
  expect_path(s, "GPU0", "NIC0", PathType::kPix, 48);      // mlx5_7 under the same bridge
  expect_path(s, "GPU0", "GPU1", PathType::kNvl, 370.8);   // 18 links x 20.6 through NVSwitch
  expect_path(s, "GPU0", "NIC1", PathType::kPxn, 48);      // via GPU1 over NVLink
  expect_path(s, "NIC0", "NIC1", PathType::kPhb, 0.1875);  // 2.5 GT/s x1 virtual bridges
  DEVICE_OR_STOP(nic0, s, "NIC0");
  EXPECT_EQ(nic0.name, "mlx5_7");
  EXPECT_TRUE(advised(s, "virtual-bridge-2.5gt-x1"));
}

TEST(TopoFiles, AlibabaHgxBroadcomSwitchesFlattened) {
  LOAD_OR_STOP(s, "alibaba-hgx-a100-8gpu-icx-cx6bond-topo.xml");
  expect_path(s, "GPU0", "GPU7", PathType::kNvl, 240);  // 12 links x 20
  expect_path(s, "GPU0", "NIC1", PathType::kPxb, 24);   // mlx5_bond_1 across the flattened PEX switch
  expect_path(s, "GPU0", "NIC0", PathType::kPhb, 24);   // mlx5_bond_0 hangs off the CPU
  expect_path(s, "GPU2", "NIC1", PathType::kPxn, 24);
  DEVICE_OR_STOP(nic1, s, "NIC1");
  EXPECT_EQ(nic1.name, "mlx5_bond_1");
  // 0c:00.0 absorbed its sub-switches 0e:00.0 and 15:00.0.
  EXPECT_GE(s.find_busid("0000:0c:00.0"), 0);
  EXPECT_LT(s.find_busid("0000:0e:00.0"), 0);
  EXPECT_LT(s.find_busid("0000:15:00.0"), 0);
  EXPECT_GE(s.find_busid("0000:11:00.0"), 0);
}

TEST(TopoFiles, AzureNcv4QuirksTolerated) {
  LOAD_OR_STOP(s, "azure-ncv4-topo.xml");
  EXPECT_TRUE(s.has_warning("nvlink-to-self"));
  expect_path(s, "GPU0", "NIC0", PathType::kPhb, 12);  // empty speed, width 0 -> Gen3 x16
  expect_path(s, "GPU1", "NIC0", PathType::kSys, 12);
  DEVICE_OR_STOP(nic0, s, "NIC0");
  EXPECT_EQ(nic0.name, "eth0");
}

TEST(TopoFiles, AwsP5SkeletonLoadsWithGaps) {
  LOAD_OR_STOP(s, "aws-p5.48xlarge-topo.xml");
  EXPECT_TRUE(s.of_kind(DeviceKind::kGpu).empty());
  EXPECT_EQ(s.of_kind(DeviceKind::kPciSwitch).size() + s.of_kind(DeviceKind::kPciOther).size(), 40u);
  EXPECT_TRUE(s.has_warning("pci-no-class"));
  EXPECT_TRUE(s.has_warning("no-gpus"));
}

TEST(TopoFiles, AwsG5SkeletonLoadsWithGaps) {
  LOAD_OR_STOP(s, "aws-g5.48xlarge-topo.xml");
  EXPECT_EQ(s.of_kind(DeviceKind::kPciOther).size(), 9u);
  EXPECT_EQ(s.numa_count(), 2);
  EXPECT_TRUE(s.has_warning("pci-no-class"));
  EXPECT_TRUE(s.has_warning("cpu-no-arch"));
}

TEST(TopoFiles, RcclVersion2Refused) {
  Result<System> r = load_nccl_xml(file("rccl-hygon-dcu-8gpu-topo-v2.xml"));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), cfxInvalidUsage);
  EXPECT_NE(r.status().message().find("version 2"), std::string::npos) << r.status().message();
  EXPECT_NE(r.status().message().find("version 1 needed"), std::string::npos);
  EXPECT_NE(r.status().message().find("RCCL"), std::string::npos);
}

TEST(TopoFiles, GraphFileRefused) {
  Result<System> r = load_nccl_xml(file("azure-ncv4-graph.xml"));
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("graph file"), std::string::npos) << r.status().message();
}

TEST(TopoFiles, MissingFileIsAClearError) {
  Result<System> r = load_nccl_xml("/nonexistent/topo.xml");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("/nonexistent/topo.xml"), std::string::npos);
}

TEST(TopoFiles, ExportRoundTripsToTheSameModel) {
  for (const char* name : {"ibmcloud-gx3d-h100-vsi-topo.xml", "alibaba-hgx-a100-8gpu-icx-cx6bond-topo.xml",
                           "azure-ndv4-topo.xml", "aws-p5.48xlarge-topo.xml", "azure-ncv4-topo.xml"}) {
    LOAD_OR_STOP(a, name);
    std::string xml = to_nccl_xml(a);
    Result<XmlNode> tree = parse_nccl_xml(xml, "export");
    ASSERT_TRUE(tree.ok()) << tree.status().message();
    Result<System> b = build_system(std::move(tree).value(), "roundtrip");
    ASSERT_TRUE(b.ok());
    ASSERT_EQ(a.devices.size(), b->devices.size()) << name;
    for (size_t i = 0; i < a.devices.size(); ++i) {
      EXPECT_EQ(a.devices[i].id, b->devices[i].id);
      EXPECT_EQ(a.devices[i].busid, b->devices[i].busid);
      for (size_t j = 0; j < a.devices.size(); ++j) {
        EXPECT_EQ(a.paths[i][j].type, b->paths[i][j].type);
        EXPECT_DOUBLE_EQ(a.paths[i][j].bw, b->paths[i][j].bw);
      }
    }
    EXPECT_EQ(to_nccl_xml(b.value()), xml) << name;
  }
}

}  // namespace
}  // namespace conflux::topo
