#include "core/internal/state_store.h"

namespace orrery {

void InMemoryStateStore::Put(const std::string& table, const std::string& key,
                             const std::string& json) {
  MutexLock lock(&mu_);
  tables_[table][key] = json;
}

void InMemoryStateStore::Delete(const std::string& table, const std::string& key) {
  MutexLock lock(&mu_);
  tables_[table].erase(key);
}

Result<std::map<std::string, std::string>> InMemoryStateStore::GetAll(const std::string& table) {
  MutexLock lock(&mu_);
  auto it = tables_.find(table);
  return it == tables_.end() ? std::map<std::string, std::string>() : it->second;
}

void InMemoryStateStore::Publish(const std::string&) {}  // no subscribers in memory

void InMemoryStateStore::StreamAdd(const std::string& stream, int64_t seq,
                                   const StreamEntry& fields) {
  MutexLock lock(&mu_);
  auto [last, fresh] = stream_last_.emplace(stream, seq);
  if (!fresh && seq <= last->second) return;  // a resend
  last->second = seq;
  streams_[stream].push_back(fields);
}

void InMemoryStateStore::StreamDelete(const std::string& stream) {
  MutexLock lock(&mu_);
  streams_.erase(stream);
  stream_last_.erase(stream);
}

std::vector<StateStore::StreamEntry> InMemoryStateStore::Stream(const std::string& stream) const {
  MutexLock lock(&mu_);
  auto it = streams_.find(stream);
  return it == streams_.end() ? std::vector<StreamEntry>() : it->second;
}

}  // namespace orrery
