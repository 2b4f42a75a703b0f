#include "node/src/executable_cache.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <deque>
#include <filesystem>
#include <fstream>
#include <random>
#include <thread>

#include "core/internal/clock.h"
#include "core/internal/file_hash.h"
#include "core/internal/folder_pack.h"
#include "core/internal/log.h"
#include "core/internal/rate_limit.h"
#include "core/internal/runtime_env.h"
#include "core/internal/session_dir.h"
#include "core/internal/thread_annotations.h"

namespace orrery::node {

namespace {
// Paths whose content hash is remembered (argv[0] of requests and cached copies).
constexpr size_t kMaxHashedPaths = 256;

RateLimitedLog stray_reply_log;

// Removes a folder of unpacked files; false (logged) when it cannot.
bool RemoveFolder(const std::string& folder) {
  std::error_code ec;
  std::filesystem::remove_all(folder, ec);
  if (ec) LOG_WARN("node: cannot remove the working_dir copy " + folder + ": " + ec.message());
  return !ec;
}

uint64_t RandomNonce() {
  std::random_device rd;
  return (uint64_t(rd()) << 32) ^ uint64_t(rd());
}
}  // namespace

// One thread, started when first needed, that runs the functions queued for it in order,
// and the function that runs one on the cache's owner's thread. Destroying it waits for the
// one running; those queued after it are dropped (a folder renamed away for removal is then
// left to RemoveAbandoned).
class ExecutableCache::Background {
 public:
  explicit Background(std::function<void(std::function<void()>)> post) : post_(std::move(post)) {}
  ~Background() {
    {
      MutexLock lock(&mu_);
      stop_ = true;
      wake_.NotifyAll();
    }
    if (thread_.joinable()) thread_.join();
  }
  // From the owner's thread.
  void Queue(std::function<void()> fn) EXCLUDES(mu_) {
    MutexLock lock(&mu_);
    queue_.push_back(std::move(fn));
    wake_.NotifyOne();
    if (!thread_.joinable()) thread_ = std::thread([this] { Run(); });
  }
  // From the background thread: runs `fn` on the owner's thread.
  void Post(std::function<void()> fn) { post_(std::move(fn)); }

 private:
  void Run() EXCLUDES(mu_) {
    for (;;) {
      std::function<void()> fn;
      {
        MutexLock lock(&mu_);
        while (!stop_ && queue_.empty()) wake_.Wait(&mu_);
        if (stop_) return;
        fn = std::move(queue_.front());
        queue_.pop_front();
      }
      fn();
    }
  }

