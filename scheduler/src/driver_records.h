// Records drivers ask the head to keep in the state store: the training module's run
// records ("train_runs") and their metrics streams. Each stream entry is appended once, and a
// request is acknowledged only once the store has it. docs/architecture.md "The head".
#pragma once

#include <map>
#include <string>

#include "scheduler/src/head_context.h"

namespace orrery::scheduler {

class DriverRecords {
 public:
  explicit DriverRecords(HeadContext ctx) : ctx_(std::move(ctx)) {}
  void OnPutRecord(const proto::RecordMsg& m);
  // Forgets a run whose record expired (docs/redis-schema.md "Retention").
  void Forget(const std::string& key) { stream_written_.erase(key); }

 private:
  HeadContext ctx_;
  std::map<std::string, int64_t> stream_written_;  // record key -> last stream index appended
};

}  // namespace orrery::scheduler
