// TorchTrainer::Fit(): reserve, start, run, collect, restart after failures, clean up.
#include "orrery/train/trainer.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <deque>
#include <filesystem>
#include <set>

#include "actors/internal/runtime.h"
#include "core/internal/clock.h"
#include "core/internal/error_kind.h"
#include "core/internal/log.h"
#include "orrery/orrery.h"
#include "train/src/backend.h"
#include "train/src/checkpoint_manager.h"
#include "train/src/report_collector.h"
#include "train/src/reservation.h"
#include "train/src/run_record.h"
#include "train/src/worker.h"

namespace orrery::train {

using internal::TrainWorker;

namespace {

constexpr int kPollMs = 500;             // how long a worker holds a Poll open
constexpr int kSettleMs = 3000;          // after a failure, for the others' last reports
constexpr int kSetupTimeoutMs = 120000;  // worker start, Info and Start

std::string DefaultStoragePath() {
  const char* home = std::getenv("HOME");
  return std::string(home && *home ? home : "/tmp") + "/orrery_results";
}

std::string DefaultRunName() {
  std::time_t t = std::time(nullptr);
  char buf[64];
  std::strftime(buf, sizeof(buf), "TorchTrainer_%Y-%m-%d_%H-%M-%S", std::localtime(&t));
  return buf;
}

std::string SecondsText(double s) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%g", s);
  return buf;
}

std::string FormatMetrics(const Metrics& m) {
  std::string out;
  char buf[96];
  if (auto it = m.find("step"); it != m.end()) {
    std::snprintf(buf, sizeof(buf), "step=%g", it->second);
    out = buf;
  }
  for (const auto& [k, v] : m) {
    if (k == "step") continue;
    std::snprintf(buf, sizeof(buf), "%s%s=%.6g", out.empty() ? "" : " ", k.c_str(), v);
    out += buf;
  }
  return out;
}

// How one attempt (one group, from start to end or failure) ended.
struct Outcome {
  enum Kind { kFinished, kWorkerFailed, kFatal } kind = kFinished;
  std::string message;
  proto::ErrorKind error_kind = proto::ErrorKind::kNone;  // kFatal: the error to return
};

// Sets the run's error; returns the kind it has. A run fails with one of these kinds as
// such, and with TrainingFailedError otherwise.
proto::ErrorKind SetError(Result& r, proto::ErrorKind k, const std::string& message) {
  if (k != proto::ErrorKind::kPlacementGroupError &&
      k != proto::ErrorKind::kAcceleratorNotAvailableError &&
      k != proto::ErrorKind::kInfeasibleError && k != proto::ErrorKind::kConnectionError)
    k = proto::ErrorKind::kTrainingFailedError;
  proto::VisitError(k, message, [&r](const auto& e) { r.SetError(e); });
  return k;
}

// The state of one Fit(): the configs, the run's record and what was reported so far.
class Run {
 public:
  Run(std::string loop, Entrypoint entrypoint, const ScalingConfig& scaling, const RunConfig& run,
      const TorchConfig& torch, nlohmann::json loop_config, ResolvedConfig resolved)
      : loop_(std::move(loop)),
        entrypoint_(std::move(entrypoint)),
        scaling_(scaling),
        run_(run),
        torch_(torch),
        loop_config_(std::move(loop_config)),
        rc_(std::move(resolved)),
        checkpoints_(run.checkpoint_config) {
    if (run_.name.empty()) run_.name = DefaultRunName();
    if (run_.storage_path.empty()) run_.storage_path = DefaultStoragePath();
    record_.id = UniqueId::Random().Hex();
    record_.name = run_.name;
    record_.loop = loop_.empty() ? "entrypoint:" : loop_;
    if (loop_.empty())
      for (const auto& a : entrypoint_.argv) record_.loop += " " + a;
    record_.path = (std::filesystem::path(run_.storage_path) / run_.name).string();
    record_.backend = rc_.backend;
    record_.start_time = WallSeconds();
    record_.config = ConfigJson(scaling_, torch_, run_, loop_config_);
    result_.path = record_.path;
    result_.run_id = record_.id;
  }

  Result Fit();

