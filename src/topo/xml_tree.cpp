#include "topo/xml_tree.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdlib>

namespace conflux::topo {

const std::string* XmlNode::attr(const std::string& key) const {
  for (const auto& [k, v] : attrs)
    if (k == key) return &v;
  return nullptr;
}

std::string XmlNode::attr_or(const std::string& key, const std::string& fallback) const {
  const std::string* v = attr(key);
  return v ? *v : fallback;
}

void XmlNode::set(const std::string& key, const std::string& value) {
  for (auto& [k, v] : attrs) {
    if (k == key) {
      v = value;
      return;
    }
  }
  attrs.emplace_back(key, value);
}

void XmlNode::set_if_missing(const std::string& key, const std::string& value) {
  if (!has(key)) attrs.emplace_back(key, value);
}

XmlNode* XmlNode::child(const std::string& child_name) {
  for (auto& c : children)
    if (c.name == child_name) return &c;
  return nullptr;
}

const XmlNode* XmlNode::child(const std::string& child_name) const {
  for (const auto& c : children)
    if (c.name == child_name) return &c;
  return nullptr;
}

XmlNode& XmlNode::add(std::string child_name) {
  children.push_back(XmlNode{std::move(child_name), {}, {}});
  return children.back();
}

std::string normalize_busid(const std::string& busid) {
  std::string out;
  out.reserve(busid.size());
  for (char c : busid) out.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
  // "bb:dd.f" (no domain) has a single colon.
  size_t colons = 0;
  for (char c : out) colons += c == ':';
  if (colons == 1) out = "0000:" + out;
  return out;
}

std::optional<long long> parse_int(const std::string* text) {
  if (!text || text->empty()) return std::nullopt;
  errno = 0;
  char* end = nullptr;
  long long v = std::strtoll(text->c_str(), &end, 0);
  if (errno != 0 || end == text->c_str()) return std::nullopt;
  while (*end == ' ') ++end;
  if (*end != '\0') return std::nullopt;
  return v;
}

std::string text_position(std::string_view text, long long offset) {
  size_t end = offset < 0 ? 0 : std::min(static_cast<size_t>(offset), text.size());
  int line = 1, column = 1;
  for (size_t i = 0; i < end; ++i) {
    if (text[i] == '\n') {
      ++line;
      column = 1;
    } else {
      ++column;
    }
  }
  return "line " + std::to_string(line) + ", column " + std::to_string(column);
}

}  // namespace conflux::topo
