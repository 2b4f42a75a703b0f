// The chaos test's books: every call the load submits is entered once and closed once
// with its outcome, so that at the end "submitted = returned + typed errors" can be checked
// and a call that never came back shows up. Thread-safe.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

namespace orrery_chaos {

class Ledger {
 public:
  // What happened to one call.
  enum class Outcome {
    kOk,          // returned the expected value
    kWrongValue,  // returned, but not what was sent for: a violation
    kTypedError,  // raised an orrery::Error subclass other than GetTimeoutError
    kTimedOut,    // GetTimeoutError: it did not finish within its timeout (a hang)
    kUntyped,     // raised something that is not an orrery::Error: a violation
  };

  struct Counts {
    int64_t submitted = 0, ok = 0, wrong = 0, typed = 0, timed_out = 0, untyped = 0;
    std::map<std::string, int64_t> by_kind;  // typed errors by Error::kind()
    int64_t closed() const { return ok + wrong + typed + timed_out + untyped; }
  };

  // Opens an entry for a call of kind `op` ("actor call", "task", ...); returns its number.
  int64_t Submit(const std::string& op);
  // Closes entry `id` once. `detail` ("Kind: message" for a typed error, the wrong value,
  // the exception's text) goes into the counts (by kind) and into Examples(); violations
  // also into Violations().
  void Close(int64_t id, Outcome outcome, const std::string& detail);

  std::map<std::string, Counts> Totals() const;
  // Entries still open, as "op #id (since N s)".
  std::vector<std::string> Open() const;
  // Calls that returned a wrong value, raised something untyped, or were closed twice.
  std::vector<std::string> Violations() const;
  // Seconds since the ledger began (the clock of Examples()).
  double Seconds() const {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  }
  // A table for the log.
  std::string Summary() const;
  // The first few errors of each kind, with the seconds since the ledger began.
  std::string Examples() const;

 private:
  struct Entry {
    std::string op;
    std::chrono::steady_clock::time_point since;
  };
  mutable std::mutex mu_;
  int64_t next_ = 1;
  std::map<int64_t, Entry> open_;
  std::map<std::string, Counts> totals_;
  std::vector<std::string> violations_;
  std::map<std::string, std::vector<std::string>> examples_;  // "op kind" -> first lines
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
};

}  // namespace orrery_chaos
