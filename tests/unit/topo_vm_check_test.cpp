// `conflux vm check` on fake /sys trees written by the test: the tree a plan
// predicts passes; each planted fault (a device missing, a device under the
// wrong switch, a wrong NUMA node, a bus id in the file that the guest lacks,
// a CPU mask outside the guest's CPUs) is caught. `conflux vm xml` on a flat
// guest, and the vendor's NDv4 files against the /sys of an NDv4 VM.
#include "support/test_env.h"
#include "topo/load_system.h"
#include "topo/nccl_xml.h"
#include "topo/sysfs_pci.h"
#include "topo/vm_check.h"
#include "topo/vm_guest_xml.h"
#include "topo/vm_output.h"
#include "topo/vm_plan.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

namespace conflux::topo {
namespace {

namespace fs = std::filesystem;

std::string topo_path(const std::string& name) { return conflux::test::topology_dir() + "/" + name; }

void put(const fs::path& p, const std::string& text) {
  std::ofstream out(p);
  out << text << "\n";
}

// A /sys tree laid out as the kernel does: function directories nested as
// the PCI tree, /sys/bus/pci/devices links into them, CPUs and NUMA nodes.
class FakeSysfs {
 public:
  FakeSysfs() {
    root_ = fs::temp_directory_path() / ("conflux-sysfs-" + std::to_string(getpid()) + "-" + std::to_string(count_++));
    fs::remove_all(root_);
  }
  ~FakeSysfs() { fs::remove_all(root_); }
  FakeSysfs(const FakeSysfs&) = delete;
  FakeSysfs& operator=(const FakeSysfs&) = delete;

  std::string write(const SysfsSnapshot& s) {
    fs::path devices = root_ / "sys/devices";
    fs::path bus = root_ / "sys/bus/pci/devices";
    fs::create_directories(bus);
    for (const auto& f : s.functions) {
      fs::path rel;
      for (const auto& part : f.path) rel /= part;
      fs::path dir = devices / rel;
      fs::create_directories(dir);
      put(dir / "class", f.pci_class);
      put(dir / "vendor", f.vendor.empty() ? "0x1af4" : f.vendor);
      if (!f.device.empty()) put(dir / "device", f.device);
      if (!f.subsystem_vendor.empty()) put(dir / "subsystem_vendor", f.subsystem_vendor);
      if (!f.subsystem_device.empty()) put(dir / "subsystem_device", f.subsystem_device);
      if (!f.link_speed.empty()) put(dir / "max_link_speed", f.link_speed);
      if (f.link_width >= 0) put(dir / "max_link_width", std::to_string(f.link_width));
      put(dir / "numa_node", std::to_string(f.numa));
      fs::create_directory_symlink(fs::path("../../../devices") / rel, bus / f.busid);
    }
    fs::create_directories(root_ / "sys/devices/system/cpu");
    put(root_ / "sys/devices/system/cpu/online", cpulist_of(s.online_cpus));
    for (const auto& [node, cpus] : s.node_cpus) {
      fs::path d = root_ / "sys/devices/system/node" / ("node" + std::to_string(node));
      fs::create_directories(d);
      put(d / "cpulist", cpulist_of(cpus));
    }
    return root_.string();
  }

