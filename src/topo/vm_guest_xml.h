// The guest topology file (NCCL_TOPO_FILE for the guest): the host's PCI
// facts on the guest's bus ids. Shared by `conflux vm plan` (the guest's own
// switches, whose xio3130 ports report 2.5 GT/s x1, get the host switch's
// link) and `conflux vm xml` (a flat guest: the host's switches become
// synthetic ones whose ids exist nowhere in the guest, as Azure and AWS ship).
#pragma once

#include "core/status.h"
#include "topo/sysfs_pci.h"
#include "topo/system.h"
#include "topo/xml_tree.h"

#include <string>
#include <vector>

namespace conflux::topo {

// The <pci busid=...> element anywhere below `tree`, or nullptr.
const XmlNode* find_pci_element(const XmlNode& tree, const std::string& busid);

// Puts the host device's class, vendor, device and subsystem ids and its
// link (as a string NCCL knows, width 0 or unknown as x16) on `guest_pci`.
void copy_host_pci_attrs(XmlNode& guest_pci, const System& host, int host_device);
// Only the link: for a guest switch standing for a host switch.
void copy_host_link(XmlNode& guest_pci, const System& host, int host_device);
// arch, vendor, familyid, modelid of the host CPU of NUMA node `host_numa`
// (the first CPU when -1), which set the inter-socket bandwidth.
void copy_host_cpu_attrs(XmlNode& cpu, const System& host, int host_numa);

struct GuestMatch {
  int host = -1;            // host device index
  std::string guest_busid;
};

// Pairs the guest's GPUs and NICs with the host's: by vendor, device and
// subsystem ids, then in bus id order within each kind of device. A count
// that differs is an error naming the ids.
Result<std::vector<GuestMatch>> match_guest_devices(const System& host, const SysfsSnapshot& guest);

// `conflux vm xml`: the guest file for a guest whose tree cannot change.
// `notes` gets what the file cannot carry (NUMA nodes the guest lacks).
Result<XmlNode> guest_xml_from_host(const System& host, const SysfsSnapshot& guest, std::vector<Diagnostic>* notes);

}  // namespace conflux::topo