 private:
  Outcome Attempt(double reservation_timeout);
  Outcome StartAndWatch(const std::vector<PlacementGroup>& pgs,
                        std::vector<ActorHandle<TrainWorker>>& actors,
                        std::set<int64_t>* incomplete);
  // Starts one worker per bundle and asks each where it runs (kFinished when all answered).
  Outcome StartWorkers(const std::vector<PlacementGroup>& pgs,
                       std::vector<ActorHandle<TrainWorker>>& actors,
                       std::vector<WorkerPlacement>* placements, std::vector<WorkerInfoMsg>* infos);
  WorkerStartMsg StartMessage(const WorkerAssignment& a, const std::vector<std::string>& peers,
                              const std::string& checkpoint_path) const;
  // Starts every worker's loop with its rank; returns the workers by rank.
  std::vector<ActorHandle<TrainWorker>> StartRanks(
      const std::vector<WorkerAssignment>& ranks,
      const std::vector<ActorHandle<TrainWorker>>& actors, const std::vector<WorkerInfoMsg>& infos);
  Outcome Watch(const std::vector<ActorHandle<TrainWorker>>& by_rank,
                std::set<int64_t>* incomplete);
  std::string Who(size_t rank) const;  // a worker as error messages name it
  void Finalize(const ReportMsg& rank0, const std::string& checkpoint);
  // Sends the run's record (and metrics entry `index`, if given) to the head. Entries the
  // head has not acknowledged (it acknowledges once Redis has them) are kept, in order, and
  // sent again before the next write, so none is lost while the head or Redis is away; the
  // head appends each index at most once. `timeout_ms` bounds each request.
  void Write(const std::string& status, const nlohmann::json* entry = nullptr, int64_t index = -1,
             int timeout_ms = 5000);
  void Say(const std::string& line) const {
    if (run_.verbose > 0)
      std::printf("[%s] %s\n", run_.name.c_str(), line.c_str()), std::fflush(stdout);
  }

