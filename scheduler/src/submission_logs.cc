// SubmissionManager's log routing and recovery (submission_manager.h; docs/logs.md).
#include <chrono>
#include <nlohmann/json.hpp>

#include "core/internal/log.h"
#include "core/internal/text.h"
#include "orrery/resources.h"
#include "scheduler/src/records.h"
#include "scheduler/src/submission_manager.h"

namespace orrery::scheduler {

using proto::MsgType;

namespace {

constexpr size_t kMaxGroups = 4096;
constexpr size_t kMaxNameBytes = 128;

int64_t WallMillis() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// A field from a node, made safe to store and print: bounded, no control bytes.
std::string Clean(const std::string& s, size_t limit) {
  return records::EscapeUtf8(text::EscapeControl(s.substr(0, limit)));
}

bool IsHexId(const std::string& s) {
  return s.size() == 2 * UniqueId::kSize &&
         s.find_first_not_of("0123456789abcdef") == std::string::npos;
}

}  // namespace

void SubmissionManager::StoreLogs(const proto::LogLinesMsg& g, const std::string& node_hex) {
  std::string stream = g.submission_id.empty() ? "logs" : "job_logs:" + g.submission_id;
  size_t i = 0;
  while (i < g.lines.size()) {
    std::string text;
    for (; i < g.lines.size() &&
           (text.empty() || text.size() + g.lines[i].size() < kMaxLogEntryBytes);
         ++i) {
      if (!text.empty()) text.push_back('\n');
      text += g.lines[i].substr(0, kMaxLogEntryBytes);
    }
    log_seq_ = std::max(log_seq_ + 1, WallMillis() * 1000);
    ctx_.store->StreamAdd(stream, log_seq_,
                          {{"node", node_hex},
                           {"pid", std::to_string(g.pid)},
                           {"name", g.name},
                           {"job", g.job_id},
                           {"actor", g.actor_id},
                           {"submission", g.submission_id},
                           {"stream", g.is_stderr ? "stderr" : "stdout"},
                           {"text", text}});
  }
}

void SubmissionManager::OnLogBatch(proto::LogBatchMsg m, int node) {
  std::string node_hex = nodes_.HexId(node);
  if (m.groups.size() > kMaxGroups) m.groups.resize(kMaxGroups);
  std::map<std::string, proto::LogBatchMsg> to_drivers;  // by driver address
  for (auto& g : m.groups) {
    g.name = Clean(g.name, kMaxNameBytes);
    if (!IsHexId(g.job_id)) g.job_id.clear();
    if (!IsHexId(g.actor_id)) g.actor_id.clear();
    if (!g.submission_id.empty() && !subs_.count(g.submission_id)) continue;  // none of ours
    for (auto& line : g.lines) line = Clean(line, kMaxLogEntryBytes);
    StoreLogs(g, node_hex);
    if (g.job_id.empty() || !g.submission_id.empty()) continue;
    std::string driver = jobs_.DriverAddress(UniqueId::FromHex(g.job_id).Binary());
    if (driver.empty()) continue;
    proto::LogBatchMsg& out = to_drivers[driver];
    out.node_id = node_hex;
    out.groups.push_back(std::move(g));
  }
  for (const auto& [driver, batch] : to_drivers)
    ctx_.outbox->Send(driver, MsgType::kLogBatch, batch);
}

void SubmissionManager::Restore(const TableRecords& records, double wall_now) {
  for (const auto& [key, text] : records) {
    Submission s;
    try {
      auto j = nlohmann::json::parse(text);
      s.spec.submission_id = j.at("submission_id").get<std::string>();
      s.spec.argv = j.at("argv").get<std::vector<std::string>>();
      s.spec.arch = j.value("arch", "");
      s.spec.binary_hash = j.at("binary_hash").get<std::string>();
      s.spec.entrypoint = j.value("entrypoint", "");
      s.spec.resources = j.value("resources", Resources{});
      s.spec.label_selector = j.value("labels", Labels{});
      s.spec.runtime_env.env_vars = j.value("env_vars", Labels{});
      s.spec.runtime_env.working_dir = j.value("working_dir", "");
      s.spec.runtime_env.working_dir_hash = j.value("working_dir_hash", "");
      s.spec.runtime_env.working_dir_id = j.value("working_dir_id", "");
      std::string state = j.at("state").get<std::string>();
      for (auto st :
           {SubmissionState::kPending, SubmissionState::kRunning, SubmissionState::kSucceeded,
            SubmissionState::kFailed, SubmissionState::kStopped})
        if (state == SubmissionStateName(st)) s.state = st;
      s.node = j.value("node_id", "").empty() ? -1 : nodes_.IndexOfHex(j.value("node_id", ""));
      s.pid = j.value("pid", 0);
      s.has_exit_code = j.contains("exit_code") && j["exit_code"].is_number_integer();
      if (s.has_exit_code) s.exit_code = j["exit_code"].get<int>();
      s.submit_time = j.value("submit_time", 0.0);
      s.start_time = j.value("start_time", 0.0);
      s.end_time = j.value("end_time", 0.0);
      s.message = j.value("message", "");
      s.job_id = j.value("job_id", "");
    } catch (const std::exception& e) {
      LOG_WARN("skipping submission record " + records::EscapeUtf8(key.substr(0, 80)) + ": " +
               e.what());
      continue;
    }
    if (s.spec.submission_id != key || CheckSubmission(s.spec).code() != StatusCode::kOk) {
      LOG_WARN("skipping submission record " + records::EscapeUtf8(key.substr(0, 80)) +
               ": not a submission the head wrote");
      continue;
    }
    jobs_.Vouch(s.spec.binary_hash);
    Submission& stored = subs_[key] = std::move(s);
    bool ended = stored.state == SubmissionState::kSucceeded ||
                 stored.state == SubmissionState::kFailed ||
                 stored.state == SubmissionState::kStopped;
    if (ended) continue;
    if (stored.node >= 0 && nodes_.alive(stored.node)) {
      Subtract(nodes_.available(stored.node), stored.spec.resources);
      stored.reserved = true;
    } else if (stored.node >= 0) {
      End(stored, SubmissionState::kFailed, "its node is gone", wall_now);
    }
  }
}

}  // namespace orrery::scheduler
