#include "train/src/entrypoint_process.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <filesystem>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>

#include "core/internal/kept_memory.h"
#include "orrery/errors.h"

extern char** environ;

namespace orrery::train::internal {

namespace {

constexpr size_t kMaxLine = 1 << 20;  // a request longer than this closes its connection
constexpr size_t kMaxOutputLine = 64 * 1024;
constexpr size_t kTailLines = 20;  // of stderr, in the failure's message
constexpr size_t kMaxConnections = 16;
constexpr int kTickMs = 100;

double Now() {
  using namespace std::chrono;
  return duration<double>(steady_clock::now().time_since_epoch()).count();
}

// The child's environment: the worker's (the group's variables are exported there), the
// entrypoint's own, then what the line protocol and the frameworks need.
std::vector<std::string> ChildEnvironment(const EntrypointRun& run, const std::string& socket) {
  std::map<std::string, std::string> env;
  for (char** e = environ; *e; ++e) {
    const char* eq = std::strchr(*e, '=');
    if (eq) env[std::string(*e, size_t(eq - *e))] = eq + 1;
  }
  // A worker's one arena is for its own calls (kWorkerTunables), not a framework's threads:
  // the framework gets what its node chose for it (the user's tunables and huge pages).
  if (auto framework = env.find(orrery::internal::kFrameworkTunablesEnv); framework != env.end()) {
    env["GLIBC_TUNABLES"] = framework->second;
    env.erase(framework);
  }
  for (const auto& [k, v] : run.env) env[k] = v;
  auto get = [&env](const char* k) { return env.count(k) ? env[k] : std::string(); };
  // torchrun's, beside those the backend set (MASTER_ADDR, RANK, ...).
  if (!get("NODE_RANK").empty()) env["GROUP_RANK"] = get("NODE_RANK");
  if (!get("RANK").empty()) env["ROLE_RANK"] = get("RANK");
  if (!get("WORLD_SIZE").empty()) env["ROLE_WORLD_SIZE"] = get("WORLD_SIZE");
  // JAX's multi-controller settings: jax.distributed.initialize() with no arguments.
  if (!get("MASTER_ADDR").empty() && !get("MASTER_PORT").empty()) {
    env["JAX_COORDINATOR_ADDRESS"] = get("MASTER_ADDR") + ":" + get("MASTER_PORT");
    env["JAX_NUM_PROCESSES"] = get("WORLD_SIZE");
    env["JAX_PROCESS_ID"] = get("RANK");
  }
  std::string path = PythonModuleDir();
  env["PYTHONPATH"] = get("PYTHONPATH").empty() ? path : path + ":" + get("PYTHONPATH");
  env["PYTHONUNBUFFERED"] = "1";  // lines reach the log plane as they are printed
  env["ORRERY_TRAIN_SOCKET"] = socket;
  double beat = std::clamp(run.silence_s / 4, 0.05, 5.0);
  env["ORRERY_TRAIN_HEARTBEAT_S"] = std::to_string(beat);
  std::vector<std::string> out;
  for (const auto& [k, v] : env) out.push_back(k + "=" + v);
  return out;
}

constexpr char kSocketFolderPrefix[] = "orrery-train-";

// The listening socket in a private directory of its own (named by this process, so that a
// later run can tell it was left by a process that is gone); removed with it.
struct Listener {
  std::string dir, path;
  int fd = -1;
  Listener() {
    RemoveEndedSocketFolders("/tmp");
    std::string tmpl =
        "/tmp/" + std::string(kSocketFolderPrefix) + std::to_string(getpid()) + "-XXXXXX";
    if (!mkdtemp(tmpl.data()))
      throw Error(std::string("cannot make a directory: ") + strerror(errno));
    dir = tmpl;
    path = dir + "/train.sock";
    fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::strncpy(addr.sun_path, path.c_str(), sizeof(addr.sun_path) - 1);
    if (fd < 0 || bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
        listen(fd, 16) != 0) {
      std::string why = strerror(errno);
      Remove();
      throw Error("cannot listen on " + path + ": " + why);
    }
  }
  ~Listener() { Remove(); }
  void Remove() {
    if (fd >= 0) close(fd);
    fd = -1;
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
  }
};

}  // namespace

void RemoveEndedSocketFolders(const std::string& root) {
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(root, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind(kSocketFolderPrefix, 0) != 0) continue;
    const std::string rest = name.substr(sizeof(kSocketFolderPrefix) - 1);
    const size_t dash = rest.find('-');
    if (dash == 0 || dash == std::string::npos || dash > 9 ||
        rest.find_first_not_of("0123456789") != dash)
      continue;
    const pid_t pid = pid_t(std::stol(rest.substr(0, dash)));
    struct stat st {};
    if (lstat(entry.path().c_str(), &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != geteuid())
      continue;
    if (pid <= 0 || kill(pid, 0) == 0 || errno != ESRCH) continue;  // alive, or not ours to ask
    std::error_code gone;
    std::filesystem::remove_all(entry.path(), gone);
  }
}

namespace {

// Reads lines from a descriptor without blocking; a line past `max` is cut there.
struct LineReader {
  int fd = -1;
  std::string buf;
  // False at end of file or on an error.
  template <typename F>
  bool Drain(size_t max, F&& on_line) {
    char chunk[16384];
    while (true) {
      ssize_t n = read(fd, chunk, sizeof(chunk));
      if (n == 0) break;
      if (n < 0) return errno == EAGAIN || errno == EINTR;
      buf.append(chunk, size_t(n));
      size_t nl;
      while ((nl = buf.find('\n')) != std::string::npos || buf.size() > max) {
        size_t end = nl == std::string::npos ? max : nl;
        on_line(buf.substr(0, end));
        buf.erase(0, nl == std::string::npos ? end : end + 1);
      }
    }
    if (!buf.empty()) on_line(buf);
    buf.clear();
    return false;
  }
};

struct Child {
  pid_t pid = -1;
  bool reaped = false;
  int out = -1, err = -1;
  ~Child() {
    if (pid > 0) kill(-pid, SIGKILL);  // its group, whatever is left of it
    if (pid > 0 && !reaped) waitpid(pid, nullptr, 0);
    if (out >= 0) close(out);
    if (err >= 0) close(err);
  }
};

void Spawn(const EntrypointRun& run, const std::string& socket, Child* c) {
  std::vector<std::string> env = ChildEnvironment(run, socket);
  std::vector<char*> argv, envp;
  for (const auto& a : run.argv) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  for (auto& e : env) envp.push_back(e.data());
  envp.push_back(nullptr);
  int out[2], err[2];
  if (pipe2(out, O_CLOEXEC) != 0) throw Error(std::string("pipe: ") + strerror(errno));
  if (pipe2(err, O_CLOEXEC) != 0) {
    close(out[0]);
    close(out[1]);
    throw Error(std::string("pipe: ") + strerror(errno));
  }
  pid_t parent = getpid();
  pid_t pid = fork();
  if (pid == 0) {  // only async-signal-safe calls from here
    setpgid(0, 0);
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(127);
    dup2(out[1], 1);
    dup2(err[1], 2);
    if (!run.working_dir.empty() && chdir(run.working_dir.c_str()) != 0) {
      const char msg[] = "orrery: cannot enter the entrypoint's working_dir\n";
      (void)!write(2, msg, sizeof(msg) - 1);
      _exit(126);
    }
    execvpe(argv[0], argv.data(), envp.data());
    const char msg[] = "orrery: the entrypoint could not be started (execvp failed)\n";
    (void)!write(2, msg, sizeof(msg) - 1);
    _exit(127);
  }
  close(out[1]);
  close(err[1]);
  c->out = out[0];
  c->err = err[0];
  if (pid < 0) throw Error(std::string("fork: ") + strerror(errno));
  c->pid = pid;
  fcntl(c->out, F_SETFL, O_NONBLOCK);
  fcntl(c->err, F_SETFL, O_NONBLOCK);
}

std::string Describe(int status) {
  if (WIFEXITED(status)) return "exited with status " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) {
    int sig = WTERMSIG(status);
    const char* name = sigabbrev_np(sig);
    return "was killed by signal " + std::to_string(sig) +
           (name ? std::string(" (SIG") + name + ")" : "");
  }
  return "ended (status " + std::to_string(status) + ")";
}

// One connection from the process (the module connects once; a script may open more).
struct Connection {
  LineReader in;
  std::string pending;   // answers not written yet
  bool closing = false;  // sent a line past the bound: closed once answered
};

class Server {
 public:
  Server(Context& ctx, const EntrypointRun& run) : ctx_(ctx), run_(run) {}

