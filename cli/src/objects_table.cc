#include "cli/src/objects_table.h"

#include <algorithm>
#include <cstdio>
#include <nlohmann/json.hpp>

namespace orrery::cli {

namespace {

constexpr size_t kMaxOwnerChars = 48;
constexpr size_t kMaxAddressChars = 64;

// Rows of cells as left-aligned columns two spaces apart (cells are ASCII: Printable).
std::string Columns(const std::vector<std::vector<std::string>>& rows) {
  std::vector<size_t> width;
  for (const auto& row : rows) {
    if (row.size() > width.size()) width.resize(row.size(), 0);
    for (size_t c = 0; c < row.size(); ++c) width[c] = std::max(width[c], row[c].size());
  }
  std::string out;
  for (const auto& row : rows) {
    std::string line;
    for (size_t c = 0; c < row.size(); ++c) {
      line += row[c];
      if (c + 1 < row.size()) line += std::string(width[c] - row[c].size() + 2, ' ');
    }
    out += line + "\n";
  }
  return out;
}

std::string Plural(uint64_t n, const char* one, const char* many) {
  return std::to_string(n) + " " + (n == 1 ? one : many);
}

}  // namespace

std::string HumanBytes(uint64_t bytes) {
  static const char* kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  if (bytes < 1024) return std::to_string(bytes) + " B";
  double v = double(bytes);
  size_t unit = 0;
  while (v >= 1024 && unit + 1 < std::size(kUnits)) {
    v /= 1024;
    ++unit;
  }
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.1f %s", v, kUnits[unit]);
  return buf;
}

std::string StoreUsage(const proto::ObjectStoreUsageMsg& u) {
  if (u.capacity_bytes == 0 && u.used_bytes == 0 && u.num_objects == 0) return "no object store";
  return HumanBytes(u.used_bytes) + " / " + HumanBytes(u.capacity_bytes) + " (" +
         Plural(u.num_objects, "object", "objects") + ", " + HumanBytes(u.spilled_bytes) +
         " spilled)";
}

std::string Printable(const std::string& s, size_t max) {
  static const char* kDigits = "0123456789abcdef";
  std::string out;
  for (unsigned char c : s) {
    if (c >= 0x20 && c < 0x7f) {
      out.push_back(char(c));
    } else {
      out += "\\x";
      out.push_back(kDigits[c >> 4]);
      out.push_back(kDigits[c & 15]);
    }
    if (out.size() > max) break;
  }
  if (out.size() > max) out = out.substr(0, max > 3 ? max - 3 : 0) + "...";
  return out;
}

std::string FormatObjects(const std::vector<NodeObjects>& nodes) {
  std::vector<std::vector<std::string>> node_rows = {{"NODE", "ADDRESS", "OBJECT STORE"}};
  std::vector<std::string> notes;
  std::vector<std::vector<std::string>> object_rows = {
      {"OBJECT", "SIZE", "NODE", "OWNER", "SPILLED", "COPY", "PINS"}};
  size_t answered = 0;
  for (const auto& n : nodes) {
    std::string node = Printable(n.node_id.substr(0, 8), 8);
    std::string address = Printable(n.address, kMaxAddressChars);
    if (!n.answered) {
      node_rows.push_back({node, address, Printable(n.error, 200)});
      continue;
    }
    ++answered;
    node_rows.push_back({node, address, StoreUsage(n.reply.usage)});
    if (n.reply.truncated) {
      notes.push_back("node " + node + " listed only " +
                      Plural(n.reply.objects.size(), "object", "objects") + " of " +
                      std::to_string(n.reply.usage.num_objects) + " (a reply holds at most " +
                      std::to_string(proto::kMaxListedObjects) + ")");
    }
    for (const auto& o : n.reply.objects) {
      object_rows.push_back({Printable(o.object_id.substr(0, 16), 16), HumanBytes(o.size), node,
                             Printable(o.owner, kMaxOwnerChars), o.spilled ? "yes" : "no",
                             o.primary ? "primary" : "copy", std::to_string(o.pins)});
    }
  }
  std::string out = Columns(node_rows);
  for (const auto& note : notes) out += "note: " + note + "\n";
  out += "\n";
  size_t listed = object_rows.size() - 1;
  if (listed == 0) {
    out += "(no objects)\n";
  } else {
    out += Columns(object_rows);
  }
  out += "\n" + Plural(listed, "object", "objects") + " listed from " + std::to_string(answered) +
         " of " + Plural(nodes.size(), "node", "nodes");
  if (answered < nodes.size())
    out += " (" + std::to_string(nodes.size() - answered) + " did not answer)";
  out += "\n";
  return out;
}

nlohmann::json ObjectsJson(const std::vector<NodeObjects>& nodes) {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& n : nodes) {
    nlohmann::json objects = nlohmann::json::array();
    for (const auto& o : n.reply.objects) {
      objects.push_back({{"object_id", o.object_id},
                         {"size", o.size},
                         {"owner", o.owner},
                         {"spilled", o.spilled},
                         {"primary", o.primary},
                         {"pins", o.pins}});
    }
    const auto& u = n.reply.usage;
    out.push_back({{"node_id", n.node_id},
                   {"address", n.address},
                   {"answered", n.answered},
                   {"error", n.error},
                   {"usage",
                    {{"capacity_bytes", u.capacity_bytes},
                     {"used_bytes", u.used_bytes},
                     {"spilled_bytes", u.spilled_bytes},
                     {"num_objects", u.num_objects}}},
                   {"truncated", n.reply.truncated},
                   {"objects", std::move(objects)}});
  }
  return {{"nodes", std::move(out)}};
}

}  // namespace orrery::cli
