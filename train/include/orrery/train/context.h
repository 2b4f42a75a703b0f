// What a training loop sees (docs/train.md "The Context"): its rank, device and mesh, its
// config, Report() for metrics and checkpoints, and collectives between the workers of its
// group.
//
//   void TrainLoop(orrery::train::Context& ctx) {
//     std::vector<double> grad = ...;
//     ctx.AllReduce(grad);                         // sum over every worker, in place
//     ctx.Report({{"loss", loss}, {"step", step}});
//   }
//   ORRERY_REMOTE(TrainLoop);
//
// Threading: a Context belongs to the thread that runs the loop. Collectives must be called
// by every worker of the group in the same order (as with MPI, NCCL or c10d); a collective
// that waits longer than TorchConfig::timeout_s for a peer throws orrery::TrainingFailedError
// instead of hanging.
#pragma once

#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

namespace orrery::train {

using Metrics = std::map<std::string, double>;

// A checkpoint is a directory. A worker passes one it wrote to Report(); Orrery copies it to
// <storage_path>/<run name>/checkpoint_<n> (every worker that passes one copies its files
// into the same directory) and hands that copy back through GetCheckpoint() after a
// restart and in Result::checkpoint.
class Checkpoint {
 public:
  Checkpoint() = default;
  explicit Checkpoint(std::string path) : path_(std::move(path)) {}
  static Checkpoint FromDirectory(std::string path) { return Checkpoint(std::move(path)); }
  const std::string& Path() const { return path_; }
  bool Empty() const { return path_.empty(); }

 private:
  std::string path_;
};

enum class ReduceOp { kSum = 0, kProduct = 1, kMin = 2, kMax = 3, kAvg = 4 };
// Also as plain names: ctx.AllReduce(v, orrery::train::kMax).
inline constexpr ReduceOp kSum = ReduceOp::kSum;
inline constexpr ReduceOp kProduct = ReduceOp::kProduct;
inline constexpr ReduceOp kMin = ReduceOp::kMin;
inline constexpr ReduceOp kMax = ReduceOp::kMax;
inline constexpr ReduceOp kAvg = ReduceOp::kAvg;

// The logical device mesh of the group. On TPUs: the slice's chips (times slices), shape
// from XlaSpmdConfig or the topology; elsewhere one device per worker, shape {world size}.
struct DeviceMesh {
  std::vector<int> shape;                           // e.g. {2, 4}
  std::vector<std::string> axis_names;              // e.g. {"data", "model"}
  std::vector<int> device_ids;                      // 0..N-1, row-major over shape
  std::vector<int> local_device_ids;                // the devices this worker drives
  std::vector<std::vector<int>> local_coordinates;  // their coordinates in the mesh
};

class Context {
 public:
  virtual ~Context() = default;

  virtual int WorldRank() const = 0;
  virtual int WorldSize() const = 0;
  virtual int LocalRank() const = 0;       // rank among the group's workers on this node
  virtual int LocalWorldSize() const = 0;  // the group's workers on this node
  virtual int NodeRank() const = 0;        // index of this node among the group's nodes
  // "xla:0" on TPU, "cuda:N" with nccl, "cpu" with gloo.
  virtual const std::string& Device() const = 0;
  virtual const DeviceMesh& Mesh() const = 0;
  // The train_loop_config given to the trainer (null when none was).
  virtual const nlohmann::json& Config() const = 0;
  // The environment the backend set for this worker (also exported to the process):
  // MASTER_ADDR, RANK, ... and for xla_tpu PJRT_DEVICE, TPU_WORKER_ID, ...
  virtual const std::map<std::string, std::string>& Environment() const = 0;
  // Name of the run (RunConfig::name) and the directory its results go to.
  virtual const std::string& RunName() const = 0;
  virtual const std::string& RunPath() const = 0;

  // Sends metrics (and optionally a checkpoint directory) to the driver. Every worker
  // should report the same number of times; the driver keeps rank 0's metrics.
  virtual void Report(const Metrics& metrics) = 0;
  virtual void Report(const Metrics& metrics, const Checkpoint& checkpoint) = 0;
  // The checkpoint to resume from: the latest one reported before a restart (or nullopt).
  virtual std::optional<Checkpoint> GetCheckpoint() const = 0;

  // Collectives over the group's workers. float, double, int32_t and int64_t.
  // In place: every worker ends with the element-wise reduction of all workers' vectors
  // (which must have the same length). Large vectors use a ring (reduce-scatter, all-gather).
  template <typename T>
  void AllReduce(std::vector<T>& data, ReduceOp op = ReduceOp::kSum);
  // In place: every worker ends with root's vector.
  template <typename T>
  void Broadcast(std::vector<T>& data, int root = 0);
  // Every worker's vector, concatenated in rank order (lengths may differ).
  template <typename T>
  std::vector<T> AllGather(const std::vector<T>& data);
  // Returns once every worker of the group has called it.
  virtual void Barrier() = 0;

 protected:
  // dtype: 0 float, 1 double, 2 int32, 3 int64.
  virtual void AllReduceRaw(void* data, size_t count, int dtype, ReduceOp op) = 0;
  virtual void BroadcastRaw(void* data, size_t bytes, int root) = 0;
  virtual std::vector<std::string> AllGatherRaw(const void* data, size_t bytes) = 0;

 private:
  template <typename T>
  static constexpr int DtypeOf();
};

template <typename T>
constexpr int Context::DtypeOf() {
  if constexpr (std::is_same_v<T, float>)
    return 0;
  else if constexpr (std::is_same_v<T, double>)
    return 1;
  else if constexpr (std::is_same_v<T, int32_t>)
    return 2;
  else if constexpr (std::is_same_v<T, int64_t>)
    return 3;
  else
    static_assert(sizeof(T) == 0, "collectives take float, double, int32_t or int64_t vectors");
  return -1;
}

template <typename T>
void Context::AllReduce(std::vector<T>& data, ReduceOp op) {
  AllReduceRaw(data.data(), data.size(), DtypeOf<T>(), op);
}

template <typename T>
void Context::Broadcast(std::vector<T>& data, int root) {
  (void)DtypeOf<T>();
  // The root's length wins: others are resized to it.
  std::vector<int64_t> size{int64_t(data.size())};
  BroadcastRaw(size.data(), sizeof(int64_t), root);
  data.resize(size_t(size[0]));
  BroadcastRaw(data.data(), data.size() * sizeof(T), root);
}

template <typename T>
std::vector<T> Context::AllGather(const std::vector<T>& data) {
  (void)DtypeOf<T>();
  std::vector<std::string> parts = AllGatherRaw(data.data(), data.size() * sizeof(T));
  std::vector<T> out;
  for (const auto& p : parts) {
    size_t n = p.size() / sizeof(T);
    size_t at = out.size();
    out.resize(at + n);
    if (n) std::memcpy(out.data() + at, p.data(), n * sizeof(T));
  }
  return out;
}

}  // namespace orrery::train