  void Serve();

 private:
  void Accept();
  // False when the connection is to be closed.
  bool Talk(Connection& c);
  void Output(LineReader& r, bool is_err);
  [[noreturn]] void Fail(const std::string& what);

  Context& ctx_;
  const EntrypointRun& run_;
  Listener listener_;
  Child child_;
  std::vector<std::unique_ptr<Connection>> conns_;
  std::deque<std::string> tail_;
  LineReader out_, err_;
  double last_heard_ = Now();
};

void Server::Fail(const std::string& what) {
  std::string msg = "rank " + std::to_string(ctx_.WorldRank()) + "'s process (" + run_.argv[0] +
                    ", pid " + std::to_string(child_.pid) + ") on host " + run_.hostname + " " +
                    what;
  if (!tail_.empty()) {
    msg += "; the last lines of its stderr:";
    for (const auto& l : tail_) msg += "\n  " + l;
  }
  throw ProcessFailed(msg);
}

void Server::Output(LineReader& r, bool is_err) {
  std::string prefix = "[rank " + std::to_string(ctx_.WorldRank()) + "] ";
  auto emit = [&](const std::string& line) {
    (is_err ? std::cerr : std::cout) << prefix << line << std::endl;
    if (!is_err) return;
    tail_.push_back(line.substr(0, 1024));
    if (tail_.size() > kTailLines) tail_.pop_front();
  };
  if (!r.Drain(kMaxOutputLine, emit) && r.fd >= 0) {
    close(r.fd);
    r.fd = -1;
  }
}

void Server::Accept() {
  while (true) {
    int fd = accept4(listener_.fd, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd < 0) return;
    if (conns_.size() >= kMaxConnections) {
      close(fd);
      continue;
    }
    auto c = std::make_unique<Connection>();
    c->in.fd = fd;
    conns_.push_back(std::move(c));
  }
}

bool Server::Talk(Connection& c) {
  bool open = c.closing || c.in.Drain(kMaxLine, [&](const std::string& line) {
    if (c.closing) return;
    last_heard_ = Now();
    if (line.size() >= kMaxLine) {
      c.pending += R"({"error":"a request line is longer than 1 MiB"})"
                   "\n";
      c.closing = true;
      return;
    }
    c.pending += AnswerRequest(ctx_, line) + "\n";
  });
  while (!c.pending.empty()) {
    ssize_t n = send(c.in.fd, c.pending.data(), c.pending.size(), MSG_NOSIGNAL);
    if (n < 0) return errno == EAGAIN && c.pending.size() < 4 * kMaxLine;
    c.pending.erase(0, size_t(n));
  }
  return open && !c.closing;
}

void Server::Serve() {
  Spawn(run_, listener_.path, &child_);
  out_.fd = child_.out;
  err_.fd = child_.err;
  child_.out = child_.err = -1;  // the readers own them now
  while (true) {
    std::vector<pollfd> fds{{listener_.fd, POLLIN, 0}, {out_.fd, POLLIN, 0}, {err_.fd, POLLIN, 0}};
    for (auto& c : conns_)
      fds.push_back({c->in.fd, short(POLLIN | (c->pending.empty() ? 0 : POLLOUT)), 0});
    poll(fds.data(), fds.size(), kTickMs);
    Accept();
    Output(out_, false);
    Output(err_, true);
    for (size_t i = 0; i < conns_.size();) {
      if (Talk(*conns_[i])) {
        ++i;
        continue;
      }
      close(conns_[i]->in.fd);
      conns_.erase(conns_.begin() + long(i));
    }
    int status = 0;
    if (waitpid(child_.pid, &status, WNOHANG) == child_.pid) {
      child_.reaped = true;
      kill(-child_.pid, SIGKILL);  // what it left in its group goes with it
      Output(out_, false);
      Output(err_, true);
      if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return;
      Fail(Describe(status));
    }
    if (Now() - last_heard_ > run_.silence_s) {
      char buf[64];
      std::snprintf(buf, sizeof(buf), "%g", run_.silence_s);
      Fail(std::string("was silent (no report and no heartbeat) for ") + buf +
           " s (TorchConfig.timeout_s)");
    }
  }
}

}  // namespace

