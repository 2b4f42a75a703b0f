#include "node/src/job_runner.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>

#include "core/internal/clock.h"
#include "core/internal/file_hash.h"
#include "core/internal/log.h"
#include "core/internal/runtime_env.h"

extern char** environ;

namespace orrery::node {

using proto::MsgType;

namespace {

// A driver told to stop is killed (its whole process group) after this long.
constexpr double kStopGraceS = 5;
constexpr size_t kMaxJobs = 1000;
constexpr size_t kMaxJobArgs = 4096;
constexpr size_t kMaxJobArgBytes = 1 << 20;

// The working folder of a job's start, as a runtime env (no variables).
proto::RuntimeEnvMsg FolderOf(const proto::StartJobMsg& m) {
  return proto::RuntimeEnvMsg{{}, m.working_dir, m.working_dir_hash, m.working_dir_id};
}

bool ValidSubmissionId(const std::string& id) {
  return !id.empty() && id.size() <= 64 &&
         id.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789_-") == std::string::npos;
}

// How a process ended, as an exit code: its status, or 128 + the signal that killed it.
int ExitCode(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return -1;
}

std::string DescribeJobExit(int status) {
  if (WIFSIGNALED(status))
    return std::string("was killed by signal ") + std::to_string(WTERMSIG(status)) + " (" +
           strsignal(WTERMSIG(status)) + ")";
  return "exited with code " + std::to_string(ExitCode(status));
}

// In the forked driver before its exec: says `msg` on stderr and exits with `code`, with
// async-signal-safe calls only.
[[noreturn]] void ChildFails(const char* msg, int code) {
  ssize_t ignored = write(2, msg, strlen(msg));
  (void)ignored;
  _exit(code);
}

}  // namespace

JobRunner::JobRunner(JobRunnerOptions options, Outbox& outbox, ExecutableCache& executables)
    : options_(std::move(options)), outbox_(outbox), executables_(executables) {}

void JobRunner::SendEvent(const std::string& submission_id, proto::JobEventKind kind, int pid,
                          int exit_code, const std::string& cause) {
  proto::JobEventMsg ev;
  ev.kind = int(kind);
  ev.submission_id = submission_id;
  ev.node_id = options_.node_id;
  ev.node_secret = options_.node_secret;
  ev.pid = pid;
  ev.exit_code = exit_code;
  ev.cause = cause;
  if (kind != proto::JobEventKind::kStarted) ended_.Add(submission_id);
  events_.Send(std::move(ev), MonotonicSeconds());
}

void JobRunner::OnStart(const proto::StartJobMsg& m, const std::string& reply_to) {
  if (!ValidSubmissionId(m.submission_id)) {
    LOG_WARN("node: ignored a job start with a malformed submission id");
    return;
  }
  // A resend: it runs, or ran, already.
  if (jobs_.count(m.submission_id) || ended_.Contains(m.submission_id)) return;
  auto refuse = [&](const std::string& why) {
    SendEvent(m.submission_id, proto::JobEventKind::kFailedToStart, 0, -1, why);
  };
  size_t arg_bytes = 0;
  for (const auto& a : m.argv) arg_bytes += a.size();
  for (const auto& [k, v] : m.env) arg_bytes += k.size() + v.size();
  if (m.argv.empty() || m.argv.size() > kMaxJobArgs || arg_bytes > kMaxJobArgBytes)
    return refuse("the job's command line is empty or too long");
  if (!IsContentHash(m.binary_hash))
    return refuse("the job's executable hash is not a SHA-256 (64 lowercase hex characters)");
  if (!m.arch.empty() && m.arch != MachineArch())
    return refuse("node " + options_.node_name + " runs on " + MachineArch() +
                  ", but the job's executable is built for " + m.arch);
  if (jobs_.size() >= kMaxJobs) return refuse("node runs too many jobs already");
  if (Status s = runtime_env::Check(FolderOf(m)); !s.ok()) return refuse(s.message());
  if (!m.working_dir.empty() && m.working_dir_hash.empty()) {
    if (std::string problem = runtime_env::FolderProblem(m.working_dir); !problem.empty())
      return refuse("the job's working_dir " + problem + " on node " + options_.node_name);
  }
  JobProcess& j = jobs_[m.submission_id];
  j.start = m;
  j.reply_to = reply_to;
  Prepare(j);
}

void JobRunner::Prepare(JobProcess& j) {
  const proto::StartJobMsg& m = j.start;
  if (j.working_dir.empty() && !m.working_dir.empty()) {
    j.working_dir = executables_.WorkingFolder(FolderOf(m), kWaiter + m.submission_id, j.reply_to);
    if (j.working_dir.empty()) return;  // OnExecutable goes on
  }
  std::string local =
      executables_.Vouched(m.binary_hash) ? executables_.LocalExecutable("", m.binary_hash) : "";
  if (!local.empty()) return Launch(j, local);
  executables_.Await(m.binary_hash, "", kWaiter + m.submission_id, j.reply_to);
}

void JobRunner::OnExecutable(const std::string& submission_id, const std::string& hash,
                             bool package, const std::string& error) {
  auto it = jobs_.find(submission_id);
  if (it == jobs_.end() || it->second.pid != 0) return;
  JobProcess& j = it->second;
  bool missing = !package && executables_.LocalExecutable("", hash).empty();
  if (!error.empty() || missing) {
    SendEvent(submission_id, proto::JobEventKind::kFailedToStart, 0, -1,
              std::string(package ? "the job's working_dir" : "the job's executable") +
                  " could not be fetched from the head" +
                  (error.empty() ? std::string() : ": " + error));
    jobs_.erase(it);
    return;
  }
  Prepare(j);
}

void JobRunner::Launch(JobProcess& j, const std::string& path) {
  const std::string& sid = j.start.submission_id;
  std::string cwd = j.working_dir;
  if (cwd.empty()) {
    cwd = options_.log_dir + "/../jobs/" + sid;
    std::error_code ec;
    std::filesystem::create_directories(cwd, ec);
  }
  std::string stem = options_.log_dir + "/job-" + sid;
  std::string out_path = stem + ".out", err_path = stem + ".err";
  // Everything the child needs is made before fork(): after it, only async-signal-safe calls.
  std::vector<std::string> args = j.start.argv;
  args[0] = path;
  std::map<std::string, std::string> env;
  for (char** e = environ; *e; ++e) {
    std::string kv = *e;
    size_t eq = kv.find('=');
    if (eq == std::string::npos) continue;
    std::string key = kv.substr(0, eq);
    // The node's own role and sockets are not the driver's.
    if (key.rfind("ORRERY_", 0) == 0 && key != "ORRERY_TMPDIR") continue;
    env[key] = kv.substr(eq + 1);
  }
  for (const auto& [k, v] : options_.env) env[k] = v;  // credentials, tunables
  for (const auto& [k, v] : j.start.env) env[k] = v;
  env["ORRERY_SUBMISSION_ID"] = sid;  // also how KillAll finds its processes without cgroups
  std::vector<std::string> env_strings;
  for (const auto& [k, v] : env) env_strings.push_back(k + "=" + v);
  std::vector<char*> argv, envp;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  for (auto& e : env_strings) envp.push_back(e.data());
  envp.push_back(nullptr);
  std::string cgroup = cgroups_ ? cgroups_->Make("job-" + sid) : "";
  int procs = cgroup.empty() ? -1 : OpenCgroupProcs(cgroup);
  pid_t self = getpid();
  pid_t pid = fork();
  if (pid == 0) {
    setpgid(0, 0);       // `orrery job stop` signals the driver's whole group
    EnterCgroup(procs);  // and its end kills everything the driver started
    // The node daemon blocks its stop signals and ignores SIGPIPE; exec keeps both, and the
    // driver must start as any program does (SIGTERM from `orrery job stop` must reach it).
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);
    signal(SIGPIPE, SIG_DFL);
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != self) _exit(127);
    int out = open(out_path.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    int err = open(err_path.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (out >= 0) dup2(out, 1);
    if (err >= 0) dup2(err, 2);
    int devnull = open("/dev/null", O_RDONLY);
    if (devnull >= 0) dup2(devnull, 0);
    if (chdir(cwd.c_str()) != 0) ChildFails("orrery: cannot change into the job's folder\n", 126);
    execve(argv[0], argv.data(), envp.data());
    ChildFails("orrery: the job's executable could not be started\n", 127);
  }
  if (procs >= 0) close(procs);
  if (pid < 0) {
    std::string why = std::string("fork: ") + std::strerror(errno);
    if (cgroups_) cgroups_->End("job-" + sid);
    SendEvent(sid, proto::JobEventKind::kFailedToStart, 0, -1, why);
    jobs_.erase(sid);
    return;
  }
  j.pid = pid;
  j.wall_started = WallSeconds();
  proto::LogLinesMsg source;
  source.submission_id = sid;
  source.name = "driver";
  if (logs_) logs_->Watch(pid, stem, source);
  LOG_INFO("node: started job " + sid + " as pid " + std::to_string(pid));
  SendEvent(sid, proto::JobEventKind::kStarted, pid, 0, "");
}

void JobRunner::OnStop(const proto::StopJobMsg& m) {
  auto it = jobs_.find(m.submission_id);
  if (it == jobs_.end()) return;
  JobProcess& j = it->second;
  if (j.pid == 0) {  // still waiting for its executable
    SendEvent(m.submission_id, proto::JobEventKind::kFailedToStart, 0, -1,
              "stopped before it started");
    jobs_.erase(it);
    return;
  }
  if (!j.stop_requested) {
    j.stop_requested = true;
    j.stop_since = MonotonicSeconds();
    kill(-j.pid, SIGTERM);
  }
}

void JobRunner::Check() {
  double now = MonotonicSeconds();
  for (auto it = jobs_.begin(); it != jobs_.end();) {
    JobProcess& j = it->second;
    int status = 0;
    if (j.pid > 0 && waitpid(j.pid, &status, WNOHANG) == j.pid) {
      KillAll(it->first, j.pid);  // what the driver left behind goes with it
      if (logs_) logs_->Finish(j.pid);
      std::string cause =
          (j.stop_requested ? "stopped: its driver " : "its driver ") + DescribeJobExit(status);
      SendEvent(it->first, proto::JobEventKind::kExited, j.pid, ExitCode(status), cause);
      it = jobs_.erase(it);
      continue;
    }
    if (j.pid > 0 && j.stop_requested && now - j.stop_since > kStopGraceS)
      KillAll(it->first, j.pid);
    ++it;
  }
}

void JobRunner::KillAll(const std::string& submission_id, int pid) {
  kill(-pid, SIGKILL);
  if (cgroups_) return cgroups_->End("job-" + submission_id);
  // Without cgroups, what left the driver's process group (setsid) is found by the
  // submission id in its environment; it was re-parented to init (or a subreaper), which
  // reaps it.
  for (int p : ProcessesWithEnv("ORRERY_SUBMISSION_ID=" + submission_id)) kill(p, SIGKILL);
}

void JobRunner::List(proto::ListWorkersReplyMsg* reply) const {
  for (const auto& [sid, j] : jobs_) {
    if (reply->workers.size() >= proto::kMaxListedWorkers) {
      reply->truncated = true;
      break;
    }
    proto::WorkerInfoMsg info;
    info.pid = j.pid;
    info.kind = "job";
    info.state = j.stop_requested ? "STOPPING" : j.pid > 0 ? "BUSY" : "STARTING";
    info.name = "driver";
    info.job_id = sid;  // a submitted job is known by its submission id
    info.start_time = j.wall_started;
    reply->workers.push_back(std::move(info));
  }
}

void JobRunner::StopAll() {
  for (auto& [sid, j] : jobs_) {
    if (j.pid <= 0) continue;
    KillAll(sid, j.pid);
    int status = 0;
    waitpid(j.pid, &status, 0);
  }
  jobs_.clear();
}

}  // namespace orrery::node
