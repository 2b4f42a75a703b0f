// The node's log monitor (docs/logs.md): workers and submitted jobs write their stdout and
// stderr to files in the node's log directory; this thread tails those files, sends their
// new lines to the head in batches (which stores them and passes them on to the drivers),
// and rotates a file that grew past its size limit while its writer runs.
//
// Memory is bounded whatever a process prints: files are read in chunks of kChunkBytes, at
// most kMaxReadPerPoll per file and poll while the process runs; lines past the rate limit
// are not kept, except the newest kTailBytes of each file, which are forwarded when the
// limit allows again or when the process ends. Lines dropped from the middle are counted
// exactly and the count is forwarded, as a stderr line, where the gap is.
//
// Rotation: the writer is the process's own descriptor (O_APPEND), so the monitor, the only
// reader, rotates: it copies the bytes it has read to .1 (older copies move to .2, ...) and
// removes them from the front of the live file with fallocate(FALLOC_FL_COLLAPSE_RANGE),
// which the kernel applies atomically between the writer's appends: nothing is lost. Where
// the file system cannot collapse (tmpfs, or less than a block read), it waits until it has
// read to the end, copies and truncates: bytes appended between that read and the truncation
// are lost (docs/logs.md).
//
// Thread-safety: every public method may be called from any thread. Watch, Describe and
// Finish (called on the node's inbox thread) only queue the request and return: the files
// are read, and the requests applied, by the monitor's thread (or Flush's caller) under a
// lock of their own, so no disk I/O ever holds the lock the inbox thread takes.
#pragma once

#include <cstdint>
#include <deque>
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
  // What one process's lines may send per second (a second's worth of burst); beyond it
  // lines stay in the file only, but for each file's tail (kTailBytes), and the driver is
  // told exactly how many it did not get.
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
  // What one read of a file takes at most.
  static constexpr size_t kChunkBytes = 256 << 10;
  // What one file gives per poll at most while its process runs, so one chatty writer
  // cannot starve the others (a finished process's files are read to the end).
  static constexpr uint64_t kMaxReadPerPoll = 64 << 20;
  // The newest lines of a file past the rate limit kept to be forwarded later (its tail).
  static constexpr size_t kTailBytes = 32 << 10;

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
    uint64_t offset = 0;  // of the next byte to read, in the live file
    std::string pending;  // an unfinished line, at most kMaxLineBytes
    // Lines past the rate limit, unescaped, oldest first: at most kTailBytes (with a byte
    // for each newline).
    std::deque<std::string> held;
    size_t held_bytes = 0;
    uint64_t dropped = 0;  // lines not forwarded since the last note of them
  };
  struct Process {
    proto::LogLinesMsg source;
    std::vector<File> files;
    bool finished = false;
    // The rate limit, a token bucket of bytes shared by both files (a second's worth).
    double tokens = 0;
    double refilled_at = 0;
  };
  using Groups = std::vector<proto::LogLinesMsg>;

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
  // Reads what is new in `f`; appends its lines to `out` (respecting the rate limit). True
  // when it stopped at kMaxReadPerPoll with more to read.
  bool ReadFile(Process& p, File& f, bool at_end, Groups* out) REQUIRES(poll_mu_);
  // One line of `f`: forwarded, or held as part of its tail.
  void Take(Process& p, File& f, std::string line, Groups* out) REQUIRES(poll_mu_);
  // Forwards held lines while the rate limit allows (`all`: every one, and the note).
  void Release(Process& p, File& f, bool all, Groups* out) REQUIRES(poll_mu_);
  // Appends `line` to `out`, after the note of the lines dropped before it.
  void Emit(const Process& p, File& f, const std::string& line, Groups* out) REQUIRES(poll_mu_);
  void EmitDropped(const Process& p, File& f, Groups* out) REQUIRES(poll_mu_);
  // Rotates `f` (open as `fd`, `size` bytes) when it is past its limit.
  void Rotate(File& f, int fd, uint64_t size, uint64_t block) REQUIRES(poll_mu_);
  void Send(std::vector<proto::LogLinesMsg> groups);
  // True when a file has more to read than this poll took.
  bool PollOnce() EXCLUDES(poll_mu_, mu_);

  LogMonitorOptions options_;
  Outbox& outbox_;
  // Taken by the reader (the monitor's thread, or Flush's caller) for a whole poll, file
  // I/O included; never by Watch, Describe or Finish.
  Mutex poll_mu_ ACQUIRED_BEFORE(mu_);
  std::map<int, Process> processes_ GUARDED_BY(poll_mu_);
  // Set after a collapse failed: rotation copies and truncates from then on.
  bool collapse_unsupported_ GUARDED_BY(poll_mu_) = false;
  size_t last_group_bytes_ GUARDED_BY(poll_mu_) = 0;  // the text in the poll's last group
  // Held only to queue or take requests and for stop_: never across I/O.
  Mutex mu_;
  CondVar cv_;
  std::vector<Request> requests_ GUARDED_BY(mu_);
  bool stop_ GUARDED_BY(mu_) = false;
  std::thread thread_;  // started and joined by Start and Stop (one caller at a time)
};

}  // namespace orrery::node