std::string AnswerRequest(Context& ctx, const std::string& line) {
  nlohmann::json out = nlohmann::json::object();
  try {
    auto req = nlohmann::json::parse(line);
    if (!req.is_object() || !req.contains("op") || !req["op"].is_string())
      return R"({"error":"a request is a JSON object with a string \"op\""})";
    const std::string op = req["op"];
    if (op == "hello" || op == "heartbeat") {
      out["ok"] = true;
    } else if (op == "get_checkpoint") {
      auto c = ctx.GetCheckpoint();
      out["checkpoint"] = c ? nlohmann::json(c->Path()) : nlohmann::json(nullptr);
    } else if (op == "get_context") {
      out["context"] = {{"world_rank", ctx.WorldRank()}, {"local_rank", ctx.LocalRank()},
                        {"world_size", ctx.WorldSize()}, {"local_world_size", ctx.LocalWorldSize()},
                        {"node_rank", ctx.NodeRank()},   {"storage_path", ctx.RunPath()},
                        {"trial_name", ctx.RunName()},   {"mesh_shape", ctx.Mesh().shape},
                        {"device", ctx.Device()},        {"train_loop_config", ctx.Config()}};
    } else if (op == "report") {
      Metrics metrics;
      if (!req.contains("metrics") || !req["metrics"].is_object())
        return R"({"error":"report: metrics must be an object"})";
      for (const auto& [k, v] : req["metrics"].items()) {
        if (v.is_number()) metrics[k] = v.get<double>();
        if (v.is_boolean()) metrics[k] = v.get<bool>() ? 1 : 0;
      }
      if (req.contains("checkpoint_dir") && req["checkpoint_dir"].is_string()) {
        ctx.Report(metrics, Checkpoint(req["checkpoint_dir"].get<std::string>()));
      } else {
        ctx.Report(metrics);
      }
      out["ok"] = true;
    } else {
      out["error"] = "unknown op '" + op + "'";
    }
  } catch (const std::exception& e) {
    out = {{"error", e.what()}};
  }
  return out.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

std::string PythonModuleDir() {
  if (const char* p = std::getenv("ORRERY_PYTHON_PATH"); p && *p) return p;
  namespace fs = std::filesystem;
  std::error_code ec;
  // Beside the library (or executable) this code runs from: an installed tree moved to
  // another prefix still finds its own copy.
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&PythonModuleDir), &info) && info.dli_fname) {
    fs::path near = fs::path(info.dli_fname).parent_path().parent_path() / "share/orrery/python";
    if (fs::exists(near / "orrery_train", ec)) return near.string();
  }
  if (fs::exists(ORRERY_PYTHON_INSTALL_DIR "/orrery_train", ec)) return ORRERY_PYTHON_INSTALL_DIR;
  return ORRERY_PYTHON_SOURCE_DIR;
}

void RunEntrypoint(Context& ctx, const EntrypointRun& run) {
  if (run.argv.empty() || run.argv[0].empty()) throw ConfigError("Entrypoint: argv is empty");
  Server server(ctx, run);
  server.Serve();
}

}  // namespace orrery::train::internal
