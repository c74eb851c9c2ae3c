// The files `conflux vm plan` writes from a VmPlan, and plan.json read back
// (by `conflux vm check` inside the guest, which has no host topology).
#pragma once

#include "core/status.h"
#include "topo/system.h"
#include "topo/vm_plan.h"

#include <string>
#include <string_view>
#include <vector>

namespace conflux::topo {

// QEMU arguments, one per element (no shell quoting): q35, the vCPUs and
// NUMA nodes, the controllers, and a vfio-pci device per passed-through
// device. `standin`: an emulated endpoint instead of each vfio-pci device
// (virtio-gpu-pci for a GPU, virtio-net-pci for a NIC) with the same id, bus
// and address, and memory not bound to host nodes, so the layout boots on
// any machine.
std::vector<std::string> qemu_args(const VmPlan& plan, bool standin);

// The <controller> and <hostdev> elements for a q35 libvirt domain (a
// fragment inside <devices>), with the NUMA cells it needs as a comment.
// libvirt's <address bus=...> is the index of the controller, not the bus
// number the firmware gives it.
std::string libvirt_xml(const VmPlan& plan);

// plan.json: devices (kind, host, guest, qemu_id, NUMA, switches), the
// expected class of every GPU-GPU and GPU-NIC pair (host's and guest's),
// the controllers and the guest NUMA nodes.
std::string plan_json(const VmPlan& plan);

// What `conflux vm check` needs from plan.json.
struct ExpectedDevice {
  DeviceKind kind = DeviceKind::kGpu;
  std::string host, guest, qemu_id;
  int guest_numa = -1;
  std::string guest_switch;  // "" = under the CPU
  std::string link_speed;    // the host's, as the guest file states it
  int link_width = -1;
};
struct ExpectedPair {
  std::string a, b;  // qemu ids
  PathType host = PathType::kDis;
  PathType guest = PathType::kDis;
};
struct VmExpectation {
  std::string layout;
  std::vector<ExpectedDevice> devices;
  std::vector<ExpectedPair> pairs;
  const ExpectedDevice* find(const std::string& qemu_id) const;
};

Result<VmExpectation> parse_plan_json(std::string_view text, const std::string& origin);
Result<VmExpectation> read_plan_json(const std::string& path);

// "PIX" -> kPix; kDis for anything else.
PathType path_type_of(const std::string& name);

}  // namespace conflux::topo
