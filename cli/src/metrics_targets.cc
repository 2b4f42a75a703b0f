#include "cli/src/metrics_targets.h"

#include <unistd.h>

#include <cctype>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>

namespace orrery::cli {

bool IsTargetAddress(const std::string& a) {
  size_t colon = a.rfind(':');
  if (a.empty() || a.size() > 256 || colon == std::string::npos || colon == 0) return false;
  std::string port = a.substr(colon + 1);
  if (port.empty() || port.size() > 5 || port.find_first_not_of("0123456789") != std::string::npos)
    return false;
  int p = std::stoi(port);
  if (p < 1 || p > 65535) return false;
  for (char c : a.substr(0, colon)) {
    bool ok = std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-' || c == '_' ||
              c == ':' || c == '[' || c == ']';
    if (!ok) return false;
  }
  return true;
}

namespace {
// The record's string field, or "" when the record is not a JSON object with one.
std::string StringField(const std::string& record, const char* field, nlohmann::json* parsed) {
  try {
    *parsed = nlohmann::json::parse(record);
  } catch (const std::exception&) {
    return "";
  }
  if (!parsed->is_object()) return "";
  auto it = parsed->find(field);
  return it != parsed->end() && it->is_string() ? it->get<std::string>() : "";
}

}  // namespace

bool WriteAtomically(const std::string& path, const std::string& text) {
  std::string tmp = path + ".tmp." + std::to_string(getpid());
  {
    std::ofstream f(tmp, std::ios::trunc);
    f << text;
    if (!f.flush()) return false;
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::remove(tmp.c_str());
    return false;
  }
  return true;
}

std::string MetricsTargetsJson(const std::map<std::string, std::string>& head,
                               const std::map<std::string, std::string>& nodes) {
  nlohmann::json out = nlohmann::json::array();
  nlohmann::json parsed;
  if (auto h = head.find("head"); h != head.end()) {
    std::string address = StringField(h->second, "metrics_address", &parsed);
    if (IsTargetAddress(address))
      out.push_back({{"targets", {address}}, {"labels", {{"role", "head"}}}});
  }
  for (const auto& [id, record] : nodes) {
    std::string address = StringField(record, "metrics_address", &parsed);
    if (!IsTargetAddress(address)) continue;
    auto alive = parsed.find("alive");
    if (alive == parsed.end() || !alive->is_boolean() || !alive->get<bool>()) continue;
    bool hex = id.size() == 32 && id.find_first_not_of("0123456789abcdef") == std::string::npos;
    if (!hex) continue;
    out.push_back({{"targets", {address}}, {"labels", {{"role", "node"}, {"node_id", id}}}});
  }
  return out.dump(2) + "\n";
}

}  // namespace orrery::cli
