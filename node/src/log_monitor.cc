#include "node/src/log_monitor.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>

#include "core/internal/clock.h"
#include "core/internal/log.h"
#include "core/internal/text.h"
#include "core/internal/transport.h"

namespace orrery::node {

namespace {

// What one file gives per poll at most, so one chatty writer cannot starve the others.
constexpr size_t kMaxReadPerPoll = 256 << 10;

size_t TextBytes(const proto::LogLinesMsg& g) {
  size_t n = 0;
  for (const auto& l : g.lines) n += l.size() + 1;
  return n;
}

// Copies `from` to `to` (replacing it); false when it could not.
bool CopyFile(const std::string& from, const std::string& to) {
  int in = open(from.c_str(), O_RDONLY | O_CLOEXEC);
  if (in < 0) return false;
  int out = open(to.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  bool ok = out >= 0;
  char buf[1 << 16];
  ssize_t n;
  while (ok && (n = read(in, buf, sizeof(buf))) > 0) ok = write(out, buf, size_t(n)) == n;
  close(in);
  if (out >= 0) close(out);
  return ok;
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
  size_t start = 0;
  while (start < chunk.size()) {
    size_t nl = chunk.find('\n', start);
    size_t end = nl == std::string_view::npos ? chunk.size() : nl;
    pending->append(chunk.substr(start, end - start));
    while (pending->size() > kMaxLineBytes) {
      lines->push_back(text::EscapeControl(std::string_view(*pending).substr(0, kMaxLineBytes)));
      pending->erase(0, kMaxLineBytes);
    }
    if (nl == std::string_view::npos) break;
    if (!pending->empty() && pending->back() == '\r') pending->pop_back();
    lines->push_back(text::EscapeControl(*pending));
    pending->clear();
    start = nl + 1;
  }
  if (at_end && !pending->empty()) {
    lines->push_back(text::EscapeControl(*pending));
    pending->clear();
  }
}

void LogMonitor::ReadFile(Process& p, File& f, bool at_end, std::vector<proto::LogLinesMsg>* out) {
  if (options_.before_read) options_.before_read(f.path);
  int fd = open(f.path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return;  // not made yet
  struct stat st {};
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    close(fd);
    return;
  }
  if (uint64_t(st.st_size) < f.offset) f.offset = 0;  // truncated by someone else
  std::vector<std::string> lines;
  std::string buf(kMaxReadPerPoll, '\0');
  size_t budget = at_end ? SIZE_MAX : kMaxReadPerPoll;
  while (budget > 0) {
    ssize_t n = pread(fd, buf.data(), std::min(buf.size(), budget), off_t(f.offset));
    if (n <= 0) break;
    f.offset += uint64_t(n);
    budget -= std::min(budget, size_t(n));
    SplitLines(std::string_view(buf.data(), size_t(n)), false, &f.pending, &lines);
  }
  close(fd);
  if (at_end) SplitLines({}, true, &f.pending, &lines);
  if (f.offset > options_.rotate_bytes) Rotate(f);
  if (lines.empty()) return;
  double now = MonotonicSeconds();
  if (now - p.window_start >= 1.0) {
    if (p.dropped > 0) {
      proto::LogLinesMsg notice = p.source;
      notice.is_stderr = true;
      notice.lines = {"[orrery] " + std::to_string(p.dropped) +
                      " line(s) not forwarded (over the rate limit); see " + f.path};
      out->push_back(std::move(notice));
    }
    p.window_start = now;
    p.window_bytes = 0;
    p.dropped = 0;
  }
  proto::LogLinesMsg g = p.source;
  g.is_stderr = f.is_stderr;
  for (auto& l : lines) {
    if (p.window_bytes + l.size() > options_.forward_bytes_per_s) {
      ++p.dropped;
      continue;
    }
    p.window_bytes += l.size() + 1;
    g.lines.push_back(std::move(l));
  }
  if (!g.lines.empty()) out->push_back(std::move(g));
}

void LogMonitor::Rotate(File& f) {
  if (options_.rotate_backups > 0) {
    for (int i = options_.rotate_backups - 1; i >= 1; --i) {
      std::rename((f.path + "." + std::to_string(i)).c_str(),
                  (f.path + "." + std::to_string(i + 1)).c_str());
    }
    if (!CopyFile(f.path, f.path + ".1")) LOG_WARN("log monitor: cannot copy " + f.path);
  }
  if (truncate(f.path.c_str(), 0) != 0) {
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

void LogMonitor::PollOnce() {
  std::vector<proto::LogLinesMsg> groups;
  {
    MutexLock poll(&poll_mu_);  // the reader's own: Watch and the like never wait on it
    ApplyRequests();
    for (auto it = processes_.begin(); it != processes_.end();) {
      Process& p = it->second;
      bool last = p.finished;
      for (File& f : p.files) ReadFile(p, f, last, &groups);
      it = last ? processes_.erase(it) : std::next(it);
    }
  }
  if (!groups.empty() && !options_.head_address.empty()) Send(std::move(groups));
}

void LogMonitor::Flush() { PollOnce(); }

void LogMonitor::Run() {
  auto stopping = [this] {
    MutexLock lock(&mu_);
    if (!stop_)
      cv_.WaitUntil(&mu_,
                    std::chrono::steady_clock::now() + std::chrono::milliseconds(options_.poll_ms));
    return stop_;
  };
  bool stop = false;
  while (!stop) {
    stop = stopping();
    PollOnce();  // once more after Stop: what was written until then goes too
  }
  transport::CloseThreadSockets();  // this thread's, before it ends
}

}  // namespace orrery::node
