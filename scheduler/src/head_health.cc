// HeadService's failure detection: what the detector hears of nodes and drivers, and what
// the head does with its verdicts (failure_detector.h; docs/architecture.md "Failure
// detection").
#include "core/internal/log.h"
#include "scheduler/internal/head_service.h"

namespace orrery::scheduler {

namespace {
// The detector's keys: a node's or a job's binary id, with a prefix that tells them apart.
std::string NodeKey(const std::string& node_id) { return "n" + node_id; }
std::string JobKey(const std::string& job_id) { return "j" + job_id; }
}  // namespace

void HeadService::HeardNode(int i) {
  const NodeEntry& e = m_.nodes.at(i);
  if (!e.view.alive) return nodes_health_.Forget(NodeKey(e.view.id.Binary()));
  nodes_health_.Heard(NodeKey(e.view.id.Binary()), e.address);
}

void HeadService::HeardJob(const proto::JobMsg& m) {
  if (m.alive && m_.jobs.IsAlive(m.job_id)) {
    drivers_health_.Heard(JobKey(m.job_id), m_.jobs.DriverAddress(m.job_id));
  } else {
    drivers_health_.Forget(JobKey(m.job_id));
  }
}

void HeadService::HeardRestored() {
  for (size_t i = 0; i < m_.nodes.size(); ++i)
    if (m_.nodes.alive(int(i))) HeardNode(int(i));
  for (const auto& [id, job] : m_.jobs.all())
    if (job.alive) drivers_health_.Heard(JobKey(id), job.info.driver_address);
}

void HeadService::CheckHealth(double now) {
  bool caught_up = inbox_.CaughtUp();
  drivers_health_.Advance(now, caught_up);
  for (const FailureDetector::Verdict& v : drivers_health_.Tick()) {
    const std::string id = v.key.substr(1);
    if (v.kind == FailureDetector::Kind::kDead) {
      m_.jobs.DriverDied(id, v.cause);
    } else if (v.kind == FailureDetector::Kind::kSuspected) {
      LOG_WARN("the driver of job " + Hex(id) + " is suspected: " + v.cause);
    }
  }
  nodes_health_.Advance(now, caught_up);
  for (const FailureDetector::Verdict& v : nodes_health_.Tick()) OnNodeVerdict(v, now);
}

void HeadService::OnNodeVerdict(const FailureDetector::Verdict& v, double now) {
  const std::string id = v.key.substr(1);
  int i = m_.nodes.Index(id);
  if (i < 0 || !m_.nodes.alive(i)) return;
  switch (v.kind) {
    case FailureDetector::Kind::kSuspected:
      LOG_WARN("node " + Hex(id) + " is suspected (no new work goes there): " + v.cause);
      m_.nodes.SetSuspected(i, true);
      break;
    case FailureDetector::Kind::kCleared:
      LOG_INFO("node " + Hex(id) + " is heard from again");
      m_.nodes.SetSuspected(i, false);
      m_.queue.ScheduleAll(now);
      break;
    case FailureDetector::Kind::kDead:
      m_.NodeDied(i, v.cause, now);
      break;
  }
}

}  // namespace orrery::scheduler
