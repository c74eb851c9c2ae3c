// `conflux vm plan`: the guest layout of every real topology file keeps the
// host's PCI path classes and NUMA nodes; the firmware's bus numbering
// rules; the files it writes; bad input.
#include "support/test_env.h"
#include "topo/load_system.h"
#include "topo/nccl_xml.h"
#include "topo/vm_guest_xml.h"
#include "topo/vm_map.h"
#include "topo/vm_output.h"
#include "topo/vm_plan.h"

#include <gtest/gtest.h>
#include <pugixml.hpp>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <set>

namespace conflux::topo {
namespace {

std::string topo_path(const std::string& name) { return conflux::test::topology_dir() + "/" + name; }

Result<VmPlan> plan_file(const std::string& name, VmLayout layout, const PassthroughMap& map = {true, {}}) {
  Result<System> host = load_any_topology(topo_path(name));
  if (!host.ok()) return host.status();
  VmPlanOptions opt;
  opt.layout = layout;
  opt.vcpus_per_node = 2;
  return plan_vm(host.value(), map, opt);
}

Result<System> system_from(const std::string& xml) {
  Result<XmlNode> tree = parse_nccl_xml(xml, "test");
  if (!tree.ok()) return tree.status();
  return build_system(std::move(tree).value(), "test");
}

// The real files with at least one GPU and one NIC with a PCI bus id.
std::vector<std::string> files_with_gpus_and_nics() {
  std::vector<std::string> out;
  for (const char* sub : {"", "hwloc/"}) {
    for (const auto& e : std::filesystem::directory_iterator(topo_path(sub))) {
      if (e.path().extension() != ".xml") continue;
      std::string name = sub + e.path().filename().string();
      Result<System> s = load_any_topology(topo_path(name));
      if (!s.ok()) continue;  // the RCCL version-2 dump and the NCCL graph file
      bool gpu = false, nic = false;
      for (int g : s->of_kind(DeviceKind::kGpu)) gpu |= !s->devices[g].busid.empty();
      for (int n : s->of_kind(DeviceKind::kNic)) nic |= !s->devices[n].busid.empty();
      if (gpu && nic) out.push_back(name);
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

TEST(VmPlan, EveryRealFileKeepsTheHostsPciClassesAndNuma) {
  std::vector<std::string> files = files_with_gpus_and_nics();
  // 8 NCCL files and the 6 hwloc dumps. Not: the p5 and g5 skeletons (no
  // GPUs), NCv4 (its one NIC, eth0, has no bus id), the RCCL version-2 dump
  // and the graph file (refused).
  ASSERT_EQ(files.size(), 14u);
  std::set<PathType> host_classes;
  std::printf("%-55s %6s %6s %s\n", "file", "pairs", "flat", "changed by flat passthrough");
  for (const auto& name : files) {
    Result<VmPlan> plan = plan_file(name, VmLayout::kSwitch);
    ASSERT_TRUE(plan.ok()) << name << ": " << plan.status().message();
    ASSERT_FALSE(plan->pairs.empty()) << name;
    for (const VmPair& p : plan->pairs) {
      host_classes.insert(p.host);
      EXPECT_EQ(to_string(p.guest), std::string(to_string(p.host)))
          << name << ": " << plan->devices[p.a].qemu_id << "-" << plan->devices[p.b].qemu_id;
    }
    EXPECT_TRUE(plan->numa_preserved()) << name;
    // The written guest-topo.xml, read back as NCCL would read it, gives the
    // same classes: the file is what carries them into the guest.
    Result<System> guest = system_from(to_nccl_xml(plan->guest_topo));
    ASSERT_TRUE(guest.ok()) << name << ": " << guest.status().message();
    Result<System> host = pci_only(load_any_topology(topo_path(name)).value());
    ASSERT_TRUE(host.ok());
    for (const VmPair& p : plan->pairs) {
      const VmDevice& a = plan->devices[p.a];
      const VmDevice& b = plan->devices[p.b];
      int ga = guest->find_busid(a.guest_busid), gb = guest->find_busid(b.guest_busid);
      int ha = host->find_busid(a.host_busid), hb = host->find_busid(b.host_busid);
      ASSERT_TRUE(ga >= 0 && gb >= 0 && ha >= 0 && hb >= 0) << name;
      EXPECT_EQ(guest->path(ga, gb).type, host->path(ha, hb).type) << name << " " << a.qemu_id << "-" << b.qemu_id;
      // NUMA preserved: the guest CPU above each device carries the host's node.
      EXPECT_EQ(guest->devices[ga].numa == guest->devices[gb].numa, host->devices[ha].numa == host->devices[hb].numa);
    }
    // Flat passthrough puts every device on a root port of pcie.0: every
    // pair is PHB in the guest, so it changes exactly the pairs the host
    // has as anything but PHB.
    Result<VmPlan> flat = plan_file(name, VmLayout::kFlat);
    ASSERT_TRUE(flat.ok()) << name << ": " << flat.status().message();
    int not_phb = 0;
    for (const VmPair& p : plan->pairs) not_phb += p.host != PathType::kPhb;
    for (const VmPair& p : flat->pairs) EXPECT_EQ(p.guest, PathType::kPhb) << name;
    EXPECT_EQ(flat->changed_pairs(), not_phb) << name;
    std::map<PathType, int> lost;
    for (const VmPair& p : flat->pairs)
      if (p.host != p.guest) ++lost[p.host];
    std::string by;
    for (auto [t, n] : lost) by += std::string(by.empty() ? "" : ", ") + to_string(t) + " " + std::to_string(n);
    std::printf("%-55s %6zu %6d %s\n", name.c_str(), flat->pairs.size(), flat->changed_pairs(), by.c_str());
  }
  // The set exercises every PCI class: one switch (PIX), nested switches
  // (PXB, the Broadcom-switched HGX), the root complex (PHB), the sockets (SYS).
  for (PathType t : {PathType::kPix, PathType::kPxb, PathType::kPhb, PathType::kSys})
    EXPECT_TRUE(host_classes.count(t)) << to_string(t);
}

// A host with what each grouping looks like: NUMA 0 has a switch holding a
// GPU and a NIC, and a NIC on the root complex; NUMA 1 a GPU on the root
// complex.
constexpr const char* kSmallHost = R"(<system version="1">
  <cpu numaid="0" affinity="0000000f" arch="x86_64" vendor="GenuineIntel" familyid="6" modelid="143">
    <pci busid="0000:10:00.0" class="0x060400" vendor="0x1000" device="0xc010" link_speed="32.0 GT/s PCIe" link_width="16">
      <pci busid="0000:11:00.0" class="0x030200" vendor="0x10de" device="0x2335" link_speed="32.0 GT/s PCIe" link_width="16"/>
      <pci busid="0000:12:00.0" class="0x020000" vendor="0x15b3" device="0x1021" link_speed="32.0 GT/s PCIe" link_width="16"/>
    </pci>
    <pci busid="0000:20:00.0" class="0x020000" vendor="0x15b3" device="0x1021" link_speed="16.0 GT/s PCIe" link_width="16"/>
  </cpu>
  <cpu numaid="1" affinity="000000f0" arch="x86_64" vendor="GenuineIntel" familyid="6" modelid="143">
    <pci busid="0000:90:00.0" class="0x030200" vendor="0x10de" device="0x2335" link_speed="32.0 GT/s PCIe" link_width="16"/>
  </cpu>
</system>
)";

Result<VmPlan> plan_small(VmLayout layout, const std::string& map_text = "all") {
  Result<System> host = system_from(kSmallHost);
  if (!host.ok()) return host.status();
  Result<PassthroughMap> map = map_text == "all" ? Result<PassthroughMap>(PassthroughMap{true, {}})
                                                 : parse_passthrough_map(map_text, "map.txt");
  if (!map.ok()) return map.status();
  VmPlanOptions opt;
  opt.layout = layout;
  return plan_vm(host.value(), map.value(), opt);
}

const VmController& controller(const VmPlan& p, const std::string& id) {
  for (const auto& c : p.controllers)
    if (c.id == id) return c;
  static const VmController kNone;
  ADD_FAILURE() << "no controller " << id;
  return kNone;
}

const VmDevice& device(const VmPlan& p, const std::string& id) {
  for (const auto& d : p.devices)
    if (d.qemu_id == id) return d;
  static const VmDevice kNone;
  ADD_FAILURE() << "no device " << id;
  return kNone;
}

TEST(VmPlan, BusNumbersDepthFirstInSlotOrderFromEachExpander) {
  Result<VmPlan> p = plan_small(VmLayout::kSwitch);
  ASSERT_TRUE(p.ok()) << p.status().message();
  // pxb0 (NUMA 0) opens bus 1: rp0 (01:00.0) -> bus 2 with the switch's
  // upstream port (02:00.0) -> bus 3 with its two downstream ports (03:00.0
  // -> 4, 03:01.0 -> 5); rp1 (01:01.0) -> 6. pxb1 (NUMA 1) then starts at 7.
  EXPECT_EQ(controller(*p, "pxb0").bus_nr, 1);
  EXPECT_EQ(controller(*p, "rp0").busid, "0000:01:00.0");
  EXPECT_EQ(controller(*p, "rp0").secondary, 2);
  EXPECT_EQ(controller(*p, "rp0").subordinate, 5);
  EXPECT_EQ(controller(*p, "sw0").busid, "0000:02:00.0");
  EXPECT_EQ(controller(*p, "sw0p1").busid, "0000:03:01.0");
  EXPECT_EQ(controller(*p, "rp1").secondary, 6);
  EXPECT_EQ(controller(*p, "pxb1").bus_nr, 7);
  EXPECT_EQ(device(*p, "gpu0").guest_busid, "0000:04:00.0");
  EXPECT_EQ(device(*p, "nic0").guest_busid, "0000:05:00.0");
  EXPECT_EQ(device(*p, "nic1").guest_busid, "0000:06:00.0");
  EXPECT_EQ(device(*p, "gpu1").guest_busid, "0000:08:00.0");
  EXPECT_EQ(device(*p, "gpu0").guest_switch, "0000:02:00.0");  // NCCL's parent: the upstream port
  EXPECT_EQ(device(*p, "nic1").guest_switch, "");
  EXPECT_EQ(device(*p, "gpu1").guest_numa, 1);
  EXPECT_EQ(p->buses_used, 9);
  // Every port has its own chassis, as QEMU requires of (chassis, slot).
  std::set<int> chassis;
  for (const auto& c : p->controllers)
    if (c.kind == VmController::Kind::kRootPort || c.kind == VmController::Kind::kDownstream) {
      EXPECT_TRUE(chassis.insert(c.chassis).second) << c.id;
    }
}

TEST(VmPlan, FlatLayoutIsRootPortsOnPcie0) {
  Result<VmPlan> p = plan_small(VmLayout::kFlat);
  ASSERT_TRUE(p.ok()) << p.status().message();
  EXPECT_EQ(controller(*p, "rp0").busid, "0000:00:10.0");
  EXPECT_TRUE(controller(*p, "rp0").multifunction);
  EXPECT_EQ(controller(*p, "rp3").busid, "0000:00:10.3");
  for (const auto& d : p->devices) {
    EXPECT_EQ(d.guest_numa, -1);
    EXPECT_EQ(d.guest_switch, "");
  }
  EXPECT_EQ(device(*p, "gpu0").guest_busid, "0000:01:00.0");  // host bus id order
  EXPECT_EQ(p->changed_pairs(), 4);  // all but gpu0-nic1 (PHB on the host): gpu0-nic0 PIX, three SYS
}

TEST(VmPlan, StandInArgsKeepTheLayoutAndSwapOnlyTheEndpoints) {
  Result<VmPlan> p = plan_file("azure-ndv4-topo.xml", VmLayout::kSwitch);
  ASSERT_TRUE(p.ok()) << p.status().message();
  std::vector<std::string> real = qemu_args(*p, false), standin = qemu_args(*p, true);
  ASSERT_EQ(real.size(), standin.size());
  int swapped = 0;
  for (size_t i = 0; i < real.size(); ++i) {
    if (real[i] == standin[i]) continue;
    if (real[i].rfind("memory-backend-ram", 0) == 0) {
      EXPECT_NE(real[i].find(",host-nodes="), std::string::npos);
      continue;
    }
    ASSERT_EQ(real[i].rfind("vfio-pci,host=", 0), 0u) << real[i];
    // Same id, bus and address after the device model.
    std::string tail = real[i].substr(real[i].find(",id="));
    EXPECT_NE(standin[i].find(tail), std::string::npos) << standin[i];
    EXPECT_TRUE(standin[i].rfind("virtio-gpu-pci", 0) == 0 || standin[i].rfind("virtio-net-pci", 0) == 0);
    ++swapped;
  }
  EXPECT_EQ(swapped, 16);
  // The libvirt fragment is well-formed and has every controller and hostdev.
  pugi::xml_document doc;
  std::string xml = "<devices>" + libvirt_xml(*p) + "</devices>";
  ASSERT_TRUE(doc.load_string(xml.c_str()));
  size_t controllers = 0, hostdevs = 0;
  for (auto n : doc.child("devices").children()) {
    controllers += std::string(n.name()) == "controller";
    hostdevs += std::string(n.name()) == "hostdev";
  }
  EXPECT_EQ(controllers, p->controllers.size());
  EXPECT_EQ(hostdevs, 16u);
  EXPECT_STREQ(doc.select_node("//controller[@model='pcie-expander-bus']/target/node").node().text().get(), "0");
  // plan.json reads back.
  Result<VmExpectation> e = parse_plan_json(plan_json(*p), "plan.json");
  ASSERT_TRUE(e.ok()) << e.status().message();
  ASSERT_EQ(e->devices.size(), 16u);
  EXPECT_EQ(e->devices[0].guest, p->devices[0].guest_busid);
  EXPECT_EQ(e->devices[0].guest_switch, p->devices[0].guest_switch);
  EXPECT_EQ(e->pairs.size(), p->pairs.size());
  EXPECT_EQ(e->layout, "switch");
}

TEST(VmPlan, BroadcomSubSwitchesBecomeOneGuestSwitch) {
  Result<VmPlan> p = plan_file("alibaba-hgx-a100-8gpu-icx-cx6bond-topo.xml", VmLayout::kSwitch);
  ASSERT_TRUE(p.ok()) << p.status().message();
  Result<System> host = pci_only(load_any_topology(topo_path("alibaba-hgx-a100-8gpu-icx-cx6bond-topo.xml")).value());
  ASSERT_TRUE(host.ok());
  // One guest upstream port per host switch above a passed device (after
  // NCCL's flattening), none for the merged sub-switches.
  std::set<int> host_switches;
  for (const auto& d : p->devices)
    for (int s = host->devices[host->find_busid(d.host_busid)].parent; s >= 0 && host->devices[s].kind != DeviceKind::kCpu;
         s = host->devices[s].parent)
      host_switches.insert(s);
  size_t ups = 0;
  for (const auto& c : p->controllers) ups += c.kind == VmController::Kind::kUpstream;
  EXPECT_EQ(ups, host_switches.size());
  for (int s : host_switches) EXPECT_NE(host->devices[s].busid, "0000:0e:00.0");  // a merged sub-switch
}

TEST(VmPlan, GuestFileStatesHostLinksAndGuestCpus) {
  Result<VmPlan> p = plan_small(VmLayout::kSwitch);
  ASSERT_TRUE(p.ok());
  const XmlNode* sw = find_pci_element(p->guest_topo, "0000:02:00.0");
  ASSERT_NE(sw, nullptr);
  // The xio3130 upstream port reports 2.5 GT/s x1; the file says the host switch's Gen5 x16.
  EXPECT_EQ(sw->attr_or("link_speed", ""), "32.0 GT/s PCIe");
  EXPECT_EQ(sw->attr_or("link_width", ""), "16");
  const XmlNode* gpu = find_pci_element(p->guest_topo, "0000:04:00.0");
  ASSERT_NE(gpu, nullptr);
  EXPECT_EQ(gpu->attr_or("device", ""), "0x2335");
  // Guest CPU masks: the guest's vCPUs (4 per node, as on the host), not the host's CPUs.
  EXPECT_EQ(p->guest_topo.children[0].attr_or("affinity", ""), "0000000f");
  EXPECT_EQ(p->guest_topo.children[1].attr_or("affinity", ""), "000000f0");
  EXPECT_EQ(p->guest_topo.children[1].attr_or("modelid", ""), "143");
  EXPECT_EQ(nccl_link_speed("32 GT/s PCIe/s"), "32.0 GT/s PCIe");  // AWS p5's quirk, as NCCL reads it
  EXPECT_EQ(nccl_link_speed(""), "8.0 GT/s PCIe");               // NCCL's assumption, stated
}

TEST(VmPlan, WarnsAboutWhatNoLayoutCarries) {
  Result<VmPlan> p = plan_small(VmLayout::kSwitch);
  ASSERT_TRUE(p.ok());
  std::set<std::string> codes;
  for (const auto& w : p->warnings) codes.insert(w.code);
  EXPECT_TRUE(codes.count("xio3130-link"));
  EXPECT_TRUE(codes.count("acs-ats"));
  EXPECT_TRUE(codes.count("gpudirect-clique"));
}

TEST(VmPlan, MapChoosesDevicesAndGuestNodes) {
  Result<VmPlan> p = plan_small(VmLayout::kSwitch, "# two devices\n0000:11:00.0\n90:00.0 0\n");
  ASSERT_TRUE(p.ok()) << p.status().message();
  ASSERT_EQ(p->devices.size(), 2u);
  EXPECT_EQ(p->devices[1].guest_numa, 0);  // the map's node, not the host's
  bool merged = false;
  for (const auto& w : p->warnings) merged |= w.code == "numa-merged";
  EXPECT_TRUE(merged);
  EXPECT_FALSE(p->numa_preserved());
  // Devices of one host switch on two guest nodes: refused.
  Result<VmPlan> split = plan_small(VmLayout::kSwitch, "0000:11:00.0 0\n0000:12:00.0 1\n");
  ASSERT_FALSE(split.ok());
  EXPECT_NE(split.status().message().find("shares host switch 0000:10:00.0"), std::string::npos)
      << split.status().message();
}

TEST(VmInput, MapErrorsNameTheLine) {
  struct Case {
    const char* text;
    const char* says;
  } cases[] = {
      {"0000:11:00.0\n0000:zz:00.0\n", "map.txt:2: \"0000:zz:00.0\" is not a PCI address"},
      {"0000:11:00.0\n0000:1b:0", "map.txt:2: \"0000:1b:0\" is not a PCI address"},  // truncated
      {"0000:11:00.0 x\n", "map.txt:1: guest NUMA node \"x\""},
      {"0000:11:00.0 0 7\n", "map.txt:1: expected"},
      {"0000:11:00.0\n\n0000:11:00.0\n", "map.txt:3: 0000:11:00.0 is already listed at map.txt:1"},
      {"all\n0000:11:00.0\n", "map.txt:2: \"all\" must be the only entry"},
      {"# nothing\n\n", "names no device"},
  };
  for (const auto& c : cases) {
    Result<PassthroughMap> m = parse_passthrough_map(c.text, "map.txt");
    ASSERT_FALSE(m.ok()) << c.text;
    EXPECT_NE(m.status().message().find(c.says), std::string::npos) << m.status().message();
  }
  Result<PassthroughMap> ok = parse_passthrough_map("1B:00.0 1  # GPU\n", "map.txt");
  ASSERT_TRUE(ok.ok());
  EXPECT_EQ(ok->entries[0].host_busid, "0000:1b:00.0");
  EXPECT_EQ(ok->entries[0].guest_numa, 1);
}

TEST(VmInput, MapNamingWhatTheHostLacksOrCannotPass) {
  Result<VmPlan> missing = plan_small(VmLayout::kSwitch, "0000:11:00.0\n0000:99:00.0\n");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("map.txt:2: the host has no PCI device 0000:99:00.0"), std::string::npos)
      << missing.status().message();
  Result<VmPlan> sw = plan_small(VmLayout::kSwitch, "0000:10:00.0\n");
  ASSERT_FALSE(sw.ok());
  EXPECT_NE(sw.status().message().find("is a PCI switch on the host, not a GPU or NIC"), std::string::npos);
}

// A host with `switches` switches of two NICs each, spread over 8 NUMA nodes.
std::string big_host(int switches) {
  std::string x = "<system version=\"1\">\n";
  for (int n = 0; n < 8; ++n) {
    x += "<cpu numaid=\"" + std::to_string(n) + "\">\n";
    for (int s = n; s < switches; s += 8) {
      char buf[256];
      std::snprintf(buf, sizeof buf,
                    "<pci busid=\"%04x:00:00.0\" class=\"0x060400\"><pci busid=\"%04x:01:00.0\" class=\"0x020000\"/>"
                    "<pci busid=\"%04x:02:00.0\" class=\"0x020000\"/></pci>\n",
                    s + 1, s + 1, s + 1);
      x += buf;
    }
    x += "</cpu>\n";
  }
  return x + "</system>\n";
}

TEST(VmInput, MoreDevicesThanBuses) {
  Result<System> fits = system_from(big_host(60));  // 8 + 60 * 4 = 248 buses
  ASSERT_TRUE(fits.ok());
  Result<VmPlan> ok = plan_vm(fits.value(), {true, {}}, {});
  ASSERT_TRUE(ok.ok()) << ok.status().message();
  EXPECT_EQ(ok->buses_used, 249);
  Result<System> host = system_from(big_host(64));  // 8 + 64 * 4 = 264 buses
  ASSERT_TRUE(host.ok());
  Result<VmPlan> p = plan_vm(host.value(), {true, {}}, {});
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.status().message().find("128 devices in this layout need"), std::string::npos) << p.status().message();
  EXPECT_NE(p.status().message().find("256"), std::string::npos);
  // Flat: 128 root ports do not fit on pcie.0's slots either.
  VmPlanOptions flat;
  flat.layout = VmLayout::kFlat;
  Result<VmPlan> f = plan_vm(host.value(), {true, {}}, flat);
  ASSERT_FALSE(f.ok());
  EXPECT_NE(f.status().message().find("root ports"), std::string::npos) << f.status().message();
}

TEST(VmPlan, NodeWithMoreRootPortsThanSlotsGetsASecondExpander) {
  std::string x = "<system version=\"1\">\n<cpu numaid=\"0\">\n";
  for (int i = 1; i <= 40; ++i) {
    char buf[96];
    std::snprintf(buf, sizeof buf, "<pci busid=\"0000:%02x:00.0\" class=\"0x020000\"/>\n", i);
    x += buf;
  }
  Result<System> host = system_from(x + "</cpu>\n</system>\n");
  ASSERT_TRUE(host.ok()) << host.status().message();
  Result<VmPlan> p = plan_vm(host.value(), {true, {}}, {});
  ASSERT_TRUE(p.ok()) << p.status().message();
  EXPECT_EQ(controller(*p, "pxb0").numa, 0);
  EXPECT_EQ(controller(*p, "pxb1").numa, 0);
  EXPECT_EQ(controller(*p, "pxb1").bus_nr, 34);  // pxb0's bus 1 and its 32 root ports' buses 2-33
  EXPECT_EQ(device(*p, "nic32").guest_busid, "0000:23:00.0");
  for (const auto& d : p->devices) EXPECT_EQ(d.guest_numa, 0);
}

TEST(VmInput, LibvirtDomain) {
  constexpr const char* kGood = R"(<domain type='kvm'>
  <os><type arch='x86_64' machine='pc-q35-7.2'>hvm</type></os>
  <devices>
    <controller type='pci' index='0' model='pcie-root'/>
    <hostdev mode='subsystem' type='pci' managed='yes'>
      <source><address domain='0x0000' bus='0x11' slot='0x00' function='0x0'/></source>
      <address type='pci' domain='0x0000' bus='0x01' slot='0x00' function='0x0'/>
    </hostdev>
    <hostdev mode='subsystem' type='pci' managed='yes'>
      <source><address domain='0x0000' bus='0x12' slot='0x00' function='0x0'/></source>
    </hostdev>
  </devices>
</domain>
)";
  Result<PassthroughMap> m = parse_libvirt_domain(kGood, "dom.xml");
  ASSERT_TRUE(m.ok()) << m.status().message();
  ASSERT_EQ(m->entries.size(), 2u);
  EXPECT_EQ(m->entries[1].host_busid, "0000:12:00.0");

