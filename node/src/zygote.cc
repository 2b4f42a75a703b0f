#include "node/internal/zygote.h"

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <set>
#include <sstream>

#include "node/src/process_cgroup.h"
#include "orrery/api/serialize.h"

extern char** environ;

namespace orrery::node {

namespace {
constexpr int kChildFd = 100;  // where the zygote finds its end of the socket pair
constexpr int kSpawned = 0;
constexpr int kExited = 1;

struct Event {
  int kind = 0;
  uint64_t request_id = 0;
  int pid = 0;
  std::string text;
  MSGPACK_DEFINE(kind, request_id, pid, text);
};

struct SpawnRequest {
  uint64_t request_id = 0;
  std::map<std::string, std::string> env;
  MSGPACK_DEFINE(request_id, env);
};

void SendEvent(int fd, const Event& e) {
  std::string bytes = internal::Pack(e);
  [[maybe_unused]] ssize_t n = send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL);
}

std::string Describe(int status) {
  if (WIFEXITED(status)) return "exited with code " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) {
    int sig = WTERMSIG(status);
    return "was killed by signal " + std::to_string(sig) + " (" + strsignal(sig) + ")";
  }
  return "stopped";
}

// Opens <stem>.out and .err, appended to, for a process's stdout and stderr: their
// descriptors, -1 for one that cannot be opened.
std::array<int, 2> OpenOutputFiles(const std::string& stem) {
  std::array<int, 2> fds{};
  for (int i = 0; i < 2; ++i) {
    std::string path = stem + (i == 0 ? ".out" : ".err");
    fds[i] = open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  }
  return fds;
}

// In a new worker: stdout and stderr go to worker-<pid>.out and .err in the directory the
// node named (ORRERY_WORKER_LOG_DIR), whose log monitor tails them (docs/logs.md); stdout
// is line-buffered so lines arrive as they are written. No directory: they stay as they are.
void RedirectOutput() {
  const char* dir = std::getenv(kWorkerLogDirEnv);
  if (!dir || !*dir) return;
  std::array<int, 2> fds =
      OpenOutputFiles(std::string(dir) + "/worker-" + std::to_string(getpid()));
  for (int i = 0; i < 2; ++i) {
    if (fds[i] >= 0) dup2(fds[i], i + 1), close(fds[i]);
  }
  setvbuf(stdout, nullptr, _IOLBF, 0);
}

// What the zygote does when its workers end, so that what they started ends too: with a
// cgroup directory from the node (ORRERY_CGROUP_DIR), each worker runs in worker-<pid> there,
// killed and removed when the worker is reaped; without one, the zygote is a subreaper, and
// the orphans it inherits whose environment names a worker that ended are killed.
class WorkerEnds {
 public:
  WorkerEnds() {
    const char* dir = std::getenv("ORRERY_CGROUP_DIR");
    if (dir) cgroup_dir_ = dir;
    unsetenv("ORRERY_CGROUP_DIR");  // the node's, not the workers'
    if (cgroup_dir_.empty()) prctl(PR_SET_CHILD_SUBREAPER, 1);
  }
  // In a new worker, before it runs anything of its own.
  void EnterOwnCgroup() const {
    if (cgroup_dir_.empty()) return;
    std::string dir = cgroup_dir_ + "/worker-" + std::to_string(getpid());
    mkdir(dir.c_str(), 0755);
    int procs = OpenCgroupProcs(dir);
    EnterCgroup(procs);
    if (procs >= 0) close(procs);
  }
  void Started(int pid, const std::map<std::string, std::string>& env) {
    auto id = env.find("ORRERY_WORKER_ID");
    if (id != env.end()) worker_ids_[pid] = id->second;
  }
  // The worker `pid` was reaped.
  void Ended(int pid) {
    if (!cgroup_dir_.empty()) {
      std::string dir = cgroup_dir_ + "/worker-" + std::to_string(pid);
      KillCgroup(dir);
      if (!RemoveCgroup(dir)) ending_.insert(dir);
    } else if (worker_ids_.count(pid)) {
      ended_ids_.insert(worker_ids_[pid]);
    }
    worker_ids_.erase(pid);
  }
  // After each round of reaping: what is left to kill or remove. False when nothing is.
  bool Sweep() {
    for (auto it = ending_.begin(); it != ending_.end();) {
      KillCgroup(*it);
      it = RemoveCgroup(*it) ? ending_.erase(it) : std::next(it);
    }
    // A killed orphan's own children come to the zygote next: sweep until none is found.
    if (!ended_ids_.empty() && !KillOrphans(false)) ended_ids_.clear();
    return !ending_.empty();
  }
  // The zygote ends: everything its workers started goes too.
  void EndAll() {
    if (!cgroup_dir_.empty()) return KillCgroup(cgroup_dir_);
    for (int round = 0; round < 100 && KillOrphans(true); ++round) {
      while (waitpid(-1, nullptr, WNOHANG) > 0) {
      }
    }
  }

