#include "scheduler/src/head_context.h"

#include <nlohmann/json.hpp>

#include "core/internal/log.h"
#include "core/internal/transport.h"
#include "scheduler/src/records.h"

namespace orrery::scheduler {

void HeadContext::Publish(const std::string& table, const std::string& id,
                          const std::string& state) const {
  store->Publish(records::Dump(nlohmann::json{{"table", table}, {"id", id}, {"state", state}}));
}

void HeadContext::Ack(const std::string& to, uint64_t request_id, bool ok, proto::ErrorKind kind,
                      const std::string& message) const {
  if (to.empty()) return;
  outbox->Send(to, proto::MsgType::kAck, proto::AckMsg{request_id, ok, kind, message});
}

void HeadContext::AckWhenStored(const std::string& to, uint64_t request_id) const {
  if (to.empty() || !stored_acks->Add(to, request_id)) return;
  store->WhenWritten([acks = stored_acks, outbox = outbox, to, request_id] {
    acks->Deliver([acks, outbox, to, request_id] {
      acks->Remove(to, request_id);
      outbox->Send(to, proto::MsgType::kAck,
                   proto::AckMsg{request_id, true, proto::ErrorKind::kNone, ""});
    });
  });
}

void StoredAcks::SetPoster(Poster post) {
  MutexLock lock(&mu_);
  post_ = std::move(post);
}

void StoredAcks::Deliver(std::function<void()> send) {
  {
    MutexLock lock(&mu_);  // held while posting, so that the poster is not cleared meanwhile
    if (post_) return post_(std::move(send));
  }
  send();
}

bool StoredAcks::Add(const std::string& to, uint64_t request_id) {
  MutexLock lock(&mu_);
  return waiting_.emplace(to, request_id).second;
}

void StoredAcks::Remove(const std::string& to, uint64_t request_id) {
  MutexLock lock(&mu_);
  waiting_.erase({to, request_id});
}

size_t StoredAcks::size() const {
  MutexLock lock(&mu_);
  return waiting_.size();
}

bool RecordUsable(const Status& parsed, const char* table, const std::string& key) {
  if (parsed.ok()) return true;
  LOG_WARN(std::string("skipping an unreadable ") + table + " record " + records::EscapeUtf8(key) +
           ": " + parsed.message());
  return false;
}

bool FiledUnderItsId(const std::string& id_hex, const char* table, const std::string& key) {
  if (id_hex == key) return true;
  LOG_WARN(std::string("skipping ") + table +
           " record filed under another id: " + records::EscapeUtf8(key) + " holds " + id_hex);
  return false;
}

}  // namespace orrery::scheduler