  std::string pc = kGood;
  pc.replace(pc.find("pc-q35-7.2"), 10, "pc-i440fx-7.2");
  Result<PassthroughMap> not_q35 = parse_libvirt_domain(pc, "dom.xml");
  ASSERT_FALSE(not_q35.ok());
  EXPECT_NE(not_q35.status().message().find("is not a q35 machine"), std::string::npos);

  std::string dup = kGood;
  dup.insert(dup.find("</hostdev>\n  </devices>"),
             "<address type='pci' domain='0x0000' bus='0x01' slot='0x00' function='0x0'/>\n");
  Result<PassthroughMap> two = parse_libvirt_domain(dup, "dom.xml");
  ASSERT_FALSE(two.ok());
  EXPECT_NE(two.status().message().find("<hostdev> 1 and <hostdev> 2 both take guest PCI address 0000:01:00.0"),
            std::string::npos)
      << two.status().message();

  std::string truncated(kGood, 200);
  Result<PassthroughMap> cut = parse_libvirt_domain(truncated, "dom.xml");
  ASSERT_FALSE(cut.ok());
  EXPECT_NE(cut.status().message().find("dom.xml: not well-formed XML"), std::string::npos);
  EXPECT_NE(cut.status().message().find("line "), std::string::npos) << cut.status().message();