 private:
  fs::path root_;
  static inline int count_ = 0;
};

struct Planned {
  VmPlan plan;
  VmExpectation expect;
};

Planned planned(const std::string& file, VmLayout layout) {
  Planned out;
  Result<System> host = load_any_topology(topo_path(file));
  EXPECT_TRUE(host.ok()) << host.status().message();
  VmPlanOptions opt;
  opt.layout = layout;
  opt.vcpus_per_node = 2;
  Result<VmPlan> plan = plan_vm(host.value(), {true, {}}, opt);
  EXPECT_TRUE(plan.ok()) << plan.status().message();
  out.plan = std::move(plan).value();
  Result<VmExpectation> e = parse_plan_json(plan_json(out.plan), "plan.json");
  EXPECT_TRUE(e.ok()) << e.status().message();
  out.expect = std::move(e).value();
  return out;
}

// Writes `snap`, reads it back as a guest would, checks it against the plan
// (and `file` when given).
CheckReport check(const Planned& p, const SysfsSnapshot& snap, const XmlNode* file = nullptr) {
  FakeSysfs fake;
  Result<SysfsSnapshot> read = read_sysfs(fake.write(snap));
  EXPECT_TRUE(read.ok()) << read.status().message();
  CheckReport r = check_guest(read.value(), &p.expect);
  if (file) check_topo_file(*file, read.value(), r);
  return r;
}

PciFunction* function(SysfsSnapshot& s, const std::string& busid) {
  for (auto& f : s.functions)
    if (f.busid == busid) return &f;
  ADD_FAILURE() << "no function " << busid;
  static PciFunction none;
  return &none;
}

const VmDevice& planned_device(const VmPlan& p, const std::string& id) {
  for (const auto& d : p.devices)
    if (d.qemu_id == id) return d;
  ADD_FAILURE() << "no device " << id;
  static const VmDevice kNone;
  return kNone;
}

TEST(VmCheck, SysfsReadsBackAsWritten) {
  Planned p = planned("azure-ndv4-topo.xml", VmLayout::kSwitch);
  FakeSysfs fake;
  Result<SysfsSnapshot> read = read_sysfs(fake.write(p.plan.guest_sysfs));
  ASSERT_TRUE(read.ok()) << read.status().message();
  ASSERT_EQ(read->functions.size(), p.plan.guest_sysfs.functions.size());
  for (size_t i = 0; i < read->functions.size(); ++i) {
    EXPECT_EQ(read->functions[i].busid, p.plan.guest_sysfs.functions[i].busid);
    EXPECT_EQ(read->functions[i].path, p.plan.guest_sysfs.functions[i].path);
    EXPECT_EQ(read->functions[i].numa, p.plan.guest_sysfs.functions[i].numa);
    EXPECT_EQ(read->functions[i].pci_class, p.plan.guest_sysfs.functions[i].pci_class);
  }
  EXPECT_EQ(read->online_cpus, p.plan.guest_sysfs.online_cpus);
  EXPECT_EQ(read->node_cpus, p.plan.guest_sysfs.node_cpus);
  Result<SysfsSnapshot> none = read_sysfs("/nonexistent-root");
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.status().message().find("no PCI devices in /nonexistent-root/sys/bus/pci/devices"), std::string::npos);
}

TEST(VmCheck, ThePlannedTreePasses) {
  for (const char* file : {"azure-ndv4-topo.xml", "hwloc/aws-p5en.48xlarge-hwloc.xml",
                           "alibaba-hgx-a100-8gpu-icx-cx6bond-topo.xml"}) {
    Planned p = planned(file, VmLayout::kSwitch);
    CheckReport r = check(p, p.plan.guest_sysfs, &p.plan.guest_topo);
    EXPECT_EQ(r.exit_code(), 0) << file << "\n" << to_text(r);
    EXPECT_TRUE(r.has("as-planned")) << file;
    EXPECT_NE(r.matrix.find("host (plan)"), std::string::npos);
  }
}

TEST(VmCheck, FlatGuestIsDegraded) {
  Planned flat = planned("azure-ndv4-topo.xml", VmLayout::kFlat);
  CheckReport r = check(flat, flat.plan.guest_sysfs, &flat.plan.guest_topo);
  EXPECT_EQ(r.exit_code(), 2) << to_text(r);
  EXPECT_NE(to_text(r).find("flat tree"), std::string::npos);
  // Without a plan: the guest's GPUs and NICs by class, all on root ports.
  FakeSysfs fake;
  Result<SysfsSnapshot> read = read_sysfs(fake.write(flat.plan.guest_sysfs));
  ASSERT_TRUE(read.ok());
  CheckReport bare = check_guest(read.value(), nullptr);
  EXPECT_EQ(bare.exit_code(), 2) << to_text(bare);
  EXPECT_TRUE(bare.has("flat"));
  // The switch plan's guest, checked without a plan, is not flat.
  Planned sw = planned("azure-ndv4-topo.xml", VmLayout::kSwitch);
  FakeSysfs fake2;
  Result<SysfsSnapshot> read2 = read_sysfs(fake2.write(sw.plan.guest_sysfs));
  ASSERT_TRUE(read2.ok());
  EXPECT_EQ(check_guest(read2.value(), nullptr).exit_code(), 0);
  // The flat guest against the switch plan: a mismatch.
  CheckReport off = check(sw, flat.plan.guest_sysfs);
  EXPECT_EQ(off.exit_code(), 1);
}

TEST(VmCheck, PlantedFaultsAreCaught) {
  Planned p = planned("azure-ndv4-topo.xml", VmLayout::kSwitch);
  const VmDevice& nic0 = planned_device(p.plan, "nic0");
  const VmDevice& gpu2 = planned_device(p.plan, "gpu2");
  ASSERT_NE(nic0.guest_switch, gpu2.guest_switch);

  {  // A device missing.
    SysfsSnapshot s = p.plan.guest_sysfs;
    std::erase_if(s.functions, [&](const PciFunction& f) { return f.busid == nic0.guest_busid; });
    CheckReport r = check(p, s);
    EXPECT_EQ(r.exit_code(), 1);
    EXPECT_TRUE(r.has("device-missing")) << to_text(r);
  }
  {  // A device under the wrong switch: nic0 moved below gpu2's downstream port.
    SysfsSnapshot s = p.plan.guest_sysfs;
    std::vector<std::string> path = function(s, gpu2.guest_busid)->path;
    path.back() = nic0.guest_busid;
    function(s, nic0.guest_busid)->path = path;
    CheckReport r = check(p, s);
    EXPECT_EQ(r.exit_code(), 1);
    EXPECT_TRUE(r.has("wrong-switch")) << to_text(r);
    EXPECT_TRUE(r.has("path-class"));
  }
  {  // A wrong NUMA node.
    SysfsSnapshot s = p.plan.guest_sysfs;
    function(s, nic0.guest_busid)->numa = (nic0.guest_numa + 1) % 4;
    CheckReport r = check(p, s);
    EXPECT_EQ(r.exit_code(), 1);
    EXPECT_TRUE(r.has("wrong-numa")) << to_text(r);
  }
  {  // A bus id in the topology file that the guest lacks.
    XmlNode file = p.plan.guest_topo;
    file.children[0].add("pci").set("busid", "0000:7f:00.0");
    CheckReport r = check(p, p.plan.guest_sysfs, &file);
    EXPECT_EQ(r.exit_code(), 1);
    EXPECT_TRUE(r.has("busid-missing")) << to_text(r);
  }
  {  // A CPU mask outside the guest's CPUs (the host's, 2 x 48 cores).
    XmlNode file = p.plan.guest_topo;
    file.children[1].set("affinity", "ffffffff,ffff0000,00000000");
    CheckReport r = check(p, p.plan.guest_sysfs, &file);
    EXPECT_EQ(r.exit_code(), 1);
    EXPECT_TRUE(r.has("cpumask-outside")) << to_text(r);
  }
  {  // A bus id NCCL would not match with /sys: upper case (the guest has 0000:0b:00.0).
    XmlNode file = p.plan.guest_topo;
    ASSERT_EQ(planned_device(p.plan, "gpu0").guest_busid, "0000:0b:00.0");
    XmlNode& gpu0 = file.children[1].children[0].children[0];
    ASSERT_EQ(gpu0.attr_or("busid", ""), "0000:0b:00.0");
    gpu0.set("busid", "0000:0B:00.0");
    CheckReport r = check(p, p.plan.guest_sysfs, &file);
    EXPECT_EQ(r.exit_code(), 1);
    EXPECT_TRUE(r.has("busid-format")) << to_text(r);
  }
}

// An Azure NDv4 VM's /sys, as the vendor's file describes it: each GPU and
// NIC on a PCI root of its own, the NUMA node the current file gives it.
SysfsSnapshot ndv4_vm() {
  Result<System> s = load_any_topology(topo_path("azure-ndv4-topo.xml"));
  EXPECT_TRUE(s.ok());
  SysfsSnapshot snap;
  for (DeviceKind k : {DeviceKind::kGpu, DeviceKind::kNic}) {
    for (int i : s->of_kind(k)) {
      const Device& d = s->devices[i];
      PciFunction f;
      f.busid = d.busid;
      f.path = {"pci" + d.busid.substr(0, 7), d.busid};
      f.pci_class = d.pci_class;
      f.vendor = d.vendor;
      f.numa = d.numa;
      snap.functions.push_back(f);
    }
  }
  for (int c : s->of_kind(DeviceKind::kCpu)) {
    std::vector<int> cpus = cpus_of_mask(s->devices[c].affinity).value();
    snap.node_cpus[s->devices[c].numa] = cpus;
    snap.online_cpus.insert(snap.online_cpus.end(), cpus.begin(), cpus.end());
  }
  std::sort(snap.online_cpus.begin(), snap.online_cpus.end());
  return snap;
}

TEST(VmCheck, HistoricalNdv4FileIsCaughtOnAnNdv4Guest) {
  SysfsSnapshot vm = ndv4_vm();
  FakeSysfs fake;
  Result<SysfsSnapshot> read = read_sysfs(fake.write(vm));
  ASSERT_TRUE(read.ok());
  Result<XmlNode> current = read_nccl_xml(topo_path("azure-ndv4-topo.xml"));
  ASSERT_TRUE(current.ok());
  CheckReport good;
  check_topo_file(current.value(), read.value(), good);
  EXPECT_EQ(good.exit_code(), 0) << to_text(good);
  Result<XmlNode> old = read_nccl_xml(topo_path("azure-ndv4-topo.2023-06-historical-swapped-numa.xml"));
  ASSERT_TRUE(old.ok());
  CheckReport bad;
  check_topo_file(old.value(), read.value(), bad);
  EXPECT_EQ(bad.exit_code(), 1);
  EXPECT_TRUE(bad.has("wrong-numa")) << to_text(bad);
}

TEST(VmXml, FlatGuestGetsTheHostsGrouping) {
  for (const char* file : {"azure-ndv4-topo.xml", "hwloc/aws-p5en.48xlarge-hwloc.xml"}) {
    Result<System> host = load_any_topology(topo_path(file));
    ASSERT_TRUE(host.ok());
    // The guest: the flat plan's /sys (vfio keeps the host's classes and vendors).
    Planned flat = planned(file, VmLayout::kFlat);
    FakeSysfs fake;
    Result<SysfsSnapshot> guest = read_sysfs(fake.write(flat.plan.guest_sysfs));
    ASSERT_TRUE(guest.ok());
    std::vector<Diagnostic> notes;
    Result<XmlNode> xml = guest_xml_from_host(host.value(), guest.value(), &notes);
    ASSERT_TRUE(xml.ok()) << xml.status().message();
    // The flat guest has no NUMA nodes for its devices: said, not hidden.
    EXPECT_FALSE(notes.empty());
    // With the guest's NUMA nodes known (as a guest with expander buses would
    // report), the file gives the host's classes on the guest's bus ids.
    SysfsSnapshot numa = flat.plan.guest_sysfs;
    for (auto& f : numa.functions)
      for (const auto& d : flat.plan.devices)
        if (d.guest_busid == f.busid) f.numa = d.host_numa < 0 ? 0 : d.host_numa;
    numa.node_cpus.clear();
    for (int n = 0; n < 4; ++n) numa.node_cpus[n] = {2 * n, 2 * n + 1};
    numa.online_cpus = {0, 1, 2, 3, 4, 5, 6, 7};
    Result<XmlNode> xml2 = guest_xml_from_host(host.value(), numa, nullptr);
    ASSERT_TRUE(xml2.ok()) << xml2.status().message();
    Result<XmlNode> parsed = parse_nccl_xml(to_nccl_xml(xml2.value()), "guest.xml");
    ASSERT_TRUE(parsed.ok());
    Result<System> g = build_system(parsed.value(), "guest");
    ASSERT_TRUE(g.ok());
    Result<System> h = pci_only(host.value());
    ASSERT_TRUE(h.ok());
    Result<std::vector<GuestMatch>> m = match_guest_devices(h.value(), numa);
    ASSERT_TRUE(m.ok());
    int pairs = 0;
    for (const auto& a : *m) {
      if (h->devices[a.host].kind != DeviceKind::kGpu) continue;
      for (const auto& b : *m) {
        if (a.host == b.host) continue;
        int ga = g->find_busid(a.guest_busid), gb = g->find_busid(b.guest_busid);
        ASSERT_TRUE(ga >= 0 && gb >= 0);
        EXPECT_EQ(g->path(ga, gb).type, h->path(a.host, b.host).type) << file << " " << a.guest_busid << "-" << b.guest_busid;
        ++pairs;
      }
    }
    EXPECT_GT(pairs, 0);
    // Synthetic switches: domain ffff, absent from the guest; the file passes the cross-check.
    CheckReport r;
    check_topo_file(xml2.value(), numa, r);
    EXPECT_EQ(r.exit_code(), 0) << to_text(r);
    EXPECT_GT(g->of_kind(DeviceKind::kPciSwitch).size(), 0u);
    for (int s : g->of_kind(DeviceKind::kPciSwitch)) EXPECT_EQ(g->devices[s].busid.rfind("ffff:ff:", 0), 0u);
  }
}

TEST(VmXml, MissingGuestDeviceIsNamed) {
  Result<System> host = load_any_topology(topo_path("azure-ndv4-topo.xml"));
  ASSERT_TRUE(host.ok());
  Planned flat = planned("azure-ndv4-topo.xml", VmLayout::kFlat);
  SysfsSnapshot s = flat.plan.guest_sysfs;
  std::erase_if(s.functions, [](const PciFunction& f) { return f.pci_class == "0x030200"; });
  Result<XmlNode> xml = guest_xml_from_host(host.value(), s, nullptr);
  ASSERT_FALSE(xml.ok());
  EXPECT_NE(xml.status().message().find("no guest device matches host GPU0 0001:00:00.0"), std::string::npos)
      << xml.status().message();
}

TEST(VmCheck, CpuListsAndMasks) {
  EXPECT_EQ(parse_cpulist("0-3,8,10-11").value(), (std::vector<int>{0, 1, 2, 3, 8, 10, 11}));
  EXPECT_FALSE(parse_cpulist("3-1").ok());
  EXPECT_FALSE(parse_cpulist("a").ok());
  EXPECT_EQ(cpumask_of({0, 1, 33}), "00000002,00000003");
  EXPECT_EQ(cpus_of_mask("00000002,00000003").value(), (std::vector<int>{0, 1, 33}));
  EXPECT_FALSE(cpus_of_mask("0x3").ok());
  EXPECT_EQ(cpulist_of({0, 1, 2, 5, 7, 8}), "0-2,5,7-8");
  EXPECT_TRUE(is_canonical_busid("0000:1b:00.0"));
  EXPECT_FALSE(is_canonical_busid("0000:1B:00.0"));
  EXPECT_FALSE(is_canonical_busid("1b:00.0"));
}

}  // namespace
}  // namespace conflux::topo