  std::string loop_;
  Entrypoint entrypoint_;  // when loop_ is ""
  ScalingConfig scaling_;
  RunConfig run_;
  TorchConfig torch_;
  nlohmann::json loop_config_;
  ResolvedConfig rc_;
  CheckpointManager checkpoints_;
  RunRecord record_;
  Result result_;
  int64_t reports_ = 0;  // complete reports so far, over all attempts
  double first_report_time_ = 0;
  bool store_warned_ = false;
  std::deque<std::pair<int64_t, std::string>> unacked_entries_;  // (index, entry JSON)
};

// Unacknowledged metrics entries kept for resending; past this the oldest go (with a warning).
constexpr size_t kMaxUnackedEntries = 100000;

void Run::Write(const std::string& status, const nlohmann::json* entry, int64_t index,
                int timeout_ms) {
  record_.status = status;
  record_.num_failures = result_.num_failures;
  record_.iterations = reports_;
  record_.latest_metrics = result_.metrics;
  record_.checkpoints = checkpoints_.Kept();
  if (entry != nullptr) {
    if (unacked_entries_.size() >= kMaxUnackedEntries) {
      LOG_WARN("training run " + run_.name + ": the head has not stored " +
               std::to_string(unacked_entries_.size()) + " metrics entries; dropping the oldest");
      unacked_entries_.pop_front();
    }
    unacked_entries_.emplace_back(index, entry->dump());
  }
  auto* rt = runtime::Current();
  if (rt == nullptr) return;
  proto::RecordMsg m;
  m.table = "train_runs";
  m.key = record_.id;
  m.json = record_.ToJson();
  Status s = Status::Ok();
  if (unacked_entries_.empty()) {
    s = rt->PutRecord(m, timeout_ms);
  }
  while (!unacked_entries_.empty()) {  // oldest first; each carries the latest record
    m.stream_index = unacked_entries_.front().first;
    m.stream_json = unacked_entries_.front().second;
    s = rt->PutRecord(m, timeout_ms);
    // Refused (not JSON the head accepts): resending would not help. Otherwise keep it.
    if (!s.ok() && s.code() != StatusCode::kInvalidArgument) break;
    unacked_entries_.pop_front();
  }
  if (!s.ok() && !store_warned_) {
    store_warned_ = true;
    LOG_WARN("training run " + run_.name +
             ": the head did not store the run's record (kept to resend): " + s.message());
  }
}

void Run::Finalize(const ReportMsg& rank0, const std::string& checkpoint) {
  int64_t iteration = ++reports_;
  result_.metrics = rank0.metrics;
  result_.metrics_history.push_back(rank0.metrics);
  if (!checkpoint.empty()) {
    for (const auto& path :
         checkpoints_.Register(KeptCheckpoint{rank0.index, checkpoint, rank0.metrics})) {
      std::error_code ec;
      std::filesystem::remove_all(path, ec);
    }
  }
  if (first_report_time_ == 0) first_report_time_ = rank0.time;
  double elapsed = rank0.time - first_report_time_;
  // The time since Fit() started (both wall clock), then the rate of reports.
  char rate[96];
  int n = std::snprintf(rate, sizeof(rate), ", %.1f s elapsed",
                        std::max(0.0, rank0.time - record_.start_time));
  if (iteration > 1 && elapsed > 0 && n > 0 && size_t(n) < sizeof(rate))
    std::snprintf(rate + n, sizeof(rate) - size_t(n), " (%.3g reports/s)",
                  double(iteration - 1) / elapsed);
  Say("iteration " + std::to_string(iteration) + ": " + FormatMetrics(rank0.metrics) + rate +
      (checkpoint.empty()
           ? ""
           : ", checkpoint " + std::filesystem::path(checkpoint).filename().string()));
  nlohmann::json entry = MetricsEntry(iteration, rank0.metrics, rank0.time, checkpoint);
  Write("RUNNING", &entry, iteration);
}

Outcome Run::Attempt(double reservation_timeout) {
  std::string prefix = "train-" + record_.id.substr(0, 8);
  std::vector<PlacementGroup> pgs;
  std::vector<ActorHandle<TrainWorker>> actors;
  std::set<int64_t> incomplete;
  Outcome out;
  try {
    auto deadline =
        std::chrono::steady_clock::now() + std::chrono::duration<double>(reservation_timeout);
    for (const auto& o : GroupOptions(rc_, scaling_, prefix))
      pgs.push_back(CreatePlacementGroup(o));
    for (const auto& pg : pgs) {
      double left =
          std::chrono::duration<double>(deadline - std::chrono::steady_clock::now()).count();
      if (!pg.Wait(std::max(0.0, left))) {
        out = {Outcome::kFatal,
               "could not reserve the training group's " + std::to_string(rc_.num_workers) +
                   " workers within " + SecondsText(reservation_timeout) +
                   " s: the resources exist but are in use (see " +
                   "`orrery status`); RunConfig::reservation_timeout_s or "
                   "TRAIN_PLACEMENT_GROUP_TIMEOUT_S waits longer",
               proto::ErrorKind::kPlacementGroupError};
        break;
      }
    }
    if (out.kind == Outcome::kFinished) out = StartAndWatch(pgs, actors, &incomplete);
  } catch (const ActorDiedError& e) {  // a worker died while the group was starting
    out = {Outcome::kWorkerFailed,
           std::string("a worker died while the group was starting: ") + e.what()};
  } catch (const Error& e) {
    out = {Outcome::kFatal, e.what(), proto::ErrorKindFromName(e.kind())};
  }
  // Whatever happened: stop the workers and release the reservation.
  for (const auto& a : actors) {
    try {
      a.Kill();
    } catch (const Error&) {
    }
  }
  for (const auto& pg : pgs) RemovePlacementGroup(pg.Id());
  for (int64_t index : incomplete) {  // checkpoints some workers wrote for reports never completed
    std::error_code ec;
    std::filesystem::remove_all(std::filesystem::path(record_.path) / CheckpointDirName(index), ec);
  }
  return out;
}

Outcome Run::StartAndWatch(const std::vector<PlacementGroup>& pgs,
                           std::vector<ActorHandle<TrainWorker>>& actors,
                           std::set<int64_t>* incomplete) {
  std::vector<WorkerPlacement> placements;
  std::vector<WorkerInfoMsg> infos;
  Outcome started = StartWorkers(pgs, actors, &placements, &infos);
  if (started.kind != Outcome::kFinished) return started;
  auto assigned = AssignRanks(rc_, placements);
  if (!assigned.ok())
    return {Outcome::kFatal, assigned.status().message(), proto::ErrorKind::kTrainingFailedError};
  auto by_rank = StartRanks(assigned.value(), actors, infos);
  Write("RUNNING");
  return Watch(by_rank, incomplete);
}

Outcome Run::StartWorkers(const std::vector<PlacementGroup>& pgs,
                          std::vector<ActorHandle<TrainWorker>>& actors,
                          std::vector<WorkerPlacement>* placements,
                          std::vector<WorkerInfoMsg>* infos) {
  // Start one worker per bundle, and learn where each runs.
  for (size_t g = 0; g < pgs.size(); ++g) {
    for (size_t b = 0; b < pgs[g].Bundles().size(); ++b) {
      actors.push_back(orrery::Actor(&TrainWorker::Create)
                           .SetPlacementGroup(pgs[g], int(b))
                           .SetResources(rc_.resources_per_worker)
                           .Remote());
      WorkerPlacement p;
      p.index = int(placements->size());
      p.slice = int(g);
      placements->push_back(p);
    }
  }
  std::vector<ObjectRef<WorkerInfoMsg>> info_refs;
  for (auto& a : actors) info_refs.push_back(a.Task(&TrainWorker::Info).Remote());
  std::map<std::string, NodeInfo> nodes;
  for (auto& n : Nodes()) nodes[n.node_id.Hex()] = n;
  for (size_t i = 0; i < actors.size(); ++i) {
    try {
      infos->push_back(*Get(info_refs[i], kSetupTimeoutMs));
    } catch (const ActorDiedError& e) {
      return {Outcome::kWorkerFailed,
              "worker " + std::to_string(i) + " died while starting: " + e.what()};
    }
    auto& p = (*placements)[i];
    const auto& info = (*infos)[i];
    p.node_id = info.node_id;
    p.node_ip = info.node_ip;
    p.hostname = info.hostname;
    p.accelerator_ids = info.accelerator_ids;
    p.free_port = info.free_port;
    if (auto it = nodes.find(p.node_id); it != nodes.end()) p.node_labels = it->second.labels;
  }
  return {Outcome::kFinished, ""};
}

WorkerStartMsg Run::StartMessage(const WorkerAssignment& a, const std::vector<std::string>& peers,
                                 const std::string& checkpoint_path) const {
  WorkerStartMsg m;
  m.loop_name = loop_;
  m.entrypoint_argv = entrypoint_.argv;
  m.entrypoint_env = entrypoint_.env;
  m.entrypoint_dir = entrypoint_.working_dir;
  m.rank = a.rank;
  m.world_size = a.world_size;
  m.local_rank = a.local_rank;
  m.local_world_size = a.local_world_size;
  m.node_rank = a.node_rank;
  m.device = a.device;
  m.env = a.env;
  m.peers = peers;
  m.timeout_s = torch_.timeout_s;
  m.config_json = loop_config_.is_null() ? "" : loop_config_.dump();
  m.checkpoint_path = checkpoint_path;
  m.run_name = run_.name;
  m.run_path = record_.path;
  m.report_offset = reports_;
  m.mesh_shape = a.mesh.shape;
  m.mesh_axis_names = a.mesh.axis_names;
  m.mesh_local_device_ids = a.mesh.local_device_ids;
  m.mesh_local_coordinates = a.mesh.local_coordinates;
  return m;
}

std::vector<ActorHandle<TrainWorker>> Run::StartRanks(
    const std::vector<WorkerAssignment>& ranks, const std::vector<ActorHandle<TrainWorker>>& actors,
    const std::vector<WorkerInfoMsg>& infos) {
  // Start every worker with its rank, environment and peers.
  std::vector<std::string> peers;
  for (const auto& a : ranks) peers.push_back(infos[size_t(a.index)].collective_address);
  auto latest = checkpoints_.Latest();
  std::vector<ActorHandle<TrainWorker>> by_rank;
  record_.workers.clear();
  for (const auto& a : ranks) {
    WorkerStartMsg m = StartMessage(a, peers, latest ? latest->path : "");
    by_rank.push_back(actors[size_t(a.index)]);
    const auto& info = infos[size_t(a.index)];
    record_.workers.push_back(RunWorkerRecord{a.rank, a.local_rank, a.node_rank, info.node_id,
                                              info.node_ip, info.hostname, info.pid, a.device});
    (void)Get(by_rank.back().Task(&TrainWorker::Start).Remote(m), kSetupTimeoutMs);
  }
  return by_rank;
}

std::string Run::Who(size_t rank) const {
  const auto& w = record_.workers[rank];
  return "worker rank " + std::to_string(rank) + " (pid " + std::to_string(w.pid) + " on node " +
         w.node_id.substr(0, 12) + " at " + w.node_ip + ")";
}

Outcome Run::Watch(const std::vector<ActorHandle<TrainWorker>>& by_rank,
                   std::set<int64_t>* incomplete) {
  // Collect reports until every loop ends, finalizing each once it is complete.
  ReportCollector reports(by_rank, reports_);
  while (true) {
    if (auto failure = reports.PollOnce(kPollMs)) {
      if (failure->died) {
        for (auto& [report, checkpoint] : reports.SettleAfterFailure(failure->rank, kSettleMs))
          Finalize(report, checkpoint);
      }
      incomplete->merge(reports.Unfinished());
      if (failure->died)
        return {Outcome::kWorkerFailed, Who(failure->rank) + " died: " + failure->message};
      return {Outcome::kFatal,
              "the train loop failed on " + Who(failure->rank) + ": " + failure->message,
              proto::ErrorKind::kTrainingFailedError};
    }
    while (auto complete = reports.TakeComplete()) Finalize(complete->first, complete->second);
    if (reports.AllDone()) break;
  }
  incomplete->merge(reports.OrphanCheckpoints());  // reported, never by rank 0
  return {Outcome::kFinished, ""};
}

Result Run::Fit() {
  double timeout = ReservationTimeout(run_);
  for (const auto& w : rc_.warnings) Say("note: " + w);
  proto::ErrorKind kind = proto::ErrorKind::kNone;
  std::vector<NodeInfo> nodes = Nodes();  // and those an autoscaler may add
  for (auto& n : NodesThatMayCome(runtime::CurrentOrThrow().AutoscalerGroups()))
    nodes.push_back(std::move(n));
  Status feasible = CheckFeasible(rc_, scaling_, nodes, &kind);
  if (!feasible.ok()) {
    record_.error_kind = SetError(result_, kind, feasible.message());
    record_.error = feasible.message();
    record_.end_time = WallSeconds();
    Write("ERRORED");
    return result_;
  }
  Say("starting " + std::to_string(rc_.num_workers) + " workers (" + rc_.backend +
      "), results in " + record_.path);
  Write("PENDING");
  std::error_code ec;
  std::filesystem::create_directories(record_.path, ec);
  int max_failures = run_.failure_config.max_failures;
  while (true) {
    Outcome o = Attempt(timeout);
    if (o.kind == Outcome::kFinished) break;
    if (o.kind == Outcome::kFatal) {
      record_.error_kind = SetError(result_, o.error_kind, o.message);
      break;
    }
    ++result_.num_failures;
    if (max_failures >= 0 && result_.num_failures > max_failures) {
      record_.error_kind = SetError(
          result_, proto::ErrorKind::kTrainingFailedError,
          "training failed after " + std::to_string(result_.num_failures) + " failure" +
              (result_.num_failures > 1 ? "s" : "") +
              " (max_failures=" + std::to_string(max_failures) + "); the last: " + o.message);
      break;
    }
    auto latest = checkpoints_.Latest();
    Say("restarting the group (failure " + std::to_string(result_.num_failures) + " of " +
        (max_failures < 0 ? std::string("unlimited") : std::to_string(max_failures)) + ") from " +
        (latest ? latest->path : std::string("the start")) + ": " + o.message);
    Write("RESTARTING");
  }
  if (auto latest = checkpoints_.Latest()) result_.checkpoint = Checkpoint(latest->path);
  for (const auto& c : checkpoints_.Kept())
    result_.best_checkpoints.emplace_back(Checkpoint(c.path), c.metrics);
  record_.end_time = WallSeconds();
  if (result_.error) {
    record_.error = result_.error->what();
    Say("failed: " + record_.error);
  } else {
    Say("finished: " + std::to_string(reports_) + " iterations" +
        (result_.metrics.empty() ? "" : ", last " + FormatMetrics(result_.metrics)));
  }
  // The last word on the run: worth waiting longer for a head that is restarting.
  Write(result_.error ? "ERRORED" : "FINISHED", nullptr, -1, 30000);
  return result_;
}

}  // namespace

