#include "tune/measured_table.h"

#include "core/config.h"
#include "tune/calibrate.h"

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <vector>

namespace conflux::tune {
namespace {

std::vector<std::string> read_lines(const std::string& path) {
  std::vector<std::string> lines;
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

}  // namespace

std::string layout_key(int nranks, int nhosts, const std::string& transport, bool shm_collectives) {
  return "ranks=" + std::to_string(nranks) + ",hosts=" + std::to_string(nhosts) + ",transport=" + transport +
         ",shm_coll=" + (shm_collectives ? "1" : "0");
}

std::string measured_table_file() {
  const std::string& v = config().tune_table;
  if (v == "0" || v == "off" || v == "none") return "";
  if (!v.empty()) return v;
  const std::string dir = cache_dir();
  return dir.empty() ? "" : dir + "/algos-" + host_key() + ".txt";
}

Result<AlgoFilter> load_measured_table(const std::string& path, const std::string& key) {
  if (path.empty()) return AlgoFilter{};
  FileLock lock(path);
  std::string rules;
  for (const std::string& line : read_lines(path)) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream in(line);
    std::string k, r;
    if (in >> k >> r && k == key) rules = r;  // the last entry wins
  }
  if (rules.empty()) return AlgoFilter{};
  auto parsed = AlgoFilter::parse(rules);
  if (!parsed.ok()) return Status(parsed.status()).prepend("measured table " + path + ", entry " + key + ": ");
  return parsed;
}

Status store_measured_table(const std::string& path, const std::string& key, const std::string& rules) {
  if (path.empty()) return invalid_usage("no measured table file: set CONFLUX_TUNE_TABLE or a cache directory");
  CFX_RETURN_IF_ERROR(AlgoFilter::parse(rules).status());
  const size_t slash = path.rfind('/');
  if (slash != std::string::npos && slash > 0) mkdirs(path.substr(0, slash));
  FileLock lock(path);
  std::vector<std::string> kept;
  bool has_header = false;
  for (const std::string& line : read_lines(path)) {
    std::istringstream in(line);
    std::string k;
    in >> k;
    if (k == key) continue;
    has_header |= !line.empty() && line[0] == '#';
    kept.push_back(line);
  }
  std::ofstream out(path + ".tmp");
  if (!has_header)
    out << "# conflux measured algorithm table (written by `conflux tune`): <layout> <CONFLUX_ALGO-style ranges>\n";
  for (const std::string& line : kept) out << line << "\n";
  out << key << " " << rules << "\n";
  out.close();
  if (!out || std::rename((path + ".tmp").c_str(), path.c_str()) != 0)
    return system_error("cannot write the measured table " + path, errno);
  return Status::Ok();
}

}  // namespace conflux::tune
