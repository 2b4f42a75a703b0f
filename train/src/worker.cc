// The SPMD worker actor of a training group, and the Context its loop sees.
//
// The trainer creates one TrainWorker per worker (in its placement group's bundle), asks
// each where it runs (Info), then Starts them all: Start sets the process environment,
// connects the collective group and runs the loop on a thread of its own, so the actor
// keeps answering Poll, through which the trainer collects reports and the loop's end.
#include "train/src/worker.h"

#include <cxxabi.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <deque>
#include <filesystem>
#include <thread>

#include "core/internal/clock.h"
#include "core/internal/error_kind.h"
#include "core/internal/thread_annotations.h"
#include "orrery/orrery.h"
#include "orrery/train/trainer.h"
#include "train/src/checkpoint_manager.h"
#include "train/src/collective.h"
#include "train/src/entrypoint_process.h"
#include "train/src/port_reservation.h"

namespace orrery::train::internal {

namespace {

std::string Demangle(const char* name) {
  int status = 0;
  char* d = abi::__cxa_demangle(name, nullptr, nullptr, &status);
  std::string out = status == 0 && d ? d : name;
  std::free(d);
  return out;
}

std::string Hostname() {
  char buf[256] = {0};
  if (gethostname(buf, sizeof(buf) - 1) != 0) return "";
  return buf;
}

}  // namespace

// Where the loop's reports go: the worker actor's queue.
class ReportSink {
 public:
  void Push(ReportMsg r) EXCLUDES(mu_) {
    MutexLock lock(&mu_);
    reports_.push_back(std::move(r));
    cv_.NotifyAll();
  }
  void Finish(bool failed, std::string type, std::string message, bool process_failed = false)
      EXCLUDES(mu_) {
    MutexLock lock(&mu_);
    done_ = true;
    failed_ = failed;
    process_failed_ = process_failed;
    error_type_ = std::move(type);
    error_message_ = std::move(message);
    cv_.NotifyAll();
  }
  bool Done() EXCLUDES(mu_) {
    MutexLock lock(&mu_);
    return done_;
  }
  // Reports after `after` (dropping older ones: the caller has them), waiting up to
  // timeout_ms for something new.
  PollReplyMsg Poll(int64_t after, int timeout_ms) EXCLUDES(mu_) {
    MutexLock lock(&mu_);
    while (!reports_.empty() && reports_.front().index <= after) reports_.pop_front();
    auto deadline =
        std::chrono::steady_clock::now() + std::chrono::milliseconds(std::max(0, timeout_ms));
    while (reports_.empty() && !done_ && cv_.WaitUntil(&mu_, deadline)) {
    }
    PollReplyMsg out;
    out.reports.assign(reports_.begin(), reports_.end());
    out.done = done_;
    out.failed = failed_;
    out.error_type = error_type_;
    out.error_message = error_message_;
    out.process_failed = process_failed_;
    return out;
  }

 private:
  Mutex mu_;
  CondVar cv_;
  std::deque<ReportMsg> reports_ GUARDED_BY(mu_);
  bool done_ GUARDED_BY(mu_) = false;
  bool failed_ GUARDED_BY(mu_) = false;
  bool process_failed_ GUARDED_BY(mu_) = false;
  std::string error_type_ GUARDED_BY(mu_);
  std::string error_message_ GUARDED_BY(mu_);
};

namespace {

class ContextImpl : public GroupCollectives {
 public:
  ContextImpl(const WorkerStartMsg& m, CollectiveGroup* group, ReportSink* sink)
      : GroupCollectives(group), m_(m), sink_(sink), next_report_(m.report_offset) {
    mesh_.shape = m.mesh_shape;
    mesh_.axis_names = m.mesh_axis_names;
    int devices = 1;
    for (int d : m.mesh_shape) devices *= d;
    for (int d = 0; d < devices; ++d) mesh_.device_ids.push_back(d);
    mesh_.local_device_ids = m.mesh_local_device_ids;
    mesh_.local_coordinates = m.mesh_local_coordinates;
    if (!m.config_json.empty()) config_ = nlohmann::json::parse(m.config_json);
  }

  int WorldRank() const override { return m_.rank; }
  int WorldSize() const override { return m_.world_size; }
  int LocalRank() const override { return m_.local_rank; }
  int LocalWorldSize() const override { return m_.local_world_size; }
  int NodeRank() const override { return m_.node_rank; }
  const std::string& Device() const override { return m_.device; }
  const DeviceMesh& Mesh() const override { return mesh_; }
  const nlohmann::json& Config() const override { return config_; }
  const std::map<std::string, std::string>& Environment() const override { return m_.env; }
  const std::string& RunName() const override { return m_.run_name; }
  const std::string& RunPath() const override { return m_.run_path; }

  void Report(const Metrics& metrics) override { Report(metrics, Checkpoint()); }

  void Report(const Metrics& metrics, const Checkpoint& checkpoint) override {
    ReportMsg r;
    r.index = next_report_++;
    r.metrics = metrics;
    r.time = WallSeconds();
    if (!checkpoint.Empty()) r.checkpoint_path = Persist(checkpoint, r.index);
    sink_->Push(std::move(r));
  }

  std::optional<Checkpoint> GetCheckpoint() const override {
    if (m_.checkpoint_path.empty()) return std::nullopt;
    return Checkpoint(m_.checkpoint_path);
  }

