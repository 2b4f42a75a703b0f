#include "node/src/log_monitor.h"

#include <fcntl.h>
#include <linux/falloc.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <utility>

#include "core/internal/clock.h"
#include "core/internal/log.h"
#include "core/internal/text.h"
#include "core/internal/transport.h"

namespace orrery::node {

namespace {

size_t TextBytes(const proto::LogLinesMsg& g) {
  size_t n = 0;
  for (const auto& l : g.lines) n += l.size() + 1;
  return n;
}

// Copies `len` bytes of `in` from offset 0 to the file `to` (replaced, or appended to);
// false when it could not. The kernel copies where it can; no more than a buffer is held.
bool CopyPrefix(int in, uint64_t from, uint64_t len, const std::string& to, bool append) {
  int out = open(to.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC | (append ? O_APPEND : O_TRUNC), 0644);
  if (out < 0) return false;
  off_t at = off_t(from), end = off_t(from + len);
  bool ok = true;
  while (ok && at < end) {
    ssize_t n = copy_file_range(in, &at, out, nullptr, size_t(end - at), 0);
    if (n > 0) continue;
    if (n == 0) break;  // the file is shorter than it was
    char buf[1 << 16];  // no copy_file_range here (EXDEV, ENOSYS, ...): read and write
    n = pread(in, buf, std::min(sizeof(buf), size_t(end - at)), at);
    ok = n > 0 && write(out, buf, size_t(n)) == n;
    at += n > 0 ? n : 0;
  }
  close(out);
  return ok;
}

// Moves path.1 to path.2, ..., keeping `backups` copies.
void ShiftBackups(const std::string& path, int backups) {
  for (int i = backups - 1; i >= 1; --i)
    std::rename((path + "." + std::to_string(i)).c_str(),
                (path + "." + std::to_string(i + 1)).c_str());
}

// Calls `take(std::string)` with each line of `chunk` (raw: not escaped); `pending` holds an
// unfinished line between calls, and `at_end` takes it as a line too. A line longer than
// LogMonitor::kMaxLineBytes is cut into pieces of that size; a "\r\n" ending is one newline.
template <typename F>
void ForEachLine(std::string_view chunk, bool at_end, std::string* pending, F&& take) {
  constexpr size_t kMax = LogMonitor::kMaxLineBytes;
  size_t start = 0;
  while (start < chunk.size()) {
    size_t nl = chunk.find('\n', start);
    size_t end = nl == std::string_view::npos ? chunk.size() : nl;
    std::string_view piece = chunk.substr(start, end - start);
    while (pending->size() + piece.size() > kMax) {
      size_t n = kMax - pending->size();
      pending->append(piece.substr(0, n));
      piece.remove_prefix(n);
      take(std::exchange(*pending, std::string()));
    }
    pending->append(piece);
    if (nl == std::string_view::npos) break;
    if (!pending->empty() && pending->back() == '\r') pending->pop_back();
    take(std::exchange(*pending, std::string()));
    start = nl + 1;
  }
  if (at_end && !pending->empty()) take(std::exchange(*pending, std::string()));
}

}  // namespace

LogMonitor::LogMonitor(LogMonitorOptions options, Outbox& outbox)
    : options_(std::move(options)), outbox_(outbox) {}

LogMonitor::~LogMonitor() { Stop(); }

void LogMonitor::Start() {
  MutexLock lock(&mu_);
  if (thread_.joinable()) return;
  stop_ = false;
  thread_ = std::thread([this] { Run(); });
}

void LogMonitor::Stop() {
  {
    MutexLock lock(&mu_);
    if (!thread_.joinable()) return;
    stop_ = true;
  }
  cv_.NotifyAll();
  thread_.join();
}

void LogMonitor::Queue(Request r) {
  MutexLock lock(&mu_);
  requests_.push_back(std::move(r));
}

void LogMonitor::Watch(int pid, const std::string& stem, const proto::LogLinesMsg& source) {
  Queue({Request::kWatch, pid, stem, source});
}

void LogMonitor::Describe(int pid, const proto::LogLinesMsg& source) {
  Queue({Request::kDescribe, pid, "", source});
}

void LogMonitor::Finish(int pid) { Queue({Request::kFinish, pid, "", {}}); }

void LogMonitor::ApplyRequests() {
  std::vector<Request> requests;
  {
    MutexLock lock(&mu_);
    requests.swap(requests_);
  }
  for (Request& r : requests) {
    if (r.kind == Request::kWatch) {
      Process& p = processes_[r.pid];
      p = Process{};
      p.source = std::move(r.source);
      p.source.pid = r.pid;
      p.source.lines.clear();
      p.tokens = double(options_.forward_bytes_per_s);
      p.refilled_at = MonotonicSeconds();
      for (bool err : {false, true}) {
        File f;
        f.path = r.stem + (err ? ".err" : ".out");
        f.pid = r.pid;
        f.is_stderr = err;
        p.files.push_back(std::move(f));
      }
      continue;
    }
    auto it = processes_.find(r.pid);
    if (it == processes_.end()) continue;
    if (r.kind == Request::kFinish) {
      it->second.finished = true;
    } else {
      it->second.source = std::move(r.source);
      it->second.source.pid = r.pid;
      it->second.source.lines.clear();
    }
  }
}

void LogMonitor::SplitLines(std::string_view chunk, bool at_end, std::string* pending,
                            std::vector<std::string>* lines) {
  ForEachLine(chunk, at_end, pending,
              [&](std::string line) { lines->push_back(text::EscapeControl(line)); });
}

bool LogMonitor::ReadFile(Process& p, File& f, bool at_end, Groups* out) {
  if (options_.before_read) options_.before_read(f.path);
  Release(p, f, false, out);
  int fd = open(f.path.c_str(), O_RDWR | O_CLOEXEC | O_NOCTTY);
  bool writable = fd >= 0;
  if (fd < 0) fd = open(f.path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY);  // cannot rotate it
  struct stat st {};
  if (fd >= 0 && (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode))) {
    close(fd);
    fd = -1;
  }
  bool behind = false;
  if (fd >= 0) {
    uint64_t size = uint64_t(st.st_size);
    if (size < f.offset) f.offset = 0;  // truncated by someone else
    // A finished process's file is read to where it ended; a running one's, a slice per poll.
    uint64_t budget = at_end ? size - f.offset : kMaxReadPerPoll;
    std::string buf(kChunkBytes, '\0');
    while (budget > 0) {
      ssize_t n =
          pread(fd, buf.data(), size_t(std::min<uint64_t>(buf.size(), budget)), off_t(f.offset));
      if (n <= 0) break;
      f.offset += uint64_t(n);
      budget -= std::min(budget, uint64_t(n));
      ForEachLine(
          std::string_view(buf.data(), size_t(n)), false, &f.pending, [&](std::string line) {
            poll_mu_.AssertHeld();  // the caller holds it; the analysis does not follow lambdas
            Take(p, f, std::move(line), out);
          });
    }
    behind = !at_end && budget == 0;
    if (writable && fstat(fd, &st) == 0 && uint64_t(st.st_size) > options_.rotate_bytes) {
      uint64_t block = uint64_t(st.st_blksize);
      if (block == 0 || block > (1u << 20) || (block & (block - 1)) != 0) block = 4096;
      Rotate(f, fd, uint64_t(st.st_size), block);
    }
    close(fd);
  }
  if (!at_end) return behind;
  ForEachLine({}, true, &f.pending, [&](std::string line) {
    poll_mu_.AssertHeld();  // the caller holds it; the analysis does not follow lambdas
    Take(p, f, std::move(line), out);
  });
  Release(p, f, true, out);
  return false;
}