  std::string bad_field = kGood;
  bad_field.replace(bad_field.find("bus='0x12'"), 10, "bus='0x1x2'");
  Result<PassthroughMap> field = parse_libvirt_domain(bad_field, "dom.xml");
  ASSERT_FALSE(field.ok());
  EXPECT_NE(field.status().message().find("<hostdev> 2 <source>: <address bus='0x1x2'>"), std::string::npos)
      << field.status().message();
}

TEST(VmInput, TruncatedTopologyFilesNameTheLine) {
  for (const char* name : {"azure-ndv4-topo.xml", "hwloc/aws-p5en.48xlarge-hwloc.xml"}) {
    std::ifstream in(topo_path(name));
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::string path = std::filesystem::temp_directory_path() / "conflux-vm-truncated.xml";
    {
      std::ofstream out(path);
      out << text.substr(0, text.size() / 2);
    }
    Result<System> s = load_any_topology(path);
    std::filesystem::remove(path);
    ASSERT_FALSE(s.ok()) << name;
    EXPECT_NE(s.status().message().find("not well-formed XML"), std::string::npos) << s.status().message();
    EXPECT_NE(s.status().message().find("line "), std::string::npos) << s.status().message();
  }
  // NCCL files parsed directly say the line too.
  Result<XmlNode> t = parse_nccl_xml("<system version=\"1\">\n  <cpu numaid=\"0\">\n", "cut.xml");
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.status().message().find("line 2, column"), std::string::npos) << t.status().message();
}

