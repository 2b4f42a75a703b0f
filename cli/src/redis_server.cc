#include "cli/src/redis_server.h"

#include <arpa/inet.h>
#include <hiredis/hiredis.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include "cli/src/ready_file.h"
#include "core/internal/process_exists.h"
#include "core/internal/security.h"

namespace orrery::cli {

namespace {

constexpr int kAttempts = 5;
constexpr int kStartTimeoutMs = 15000;

// A port the kernel would give an ephemeral bind now: only a candidate, which another
// process may take before redis-server binds it (StartSessionRedis then tries another).
int CandidatePort() {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return 0;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  int port = 0;
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 &&
      getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0) {
    port = ntohs(addr.sin_port);
  }
  close(fd);
  return port;
}

// A value for redis.conf: quoted, so a path or password with spaces stays one argument.
std::string RedisConfQuoted(const std::string& v) {
  std::string out = "\"";
  for (char ch : v) {
    if (ch == '"' || ch == '\\') out.push_back('\\');
    out.push_back(ch);
  }
  return out + "\"";
}

// One command's reply as text ("" for an error or no reply).
std::string Reply(redisContext* c, const char* format, const std::string& arg = "") {
  auto* r = static_cast<redisReply*>(arg.empty() ? redisCommand(c, format)
                                                 : redisCommand(c, format, arg.data(), arg.size()));
  std::string out;
  if (r && (r->type == REDIS_REPLY_STATUS || r->type == REDIS_REPLY_STRING))
    out.assign(r->str, r->len);
  if (r) freeReplyObject(r);
  return out;
}

enum class Outcome { kReady, kExited, kTimedOut };

// Waits until the redis-server `pid` serves on `port`, exits, or the deadline passes.
Outcome AwaitRedis(int port, const std::string& password, int pid, std::string* how) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(kStartTimeoutMs);
  while (std::chrono::steady_clock::now() < deadline) {
    if (RedisServes(port, password, pid)) return Outcome::kReady;
    int status = 0;
    if (waitpid(pid, &status, WNOHANG) == pid || !ProcessExists(pid)) {
      *how = WIFEXITED(status) ? "exited with status " + std::to_string(WEXITSTATUS(status))
                               : "exited";
      return Outcome::kExited;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));  // polling with a deadline
  }
  return Outcome::kTimedOut;
}

}  // namespace

bool RedisServes(int port, const std::string& password, int pid) {
  timeval tv{0, 500 * 1000};
  redisContext* c = redisConnectWithTimeout("127.0.0.1", port, tv);
  if (!c || c->err) {
    if (c) redisFree(c);
    return false;
  }
  redisSetTimeout(c, tv);
  bool serves = password.empty() || Reply(c, "AUTH %b", password) == "OK";
  // PING answers an error while Redis loads its append-only file: not ready yet.
  serves = serves && Reply(c, "PING") == "PONG";
  if (serves) {
    // Another process on this port is not the one started here (it lost the port).
    std::string info = Reply(c, "INFO server");
    serves = info.find("\nprocess_id:" + std::to_string(pid) + "\r") != std::string::npos;
  }
  redisFree(c);
  return serves;
}

Result<std::string> StartSessionRedis(Session& s, const std::string& password) {
  std::string conf = s.dir + "/redis.conf", log = s.dir + "/logs/redis.log";
  std::string why;
  for (int attempt = 0; attempt < kAttempts; ++attempt) {
    int port = CandidatePort();
    if (port == 0) return Status::Unavailable("cannot find a free loopback port for Redis");
    std::string text = "port " + std::to_string(port) + "\nbind 127.0.0.1\ndir " +
                       RedisConfQuoted(s.dir) + "\nappendonly yes\ndaemonize no\nrequirepass " +
                       RedisConfQuoted(password);
    if (Status w = security::WriteSecretFile(conf, text); !w.ok()) return w;
    auto pid = SpawnDaemon({"redis-server", conf}, log);
    if (!pid.ok())
      return Status::Unavailable(pid.status().message() + " (is redis-server installed?)");
    std::string how;
    switch (AwaitRedis(port, password, pid.value(), &how)) {
      case Outcome::kReady:
        s.pids.push_back(pid.value());
        return "127.0.0.1:" + std::to_string(port);
      case Outcome::kExited:  // most likely the port was taken meanwhile: another one
        why = "redis-server " + how + " (port " + std::to_string(port) + ")";
        continue;
      case Outcome::kTimedOut:
        kill(pid.value(), SIGKILL);
        waitpid(pid.value(), nullptr, 0);
        return Status::Timeout("Redis did not start within " +
                               std::to_string(kStartTimeoutMs / 1000) + " s; the last lines of " +
                               log + ":\n" + LogTail(log));
    }
  }
  return Status::Unavailable("Redis did not start (" + std::to_string(kAttempts) +
                             " attempts; the last: " + why + "); the last lines of " + log + ":\n" +
                             LogTail(log));
}

}  // namespace orrery::cli
