#include "cli/src/job_cmd.h"

#include <sys/stat.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <fstream>
#include <iostream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <random>
#include <thread>

#include "cli/src/head_request.h"
#include "cli/src/log_reader.h"
#include "core/internal/file_hash.h"
#include "core/internal/folder_pack.h"
#include "core/internal/redis_store.h"
#include "core/internal/runtime_env.h"
#include "core/internal/text.h"
#include "orrery/resources.h"

namespace orrery::cli {

namespace {

using proto::MsgType;

constexpr int kSubmitTimeoutMs = 30000;
constexpr int kUploadTimeoutMs = 120000;
// After a job ended, its last lines may reach Redis a moment after its state: the stream is
// read until it has been quiet this long.
constexpr int kQuietMs = 1000;

int Fail(const std::string& what, const std::string& message) {
  std::cerr << "orrery " << what << ": " << message << "\n";
  return 2;
}

std::string NewSubmissionId() {
  std::random_device rd;
  char buf[32];
  std::snprintf(buf, sizeof(buf), "job_%08x%08x", rd(), rd());
  return buf;
}

Result<Resources> ParseResourcesJson(const std::string& text) {
  Resources r;
  if (text.empty()) return r;
  try {
    auto j = nlohmann::json::parse(text);
    if (!j.is_object()) throw std::runtime_error("not a JSON object");
    for (const auto& [k, v] : j.items()) {
      if (!v.is_number()) throw std::runtime_error("the amount of '" + k + "' is not a number");
      r[k] = v.get<double>();
    }
  } catch (const std::exception& e) {
    return orrery::Status::InvalidArgument(
        "--resources: expected a JSON object of amounts such as "
        "'{\"CPU\": 1}': " +
        std::string(e.what()));
  }
  if (orrery::Status s = ValidateResources(r); !s.ok())
    return orrery::Status::InvalidArgument("--resources: " + s.message());
  return r;
}

Result<Labels> ParseLabelFlags(const std::vector<std::string>& flags) {
  Labels out;
  for (const auto& f : flags) {
    size_t eq = f.find('=');
    if (eq == 0 || eq == std::string::npos)
      return orrery::Status::InvalidArgument("--label: expected key=value, got '" + f + "'");
    out[f.substr(0, eq)] = f.substr(eq + 1);
  }
  return out;
}

std::string HeadAddress(const InspectFlags& f) {
  return f.address.find("://") == std::string::npos ? "tcp://" + f.address : f.address;
}

// The job's record from Redis; NotFound when there is none.
Result<nlohmann::json> Record(RedisReader& redis, const std::string& id) {
  auto text = redis.Record("submissions", id);
  if (!text.ok()) return text.status();
  try {
    return nlohmann::json::parse(text.value());
  } catch (const std::exception& e) {
    return orrery::Status::Internal("the record of job " + id + " is not JSON");
  }
}

bool Ended(const std::string& state) {
  return state == "SUCCEEDED" || state == "FAILED" || state == "STOPPED";
}

int ExitCodeOf(const nlohmann::json& r) {
  std::string state = r.value("state", "");
  if (state == "SUCCEEDED") return 0;
  if (r.contains("exit_code") && r["exit_code"].is_number_integer()) {
    int code = r["exit_code"].get<int>();
    return code == 0 ? 1 : code;
  }
  return 1;
}

void PrintEntry(const LogEntry& e, bool with_prefix) {
  auto it = e.fields.find("stream");
  bool err = it != e.fields.end() && it->second == "stderr";
  (err ? std::cerr : std::cout) << FormatLogEntry(e, with_prefix) << std::flush;
}

// Prints the stream's entries after *after; with `follow`, until `done()` holds and the
// stream has been quiet for kQuietMs (or forever when done is empty). `done` is asked about
// every 100 ms, whether or not lines come. Filters by `keep`.
orrery::Status Pump(RedisReader& redis, const std::string& stream, std::string* after, bool follow,
                    const std::function<bool()>& done,
                    const std::function<bool(const LogEntry&)>& keep, bool with_prefix) {
  using Clock = std::chrono::steady_clock;
  auto quiet_since = Clock::now(), asked = Clock::now() - std::chrono::seconds(1);
  bool finished = false;
  while (true) {
    auto entries = redis.Read(stream, *after, 1000, follow ? 100 : 0);
    if (!entries.ok()) return entries.status();
    for (const auto& e : entries.value()) {
      *after = e.id;
      if (keep(e)) PrintEntry(e, with_prefix);
    }
    if (!entries.value().empty()) quiet_since = Clock::now();
    if (!follow && entries.value().empty()) return orrery::Status::Ok();
    if (follow && done && !finished && Clock::now() - asked >= std::chrono::milliseconds(100)) {
      finished = done();
      asked = Clock::now();
      // Lines written just before the end may still be on their way: wait for a quiet
      // window counted from the end, not from before it.
      if (finished) quiet_since = Clock::now();
    }
    if (finished && Clock::now() - quiet_since > std::chrono::milliseconds(kQuietMs))
      return orrery::Status::Ok();
  }
}

Result<std::unique_ptr<RedisReader>> ConnectRedis(const InspectFlags& f) {
  if (f.redis_address.empty())
    return orrery::Status::InvalidArgument(
        "the cluster's Redis is not known on this host: pass --redis-address HOST:PORT");
  return RedisReader::Connect(f.redis_address, f.redis_password);
}

// The driver's runtime env from --env K=V and --working-dir (made absolute, and required to
// be a folder here).
Result<proto::RuntimeEnvMsg> JobRuntimeEnv(const std::vector<std::string>& vars,
                                           const std::string& working_dir) {
  proto::RuntimeEnvMsg env;
  for (const auto& kv : vars) {
    size_t eq = kv.find('=');
    if (eq == std::string::npos || eq == 0)
      return orrery::Status::InvalidArgument("--env " + kv + ": expected NAME=VALUE");
    env.env_vars[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  if (!working_dir.empty()) {
    auto folder = runtime_env::LocalFolder(working_dir);
    if (!folder.ok())
      return orrery::Status::InvalidArgument("--working-dir " + folder.status().message());
    env.working_dir = folder.value();
  }
  if (orrery::Status s = runtime_env::Check(env); !s.ok()) return s;
  return env;
}

// Stores `bytes` on the head: the executable `put` names, or a working_dir's package.
orrery::Status Upload(const std::string& head, const proto::BinaryMsg& put,
                      const std::string& bytes, const std::string& what) {
  auto ack =
      Ask<proto::AckMsg>(head, MsgType::kPutBinary, put, MsgType::kAck, kUploadTimeoutMs, &bytes);
  if (!ack.ok()) return ack.status();
  if (!ack->ok)
    return orrery::Status::Internal("the head refused the " + what + ": " + ack->message);
  return orrery::Status::Ok();
}

// Sends the submission, uploading the executable and the working_dir's package when the
// head lacks them.
Result<std::string> Submit(JobCommands& c, const std::string& path) {
  auto resources = ParseResourcesJson(c.resources_json);
  if (!resources.ok()) return resources.status();
  auto labels = ParseLabelFlags(c.labels);
  if (!labels.ok()) return labels.status();
  proto::SubmitJobMsg m;
  m.submission_id = NewSubmissionId();
  m.argv = c.command;
  m.binary_hash = HashFile(path);
  if (m.binary_hash.empty()) return orrery::Status::InvalidArgument("cannot read " + path);
  m.arch = MachineArch();
  m.resources = resources.value();
  m.label_selector = labels.value();
  auto runtime_env = JobRuntimeEnv(c.env, c.working_dir);
  if (!runtime_env.ok()) return runtime_env.status();
  m.runtime_env = runtime_env.value();
  // The driver may start on another host: its working_dir goes by way of the head.
  folder_pack::Packed package;
  if (const std::string& dir = m.runtime_env.working_dir; !dir.empty()) {
    auto scan = folder_pack::Fingerprint(dir);
    if (!scan.ok())
      return orrery::Status::InvalidArgument("--working-dir: " + scan.status().message());
    if (scan.value().too_big) {
      std::cerr << "orrery job submit: warning: --working-dir " << dir
                << " is too big to ship; the node must see it at that path\n";
    } else {
      auto packed = folder_pack::Pack(dir);
      if (!packed.ok())
        return orrery::Status::InvalidArgument("--working-dir: " + packed.status().message());
      package = std::move(packed.value());
      if (package.skipped > 0)
        std::cerr << "orrery job submit: warning: " << package.skipped
                  << " link(s) or special file(s) in --working-dir " << dir
                  << " are left out of what is shipped\n";
      m.runtime_env.working_dir_hash = package.hash;
      m.runtime_env.working_dir_id = folder_pack::FolderIdentity(dir);
    }
  }
  for (const auto& a : c.command) m.entrypoint += (m.entrypoint.empty() ? "" : " ") + a;
  std::string head = HeadAddress(c.flags);
  for (int attempt = 0; attempt < 2; ++attempt) {
    auto reply = Ask<proto::SubmitJobReplyMsg>(head, MsgType::kSubmitJob, m,
                                               MsgType::kSubmitJobReply, kSubmitTimeoutMs);
    if (!reply.ok()) return reply.status();
    if (!reply->error.empty()) return orrery::Status::InvalidArgument(reply->error);
    if (!reply->need_binary && !reply->need_package) return m.submission_id;
    if (reply->need_binary) {
      std::ifstream in(path, std::ios::binary);
      std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
      proto::BinaryMsg put{0, "", m.binary_hash, m.arch, true, "", m.submission_id};
      if (orrery::Status s = Upload(head, put, bytes, "executable"); !s.ok()) return s;
    }
    if (reply->need_package) {
      proto::BinaryMsg put{0, "", package.hash, "", true, "", m.submission_id};
      put.package = true;
      if (orrery::Status s = Upload(head, put, package.bytes, "working_dir"); !s.ok()) return s;
    }
  }
  return orrery::Status::Internal(
      "the head asked for the executable or the working_dir again after it was uploaded");
}

int RunSubmit(JobCommands& c) {
  if (c.command.empty())
    return Fail("job submit", "no command given: orrery job submit -- ./driver ARGS");
  const std::string& bin = c.command[0];
  struct stat st {};
  if (stat(bin.c_str(), &st) != 0 || !S_ISREG(st.st_mode) || access(bin.c_str(), X_OK) != 0)
    return Fail("job submit", "'" + bin + "' is not an executable file on this host");
  auto sid = Submit(c, bin);
  if (!sid.ok()) return Fail("job submit", sid.status().message());
  std::cerr << "orrery: job " << sid.value() << " submitted\n";
  if (c.no_wait) {
    std::cout << sid.value() << "\n";
    return 0;
  }
  auto redis = ConnectRedis(c.flags);
  if (!redis.ok()) return Fail("job submit", redis.status().message() + " (or use --no-wait)");
  std::string last_state, after = "0";
  nlohmann::json record;
  auto done = [&] {
    auto r = Record(*redis.value(), sid.value());
    if (!r.ok()) return false;
    record = r.value();
    std::string state = record.value("state", "");
    if (state != last_state) {
      std::cerr << "orrery: job " << sid.value() << " " << state << " "
                << text::EscapeControl(record.value("message", "")) << "\n";
      last_state = state;
    }
    return Ended(state);
  };
  orrery::Status s = Pump(
      *redis.value(), "job_logs:" + sid.value(), &after, true, done,
      [](const LogEntry&) { return true; }, false);
  if (!s.ok()) return Fail("job submit", s.message());
  return ExitCodeOf(record);
}

int RunStatus(JobCommands& c, RedisReader& redis) {
  auto r = Record(redis, c.id);
  if (!r.ok() && r.status().code() == StatusCode::kNotFound)
    return Fail("job status", "no job " + c.id + " (see `orrery job list`)");
  if (!r.ok()) return Fail("job status", r.status().message());
  if (c.flags.json) {
    std::cout << r->dump(2) << "\n";
  } else {
    std::cout << c.id << "  " << r->value("state", "") << "  "
              << text::EscapeControl(r->value("entrypoint", "")) << "\n  "
              << text::EscapeControl(r->value("message", "")) << "\n";
  }
  return 0;
}

int RunJobLogs(JobCommands& c, RedisReader& redis) {
  auto r = Record(redis, c.id);
  if (!r.ok() && r.status().code() == StatusCode::kNotFound)
    return Fail("job logs", "no job " + c.id + " (see `orrery job list`)");
  std::string after = "0";
  auto done = [&] {
    auto rec = Record(redis, c.id);
    return !rec.ok() || Ended(rec->value("state", ""));
  };
  orrery::Status s = Pump(
      redis, "job_logs:" + c.id, &after, c.follow, done, [](const LogEntry&) { return true; },
      false);
  return s.ok() ? 0 : Fail("job logs", s.message());
}

int RunStop(JobCommands& c) {
  proto::StopJobMsg m{0, "", c.id};
  auto ack = Ask<proto::AckMsg>(HeadAddress(c.flags), MsgType::kStopJob, m, MsgType::kAck, 10000);
  if (!ack.ok()) return Fail("job stop", ack.status().message());
  if (!ack->ok) return Fail("job stop", ack->message);
  std::cout << "stopping job " << c.id << "\n";
  return 0;
}

int RunList(JobCommands& c) {
  auto store = RedisStateStore::Connect(c.flags.redis_address, "default", c.flags.redis_password);
  if (!store.ok()) return Fail("job list", store.status().message());
  auto records = store.value()->GetAll("submissions");
  if (!records.ok()) return Fail("job list", records.status().message());
  nlohmann::json rows = nlohmann::json::array();
  for (const auto& [id, text] : records.value()) {
    try {
      rows.push_back(nlohmann::json::parse(text));
    } catch (const std::exception&) {
      rows.push_back({{"submission_id", id}, {"error", "unparsable record"}});
    }
  }
  if (c.flags.json) {
    std::cout << rows.dump(2) << "\n";
    return 0;
  }
  for (const auto& r : rows) {
    std::cout << text::EscapeControl(r.value("submission_id", "")) << "  "
              << text::EscapeControl(r.value("state", "")) << "  "
              << text::EscapeControl(r.value("entrypoint", "")) << "\n";
  }
  if (rows.empty()) std::cout << "(none)\n";
  return 0;
}

// `orrery logs`: the workers' stream, filtered; a submitted job's own stream for --job job_...
int RunClusterLogs(JobCommands& c, RedisReader& redis) {
  std::string after = "0";
  if (c.job_filter.rfind("job_", 0) == 0) {
    orrery::Status s = Pump(
        redis, "job_logs:" + c.job_filter, &after, c.follow, nullptr,
        [](const LogEntry&) { return true; }, false);
    return s.ok() ? 0 : Fail("logs", s.message());
  }
  auto matches = [](const LogEntry& e, const char* field, const std::string& want) {
    if (want.empty()) return true;
    auto it = e.fields.find(field);
    return it != e.fields.end() && !it->second.empty() && it->second.rfind(want, 0) == 0;
  };
  auto keep = [&](const LogEntry& e) {
    return matches(e, "actor", c.actor) && matches(e, "node", c.node) &&
           matches(e, "job", c.job_filter);
  };
  orrery::Status s = Pump(redis, "logs", &after, c.follow, nullptr, keep, true);
  return s.ok() ? 0 : Fail("logs", s.message());
}

}  // namespace

void AddJobCommands(CLI::App& app, JobCommands* c) {
  c->job = app.add_subcommand("job", "submit jobs to the cluster and follow them");
  c->job->require_subcommand(1);
  c->submit = c->job->add_subcommand("submit", "run a driver executable on the cluster");
  c->submit->add_option(
      "--resources", c->resources_json,
      "what the node running the driver must have free (JSON, e.g. '{\"CPU\": 1}')");
  c->submit->add_option("--label", c->labels, "a label key=value the node must carry (repeatable)");
  c->submit->add_option("--env", c->env,
                        "a variable K=V for the driver's environment (repeatable)");
  c->submit->add_option("--working-dir", c->working_dir,
                        "the folder the driver starts in (on the node's host)");
  c->submit->add_flag("--no-wait", c->no_wait, "print the job id and return at once");
  c->submit->add_option("command", c->command, "-- ./driver ARGS...")->required();
  c->status = c->job->add_subcommand("status", "a job's state and exit code");
  c->logs = c->job->add_subcommand("logs", "a job's output");
  c->stop = c->job->add_subcommand("stop", "stop a job (SIGTERM, then SIGKILL after 5 s)");
  c->list = c->job->add_subcommand("list", "every job submitted to the cluster");
  for (auto* sub : {c->status, c->logs, c->stop})
    sub->add_option("id", c->id, "the job id (job_...)")->required();
  c->logs->add_flag("--follow,-f", c->follow, "keep printing until the job ends");
  c->cluster_logs = app.add_subcommand("logs", "what workers and jobs wrote to stdout and stderr");
  c->cluster_logs->add_option("--actor", c->actor, "only this actor's (id or its start)");
  c->cluster_logs->add_option("--node", c->node, "only this node's workers (id or its start)");
  c->cluster_logs->add_option("--job", c->job_filter, "only this job's (a job id, or job_...)");
  c->cluster_logs->add_flag("--follow,-f", c->follow, "keep printing new lines");
  for (auto* sub : {c->submit, c->status, c->logs, c->stop, c->list, c->cluster_logs}) {
    sub->add_option("--address", c->flags.address,
                    "the head (host:port); default: $ORRERY_ADDRESS, else this host's session");
    sub->add_option("--redis-address", c->flags.redis_address, "the cluster's Redis (host:port)");
    sub->add_option("--redis-password-file", c->flags.redis_password_file, "its password");
    AddCredentialFlags(sub, &c->credentials);
  }
  for (auto* sub : {c->status, c->list}) sub->add_flag("--json", c->flags.json, "print JSON");
}

bool JobCommandParsed(const JobCommands& c) { return *c.job || *c.cluster_logs; }

int RunJobCommand(JobCommands& c) {
  if (orrery::Status s = FindClusterAndPassword(c.flags); !s.ok()) return Fail("job", s.message());
  if (c.flags.address.empty())
    return Fail("job", "no cluster found on this host; pass --address HOST:PORT");
  if (!Authenticate(c.credentials, c.flags.address)) return 2;
  if (*c.submit) return RunSubmit(c);
  if (*c.stop) return RunStop(c);
  if (*c.list) return RunList(c);
  auto redis = ConnectRedis(c.flags);
  if (!redis.ok()) return Fail("job", redis.status().message());
  if (*c.status) return RunStatus(c, *redis.value());
  if (*c.logs) return RunJobLogs(c, *redis.value());
  return RunClusterLogs(c, *redis.value());
}

}  // namespace orrery::cli
