// The NCCL-dialect topology tree: <system> with <cpu>, <pci>, <gpu>, <nvlink>,
// <c2c>, <nic>, <net> elements and their string attributes. It is the common
// form of every source (an NCCL topology file, hwloc discovery, both fused),
// exactly as NCCL fuses at the XML level before it builds its graph; the
// model (system.h) is built from it and export writes it back.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace conflux::topo {

struct XmlNode {
  std::string name;
  std::vector<std::pair<std::string, std::string>> attrs;  // document order
  std::vector<XmlNode> children;

  const std::string* attr(const std::string& key) const;
  std::string attr_or(const std::string& key, const std::string& fallback) const;
  bool has(const std::string& key) const { return attr(key) != nullptr; }
  void set(const std::string& key, const std::string& value);  // replaces or appends
  void set_if_missing(const std::string& key, const std::string& value);
  XmlNode* child(const std::string& child_name);
  const XmlNode* child(const std::string& child_name) const;
  XmlNode& add(std::string child_name);
};

// Bus ids compare case-insensitively and NCCL pads them to "dddd:bb:dd.f";
// this lower-cases and pads a short "bb:dd.f" with domain 0000.
std::string normalize_busid(const std::string& busid);

// Parses an integer attribute written as decimal or 0x-hex; nullopt when
// absent, empty or malformed.
std::optional<long long> parse_int(const std::string* text);

// "line 12, column 5" for a byte offset into `text` (XML parsers report
// offsets; people read lines).
std::string text_position(std::string_view text, long long offset);

}  // namespace conflux::topo
