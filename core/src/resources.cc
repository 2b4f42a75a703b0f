#include "orrery/resources.h"

#include <cmath>
#include <sstream>

namespace orrery {

namespace {
constexpr double kEpsilon = 1e-9;
}

Status ValidateResources(const Resources& demand) {
  for (const auto& [name, value] : demand) {
    if (name.empty()) return Status::InvalidArgument("resource names must not be empty");
    if (!std::isfinite(value) || value <= 0) {
      return Status::InvalidArgument("resource '" + name + "' must be greater than 0, got " +
                                     std::to_string(value));
    }
    if (value > 1 && std::fabs(value - std::round(value)) > kEpsilon) {
      return Status::InvalidArgument(
          "resource '" + name + "' above 1 must be a whole number, got " + std::to_string(value));
    }
  }
  return Status::Ok();
}

bool Fits(const Resources& demand, const Resources& available) {
  for (const auto& [name, value] : demand) {
    auto it = available.find(name);
    double have = it == available.end() ? 0.0 : it->second;
    if (have + kEpsilon < value) return false;
  }
  return true;
}

void Subtract(Resources& available, const Resources& demand) {
  for (const auto& [name, value] : demand) {
    double& v = available[name];
    v -= value;
    if (std::fabs(v) < kEpsilon) v = 0;
  }
}

void Add(Resources& available, const Resources& amount) {
  for (const auto& [name, value] : amount) {
    double& v = available[name];
    v += value;
    if (std::fabs(v) < kEpsilon) v = 0;
  }
}

std::string ToString(const Resources& resources) {
  std::ostringstream os;
  os << "{";
  bool first = true;
  for (const auto& [name, value] : resources) {
    os << (first ? "" : ", ") << name << ": " << value;
    first = false;
  }
  os << "}";
  return os.str();
}

std::string ToString(const Labels& labels) {
  std::ostringstream os;
  os << "{";
  bool first = true;
  for (const auto& [k, v] : labels) {
    os << (first ? "" : ", ") << k << "=" << v;
    first = false;
  }
  os << "}";
  return os.str();
}

}  // namespace orrery
