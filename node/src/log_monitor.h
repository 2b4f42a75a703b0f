// The node's log monitor (docs/logs.md): workers and submitted jobs write their stdout and
// stderr to files in the node's log directory; this thread tails those files, sends their
// new lines to the head in batches (which stores them and passes them on to the drivers),
// and rotates a file that grew past its size limit (copy to .1, .2, ..., then truncate: the
// writer keeps its descriptor, opened O_APPEND).
//
// Thread-safety: every public method may be called from any thread.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "core/internal/protocol_ops.h"

namespace orrery::node {

struct LogMonitorOptions {
  std::string head_address;
  std::string node_id;  // hex
  std::string node_secret;
  // A file is rotated once it holds more than rotate_bytes; `rotate_backups` old copies are
  // kept (0: it is only truncated).
  uint64_t rotate_bytes = 100ull << 20;
  int rotate_backups = 5;
  int poll_ms = 100;
  // What one process's lines may send per second; beyond it lines stay in the file only,
  // and the driver is told how many it did not get.
  uint64_t forward_bytes_per_s = 1 << 20;
};

class LogMonitor {
 public:
  // A line longer than this is cut into pieces of this size.
  static constexpr size_t kMaxLineBytes = 16 << 10;
  // A batch sent to the head holds at most about this many bytes of text.
  static constexpr size_t kMaxBatchBytes = 256 << 10;

  explicit LogMonitor(LogMonitorOptions options);
  ~LogMonitor();
  void Start();
  // Reads what is new once more, sends it, and ends the thread.
  void Stop();

  // Starts tailing `stem`.out and `stem`.err for process `pid`, whose lines carry `source`
  // (its lines field is ignored).
  void Watch(int pid, const std::string& stem, const proto::LogLinesMsg& source);
  // What the lines of `pid` are attributed to from now on (a worker took an actor or lease).
  void Describe(int pid, const proto::LogLinesMsg& source);
  // The process ended: its files are read to the end once more, then no longer watched.
  void Finish(int pid);
  // Reads every watched file now and sends what it found, from the calling thread (tests).
  void Flush();

  // Splits `chunk` into lines (pending holds an unfinished line between calls; `at_end`
  // takes it as a line too), cutting long ones and escaping control bytes.
  static void SplitLines(std::string_view chunk, bool at_end, std::string* pending,
                         std::vector<std::string>* lines);

 private:
  struct File {
    std::string path;
    int pid = 0;
    bool is_stderr = false;
    uint64_t offset = 0;
    std::string pending;
  };
  struct Process {
    proto::LogLinesMsg source;
    std::vector<File> files;
    bool finished = false;
    double window_start = 0;  // the rate limit's current second
    uint64_t window_bytes = 0;
    uint64_t dropped = 0;  // lines not forwarded in this window
  };

  void Run();
  // Reads what is new in `f`; appends its lines to `out` (respecting the rate limit).
  void ReadFile(Process& p, File& f, bool at_end, std::vector<proto::LogLinesMsg>* out);
  void Rotate(File& f);
  void Send(std::vector<proto::LogLinesMsg> groups);
  void PollOnce();

  LogMonitorOptions options_;
  std::mutex mu_;  // guards processes_ and stop_; held while files are read (never sent)
  std::condition_variable cv_;
  std::map<int, Process> processes_;
  bool stop_ = false;
  std::mutex poll_mu_;  // one poll at a time (the thread's, or Flush's)
  std::thread thread_;
};

}  // namespace orrery::node
