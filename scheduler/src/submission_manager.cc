#include "scheduler/src/submission_manager.h"

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>

#include "core/internal/file_hash.h"
#include "core/internal/log.h"
#include "core/internal/runtime_env.h"
#include "core/internal/text.h"
#include "orrery/resources.h"
#include "orrery/scheduler/policy.h"
#include "scheduler/src/records.h"

namespace orrery::scheduler {

using proto::MsgType;

namespace {

constexpr size_t kMaxArgs = 4096;
constexpr size_t kMaxCommandBytes = 1 << 20;

bool ValidSubmissionId(const std::string& id) {
  return id.size() >= 5 && id.size() <= 64 && id.rfind("job_", 0) == 0 &&
         id.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789_-") == std::string::npos;
}

bool Ended(SubmissionState s) {
  return s == SubmissionState::kSucceeded || s == SubmissionState::kFailed ||
         s == SubmissionState::kStopped;
}

std::string HostOf(const std::string& address) {
  std::string a = address;
  if (a.rfind("tcp://", 0) == 0) a = a.substr(6);
  return a.substr(0, a.rfind(':'));
}

}  // namespace

Status CheckSubmission(const proto::SubmitJobMsg& m) {
  if (!ValidSubmissionId(m.submission_id))
    return Status::InvalidArgument("a submission id is job_ followed by lowercase hex");
  size_t bytes = 0;
  for (const auto& a : m.argv) bytes += a.size();
  if (m.argv.empty() || m.argv.size() > kMaxArgs || bytes > kMaxCommandBytes)
    return Status::InvalidArgument("the job's command line is empty or too long");
  if (!IsContentHash(m.binary_hash))
    return Status::InvalidArgument("the job's executable is named by its SHA-256");
  if (Status s = ValidateResources(m.resources); !s.ok()) return s;
  if (Status s = records::CheckUtf8("the job's resources", m.resources); !s.ok()) return s;
  if (Status s = records::CheckUtf8("the job's labels", m.label_selector); !s.ok()) return s;
  if (Status s = runtime_env::Check(m.runtime_env); !s.ok()) return s;
  if (Status s = records::CheckUtf8("the job's variables", m.runtime_env.env_vars); !s.ok())
    return s;
  if (Status s = records::CheckUtf8("the job's working_dir identity", m.runtime_env.working_dir_id);
      !s.ok())
    return s;
  return records::CheckUtf8("the job's working_dir", m.runtime_env.working_dir);
}

const char* SubmissionStateName(SubmissionState s) {
  switch (s) {
    case SubmissionState::kPending:
      return "PENDING";
    case SubmissionState::kRunning:
      return "RUNNING";
    case SubmissionState::kSucceeded:
      return "SUCCEEDED";
    case SubmissionState::kFailed:
      return "FAILED";
    case SubmissionState::kStopped:
      return "STOPPED";
  }
  return "?";
}

void SubmissionManager::OnSubmit(const proto::SubmitJobMsg& m, double wall_now) {
  proto::SubmitJobReplyMsg reply{m.request_id, m.submission_id, false, ""};
  auto answer = [&] { ctx_.outbox->Send(m.reply_to, MsgType::kSubmitJobReply, reply); };
  if (subs_.count(m.submission_id)) return answer();  // a resend: accepted already
  if (Status s = CheckSubmission(m); !s.ok()) {
    reply.error = s.message();
    return answer();
  }
  // Uploads the head lacks: the executable, and the working_dir's package.
  const std::string& package = m.runtime_env.working_dir_hash;
  reply.need_binary = !jobs_.HasBinary(m.binary_hash);
  reply.need_package = !package.empty() && !jobs_.TouchPackage(package);
  if (reply.need_binary) jobs_.ExpectUpload(m.submission_id, m.binary_hash);
  if (reply.need_binary || reply.need_package) return answer();
  Submission s;
  s.spec = m;
  s.spec.reply_to.clear();
  s.spec.entrypoint = records::EscapeUtf8(m.entrypoint);
  // Feasible somewhere (in total), or it would wait forever.
  bool feasible = false;
  for (size_t i = 0; i < nodes_.size() && !feasible; ++i) {
    const NodeView& v = nodes_.at(int(i)).view;
    feasible = v.alive && Fits(m.resources, v.total) && MatchesSelector(v.labels, m.label_selector);
  }
  if (!feasible) {
    reply.error = "no alive node has " + ToString(m.resources) +
                  (m.label_selector.empty() ? "" : " with the labels asked for") +
                  " in total: the job can never run";
    return answer();
  }
  jobs_.Vouch(m.binary_hash);
  s.submit_time = wall_now;
  Evict();
  Submission& stored = subs_[m.submission_id] = std::move(s);
  LOG_INFO("job " + m.submission_id + " submitted: " + stored.spec.entrypoint);
  Persist(stored);
  answer();
  Tick(wall_now);
}

int SubmissionManager::PickNode(const Submission& s) const {
  bool any = s.spec.resources.empty() && s.spec.label_selector.empty();
  int fallback = -1;
  for (size_t i = 0; i < nodes_.size(); ++i) {
    const NodeEntry& n = nodes_.at(int(i));
    if (!n.view.alive || !Fits(s.spec.resources, n.view.available)) continue;
    if (!MatchesSelector(n.view.labels, s.spec.label_selector)) continue;
    // Asked for nothing in particular: the head's own host first.
    if (!any || HostOf(n.address) == HostOf(head_address_)) return int(i);
    if (fallback < 0) fallback = int(i);
  }
  return fallback;
}

void SubmissionManager::Start(Submission& s, int node, double wall_now) {
  s.node = node;
  Subtract(nodes_.available(node), s.spec.resources);
  s.reserved = true;
  SendStart(s, wall_now);
  s.message = "starting on node " + nodes_.HexId(node).substr(0, 12);
  Persist(s);
}

void SubmissionManager::SendStart(Submission& s, double wall_now) {
  proto::StartJobMsg start;
  start.submission_id = s.spec.submission_id;
  start.argv = s.spec.argv;
  start.binary_hash = s.spec.binary_hash;
  start.arch = s.spec.arch;
  std::string head = head_address_;
  if (head.rfind("tcp://", 0) == 0) head = head.substr(6);
  start.env = s.spec.runtime_env.env_vars;  // no ORRERY_* among them (CheckSubmission)
  start.working_dir = s.spec.runtime_env.working_dir;
  start.working_dir_hash = s.spec.runtime_env.working_dir_hash;
  start.working_dir_id = s.spec.runtime_env.working_dir_id;
  start.env["ORRERY_ADDRESS"] = head;
  start.env["ORRERY_SUBMISSION_ID"] = s.spec.submission_id;
  ctx_.outbox->Send(nodes_.address(s.node), MsgType::kStartJob, start);
  s.start_sent = wall_now;
}

void SubmissionManager::Tick(double wall_now) {
  for (auto& [id, s] : subs_) {
    if (s.state != SubmissionState::kPending || s.stop_requested) continue;
    if (s.node >= 0) {
      if (nodes_.alive(s.node) && std::abs(wall_now - s.start_sent) >= kStartResendS)
        SendStart(s, wall_now);
      continue;
    }
    int node = PickNode(s);
    if (node >= 0) Start(s, node, wall_now);
  }
}

void SubmissionManager::End(Submission& s, SubmissionState state, const std::string& message,
                            double wall_now) {
  if (Ended(s.state)) return;
  if (s.reserved && s.node >= 0 && nodes_.alive(s.node)) nodes_.Give(s.node, s.spec.resources);
  s.reserved = false;
  s.state = state;
  s.message = records::EscapeUtf8(message);
  s.end_time = wall_now;
  LOG_INFO("job " + s.spec.submission_id + " " + SubmissionStateName(state) + ": " + s.message);
  Persist(s);
}

void SubmissionManager::OnStop(const proto::StopJobMsg& m, double wall_now) {
  auto it = subs_.find(m.submission_id);
  if (it == subs_.end()) {
    return ctx_.Ack(m.reply_to, m.request_id, false, proto::ErrorKind::kConfigError,
                    "no job " + records::EscapeUtf8(m.submission_id.substr(0, 80)) +
                        " was submitted to this cluster");
  }
  Submission& s = it->second;
  if (!Ended(s.state)) {
    s.stop_requested = true;
    if (s.node < 0) {
      End(s, SubmissionState::kStopped, "stopped before it started", wall_now);
    } else {
      proto::StopJobMsg stop{0, "", s.spec.submission_id};
      ctx_.outbox->Send(nodes_.address(s.node), MsgType::kStopJob, stop);
      s.message = "stopping";
      Persist(s);
    }
  }
  ctx_.Ack(m.reply_to, m.request_id);
}

void SubmissionManager::OnJobEvent(const proto::JobEventMsg& m, int node, double wall_now) {
  auto it = subs_.find(m.submission_id);
  if (it == subs_.end() || it->second.node != node) return;  // not this node's to report
  Submission& s = it->second;
  switch (proto::JobEventKind(m.kind)) {
    case proto::JobEventKind::kStarted:
      if (s.state != SubmissionState::kPending) return;
      s.state = SubmissionState::kRunning;
      s.pid = m.pid;
      s.start_time = wall_now;
      s.message = "running on node " + nodes_.HexId(node).substr(0, 12);
      return Persist(s);
    case proto::JobEventKind::kExited:
      s.exit_code = m.exit_code;
      s.has_exit_code = true;
      return End(s,
                 s.stop_requested   ? SubmissionState::kStopped
                 : m.exit_code == 0 ? SubmissionState::kSucceeded
                                    : SubmissionState::kFailed,
                 m.cause, wall_now);
    case proto::JobEventKind::kFailedToStart:
      return End(s, s.stop_requested ? SubmissionState::kStopped : SubmissionState::kFailed,
                 m.cause, wall_now);
  }
}

void SubmissionManager::NodeDied(int i, const std::string& cause, double wall_now) {
  for (auto& [id, s] : subs_) {
    if (s.node != i || Ended(s.state)) continue;
    s.reserved = false;  // the node's resources are gone with it
    End(s, SubmissionState::kFailed,
        "node " + nodes_.HexId(i).substr(0, 12) + " died (" + cause + ")", wall_now);
  }
}

void SubmissionManager::DriverRegistered(const std::string& submission_id,
                                         const std::string& job_id_hex) {
  auto it = subs_.find(submission_id);
  if (it == subs_.end() || !it->second.job_id.empty()) return;
  it->second.job_id = job_id_hex;
  Persist(it->second);
}

bool SubmissionManager::Forget(const std::string& submission_id) {
  auto it = subs_.find(submission_id);
  if (it == subs_.end()) return true;
  if (!Ended(it->second.state)) return false;
  subs_.erase(it);
  return true;
}

void SubmissionManager::Evict() {
  while (subs_.size() >= kMaxSubmissions) {
    auto oldest = subs_.end();
    for (auto it = subs_.begin(); it != subs_.end(); ++it) {
      if (!Ended(it->second.state)) continue;
      if (oldest == subs_.end() || it->second.end_time < oldest->second.end_time) oldest = it;
    }
    if (oldest == subs_.end()) return;  // all running: kept
    subs_.erase(oldest);
  }
}

std::string SubmissionManager::Json(const Submission& s) const {
  nlohmann::json j{{"submission_id", s.spec.submission_id},
                   {"state", SubmissionStateName(s.state)},
                   {"entrypoint", s.spec.entrypoint},
                   {"argv", s.spec.argv},
                   {"arch", s.spec.arch},
                   {"resources", s.spec.resources},
                   {"labels", s.spec.label_selector},
                   {"env_vars", s.spec.runtime_env.env_vars},
                   {"working_dir", s.spec.runtime_env.working_dir},
                   {"working_dir_hash", s.spec.runtime_env.working_dir_hash},
                   {"working_dir_id", s.spec.runtime_env.working_dir_id},
                   {"binary_hash", s.spec.binary_hash},
                   {"node_id", s.node >= 0 ? nodes_.HexId(s.node) : ""},
                   {"pid", s.pid},
                   {"exit_code", s.has_exit_code ? nlohmann::json(s.exit_code) : nlohmann::json()},
                   {"submit_time", s.submit_time},
                   {"start_time", s.start_time},
                   {"end_time", s.end_time},
                   {"message", s.message},
                   {"job_id", s.job_id}};
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

void SubmissionManager::Persist(const Submission& s) {
  ctx_.store->Put("submissions", s.spec.submission_id, Json(s));
  ctx_.Publish("submissions", s.spec.submission_id, SubmissionStateName(s.state));
}

}  // namespace orrery::scheduler
