#include "core/internal/listings.h"

#include "core/internal/text.h"

namespace orrery::listings {

namespace {
std::string Clean(const std::string& s) { return text::EscapeControl(s.substr(0, 256)); }
}  // namespace

nlohmann::json WorkerRow(const std::string& node_id, const proto::WorkerInfoMsg& w) {
  return {{"node_id", Clean(node_id)},     {"pid", w.pid},
          {"kind", Clean(w.kind)},         {"state", Clean(w.state)},
          {"job_id", Clean(w.job_id)},     {"actor_id", Clean(w.actor_id)},
          {"lease_id", Clean(w.lease_id)}, {"name", Clean(w.name)},
          {"start_time", w.start_time},    {"resources", w.resources}};
}

nlohmann::json TaskRow(const std::string& job_id, const proto::TaskInfoMsg& t) {
  return {{"task_id", Clean(t.task_id)}, {"job_id", Clean(job_id)},       {"name", Clean(t.name)},
          {"kind", Clean(t.kind)},       {"actor_id", Clean(t.actor_id)}, {"state", Clean(t.state)},
          {"error", Clean(t.error)},     {"submit_time", t.submit_time},  {"end_time", t.end_time}};
}

}  // namespace orrery::listings
