#include "node/src/zygote_pool.h"

#include <signal.h>
#include <sys/epoll.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include "core/internal/clock.h"
#include "core/internal/log.h"
#include "node/src/process_cgroup.h"

namespace orrery::node {

namespace {
ExecutableIdentity FromStat(const struct stat& st) {
  return ExecutableIdentity{st.st_dev, st.st_ino, st.st_size,
                            (long long)st.st_mtim.tv_sec * 1000000000ll + st.st_mtim.tv_nsec};
}

// Whether the process `pid` has ended: gone, or a zombie (its descriptors are closed).
bool Ended(int pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(stat, line)) return true;
  size_t paren = line.rfind(')');
  return paren == std::string::npos || line.compare(paren, 3, ") Z") == 0;
}

// Waits until every process of `pids` has ended, at most `seconds`.
void WaitEnded(const std::vector<int>& pids, double seconds) {
  double deadline = MonotonicSeconds() + seconds;
  for (int pid : pids) {
    while (!Ended(pid) && MonotonicSeconds() < deadline) usleep(5000);
  }
}
}  // namespace

Result<ExecutableIdentity> IdentityOf(const std::string& path) {
  struct stat st;
  if (stat(path.c_str(), &st) != 0) {
    return Status::NotFound("cannot stat " + path + ": " + std::strerror(errno));
  }
  return FromStat(st);
}

ZygotePool::ZygotePool(std::map<std::string, std::string> env, ZygoteEvents events)
    : env_(std::move(env)), events_(std::move(events)), epoll_fd_(epoll_create1(EPOLL_CLOEXEC)) {}

ZygotePool::~ZygotePool() {
  StopAll();
  if (epoll_fd_ >= 0) close(epoll_fd_);
}

Result<ZygotePool::Entry*> ZygotePool::Current(const std::vector<std::string>& argv) {
  if (argv.empty())
    return Status::InvalidArgument("the request names no executable for its workers");
  if (epoll_fd_ < 0) return Status::Internal(std::string("epoll_create1: ") + std::strerror(errno));
  const std::string& path = argv[0];
  Result<ExecutableIdentity> identity = IdentityOf(path);
  auto it = current_.find(path);
  if (it != current_.end()) {
    Entry* e = entries_.at(it->second).get();
    // A file that went away leaves the zygote as the only copy of the code: keep using it.
    if (!identity.ok() || identity.value() == e->identity) return e;
    LOG_INFO("node: " + path + " changed since its worker zygote (pid " +
             std::to_string(e->client->pid()) + ") started; new workers come from a new one");
    e->retired = true;
    current_.erase(it);
    DropIfDone(e);
  }
  if (!identity.ok() || access(path.c_str(), X_OK) != 0) {
    return Status::NotFound("the driver's executable " + path + " is not on this node");
  }
  auto client = std::make_unique<ZygoteClient>();
  std::map<std::string, std::string> env = env_;
  env["ORRERY_ROLE"] = "zygote";
  uint64_t id = next_id_++;
  std::string cgroup = MakeCgroup(id);
  if (cgroup.empty()) env.erase("ORRERY_CGROUP_DIR");
  if (!cgroup.empty()) env["ORRERY_CGROUP_DIR"] = cgroup;
  // The zygote runs the driver's main() up to Init(): what that prints goes to a file in
  // its workers' log folder, not again to the terminal the node shares with the driver.
  std::string output;
  if (auto dir = env.find(kWorkerLogDirEnv); dir != env.end() && !dir->second.empty())
    output = dir->second + "/zygote-" + std::to_string(id);
  Status st = client->Start(argv, env, output);
  if (!st.ok()) {
    EndCgroup(cgroup);
    return st;
  }
  auto entry = std::make_unique<Entry>();
  entry->id = id;
  entry->cgroup = cgroup;
  entry->output = output;
  entry->path = path;
  // What the zygote really runs, should the file have changed since the stat above.
  Result<ExecutableIdentity> running =
      IdentityOf("/proc/" + std::to_string(client->pid()) + "/exe");
  entry->identity = running.ok() ? running.value() : identity.value();
  entry->client = std::move(client);
  Entry* raw = entry.get();
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.u64 = raw->id;
  if (epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, raw->client->fd(), &ev) != 0) {
    std::string err = std::strerror(errno);
    raw->client->Stop();
    EndCgroup(cgroup);
    return Status::Internal("cannot poll the worker zygote's socket: " + err);
  }
  entries_[raw->id] = std::move(entry);
  current_[path] = raw->id;
  return raw;
}

Status ZygotePool::Prepare(const std::vector<std::string>& argv) {
  Result<Entry*> e = Current(argv);
  return e.ok() ? Status::Ok() : e.status();
}

Status ZygotePool::Spawn(const std::vector<std::string>& argv, uint64_t request_id,
                         const std::map<std::string, std::string>& env) {
  Result<Entry*> e = Current(argv);
  if (!e.ok()) return e.status();
  Entry* entry = e.value();
  Status s = entry->client->Spawn(request_id, env);
  if (s.code() == StatusCode::kUnavailable && entry->client->unanswered().count(request_id)) {
    // Queued, but the socket failed: the zygote is broken. Kill it; its EOF fails the
    // queued requests, this one included, and the next request starts a new zygote.
    LOG_WARN("node: " + s.message() + "; stopping it");
    kill(entry->client->pid(), SIGKILL);
    return Status::Ok();
  }
  if (!s.ok()) return s;
  Watch(*entry);
  return Status::Ok();
}

