#include "orrery/config.h"

#include <cctype>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>

#include "orrery/errors.h"

namespace orrery {

namespace {

const Config kDefaults{};

double ParseDouble(const std::string& what, const std::string& text) {
  char* end = nullptr;
  double v = std::strtod(text.c_str(), &end);
  if (text.empty() || *end != '\0')
    throw ConfigError(what + ": expected a number, got '" + text + "'");
  return v;
}

int ParseInt(const std::string& what, const std::string& text) {
  char* end = nullptr;
  long v = std::strtol(text.c_str(), &end, 10);
  if (text.empty() || *end != '\0')
    throw ConfigError(what + ": expected an integer, got '" + text + "'");
  if (v < INT_MIN || v > INT_MAX) throw ConfigError(what + ": " + text + " is out of range");
  return int(v);
}

Resources ParseResources(const std::string& what, const std::string& text) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const std::exception& e) {
    throw ConfigError(what + ": not valid JSON (" + e.what() + "): " + text);
  }
  if (!j.is_object())
    throw ConfigError(what + ": expected a JSON object like {\"GPU\": 2}, got " + text);
  Resources out;
  for (auto it = j.begin(); it != j.end(); ++it) {
    if (!it.value().is_number()) {
      throw ConfigError(what + ": the value of '" + it.key() + "' must be a number");
    }
    out[it.key()] = it.value().get<double>();
  }
  return out;
}

