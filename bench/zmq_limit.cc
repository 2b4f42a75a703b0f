#include "zmq_limit.h"

#include <signal.h>
#include <spawn.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>
#include <zmq.hpp>

extern char** environ;

namespace orrery::bench {
namespace {

constexpr char kPayload[] = "ok";  // the same small value Ray's benchmarks return
constexpr char kStop[] = "STOP";

// The echo server child; stopped with a STOP message, killed if that fails.
class EchoServerProcess {
 public:
  explicit EchoServerProcess(const char* where) {
    int fds[2];
    if (pipe(fds) != 0) throw std::runtime_error("pipe failed");
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, fds[1], STDOUT_FILENO);
    posix_spawn_file_actions_addclose(&actions, fds[0]);
    std::string self = "/proc/self/exe";
    char* argv[] = {const_cast<char*>("orrery_microbench"), const_cast<char*>(kEchoServerFlag),
                    const_cast<char*>(where), nullptr};
    int rc = posix_spawn(&pid_, self.c_str(), &actions, nullptr, argv, environ);
    posix_spawn_file_actions_destroy(&actions);
    close(fds[1]);
    if (rc != 0) {
      close(fds[0]);
      throw std::runtime_error(std::string("cannot start the echo server: ") + std::strerror(rc));
    }
    FILE* out = fdopen(fds[0], "r");
    char line[256] = {0};
    bool got = out != nullptr && std::fgets(line, sizeof(line), out) != nullptr;
    if (out != nullptr) std::fclose(out);
    std::string text(line);
    const std::string prefix = "ENDPOINT ";
    if (!got || text.rfind(prefix, 0) != 0) {
      Kill();
      throw std::runtime_error("the echo server did not report its endpoint");
    }
    endpoint_ = text.substr(prefix.size());
    while (!endpoint_.empty() && (endpoint_.back() == '\n' || endpoint_.back() == '\r'))
      endpoint_.pop_back();
  }
  ~EchoServerProcess() { Kill(); }
  const std::string& endpoint() const { return endpoint_; }

  void Reap() {
    if (pid_ <= 0) return;
    // The server exits after STOP; wait up to 2 s, then kill it.
    for (int i = 0; i < 200; ++i) {
      if (waitpid(pid_, nullptr, WNOHANG) == pid_) {
        pid_ = -1;
        return;
      }
      usleep(10000);
    }
    Kill();
  }

 private:
  void Kill() {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
    pid_ = -1;
  }
  pid_t pid_ = -1;
  std::string endpoint_;
};

}  // namespace

namespace {
// The ipc echo server's socket file, removed when the server is told to stop or is
// terminated (its parent's death sends SIGTERM; a kill -9 of the parent must not leave the
// file behind).
char g_echo_socket_file[512];

void RemoveEchoSocketAndExit(int) {
  if (g_echo_socket_file[0] != '\0') unlink(g_echo_socket_file);
  _exit(0);
}
}  // namespace

int RunZmqEchoServer(const char* where) {
  struct sigaction on_term {};
  on_term.sa_handler = RemoveEchoSocketAndExit;
  sigemptyset(&on_term.sa_mask);
  sigaction(SIGTERM, &on_term, nullptr);
  sigaction(SIGINT, &on_term, nullptr);
  prctl(PR_SET_PDEATHSIG, SIGTERM);
  zmq::context_t ctx(1);
  zmq::socket_t router(ctx, zmq::socket_type::router);
  router.set(zmq::sockopt::linger, 0);
  std::string socket_file;
  if (std::strcmp(where, kEchoOverIpc) == 0) {
    const char* tmp = std::getenv("TMPDIR");
    socket_file = std::string(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp") +
                  "/orrery-bench-echo-" + std::to_string(getpid()) + ".sock";
    if (socket_file.size() >= sizeof(g_echo_socket_file)) {
      std::fprintf(stderr, "the echo server's socket path is too long: %s\n", socket_file.c_str());
      return 2;
    }
    // Blocked while the name is written, so the handler never reads half of it.
    sigset_t term, old;
    sigemptyset(&term);
    sigaddset(&term, SIGTERM);
    sigaddset(&term, SIGINT);
    sigprocmask(SIG_BLOCK, &term, &old);
    std::memcpy(g_echo_socket_file, socket_file.c_str(), socket_file.size() + 1);
    sigprocmask(SIG_SETMASK, &old, nullptr);
    router.bind("ipc://" + socket_file);
  } else {
    int port = std::atoi(where);
    router.bind("tcp://127.0.0.1:" + (port > 0 ? std::to_string(port) : std::string("*")));
  }
  std::string endpoint = router.get(zmq::sockopt::last_endpoint);
  std::printf("ENDPOINT %s\n", endpoint.c_str());
  std::fflush(stdout);
  for (;;) {
    zmq::message_t identity, payload;
    if (!router.recv(identity) || !identity.more()) continue;
    if (!router.recv(payload)) continue;
    bool stop = payload.size() == sizeof(kStop) - 1 &&
                std::memcmp(payload.data(), kStop, payload.size()) == 0;
    router.send(identity, zmq::send_flags::sndmore);
    router.send(payload, zmq::send_flags::none);
    if (stop) {
      if (!socket_file.empty()) unlink(socket_file.c_str());
      return 0;
    }
  }
}

Rate MeasureZmqRoundTrip(const TimingOptions& options, bool ipc) {
  EchoServerProcess server(ipc ? kEchoOverIpc : "0");
  zmq::context_t ctx(1);
  zmq::socket_t dealer(ctx, zmq::socket_type::dealer);
  dealer.set(zmq::sockopt::linger, 0);
  dealer.set(zmq::sockopt::rcvtimeo, 10000);
  dealer.connect(server.endpoint());
  auto round_trip = [&] {
    dealer.send(zmq::buffer(kPayload, sizeof(kPayload) - 1), zmq::send_flags::none);
    zmq::message_t reply;
    if (!dealer.recv(reply)) throw std::runtime_error("no reply from the echo server in 10 s");
  };
  Rate rate = TimeIt(round_trip, 1, options);
  dealer.send(zmq::buffer(kStop, sizeof(kStop) - 1), zmq::send_flags::none);
  zmq::message_t bye;
  (void)dealer.recv(bye);
  server.Reap();
  return rate;
}

}  // namespace orrery::bench
