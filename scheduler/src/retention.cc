#include "scheduler/src/retention.h"

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>

#include "core/internal/log.h"

namespace orrery::scheduler {

namespace {
bool Terminal(const nlohmann::json& state) {
  if (!state.is_string()) return false;
  const auto& s = state.get_ref<const std::string&>();
  for (const char* t : {"DEAD", "FINISHED", "ERRORED", "FAILED", "STOPPED", "SUCCEEDED"})
    if (s == t) return true;
  return false;
}

bool IsHistoryTable(const std::string& table) {
  for (const char* t : kHistoryTables)
    if (table == t) return true;
  return false;
}
}  // namespace

std::optional<double> EndedAt(std::string_view table, std::string_view json) {
  // Only the top-level fields that matter are kept: a record's large values (an actor's
  // spec, a run's config) are read past, not copied.
  auto keep = [](int depth, nlohmann::json::parse_event_t event, nlohmann::json& parsed) {
    if (depth != 1 || event != nlohmann::json::parse_event_t::key) return true;
    const auto& k = parsed.get_ref<const std::string&>();
    return k == "end_time" || k == "state" || k == "status" || k == "alive";
  };
  nlohmann::json j = nlohmann::json::parse(json, keep, /*allow_exceptions=*/false);
  if (!j.is_object()) return std::nullopt;
  auto end = j.find("end_time");
  if (end == j.end() || !end->is_number()) return std::nullopt;
  double t = end->get<double>();
  if (!std::isfinite(t) || t <= 0) return std::nullopt;
  bool ended = false;
  if (table == "nodes") {
    auto alive = j.find("alive");
    ended = alive != j.end() && alive->is_boolean() && !alive->get<bool>();
  } else {
    ended = Terminal(j.value("state", nlohmann::json())) ||
            Terminal(j.value("status", nlohmann::json()));
  }
  return ended ? std::optional<double>(t) : std::nullopt;
}

double TrimIntervalS(double ttl_s) { return std::max(1.0, std::min(60.0, ttl_s / 4)); }

RetentionStore::RetentionStore(std::shared_ptr<StateStore> inner, double ttl_s)
    : inner_(std::move(inner)), ttl_s_(ttl_s) {}

void RetentionStore::NoteLocked(const std::string& table, const std::string& key,
                                std::string_view json) {
  if (!IsHistoryTable(table)) return;
  Key k{table, key};
  UnnoteLocked(k);
  std::optional<double> end = EndedAt(table, json);
  if (!end) return;
  double due = *end + ttl_s_;
  due_[k] = due;
  by_due_.emplace(due, std::move(k));
}

void RetentionStore::UnnoteLocked(const Key& k) {
  auto it = due_.find(k);
  if (it == due_.end()) return;
  by_due_.erase({it->second, k});
  due_.erase(it);
}

void RetentionStore::Put(const std::string& table, const std::string& key,
                         const std::string& json) {
  {
    MutexLock lock(&mu_);
    NoteLocked(table, key, json);
  }
  inner_->Put(table, key, json);
}

void RetentionStore::Delete(const std::string& table, const std::string& key) {
  {
    MutexLock lock(&mu_);
    UnnoteLocked({table, key});
  }
  inner_->Delete(table, key);
}

Result<std::map<std::string, std::string>> RetentionStore::GetAll(const std::string& table) {
  auto records = inner_->GetAll(table);
  if (!records.ok()) return records;
  MutexLock lock(&mu_);
  for (const auto& [key, json] : records.value()) NoteLocked(table, key, json);
  return records;
}

std::vector<RetentionStore::Key> RetentionStore::TakeDue(double wall) {
  std::vector<Key> due;
  MutexLock lock(&mu_);
  while (!by_due_.empty() && due.size() < kMaxBatch && by_due_.begin()->first <= wall) {
    due.push_back(by_due_.begin()->second);
    due_.erase(by_due_.begin()->second);
    by_due_.erase(by_due_.begin());
  }
  return due;
}

size_t RetentionStore::Trim(double mono, double wall) {
  if (mono < next_trim_) return 0;
  next_trim_ = mono + TrimIntervalS(ttl_s_);
  size_t deleted = 0;
  for (auto& k : TakeDue(wall)) {
    const auto& [table, key] = k;
    if (forget_ && !forget_(table, key)) {  // still in use: asked again one TTL later
      MutexLock lock(&mu_);
      due_[k] = wall + ttl_s_;
      by_due_.emplace(wall + ttl_s_, k);
      continue;
    }
    inner_->Delete(table, key);
    if (table == "train_runs") inner_->StreamDelete("train:" + key + ":metrics");
    if (table == "submissions") inner_->StreamDelete("job_logs:" + key);
    ++deleted;
  }
  if (deleted) LOG_INFO("history: deleted " + std::to_string(deleted) + " expired records");
  return deleted;
}

size_t RetentionStore::noted() const {
  MutexLock lock(&mu_);
  return due_.size();
}

}  // namespace orrery::scheduler