Labels ParseLabels(const std::string& what, const std::string& text) {
  Labels out;
  size_t start = 0;
  while (start <= text.size() && !text.empty()) {
    size_t comma = text.find(',', start);
    std::string item =
        text.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    size_t eq = item.find('=');
    if (eq == std::string::npos || eq == 0) {
      throw ConfigError(what + ": expected key=value[,key=value...], got '" + text + "'");
    }
    out[item.substr(0, eq)] = item.substr(eq + 1);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return out;
}

void CheckMemoryUsageThreshold(const std::string& what, double t) {
  if (!(t > 0 && t <= 1)) {
    char got[32];
    std::snprintf(got, sizeof(got), "%g", t);
    throw ConfigError(what + ": must be a fraction in (0, 1], got " + got);
  }
}

void CheckRefreshMs(const std::string& what, long long ms) {
  if (ms < 0 || ms > 3600 * 1000)
    throw ConfigError(what + ": must be 0 (off) to 3600000 ms, got " + std::to_string(ms));
}

// A bound on the processes one request can make a node keep idle.
constexpr int kMaxPrestartedWorkers = 1024;

void CheckPrestartedWorkers(const std::string& what, int n) {
  if (n < 0 || n > kMaxPrestartedWorkers)
    throw ConfigError(what + ": must be 0 (none) to " + std::to_string(kMaxPrestartedWorkers) +
                      ", got " + std::to_string(n));
}

void CheckLogLevel(const std::string& what, const std::string& level) {
  static const char* kLevels[] = {"trace", "debug", "info", "warn", "error", "off"};
  for (const char* l : kLevels)
    if (level == l) return;
  throw ConfigError(what + ": unknown log level '" + level +
                    "' (trace, debug, info, warn, error, off)");
}

// "host:port" with a port in 1..65535 (a tcp:// prefix is accepted).
void CheckAddress(const std::string& what, const std::string& value) {
  std::string v = value.rfind("tcp://", 0) == 0 ? value.substr(6) : value;
  size_t colon = v.rfind(':');
  bool ok = colon != std::string::npos && colon > 0 && colon + 1 < v.size();
  if (ok) {
    char* end = nullptr;
    long port = std::strtol(v.c_str() + colon + 1, &end, 10);
    ok = *end == '\0' && port > 0 && port < 65536;
  }
  if (!ok) throw ConfigError(what + ": expected host:port, got '" + value + "'");
}

// 1/true/yes/on or 0/false/no/off; ConfigError naming `what` otherwise.
bool ParseBool(const std::string& what, const std::string& value) {
  if (value == "1" || value == "true" || value == "yes" || value == "on") return true;
  if (value == "0" || value == "false" || value == "no" || value == "off") return false;
  throw ConfigError(what + ": expected 1/true/yes/on or 0/false/no/off, got '" + value + "'");
}

// Sets one field from a textual value, if the field is still at its default.
void SetField(Config& c, const std::string& key, const std::string& value,
              const std::string& what) {
  if (key == "address") {
    CheckAddress(what, value);
    if (c.address.empty()) c.address = value;
  } else if (key == "redis-address") {
    CheckAddress(what, value);
    if (c.redis_address.empty()) c.redis_address = value;
  } else if (key == "namespace") {
    if (c.namespace_.empty()) c.namespace_ = value;
  } else if (key == "num-cpus") {
    int n = ParseInt(what, value);
    if (n < 0) throw ConfigError(what + ": must be >= 0");
    if (c.num_cpus == kDefaults.num_cpus) c.num_cpus = n;
  } else if (key == "resources") {
    Resources r = ParseResources(what, value);
    for (auto& [k, v] : r) c.resources.emplace(k, v);
  } else if (key == "labels") {
    Labels l = ParseLabels(what, value);
    for (auto& [k, v] : l) c.labels.emplace(k, v);
  } else if (key == "log-level") {
    CheckLogLevel(what, value);
    if (c.log_level.empty()) c.log_level = value;
  } else if (key == "infeasible-timeout-s") {
    double v = ParseDouble(what, value);
    if (c.infeasible_timeout_s == kDefaults.infeasible_timeout_s) c.infeasible_timeout_s = v;
  } else if (key == "session-dir") {
    if (c.session_dir.empty()) c.session_dir = value;
  } else if (key == "node-ip") {
    if (c.node_ip.empty()) c.node_ip = value;
  } else if (key == "memory-usage-threshold") {
    double v = ParseDouble(what, value);
    CheckMemoryUsageThreshold(what, v);
    if (c.memory_usage_threshold == kDefaults.memory_usage_threshold) c.memory_usage_threshold = v;
  } else if (key == "memory-monitor-refresh-ms") {
    char* end = nullptr;
    long long v = std::strtoll(value.c_str(), &end, 10);
    if (value.empty() || *end != '\0')
      throw ConfigError(what + ": expected an integer, got '" + value + "'");
    CheckRefreshMs(what, v);
    if (c.memory_monitor_refresh_ms == kDefaults.memory_monitor_refresh_ms)
      c.memory_monitor_refresh_ms = int(v);
  } else if (key == "prestarted-workers") {
    int n = ParseInt(what, value);
    CheckPrestartedWorkers(what, n);
    if (c.prestarted_workers == kDefaults.prestarted_workers) c.prestarted_workers = n;
  } else if (key == "token-file") {
    if (value.empty()) throw ConfigError(what + ": expected a file name");
    if (c.token_file.empty()) c.token_file = value;
  } else if (key == "insecure") {
    if (ParseBool(what, value)) c.insecure = true;
  } else if (key == "log-to-driver") {
    if (!ParseBool(what, value)) c.log_to_driver = false;
  } else if (key == "object-store-memory") {
    long long v = ParseByteSize(what, value);
    if (c.object_store_memory == 0) c.object_store_memory = v;
  } else if (key == "object-spill-dir") {
    if (value.empty()) throw ConfigError(what + ": expected a directory");
    if (c.object_spill_dir.empty()) c.object_spill_dir = value;
  } else {
    throw ConfigError("unknown option " + what);
  }
}

const char* kKeys[] = {"address",
                       "redis-address",
                       "namespace",
                       "num-cpus",
                       "resources",
                       "labels",
                       "log-level",
                       "infeasible-timeout-s",
                       "session-dir",
                       "node-ip",
                       "memory-usage-threshold",
                       "memory-monitor-refresh-ms",
                       "prestarted-workers",
                       "token-file",
                       "insecure",
                       "object-store-memory",
                       "object-spill-dir",
                       "log-to-driver"};

std::string EnvName(const std::string& key) {
  std::string out = "ORRERY_";
  for (char ch : key) out.push_back(ch == '-' ? '_' : char(std::toupper(ch)));
  return out;
}

}  // namespace

