#include "tests/chaos/ledger.h"

#include <cstdio>

namespace orrery_chaos {

int64_t Ledger::Submit(const std::string& op) {
  std::lock_guard<std::mutex> lock(mu_);
  int64_t id = next_++;
  open_[id] = Entry{op, std::chrono::steady_clock::now()};
  totals_[op].submitted++;
  return id;
}

void Ledger::Close(int64_t id, Outcome outcome, const std::string& detail) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = open_.find(id);
  if (it == open_.end()) {
    violations_.push_back("entry #" + std::to_string(id) + " closed twice or never opened (" +
                          detail + ")");
    return;
  }
  const std::string op = it->second.op;
  const auto now = std::chrono::steady_clock::now();
  char when[96];
  std::snprintf(when, sizeof(when), "t=%.1fs, %.1fs after submission: ",
                std::chrono::duration<double>(now - start_).count(),
                std::chrono::duration<double>(now - it->second.since).count());
  open_.erase(it);
  const std::string line = op + " #" + std::to_string(id) + " at " + when + detail;
  Counts& c = totals_[op];
  std::string kind;
  switch (outcome) {
    case Outcome::kOk:
      c.ok++;
      return;
    case Outcome::kWrongValue:
      c.wrong++;
      kind = "wrong value";
      violations_.push_back(line);
      break;
    case Outcome::kTypedError:
      c.typed++;
      kind = detail.substr(0, detail.find(':'));
      break;
    case Outcome::kTimedOut:
      c.timed_out++;
      kind = "GetTimeoutError";
      break;
    case Outcome::kUntyped:
      c.untyped++;
      kind = "untyped";
      violations_.push_back(line);
      break;
  }
  c.by_kind[kind]++;
  auto& ex = examples_[op + " / " + kind];
  if (ex.size() < 3) ex.push_back(line);
}

std::string Ledger::Examples() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::string out;
  for (const auto& [key, lines] : examples_) {
    out += "  " + key + ":\n";
    for (const auto& l : lines) out += "    " + l.substr(0, 400) + "\n";
  }
  return out;
}

std::map<std::string, Ledger::Counts> Ledger::Totals() const {
  std::lock_guard<std::mutex> lock(mu_);
  return totals_;
}

std::vector<std::string> Ledger::Open() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<std::string> out;
  auto now = std::chrono::steady_clock::now();
  for (const auto& [id, e] : open_) {
    double s = std::chrono::duration<double>(now - e.since).count();
    char buf[64];
    std::snprintf(buf, sizeof(buf), " (open for %.1f s)", s);
    out.push_back(e.op + " #" + std::to_string(id) + buf);
  }
  return out;
}

std::vector<std::string> Ledger::Violations() const {
  std::lock_guard<std::mutex> lock(mu_);
  return violations_;
}

std::string Ledger::Summary() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::string out;
  for (const auto& [op, c] : totals_) {
    char buf[256];
    std::snprintf(buf, sizeof(buf),
                  "  %-14s submitted %6lld  ok %6lld  typed errors %5lld  timed out %4lld  wrong "
                  "%lld  untyped %lld",
                  op.c_str(), (long long)c.submitted, (long long)c.ok, (long long)c.typed,
                  (long long)c.timed_out, (long long)c.wrong, (long long)c.untyped);
    out += buf;
    for (const auto& [kind, n] : c.by_kind) out += "  " + kind + "=" + std::to_string(n);
    out += "\n";
  }
  return out;
}

}  // namespace orrery_chaos
