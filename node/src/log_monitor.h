// The node's log monitor (docs/logs.md): workers and submitted jobs write their stdout and
// stderr to files in the node's log directory; this thread tails those files, sends their
// new lines to the head in batches (which stores them and passes them on to the drivers),
// and rotates a file that grew past its size limit (copy to .1, .2, ..., then truncate: the
// writer keeps its descriptor, opened O_APPEND).
//
// Thread-safety: every public method may be called from any thread. Watch, Describe and
// Finish (called on the node's inbox thread) only queue the request and return: the files
// are read, and the requests applied, by the monitor's thread (or Flush's caller) under a
// lock of their own, so no disk I/O ever holds the lock the inbox thread takes.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "core/internal/outbox.h"
#include "core/internal/protocol_ops.h"
#include "core/internal/thread_annotations.h"

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
  // Tests: called with a file's path before it is read, on the reading thread.
  std::function<void(const std::string& path)> before_read;
};

class LogMonitor {
 public:
  // A line longer than this is cut into pieces of this size.
  static constexpr size_t kMaxLineBytes = 16 << 10;
  // A batch sent to the head holds at most about this many bytes of text.
  static constexpr size_t kMaxBatchBytes = 256 << 10;

  // Batches go to options.head_address through `outbox` (any thread may send through it).
  explicit LogMonitor(LogMonitorOptions options, Outbox& outbox = TransportOutbox());
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

  // A Watch, Describe or Finish not applied yet.
  struct Request {
    enum Kind { kWatch, kDescribe, kFinish } kind = kWatch;
    int pid = 0;
    std::string stem;
    proto::LogLinesMsg source;
  };

  void Run();
  void Queue(Request r) EXCLUDES(mu_);
  // Applies the queued requests to processes_, in order.
  void ApplyRequests() REQUIRES(poll_mu_) EXCLUDES(mu_);
  // Reads what is new in `f`; appends its lines to `out` (respecting the rate limit).
  void ReadFile(Process& p, File& f, bool at_end, std::vector<proto::LogLinesMsg>* out)
      REQUIRES(poll_mu_);
  void Rotate(File& f) REQUIRES(poll_mu_);
  void Send(std::vector<proto::LogLinesMsg> groups);
  void PollOnce() EXCLUDES(poll_mu_, mu_);

  LogMonitorOptions options_;
  Outbox& outbox_;
  // Taken by the reader (the monitor's thread, or Flush's caller) for a whole poll, file
  // I/O included; never by Watch, Describe or Finish.
  Mutex poll_mu_ ACQUIRED_BEFORE(mu_);
  std::map<int, Process> processes_ GUARDED_BY(poll_mu_);
  // Held only to queue or take requests and for stop_: never across I/O.
  Mutex mu_;
  CondVar cv_;
  std::vector<Request> requests_ GUARDED_BY(mu_);
  bool stop_ GUARDED_BY(mu_) = false;
  std::thread thread_;  // started and joined by Start and Stop (one caller at a time)
};

}  // namespace orrery::node