 private:
  // Kills the zygote's children that are not workers and whose environment names an ended
  // worker (or any, with `all`); whether there were any.
  bool KillOrphans(bool all) {
    bool found = false;
    pid_t self = getpid();
    DIR* proc = opendir("/proc");
    if (!proc) return false;
    while (dirent* d = readdir(proc)) {
      int pid = std::atoi(d->d_name);
      if (pid <= 0 || worker_ids_.count(pid) || ParentOf(pid) != self) continue;
      if (all || NamesEndedWorker(pid)) found = kill(pid, SIGKILL) == 0 || found;
    }
    closedir(proc);
    return found;
  }
  static int ParentOf(int pid) {
    std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
    std::string line;
    if (!std::getline(in, line) || line.rfind(')') == std::string::npos) return -1;
    std::istringstream rest(line.substr(line.rfind(')') + 1));
    std::string state;
    int ppid = -1;
    rest >> state >> ppid;
    return ppid;
  }
  bool NamesEndedWorker(int pid) const {
    return AnyEnvironEntry(pid, [this](const std::string& var) {
      return var.rfind("ORRERY_WORKER_ID=", 0) == 0 && ended_ids_.count(var.substr(17)) > 0;
    });
  }

  std::string cgroup_dir_;
  std::map<int, std::string> worker_ids_;  // by pid
  std::set<std::string> ended_ids_;        // workers whose orphans are killed
  std::set<std::string> ending_;           // killed cgroups not yet empty
};

// Forks a worker for `req`: its pid, or -1.
pid_t ForkWorker(const SpawnRequest& req, WorkerEntry entry, const WorkerEnds& ends,
                 const int close_fds[2], const sigset_t& chld) {
  pid_t self = getpid();
  std::fflush(nullptr);
  pid_t pid = fork();
  if (pid != 0) return pid;
  close(close_fds[0]);
  close(close_fds[1]);
  sigprocmask(SIG_UNBLOCK, &chld, nullptr);
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() != self) _exit(0);
  ends.EnterOwnCgroup();
  for (const auto& [k, v] : req.env) setenv(k.c_str(), v.c_str(), 1);
  RedirectOutput();
  entry();
  _exit(0);
}

}  // namespace

void ZygoteMain(int fd, WorkerEntry entry) {
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  const char* parent = std::getenv("ORRERY_PARENT_PID");
  if (parent && getppid() != std::atoi(parent)) _exit(0);  // the node died before we got here
  sigset_t chld;
  sigemptyset(&chld);
  sigaddset(&chld, SIGCHLD);
  sigprocmask(SIG_BLOCK, &chld, nullptr);
  int sfd = signalfd(-1, &chld, SFD_CLOEXEC | SFD_NONBLOCK);
  WorkerEnds ends;
  std::set<int> children;
  std::vector<char> buf(1 << 20);
  bool sweeping = false;
  while (true) {
    pollfd fds[2] = {{fd, POLLIN, 0}, {sfd, POLLIN, 0}};
    // Killed processes not yet gone from their cgroup: look again shortly.
    if (poll(fds, 2, sweeping ? 50 : -1) < 0) {
      if (errno == EINTR) continue;
      break;
    }
    if (fds[1].revents & POLLIN) {
      signalfd_siginfo info;
      while (read(sfd, &info, sizeof(info)) > 0) {
      }
      int status;
      pid_t pid;
      // Orphans of ended workers are reaped here too (a subreaper's), but not reported.
      while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
        if (children.erase(pid) == 0) continue;
        ends.Ended(pid);
        SendEvent(fd, Event{kExited, 0, pid, Describe(status)});
      }
    }
    sweeping = ends.Sweep();
    if (fds[0].revents & (POLLIN | POLLHUP | POLLERR)) {
      ssize_t n = recv(fd, buf.data(), buf.size(), 0);
      if (n <= 0) break;  // the node is gone
      SpawnRequest req;
      try {
        msgpack::object_handle oh =
            internal::UnpackUntrusted(buf.data(), size_t(n), internal::kControlUnpackLimits);
        oh.get().convert(req);
      } catch (const std::exception& e) {
        SendEvent(fd, Event{kSpawned, 0, -1, std::string("bad spawn request: ") + e.what()});
        continue;
      }
      int fds_to_close[2] = {fd, sfd};
      pid_t pid = ForkWorker(req, entry, ends, fds_to_close, chld);
      if (pid > 0) {
        children.insert(pid);
        ends.Started(pid, req.env);
      }
      SendEvent(fd, Event{kSpawned, req.request_id, int(pid), pid < 0 ? std::strerror(errno) : ""});
    }
  }
  for (int pid : children) kill(pid, SIGKILL);
  ends.EndAll();
  _exit(0);
}