void LogMonitor::Take(Process& p, File& f, std::string line, Groups* out) {
  double cost = double(line.size() + 1);
  if (f.held.empty() && p.tokens >= cost) {
    p.tokens -= cost;
    Emit(p, f, line, out);
    return;
  }
  f.held_bytes += line.size() + 1;
  f.held.push_back(std::move(line));
  while (f.held_bytes > kTailBytes) {  // drop from the middle: the oldest held line
    f.held_bytes -= f.held.front().size() + 1;
    f.held.pop_front();
    ++f.dropped;
  }
}

void LogMonitor::Release(Process& p, File& f, bool all, Groups* out) {
  while (!f.held.empty()) {
    double cost = double(f.held.front().size() + 1);
    if (!all && p.tokens < cost) return;
    if (!all) p.tokens -= cost;
    Emit(p, f, f.held.front(), out);
    f.held_bytes -= f.held.front().size() + 1;
    f.held.pop_front();
  }
  if (all) EmitDropped(p, f, out);
}

void LogMonitor::EmitDropped(const Process& p, File& f, Groups* out) {
  if (f.dropped == 0) return;
  proto::LogLinesMsg notice = p.source;
  notice.is_stderr = true;
  notice.lines = {"[orrery] " + std::to_string(f.dropped) + " line(s) of " +
                  (f.is_stderr ? "stderr" : "stdout") +
                  " not forwarded (over the rate limit); see " + f.path};
  last_group_bytes_ = TextBytes(notice);
  out->push_back(std::move(notice));
  f.dropped = 0;
}

