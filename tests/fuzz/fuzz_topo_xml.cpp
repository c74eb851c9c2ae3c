// libFuzzer target: the NCCL topology XML reader and the model builder must
// refuse any input cleanly (no crash, no leak, no runaway recursion), and an
// accepted input must survive export and re-import.
#include "topo/advice.h"
#include "topo/nccl_xml.h"
#include "topo/report.h"

#include <cstddef>
#include <cstdint>
#include <string_view>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace conflux::topo;
  std::string_view text(reinterpret_cast<const char*>(data), size);
  conflux::Result<XmlNode> tree = parse_nccl_xml(text, "fuzz");
  if (!tree.ok()) return 0;
  // Keep the path matrix (n^2 per source) bounded on huge inputs.
  if (size > 64 * 1024) return 0;
  conflux::Result<System> sys = build_system(tree.value(), "fuzz");
  if (!sys.ok()) return 0;
  (void)to_json(sys.value(), advise(sys.value()));
  conflux::Result<XmlNode> again = parse_nccl_xml(to_nccl_xml(sys.value()), "fuzz-export");
  if (!again.ok()) __builtin_trap();  // our own export must always read back
  return 0;
}