ZygoteClient::~ZygoteClient() { Stop(); }

Status ZygoteClient::Start(const std::vector<std::string>& argv,
                           const std::map<std::string, std::string>& env,
                           const std::string& output_stem) {
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0) {
    return Status::Internal(std::string("socketpair: ") + std::strerror(errno));
  }
  std::vector<std::string> envs;
  for (char** e = environ; *e; ++e) {
    std::string kv = *e;
    std::string key = kv.substr(0, kv.find('='));
    if (!env.count(key)) envs.push_back(kv);
  }
  for (const auto& [k, v] : env) envs.push_back(k + "=" + v);
  envs.push_back("ORRERY_ZYGOTE_FD=" + std::to_string(kChildFd));
  envs.push_back("ORRERY_PARENT_PID=" + std::to_string(getpid()));
  std::vector<char*> cargv, cenv;
  for (const auto& a : argv) cargv.push_back(const_cast<char*>(a.c_str()));
  cargv.push_back(nullptr);
  for (const auto& e : envs) cenv.push_back(const_cast<char*>(e.c_str()));
  cenv.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, sv[1], kChildFd);
  // A file that cannot be opened leaves that stream as the node's.
  std::array<int, 2> outputs{-1, -1};
  if (!output_stem.empty()) outputs = OpenOutputFiles(output_stem);
  for (int i = 0; i < 2; ++i) {
    if (outputs[i] >= 0) posix_spawn_file_actions_adddup2(&actions, outputs[i], i + 1);
  }
  pid_t pid;
  int rc = posix_spawn(&pid, argv.at(0).c_str(), &actions, nullptr, cargv.data(), cenv.data());
  posix_spawn_file_actions_destroy(&actions);
  close(sv[1]);
  for (int fd : outputs) {
    if (fd >= 0) close(fd);
  }
  if (rc != 0) {
    close(sv[0]);
    return Status::Internal(std::string("cannot start the worker zygote: ") + std::strerror(rc));
  }
  fd_ = sv[0];
  pid_ = pid;
  fcntl(fd_, F_SETFL, fcntl(fd_, F_GETFL) | O_NONBLOCK);
  return Status::Ok();
}

Status ZygoteClient::Spawn(uint64_t request_id, const std::map<std::string, std::string>& env) {
  if (fd_ < 0) return Status::Unavailable("the worker zygote is gone");
  if (queue_.size() >= kMaxQueuedSpawns) {
    return Status::Unavailable("too many worker processes are waiting to be started (" +
                               std::to_string(queue_.size()) + " queued at the worker zygote)");
  }
  queue_.push_back(internal::Pack(SpawnRequest{request_id, env}));
  unanswered_.insert(request_id);
  return Flush();
}

Status ZygoteClient::Flush() {
  while (!queue_.empty()) {
    if (fd_ < 0) return Status::Unavailable("the worker zygote is gone");
    const std::string& bytes = queue_.front();
    if (send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL) < 0) {
      if (errno == EINTR) continue;
      // A full socket: the zygote has not read the requests before these yet.
      if (errno == EAGAIN || errno == EWOULDBLOCK || errno == ENOBUFS) return Status::Ok();
      return Status::Unavailable(std::string("the worker zygote is gone: ") + std::strerror(errno));
    }
    queue_.pop_front();
  }
  return Status::Ok();
}

bool ZygoteClient::OnReadable(const std::function<void(uint64_t, int)>& spawned,
                              const std::function<void(int, const std::string&)>& exited) {
  char buf[4096];
  while (true) {
    ssize_t n = recv(fd_, buf, sizeof(buf), 0);
    if (n == 0) return false;
    if (n < 0) return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR;
    Event e;
    try {
      msgpack::object_handle oh =
          internal::UnpackUntrusted(buf, size_t(n), internal::kControlUnpackLimits);
      oh.get().convert(e);
    } catch (const std::exception&) {
      continue;
    }
    if (e.kind == kSpawned) {
      // An answer to an unknown request (a zygote that misbehaves) is not ours to report.
      if (unanswered_.erase(e.request_id) == 0) continue;
      if (e.pid > 0) children_.insert(e.pid);
      spawned(e.request_id, e.pid);
    }
    if (e.kind == kExited) {
      if (children_.erase(e.pid) == 0) continue;
      exited(e.pid, e.text);
    }
  }
}

std::string ZygoteClient::Stop() {
  std::string how;
  if (pid_ > 0) {
    kill(pid_, SIGKILL);
    int status;
    if (waitpid(pid_, &status, 0) == pid_) how = Describe(status);
    pid_ = -1;
  }
  if (fd_ >= 0) {
    close(fd_);
    fd_ = -1;
  }
  queue_.clear();
  return how;
}

}  // namespace orrery::node