void LogMonitor::Emit(const Process& p, File& f, const std::string& line, Groups* out) {
  EmitDropped(p, f, out);
  if (out->empty() || out->back().pid != p.source.pid || out->back().is_stderr != f.is_stderr ||
      last_group_bytes_ >= kMaxBatchBytes) {
    out->push_back(p.source);
    out->back().is_stderr = f.is_stderr;
    last_group_bytes_ = 0;
  }
  out->back().lines.push_back(text::EscapeControl(line));
  last_group_bytes_ += out->back().lines.back().size() + 1;
}

void LogMonitor::Rotate(File& f, int fd, uint64_t size, uint64_t block) {
  // What may be collapsed: whole blocks of what was read, short of the end of the file.
  uint64_t cut = collapse_unsupported_ ? 0 : f.offset / block * block;
  if (cut >= size) cut = cut >= block ? cut - block : 0;
  if (cut == 0 && f.offset < size) return;  // truncate only once everything was read
  int backups = options_.rotate_backups;
  if (backups > 0) ShiftBackups(f.path, backups);
  std::string first = f.path + ".1";
  if (cut > 0) {
    if (backups > 0 && !CopyPrefix(fd, 0, cut, first, false))
      LOG_WARN("log monitor: cannot copy " + f.path);
    if (fallocate(fd, FALLOC_FL_COLLAPSE_RANGE, 0, off_t(cut)) == 0) {
      f.offset -= cut;
      return;
    }
    LOG_WARN("log monitor: cannot collapse " + f.path + " (" + std::strerror(errno) +
             "): log files are copied and truncated from now on");
    collapse_unsupported_ = true;
    if (f.offset < size) return;  // .1 holds the start already; the rest goes next time
  }
  if (backups > 0 && !CopyPrefix(fd, cut, f.offset - cut, first, cut > 0))
    LOG_WARN("log monitor: cannot copy " + f.path);
  if (ftruncate(fd, 0) != 0) {
    LOG_WARN("log monitor: cannot truncate " + f.path);
    return;
  }
  f.offset = 0;
}

void LogMonitor::Send(std::vector<proto::LogLinesMsg> groups) {
  proto::LogBatchMsg batch;
  batch.node_id = options_.node_id;
  batch.node_secret = options_.node_secret;
  size_t bytes = 0;
  auto flush = [&] {
    if (batch.groups.empty()) return;
    outbox_.Send(options_.head_address, proto::MsgType::kLogBatch, batch);
    batch.groups.clear();
    bytes = 0;
  };
  for (auto& g : groups) {
    bytes += TextBytes(g);
    batch.groups.push_back(std::move(g));
    if (bytes >= kMaxBatchBytes) flush();
  }
  flush();
}

bool LogMonitor::PollOnce() {
  bool behind = false;
  std::vector<proto::LogLinesMsg> groups;
  {
    MutexLock poll(&poll_mu_);  // the reader's own: Watch and the like never wait on it
    ApplyRequests();
    for (auto it = processes_.begin(); it != processes_.end();) {
      Process& p = it->second;
      bool last = p.finished;
      double now = MonotonicSeconds(), rate = double(options_.forward_bytes_per_s);
      p.tokens = std::min(rate, p.tokens + (now - p.refilled_at) * rate);
      p.refilled_at = now;
      for (File& f : p.files) behind |= ReadFile(p, f, last, &groups);
      it = last ? processes_.erase(it) : std::next(it);
    }
  }
  if (!groups.empty() && !options_.head_address.empty()) Send(std::move(groups));
  return behind;
}

void LogMonitor::Flush() { (void)PollOnce(); }

void LogMonitor::Run() {
  // A file read up to its per-poll slice is read again at once: a fast writer is followed
  // as fast as the monitor reads, and its file rotated near its limit.
  auto stopping = [this](bool behind) {
    MutexLock lock(&mu_);
    if (!stop_ && !behind)
      cv_.WaitUntil(&mu_,
                    std::chrono::steady_clock::now() + std::chrono::milliseconds(options_.poll_ms));
    return stop_;
  };
  bool stop = false, behind = false;
  while (!stop) {
    stop = stopping(behind);
    behind = PollOnce();  // once more after Stop: what was written until then goes too
  }
  transport::CloseThreadSockets();  // this thread's, before it ends
}

}  // namespace orrery::node
