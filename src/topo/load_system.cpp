#include "topo/load_system.h"

#include "core/config.h"

#include "core/log.h"
#include "topo/discover.h"
#include "topo/nccl_xml.h"

#include <cstdlib>
#include <mutex>
#include <optional>

namespace conflux::topo {
namespace {

std::mutex g_mu;
std::optional<std::string> g_key;
std::optional<Result<System>> g_cached;

Result<System> load_uncached(const std::string& file) {
  Result<Discovered> found = discover_tree();
  if (file.empty()) {
    if (!found.ok()) return Status(found.status()).prepend("topology discovery: ");
    CFX_ASSIGN_OR_RETURN(System sys, build_system(std::move(found->tree), "hwloc"));
    sys.virtualization = found->virtualization;
    return sys;
  }
  Result<XmlNode> tree = read_nccl_xml(file);
  if (!tree.ok()) return Status(tree.status()).prepend("CONFLUX_TOPO_FILE: ");
  if (!found.ok()) {
    CFX_WARN(kTopo, "topology discovery failed (%s); using CONFLUX_TOPO_FILE=%s alone",
             found.status().message().c_str(), file.c_str());
    return build_system(std::move(tree).value(), "file:" + file);
  }
  CFX_INFO(kTopo, "topology from CONFLUX_TOPO_FILE=%s, completed by discovery", file.c_str());
  CFX_ASSIGN_OR_RETURN(System sys, build_system(fuse(std::move(tree).value(), found->tree), "fused:" + file));
  sys.virtualization = found->virtualization;
  return sys;
}

}  // namespace

Result<System> load_system() {
  const std::string& file = config().topo_file;
  std::lock_guard<std::mutex> lock(g_mu);
  if (!g_cached || g_key != file) {
    g_cached.emplace(load_uncached(file));
    g_key = file;
    if (g_cached->ok()) {
      const System& s = g_cached->value();
      CFX_INFO(kTopo, "topology (%s): %zu GPU(s), %zu NIC(s), %d NUMA node(s)", s.source.c_str(),
               s.of_kind(DeviceKind::kGpu).size(), s.of_kind(DeviceKind::kNic).size(), s.numa_count());
    }
  }
  return *g_cached;
}

void reset_system_cache() {
  std::lock_guard<std::mutex> lock(g_mu);
  g_cached.reset();
  g_key.reset();
}

}  // namespace conflux::topo