TEST(VmInput, PlanJsonErrors) {
  Result<VmPlan> p = plan_small(VmLayout::kSwitch);
  ASSERT_TRUE(p.ok());
  std::string json = plan_json(*p);
  Result<VmExpectation> cut = parse_plan_json(json.substr(0, json.size() / 2), "plan.json");
  ASSERT_FALSE(cut.ok());
  EXPECT_NE(cut.status().message().find("plan.json: not valid JSON"), std::string::npos);
  Result<VmExpectation> other = parse_plan_json("{\"devices\": 3}", "plan.json");
  ASSERT_FALSE(other.ok());
  EXPECT_NE(other.status().message().find("no \"devices\" array"), std::string::npos);
  Result<VmExpectation> kind = parse_plan_json(R"({"devices": [{"kind": "fpga", "guest": "0000:01:00.0", "qemu_id": "x"}]})",
                                               "plan.json");
  ASSERT_FALSE(kind.ok());
  EXPECT_NE(kind.status().message().find("kind \"fpga\""), std::string::npos);
  Result<VmExpectation> dup = parse_plan_json(
      R"({"devices": [{"kind": "gpu", "guest": "0000:04:00.0", "qemu_id": "gpu0"},
                      {"kind": "nic", "guest": "0000:04:00.0", "qemu_id": "nic0"}]})",
      "plan.json");
  ASSERT_FALSE(dup.ok());
  EXPECT_NE(dup.status().message().find("repeats the guest address or id of gpu0 at 0000:04:00.0"), std::string::npos)
      << dup.status().message();
}

}  // namespace
}  // namespace conflux::topo
