#include "node/internal/zygote.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <set>

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
// In a new worker: stdout and stderr go to worker-<pid>.out and .err in the directory the
// node named (ORRERY_WORKER_LOG_DIR), whose log monitor tails them (docs/logs.md); stdout
// is line-buffered so lines arrive as they are written. No directory: they stay as they are.
void RedirectOutput() {
  const char* dir = std::getenv("ORRERY_WORKER_LOG_DIR");
  if (!dir || !*dir) return;
  std::string stem = std::string(dir) + "/worker-" + std::to_string(getpid());
  int out = open((stem + ".out").c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  int err = open((stem + ".err").c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (out >= 0) dup2(out, 1), close(out);
  if (err >= 0) dup2(err, 2), close(err);
  setvbuf(stdout, nullptr, _IOLBF, 0);
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
  std::set<int> children;
  pid_t self = getpid();
  std::vector<char> buf(1 << 20);
  while (true) {
    pollfd fds[2] = {{fd, POLLIN, 0}, {sfd, POLLIN, 0}};
    if (poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      break;
    }
    if (fds[1].revents & POLLIN) {
      signalfd_siginfo info;
      while (read(sfd, &info, sizeof(info)) > 0) {
      }
      int status;
      pid_t pid;
      while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
        children.erase(pid);
        SendEvent(fd, Event{kExited, 0, pid, Describe(status)});
      }
    }
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
      std::fflush(nullptr);
      pid_t pid = fork();
      if (pid == 0) {
        close(fd);
        close(sfd);
        sigprocmask(SIG_UNBLOCK, &chld, nullptr);
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != self) _exit(0);
        for (const auto& [k, v] : req.env) setenv(k.c_str(), v.c_str(), 1);
        RedirectOutput();
        entry();
        _exit(0);
      }
      if (pid > 0) children.insert(pid);
      SendEvent(fd, Event{kSpawned, req.request_id, int(pid), pid < 0 ? std::strerror(errno) : ""});
    }
  }
  for (int pid : children) kill(pid, SIGKILL);
  _exit(0);
}

ZygoteClient::~ZygoteClient() { Stop(); }

Status ZygoteClient::Start(const std::vector<std::string>& argv,
                           const std::map<std::string, std::string>& env) {
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
  pid_t pid;
  int rc = posix_spawn(&pid, argv.at(0).c_str(), &actions, nullptr, cargv.data(), cenv.data());
  posix_spawn_file_actions_destroy(&actions);
  close(sv[1]);
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
