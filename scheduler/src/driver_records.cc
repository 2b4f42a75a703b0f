#include "scheduler/src/driver_records.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <nlohmann/json.hpp>

#include "scheduler/src/records.h"

namespace orrery::scheduler {

namespace {
// Drivers may write only the tables the head does not own itself.
Status CheckTarget(const proto::RecordMsg& m) {
  if (m.table != "train_runs")
    return Status::InvalidArgument("the head keeps no driver records in table \"" + m.table + "\"");
  bool key_ok = !m.key.empty() && m.key.size() <= 64;
  for (char c : m.key) key_ok = key_ok && std::isxdigit(static_cast<unsigned char>(c));
  if (!key_ok) return Status::InvalidArgument("a record key is 1 to 64 hex digits");
  return Status::Ok();
}
}  // namespace

void DriverRecords::Remember(const std::string& key, const nlohmann::json& record) {
  if (!record.is_object()) return;  // a stream entry alone: its record carries the same values
  auto it = runs_.find(key);
  if (it == runs_.end()) {
    if (runs_.size() >= kMaxRuns) {
      auto oldest = std::min_element(runs_.begin(), runs_.end(), [](const auto& a, const auto& b) {
        return a.second.order < b.second.order;
      });
      runs_.erase(oldest);
    }
    it = runs_.emplace(key, RunMetrics{"", {}, next_order_++}).first;
  }
  RunMetrics& run = it->second;
  auto take = [&run](const nlohmann::json& values) {
    if (!values.is_object()) return;
    for (const auto& [name, v] : values.items()) {
      if (!v.is_number() || name.empty() || name.size() > kMaxMetricNameBytes) continue;
      double d = v.get<double>();
      if (!std::isfinite(d)) continue;
      if (run.latest.size() >= kMaxMetricsPerRun && !run.latest.count(name)) continue;
      run.latest[name] = d;
    }
  };
  auto name = record.find("name");
  if (name != record.end() && name->is_string() &&
      name->get_ref<const std::string&>().size() <= 256)
    run.name = name->get<std::string>();
  if (auto latest = record.find("latest_metrics"); latest != record.end()) take(*latest);
}

void DriverRecords::OnPutRecord(const proto::RecordMsg& m) {
  if (Status s = CheckTarget(m); !s.ok())
    return ctx_.Ack(m.reply_to, m.request_id, false, proto::ErrorKind::kError, s.message());
  nlohmann::json record, entry;
  try {
    if (!m.json.empty()) record = nlohmann::json::parse(m.json);
    if (m.stream_index >= 0) entry = nlohmann::json::parse(m.stream_json);
  } catch (const std::exception& e) {
    return ctx_.Ack(m.reply_to, m.request_id, false, proto::ErrorKind::kError,
                    std::string("a record must be JSON: ") + e.what());
  }
  if ((!m.json.empty() && !record.is_object()) || (m.stream_index >= 0 && !entry.is_object())) {
    return ctx_.Ack(m.reply_to, m.request_id, false, proto::ErrorKind::kError,
                    "a record and a stream entry must be JSON objects");
  }
  Remember(m.key, record);
  if (m.stream_index >= 0) {
    auto [it, fresh] = stream_written_.emplace(m.key, -1);
    if (m.stream_index > it->second) {  // a resent request appends nothing twice
      it->second = m.stream_index;
      StateStore::StreamEntry fields;
      for (auto& [k, v] : entry.items())
        fields.emplace_back(k, v.is_string() ? v.get<std::string>() : records::Dump(v));
      ctx_.store->StreamAdd("train:" + m.key + ":metrics", m.stream_index, fields);
    }
  }
  if (!m.json.empty()) {
    ctx_.store->Put(m.table, m.key, m.json);
    auto status = record.find("status");  // any JSON type: only a string is announced
    ctx_.Publish(m.table, m.key,
                 status != record.end() && status->is_string() ? status->get<std::string>() : "");
  }
  // Acknowledged only once the store has the record and the entry: a driver that got its
  // ack may forget them, since a head restart can no longer lose them.
  ctx_.AckWhenStored(m.reply_to, m.request_id);
}

}  // namespace orrery::scheduler
