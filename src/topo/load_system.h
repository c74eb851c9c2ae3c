// The topology the library plans with: discovery, or CONFLUX_TOPO_FILE fused
// with discovery the way NCCL fuses NCCL_TOPO_FILE (the file first; discovery
// fills what is missing, joined by PCI bus id and NIC name).
#pragma once

#include "core/status.h"
#include "topo/system.h"
#include "topo/xml_tree.h"

#include <string>

namespace conflux::topo {

// Merges `found` into `file`: attributes the file lacks are filled, devices
// the file does not list are added under their closest ancestor the file
// has (by bus id) or under the CPU of their NUMA node; a <net> the file
// already names anywhere stays where the file put it.
XmlNode fuse(XmlNode file, const XmlNode& found);

// Honours CONFLUX_TOPO_FILE. A file that is missing, unreadable or of the
// wrong version is an error, never a silent fallback to discovery alone.
// Cached per process (keyed on the file name); the library calls it at every
// communicator init.
Result<System> load_system();

// For tests: forget the cached result.
void reset_system_cache();

// A host topology for `conflux vm`: "live" (hwloc discovery of this
// machine), an NCCL topology file (<system>) or an hwloc XML dump
// (<topology>), told apart by the root element. Malformed XML is an error
// naming the line.
Result<System> load_any_topology(const std::string& arg);

}  // namespace conflux::topo
