#include "dashboard/src/events.h"

#include <nlohmann/json.hpp>

namespace orrery::dashboard {

uint64_t TableDigest(const Table& table) {
  uint64_t h = 1469598103934665603ull;
  auto mix = [&h](const std::string& s) {
    for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
    h = (h ^ 0xff) * 1099511628211ull;  // a separator no UTF-8 text holds
  };
  for (const auto& [key, value] : table) {
    mix(key);
    mix(value);
  }
  return h;
}

FeedState ChangeFeed::Observe(const std::map<std::string, uint64_t>& digests, bool ok,
                              const std::string& error) {
  MutexLock lock(&mu_);
  std::vector<std::string> changed;
  for (const char* t : kTables) {
    auto now = digests.find(t);
    auto before = digests_.find(t);
    bool has_now = now != digests.end(), had = before != digests_.end();
    if (has_now != had || (has_now && now->second != before->second)) changed.push_back(t);
  }
  bool moved = state_.version == 0 || ok != state_.redis_ok || error != state_.redis_error ||
               !changed.empty();
  if (moved) {
    ++state_.version;
    state_.changed = std::move(changed);
    state_.redis_ok = ok;
    state_.redis_error = error;
    digests_ = digests;
  }
  return state_;
}

FeedState ChangeFeed::Current(Clock::time_point now) {
  MutexLock read(&read_mu_);
  {
    MutexLock lock(&mu_);
    if (state_.version != 0 && now - read_at_ < kReadEvery) return state_;
    read_at_ = now;
  }
  std::map<std::string, uint64_t> digests;
  if (!reader_) return Observe(digests, false, "no Redis address given");
  for (const char* t : kTables) {
    auto table = reader_->GetTable(t);
    if (!table.ok()) return Observe({}, false, table.status().message());
    digests[t] = TableDigest(table.value());
  }
  return Observe(digests, true, "");
}

bool ChangeFeed::OpenStream() {
  MutexLock lock(&mu_);
  if (streams_ >= kMaxStreams) return false;
  ++streams_;
  return true;
}

void ChangeFeed::CloseStream() {
  MutexLock lock(&mu_);
  if (streams_ > 0) --streams_;
}

std::string FormatEvent(const FeedState& state) {
  nlohmann::json data{{"version", state.version},
                      {"changed", state.changed},
                      {"redis", {{"ok", state.redis_ok}, {"error", state.redis_error}}}};
  // dump() escapes newlines, so the data is one line, as an event's data line must be.
  return "id: " + std::to_string(state.version) + "\nevent: change\ndata: " +
         data.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n\n";
}

}  // namespace orrery::dashboard