 private:
  // Copies the checkpoint directory to <run path>/checkpoint_<index> (every worker that
  // passes one merges its files into the same directory).
  std::string Persist(const Checkpoint& checkpoint, int64_t index) {
    namespace fs = std::filesystem;
    std::error_code ec;
    if (!fs::is_directory(checkpoint.Path(), ec)) {
      throw Error("Report: the checkpoint " + checkpoint.Path() + " is not a directory");
    }
    fs::path dest = fs::path(m_.run_path) / CheckpointDirName(index);
    if (fs::weakly_canonical(checkpoint.Path(), ec) == fs::weakly_canonical(dest, ec))
      return dest.string();
    fs::create_directories(dest, ec);
    if (ec) throw Error("Report: cannot create " + dest.string() + ": " + ec.message());
    fs::copy(checkpoint.Path(), dest,
             fs::copy_options::recursive | fs::copy_options::overwrite_existing, ec);
    if (ec)
      throw Error("Report: cannot copy the checkpoint to " + dest.string() + ": " + ec.message());
    return dest.string();
  }

  WorkerStartMsg m_;
  ReportSink* sink_;
  int64_t next_report_;
  DeviceMesh mesh_;
  nlohmann::json config_;
};

}  // namespace

struct TrainWorker::State {
  CollectiveGroup group;
  std::string address;
  // The port offered as MASTER_PORT (rank 0's is used), held until the worker goes: the
  // store is started by the loop, if at all, and the worker cannot tell when it is up;
  // holding it costs one socket and does not stop the store from binding it.
  PortReservation master_port;
  bool started = false;
  ReportSink sink;
  std::thread loop;
};

TrainWorker* TrainWorker::Create() { return new TrainWorker(); }

TrainWorker::TrainWorker() : s_(std::make_unique<State>()) {}

TrainWorker::~TrainWorker() {
  if (!s_->loop.joinable()) return;
  if (s_->sink.Done()) {
    s_->loop.join();
  } else {
    // The loop may be blocked in a collective and the process is about to go: do not wait,
    // and leave the state to the detached thread.
    s_->loop.detach();
    (void)s_.release();
  }
}

WorkerInfoMsg TrainWorker::Info() {
  RuntimeContext rc = GetRuntimeContext();
  WorkerInfoMsg info;
  info.node_id = rc.node_id;
  info.node_ip = rc.node_ip.empty() ? "127.0.0.1" : rc.node_ip;
  info.hostname = Hostname();
  info.pid = int(getpid());
  info.accelerator_ids = rc.accelerator_ids;
  if (s_->address.empty()) {
    auto bound = s_->group.Bind(info.node_ip);
    if (!bound.ok()) throw Error(bound.status().message());
    s_->address = bound.value();
    Status reserved = s_->master_port.Reserve();
    if (!reserved.ok()) throw Error(reserved.message());
  }
  info.collective_address = s_->address;
  info.free_port = s_->master_port.port();
  return info;
}

bool TrainWorker::Start(WorkerStartMsg m) {
  if (s_->started) return true;  // a resent call
  s_->started = true;
  for (const auto& [k, v] : m.env) setenv(k.c_str(), v.c_str(), 1);
  s_->group.Connect(m.rank, m.peers, m.timeout_s);
  State* s = s_.get();
  s_->loop = std::thread([s, m = std::move(m)] { RunLoop(s->group, s->sink, m); });
  return true;
}

PollReplyMsg TrainWorker::Poll(int64_t after, int timeout_ms) {
  return s_->sink.Poll(after, timeout_ms);
}

void TrainWorker::RunLoop(CollectiveGroup& group, ReportSink& sink, const WorkerStartMsg& m) {
  if (!m.entrypoint_argv.empty()) return RunProcess(group, sink, m);
  auto loop = orrery::internal::FindLocalFunction<TrainLoop>(m.loop_name);
  if (loop == nullptr) {
    sink.Finish(true, proto::ErrorKindName(proto::ErrorKind::kFunctionNotFoundError),
                "the train loop " + m.loop_name + " is not registered in this worker's executable");
    return;
  }
  try {
    ContextImpl ctx(m, &group, &sink);
    loop(ctx);
    sink.Finish(false, "", "");
  } catch (const Error& e) {
    sink.Finish(true, e.kind(), e.what());
  } catch (const std::exception& e) {
    sink.Finish(true, Demangle(typeid(e).name()), e.what());
  } catch (...) {
    sink.Finish(true, "unknown", "the loop threw something that is not a std::exception");
  }
}

void TrainWorker::RunProcess(CollectiveGroup& group, ReportSink& sink, const WorkerStartMsg& m) {
  EntrypointRun run;
  run.argv = m.entrypoint_argv;
  run.env = m.entrypoint_env;
  run.working_dir = m.entrypoint_dir;
  run.silence_s = m.timeout_s;
  run.hostname = Hostname();
  try {
    ContextImpl ctx(m, &group, &sink);
    RunEntrypoint(ctx, run);
    sink.Finish(false, "", "");
  } catch (const ProcessFailed& e) {
    sink.Finish(true, proto::ErrorKindName(proto::ErrorKind::kTrainingFailedError), e.what(), true);
  } catch (const Error& e) {
    sink.Finish(true, e.kind(), e.what());
  } catch (const std::exception& e) {
    sink.Finish(true, Demangle(typeid(e).name()), e.what());
  }
}

}  // namespace orrery::train::internal

ORRERY_REMOTE(orrery::train::internal::TrainWorker::Create,
              &orrery::train::internal::TrainWorker::Info,
              &orrery::train::internal::TrainWorker::Start,
              &orrery::train::internal::TrainWorker::Poll);
