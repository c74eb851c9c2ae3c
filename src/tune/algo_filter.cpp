#include "tune/algo_filter.h"

#include <algorithm>
#include <cctype>

namespace conflux::tune {
namespace {

std::string trim(std::string s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.pop_back();
  size_t i = 0;
  while (i < s.size() && std::isspace(static_cast<unsigned char>(s[i]))) ++i;
  return s.substr(i);
}

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  size_t start = 0;
  for (size_t i = 0; i <= s.size(); ++i)
    if (i == s.size() || s[i] == sep) {
      out.push_back(trim(s.substr(start, i - start)));
      start = i + 1;
    }
  return out;
}

bool looks_like_range(const std::string& s) { return !s.empty() && std::isdigit(static_cast<unsigned char>(s[0])) && s.find('-') != std::string::npos; }

Result<AlgoRule> parse_rule(const std::string& text) {
  AlgoRule rule;
  rule.text = text;
  std::vector<std::string> parts = split(text, ':');
  if (parts.size() > 3) return invalid_argument("CONFLUX_ALGO: too many ':' in \"" + text + "\"");
  std::string list = parts.back();
  for (size_t i = 0; i + 1 < parts.size(); ++i) {
    const std::string& p = parts[i];
    if (looks_like_range(p)) {
      size_t dash = p.find('-');
      CFX_ASSIGN_OR_RETURN(rule.lo, parse_size(p.substr(0, dash)));
      CFX_ASSIGN_OR_RETURN(rule.hi, parse_size(p.substr(dash + 1)));
      if (rule.hi <= rule.lo) return invalid_argument("CONFLUX_ALGO: empty size range \"" + p + "\"");
    } else {
      CFX_ASSIGN_OR_RETURN(Coll c, parse_coll(p));
      rule.coll = static_cast<int>(c);
    }
  }
  if (!list.empty() && list[0] == '^') {
    rule.exclude = true;
    list = list.substr(1);
  }
  for (std::string name : split(list, ',')) {
    if (!name.empty() && name[0] == '@') name = name.substr(1);
    name = lower(name);
    if (name.empty()) return invalid_argument("CONFLUX_ALGO: empty algorithm name in \"" + text + "\"");
    rule.names.push_back(name);
  }
  return rule;
}

}  // namespace

Result<Coll> parse_coll(const std::string& name) {
  std::string n = lower(trim(name));
  for (int c = 0; c < static_cast<int>(Coll::kCount); ++c)
    if (n == lower(coll_name(static_cast<Coll>(c)))) return static_cast<Coll>(c);
  return invalid_argument("unknown collective \"" + name + "\"");
}

Result<size_t> parse_size(const std::string& text) {
  std::string t = lower(trim(text));
  if (t == "inf" || t == "max") return SIZE_MAX;
  if (t.empty() || !std::isdigit(static_cast<unsigned char>(t[0]))) return invalid_argument("bad size \"" + text + "\"");
  size_t pos = 0;
  unsigned long long v = std::stoull(t, &pos);
  std::string suffix = t.substr(pos);
  if (suffix == "b") suffix.clear();
  if (!suffix.empty() && suffix.back() == 'b') suffix.pop_back();
  int shift = suffix.empty() ? 0 : suffix == "k" ? 10 : suffix == "m" ? 20 : suffix == "g" ? 30 : -1;
  if (shift < 0) return invalid_argument("bad size suffix in \"" + text + "\" (use K, M or G)");
  return static_cast<size_t>(v) << shift;
}

std::string size_string(size_t bytes) {
  if (bytes == SIZE_MAX) return "inf";
  const char* suffix[] = {"", "K", "M", "G"};
  int i = 0;
  while (i < 3 && bytes >= 1024 && bytes % 1024 == 0) {
    bytes /= 1024;
    ++i;
  }
  return std::to_string(bytes) + suffix[i];
}

Result<AlgoFilter> AlgoFilter::parse(const std::string& spec) {
  AlgoFilter f;
  f.spec = spec;
  if (trim(spec).empty()) return f;
  char sep = spec.find('#') != std::string::npos ? '#' : ';';
  for (const std::string& entry : split(spec, sep)) {
    if (entry.empty()) continue;
    CFX_ASSIGN_OR_RETURN(AlgoRule rule, parse_rule(entry));
    f.rules.push_back(std::move(rule));
  }
  return f;
}

const AlgoRule* AlgoFilter::rule_for(Coll c, size_t bytes) const {
  const AlgoRule* specific = nullptr;
  const AlgoRule* generic = nullptr;
  for (const AlgoRule& r : rules) {
    if (bytes < r.lo || bytes >= r.hi) continue;
    if (r.coll == static_cast<int>(c)) specific = &r;
    else if (r.coll < 0) generic = &r;
  }
  return specific ? specific : generic;
}

bool AlgoFilter::allows(const AlgoRule* rule, const std::string& name) {
  if (!rule) return true;
  bool listed = std::find(rule->names.begin(), rule->names.end(), name) != rule->names.end();
  return rule->exclude ? !listed : listed;
}

}  // namespace conflux::tune