void ZygotePool::Watch(Entry& e) {
  bool want = e.client->wants_write();
  if (want == e.polling_write) return;
  epoll_event ev{};
  ev.events = EPOLLIN | (want ? EPOLLOUT : 0u);
  ev.data.u64 = e.id;
  if (epoll_ctl(epoll_fd_, EPOLL_CTL_MOD, e.client->fd(), &ev) == 0) e.polling_write = want;
}

void ZygotePool::OnReady() {
  epoll_event events[64];
  int n = epoll_wait(epoll_fd_, events, 64, 0);
  for (int i = 0; i < n; ++i) {
    // epoll_event is packed on x86-64: copy the fields out rather than bind references to
    // them (misaligned).
    uint64_t id = events[i].data.u64;
    uint32_t what = events[i].events;
    // An earlier event's callbacks may have removed this entry.
    auto it = entries_.find(id);
    if (it != entries_.end()) OnEvent(*it->second, what);
  }
}

void ZygotePool::OnEvent(Entry& e, uint32_t events) {
  if (events & EPOLLOUT) {
    Status s = e.client->Flush();
    if (!s.ok()) {
      LOG_WARN("node: " + s.message() + "; stopping it");
      kill(e.client->pid(), SIGKILL);  // its EOF comes next
    }
  }
  if (events & (EPOLLIN | EPOLLHUP | EPOLLERR)) {
    uint64_t id = e.id;
    bool alive = e.client->OnReadable(events_.spawned, events_.exited);
    if (!alive) return Died(&e);
    if (!entries_.count(id)) return;
  }
  Watch(e);
  DropIfDone(&e);
}

void ZygotePool::Died(Entry* e) {
  epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, e->client->fd(), nullptr);
  int pid = e->client->pid();
  std::string how = e->client->Stop();
  std::string cause = "the worker zygote (pid " + std::to_string(pid) + ") for " + e->path + " " +
                      (how.empty() ? "is gone" : how) +
                      (e->output.empty() ? "" : " (its output: " + e->output + ".err)");
  LOG_WARN("node: " + cause +
           "; its workers die with it, and the next one needed starts a new zygote");
  std::set<uint64_t> unanswered = e->client->unanswered();
  std::set<int> children = e->client->children();
  EndCgroup(e->cgroup);  // what its workers started dies with them
  Remove(e);
  for (uint64_t request : unanswered) events_.failed(request, cause);
  for (int child : children) events_.exited(child, "died with " + cause);
}

void ZygotePool::DropIfDone(Entry* e) {
  if (!e->retired || !e->client->children().empty() || !e->client->unanswered().empty()) return;
  LOG_INFO("node: the last worker of the replaced zygote (pid " + std::to_string(e->client->pid()) +
           ") for " + e->path + " ended; stopping it");
  epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, e->client->fd(), nullptr);
  e->client->Stop();
  EndCgroup(e->cgroup);
  Remove(e);
}

void ZygotePool::Remove(Entry* e) {
  auto cur = current_.find(e->path);
  if (cur != current_.end() && cur->second == e->id) current_.erase(cur);
  entries_.erase(e->id);
}

std::string ZygotePool::MakeCgroup(uint64_t id) {
  auto base = env_.find("ORRERY_CGROUP_DIR");
  if (base == env_.end() || base->second.empty()) return "";
  std::string dir = base->second + "/zygote-" + std::to_string(id);
  if (mkdir(dir.c_str(), 0755) == 0) return dir;
  LOG_WARN("node: cannot make the cgroup " + dir + " (" + std::strerror(errno) +
           "); its workers run without cgroups of their own");
  return "";
}

void ZygotePool::EndCgroup(const std::string& dir) {
  if (dir.empty()) return;
  KillCgroup(dir);
  // SIGKILLed processes leave at once unless stuck in the kernel; what is left then is
  // removed with the node's subtree (process_cgroup.h).
  WaitCgroupEmpty(dir, 1000);
  if (!RemoveCgroup(dir)) LOG_WARN("node: the cgroup " + dir + " is not empty yet; left for now");
}

void ZygotePool::Kill(int pid) {
  if (pid > 0) kill(pid, SIGKILL);
}

void ZygotePool::StopAll() {
  std::vector<int> workers;
  for (auto& [id, e] : entries_)
    workers.insert(workers.end(), e->client->children().begin(), e->client->children().end());
  for (auto& [id, e] : entries_) {
    if (e->client->fd() >= 0) epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, e->client->fd(), nullptr);
    e->client->Stop();
    EndCgroup(e->cgroup);
  }
  entries_.clear();
  current_.clear();
  // The workers die with their zygotes (PR_SET_PDEATHSIG); what the node does next (removing
  // their socket files: WorkerPool::KillAll) needs them gone.
  WaitEnded(workers, kStopWaitS);
}

int ZygotePool::ZygotePid(const std::string& path) const {
  auto it = current_.find(path);
  if (it == current_.end()) return 0;
  return entries_.at(it->second)->client->pid();
}

}  // namespace orrery::node