void ValidateConfig(const Config& c) {
  if (!c.address.empty()) CheckAddress("Config::address", c.address);
  if (!c.redis_address.empty()) CheckAddress("Config::redis_address", c.redis_address);
  if (!c.log_level.empty()) CheckLogLevel("Config::log_level", c.log_level);
  if (c.num_cpus < -1)
    throw ConfigError("Config::num_cpus must be >= 0 (or -1 for the core count)");
  if (c.max_message_bytes <= 0) throw ConfigError("Config::max_message_bytes must be positive");
  CheckMemoryUsageThreshold("Config::memory_usage_threshold", c.memory_usage_threshold);
  CheckRefreshMs("Config::memory_monitor_refresh_ms", c.memory_monitor_refresh_ms);
  CheckPrestartedWorkers("Config::prestarted_workers", c.prestarted_workers);
  if (c.object_store_memory < 0)
    throw ConfigError("Config::object_store_memory must be >= 0 (0: 30% of memory)");
  if (c.insecure && !c.token_file.empty()) {
    throw ConfigError(
        "Config::insecure and Config::token_file contradict each other: an insecure process uses "
        "no token");
  }
}

long long ParseByteSize(const std::string& what, const std::string& value) {
  size_t digits = 0;
  while (digits < value.size() && std::isdigit(static_cast<unsigned char>(value[digits]))) ++digits;
  std::string suffix = value.substr(digits);
  int shift = -1;
  if (suffix.empty() || suffix == "B") shift = 0;
  if (suffix == "K" || suffix == "k" || suffix == "KiB") shift = 10;
  if (suffix == "M" || suffix == "m" || suffix == "MiB") shift = 20;
  if (suffix == "G" || suffix == "g" || suffix == "GiB") shift = 30;
  if (suffix == "T" || suffix == "t" || suffix == "TiB") shift = 40;
  if (digits == 0 || digits > 15 || shift < 0)
    throw ConfigError(what +
                      ": expected a size in bytes (digits, optionally with K, M, G or T), "
                      "got '" +
                      value + "'");
  long long n = std::stoll(value.substr(0, digits));
  if (n > (std::numeric_limits<long long>::max() >> shift))
    throw ConfigError(what + ": '" + value + "' is too large");
  return n << shift;
}

Config ApplyEnvironment(Config base) {
  for (const char* key : kKeys) {
    std::string name = EnvName(key);
    const char* value = std::getenv(name.c_str());
    if (value && *value) SetField(base, key, value, name);
  }
  return base;
}

Config ApplyFlags(Config base, int* argc, char** argv) {
  if (!argc || !argv) return base;
  int out = 1;
  for (int i = 1; i < *argc; ++i) {
    std::string arg = argv[i];
    const std::string prefix = "--orrery-";
    if (arg.rfind(prefix, 0) != 0) {
      argv[out++] = argv[i];
      continue;
    }
    std::string key = arg.substr(prefix.size());
    std::string value;
    size_t eq = key.find('=');
    if (eq != std::string::npos) {
      value = key.substr(eq + 1);
      key = key.substr(0, eq);
    } else if (key == "insecure") {
      value = "1";  // a switch: --orrery-insecure alone turns it on
    } else {
      if (i + 1 >= *argc) throw ConfigError("option --orrery-" + key + " needs a value");
      value = argv[++i];
    }
    SetField(base, key, value, "--orrery-" + key);
  }
  *argc = out;
  argv[out] = nullptr;
  return base;
}

}  // namespace orrery
