#include "scheduler/src/driver_records.h"

#include <cctype>
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
  // ack may forget them, since a head restart can no longer lose them. The ack is sent from
  // whichever thread learns it (the store's writer), holding only the outbox.
  if (m.reply_to.empty()) return;
  ctx_.store->WhenWritten([outbox = ctx_.outbox, to = m.reply_to, id = m.request_id] {
    outbox->Send(to, proto::MsgType::kAck, proto::AckMsg{id, true, proto::ErrorKind::kNone, ""});
  });
}

}  // namespace orrery::scheduler