TorchTrainer::TorchTrainer(TrainLoop loop, ScalingConfig scaling, RunConfig run, TorchConfig torch,
                           nlohmann::json train_loop_config)
    : loop_name_(orrery::internal::NameOfOrThrow(orrery::internal::KeyOf(loop), "train loop")),
      scaling_(std::move(scaling)),
      run_(std::move(run)),
      torch_(std::move(torch)),
      loop_config_(std::move(train_loop_config)) {}

TorchTrainer::TorchTrainer(Entrypoint entrypoint, ScalingConfig scaling, RunConfig run,
                           TorchConfig torch, nlohmann::json train_loop_config)
    : entrypoint_(std::move(entrypoint)),
      scaling_(std::move(scaling)),
      run_(std::move(run)),
      torch_(std::move(torch)),
      loop_config_(std::move(train_loop_config)) {}

Result TorchTrainer::Fit() {
  ResolvedConfig resolved =
      ResolveConfig(scaling_, torch_);  // ConfigError before anything is reserved
  if (loop_name_.empty() && (entrypoint_.argv.empty() || entrypoint_.argv[0].empty()))
    throw ConfigError("TorchTrainer: the Entrypoint's argv is empty (give the command to run)");
  if (!IsInitialized()) throw Error("TorchTrainer::Fit() needs orrery::Init() first");
  Run run(loop_name_, entrypoint_, scaling_, run_, torch_, loop_config_, std::move(resolved));
  return run.Fit();
}

}  // namespace orrery::train