  const std::function<void(std::function<void()>)> post_;
  Mutex mu_;
  CondVar wake_;
  bool stop_ GUARDED_BY(mu_) = false;
  std::deque<std::function<void()>> queue_ GUARDED_BY(mu_);
  std::thread thread_;  // started and joined on the owner's thread
};

ExecutableCache::ExecutableCache(Outbox& outbox, std::string head_address, std::string cache_dir)
    : outbox_(outbox), head_address_(std::move(head_address)), dir_(std::move(cache_dir)) {}

ExecutableCache::~ExecutableCache() = default;

void ExecutableCache::UnpackInBackground(
    std::function<void(std::function<void()>)> post,
    std::function<void(const std::string& hash, const Fetched&)> unpacked) {
  unpacked_ = std::move(unpacked);
  background_ = std::make_unique<Background>(std::move(post));
}

bool ExecutableCache::HasContent(const std::string& path, const std::string& hash) {
  Result<ExecutableIdentity> file = IdentityOf(path);
  if (!file.ok()) return false;
  if (hashes_.size() >= kMaxHashedPaths && !hashes_.count(path)) hashes_.clear();
  auto& cached = hashes_[path];
  if (cached.first != file.value() || cached.second.empty())
    cached = {file.value(), HashFile(path)};
  return cached.second == hash;
}

std::string ExecutableCache::LocalExecutable(const std::string& path, const std::string& hash) {
  if (!path.empty() && HasContent(path, hash)) return path;
  std::string cached_path = dir_ + "/" + hash;
  if (access(cached_path.c_str(), X_OK) == 0 && HasContent(cached_path, hash)) return cached_path;
  return "";
}

void ExecutableCache::Request(const std::string& key, proto::BinaryMsg ask,
                              const std::string& waiter) {
  auto& waiting = awaiting_[key];
  if (waiting.empty()) {
    // The nonce makes the head's the only reply that counts.
    ask.request_id = RandomNonce();
    double now = MonotonicSeconds();
    outbox_.Send(head_address_, proto::MsgType::kFetchBinary, ask);
    asked_[key] = Asked{std::move(ask), now, now + kFirstResendS, kFirstResendS};
  }
  waiting.push_back(waiter);
}

void ExecutableCache::Resend(double now) {
  for (auto& [key, asked] : asked_) {
    if (now < asked.next_send) continue;
    asked.gap = std::min(2 * asked.gap, kMaxResendGapS);
    asked.next_send = now + asked.gap;
    outbox_.Send(head_address_, proto::MsgType::kFetchBinary, asked.ask);
  }
}

void ExecutableCache::Await(const std::string& hash, const std::string& path,
                            const std::string& waiter, const std::string& reply_to) {
  proto::BinaryMsg ask{0, reply_to, hash, "", true, ""};
  ask.want_bytes = awaiting_[hash].empty() && LocalExecutable(path, hash).empty();
  if (ask.want_bytes) LOG_INFO("node: fetching the driver's executable " + hash + " from the head");
  Request(hash, ask, waiter);
}

std::string ExecutableCache::PackageFolder(const std::string& hash) const {
  if (!IsContentHash(hash)) return "";
  std::string folder = dir_ + "/working_dirs/" + hash;
  struct stat st;
  return stat(folder.c_str(), &st) == 0 && S_ISDIR(st.st_mode) ? folder : "";
}

std::string ExecutableCache::WorkingFolder(const proto::RuntimeEnvMsg& env,
                                           const std::string& waiter, const std::string& reply_to) {
  // The folder itself when this host sees it and may enter it (a node of another user may
  // not): else the package's copy.
  if (runtime_env::InPlace(env) &&
      (env.working_dir_hash.empty() || runtime_env::FolderProblem(env.working_dir).empty()))
    return env.working_dir;
  const std::string& hash = env.working_dir_hash;
  if (auto unpacking = unpacking_.find(hash); unpacking != unpacking_.end()) {
    unpacking->second.waiters.push_back(waiter);  // handed back with the others once unpacked
    return "";
  }
  if (std::string folder = PackageFolder(hash); !folder.empty()) {
    utimensat(AT_FDCWD, folder.c_str(), nullptr, 0);  // used now (TrimUnpacked)
    return folder;
  }
  proto::BinaryMsg ask{0, reply_to, hash, "", true, ""};
  ask.package = true;
  if (awaiting_[kPackageKey + hash].empty())
    LOG_INFO("node: fetching the working_dir " + hash + " from the head");
  Request(kPackageKey + hash, ask, waiter);
  return "";
}

std::vector<std::pair<std::string, ExecutableCache::Fetched>> ExecutableCache::Expire(double now) {
  std::vector<std::pair<std::string, Fetched>> out;
  for (auto it = asked_.begin(); it != asked_.end();) {
    if (now - it->second.asked_at < kFetchTimeoutS) {
      ++it;
      continue;
    }
    const std::string& key = it->first;
    Fetched f;
    f.package = key.rfind(kPackageKey, 0) == 0;
    f.waiters = std::move(awaiting_[key]);
    f.error = "the head did not answer within " + std::to_string(int(kFetchTimeoutS)) + " s";
    out.emplace_back(f.package ? key.substr(std::strlen(kPackageKey)) : key, std::move(f));
    awaiting_.erase(key);
    it = asked_.erase(it);
  }
  return out;
}

Result<ExecutableCache::Fetched> ExecutableCache::OnReply(const proto::BinaryMsg& m,
                                                          std::string bytes) {
  std::string key = (m.package ? kPackageKey : "") + m.hash;
  auto asked = asked_.find(key);
  if (asked == asked_.end() || asked->second.ask.request_id != m.request_id) {
    uint64_t suppressed = 0;
    if (!answered_.Contains(m.request_id) && stray_reply_log.ShouldLog(&suppressed)) {
      LOG_WARN("node: dropped a kBinaryReply that answers no request of this node" +
               RateLimitedLog::More(suppressed));
    }
    return Status::NotFound("a kBinaryReply that answers no request of this node");
  }
  answered_.Add(m.request_id);
  asked_.erase(asked);
  Fetched out;
  out.package = m.package;
  out.waiters = std::move(awaiting_[key]);
  awaiting_.erase(key);
  if (!m.ok) {
    out.error =
        (m.package ? "the head cannot send it: " : "the head does not vouch for it: ") + m.message;
  } else if (m.package && background_ && backlog_bytes_ + bytes.size() <= max_backlog_bytes_) {
    unpacking_[m.hash] = {std::move(out.waiters), bytes.size()};
    out.waiters.clear();
    backlog_bytes_ += bytes.size();
    background_->Queue([this, bg = background_.get(), hash = m.hash, bytes = std::move(bytes)] {
      std::string error = Unpack(hash, bytes);
      bg->Post([this, hash, error] { Unpacked(hash, error); });
    });
  } else if (m.package) {  // no thread, or a backlog past its bound: unpacked here
    out.error = Unpack(m.hash, bytes);
    if (out.error.empty()) TrimUnpacked(m.hash);
  } else if (bytes.empty()) {
    vouched_.insert(m.hash);  // this node has a copy (checked again where it is used)
  } else if (HashBytes(bytes) != m.hash) {
    out.error = "the executable fetched from the head does not match its SHA-256 " + m.hash;
  } else {
    vouched_.insert(m.hash);
    out.error = Store(m.hash, bytes);
    if (out.error.empty())
      LOG_INFO("node: cached the driver's executable as " + dir_ + "/" + m.hash);
  }
  return out;
}

void ExecutableCache::Unpacked(const std::string& hash, const std::string& error) {
  Fetched out;
  out.package = true;
  out.error = error;
  if (auto it = unpacking_.find(hash); it != unpacking_.end()) {
    out.waiters = std::move(it->second.waiters);
    backlog_bytes_ -= it->second.bytes;
    unpacking_.erase(it);
  }
  if (error.empty()) TrimUnpacked(hash);
  if (unpacked_) unpacked_(hash, out);
}

std::string ExecutableCache::Unpack(const std::string& hash, const std::string& bytes) const {
  if (HashBytes(bytes) != hash)
    return "the working_dir fetched from the head does not match its SHA-256 " + hash;
  if (!PackageFolder(hash).empty()) return "";  // unpacked meanwhile
  std::string parent = dir_ + "/working_dirs";
  std::error_code ec;
  std::filesystem::create_directories(parent, ec);
  // Each copy in a block group of its own: in the one of the copies just trimmed, ext4 without
  // a journal allocates every new file by skipping, one by one, the inodes they freed.
  SpreadSubfolders(parent);
  chmod(dir_.c_str(), 0700);
  Status s = folder_pack::Unpack(bytes, parent + "/" + hash);
  if (!s.ok()) return "the working_dir " + hash + " cannot be unpacked: " + s.message();
  LOG_INFO("node: unpacked the working_dir " + hash + " into " + parent + "/" + hash);
  // What a node killed while unpacking left behind (this host's nodes share the folder).
  if (int n = folder_pack::RemoveAbandoned(parent); n > 0)
    LOG_INFO("node: removed " + std::to_string(n) + " unfinished working_dir copies in " + parent);
  return "";
}

void ExecutableCache::TrimUnpacked(const std::string& keep) {
  namespace fs = std::filesystem;
  std::error_code ec;
  std::vector<std::pair<fs::file_time_type, fs::path>> folders;
  for (const auto& e : fs::directory_iterator(dir_ + "/working_dirs", ec)) {
    std::string name = e.path().filename().string();
    if (e.is_directory(ec) && IsContentHash(name) && name != keep)
      folders.emplace_back(e.last_write_time(ec), e.path());
  }
  std::sort(folders.begin(), folders.end());
  size_t count = folders.size() + 1;  // with `keep`
  for (const auto& [when, path] : folders) {
    if (count <= max_unpacked_) break;
    if (in_use_ && in_use_(path.string())) continue;
    if (!RemoveCopy(path.string())) continue;
    --count;
  }
}

bool ExecutableCache::RemoveCopy(const std::string& folder) {
  if (!background_) return RemoveFolder(folder);
  std::string away = folder_pack::TempFolderFor(folder);
  if (rename(folder.c_str(), away.c_str()) != 0) {
    LOG_WARN("node: cannot move the working_dir copy " + folder + " away: " + std::strerror(errno));
    return false;
  }
  background_->Queue([away] { RemoveFolder(away); });
  return true;
}

std::string ExecutableCache::Store(const std::string& hash, const std::string& bytes) {
  std::string path = dir_ + "/" + hash;
  std::error_code ec;
  std::filesystem::create_directories(dir_, ec);
  chmod(dir_.c_str(), 0700);
  std::string tmp = path + ".tmp" + std::to_string(getpid());
  {
    std::ofstream out(tmp, std::ios::binary);
    out.write(bytes.data(), std::streamsize(bytes.size()));
    if (!out) return "cannot write " + tmp;
  }
  chmod(tmp.c_str(), 0755);
  std::filesystem::rename(tmp, path, ec);
  if (ec) return "cannot store " + path + ": " + ec.message();
  return "";
}

}  // namespace orrery::node
