// Test support for the collective tests: N CollectiveGroups in one process over loopback
// TCP, one std::thread per rank, and a Context that forwards to a group (so the tests can
// go through the public Context templates: Broadcast's resize, AllGather's concatenation).
#pragma once

#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

#include "orrery/errors.h"
#include "orrery/train/context.h"
#include "train/src/collective.h"

namespace orrery::train::test_support {

// N groups bound on 127.0.0.1 and connected to each other.
class LocalGroup {
 public:
  // cross_memory: within shared memory, between the vectors themselves where they can.
  explicit LocalGroup(int n, double timeout_s = 30, bool shared_memory = false,
                      bool cross_memory = true) {
    std::vector<std::string> addresses;
    for (int r = 0; r < n; ++r) {
      groups_.push_back(std::make_unique<CollectiveGroup>());
      groups_.back()->SetSharedMemory(shared_memory);
      groups_.back()->SetCrossMemory(cross_memory);
      auto bound = groups_.back()->Bind("127.0.0.1");
      if (!bound.ok()) throw std::runtime_error("Bind: " + bound.status().message());
      addresses.push_back(bound.value());
    }
    for (int r = 0; r < n; ++r) groups_[size_t(r)]->Connect(r, addresses, timeout_s);
  }

  int size() const { return int(groups_.size()); }
  CollectiveGroup& group(int rank) { return *groups_.at(size_t(rank)); }

  // Runs body(rank, group) on one thread per rank in `ranks` (all when empty) and joins
  // them; returns what each rank threw (null where nothing), indexed by rank.
  std::vector<std::exception_ptr> Run(const std::function<void(int, CollectiveGroup&)>& body,
                                      std::vector<int> ranks = {}) {
    if (ranks.empty())
      for (int r = 0; r < size(); ++r) ranks.push_back(r);
    std::vector<std::exception_ptr> errors(groups_.size());
    std::vector<std::thread> threads;
    for (int r : ranks) {
      threads.emplace_back([&, r] {
        try {
          body(r, group(r));
        } catch (...) {
          errors[size_t(r)] = std::current_exception();
        }
      });
    }
    for (auto& t : threads) t.join();
    return errors;
  }

 private:
  std::vector<std::unique_ptr<CollectiveGroup>> groups_;
};

// The message of what a rank threw ("" when it threw nothing).
inline std::string MessageOf(const std::exception_ptr& e) {
  if (!e) return "";
  try {
    std::rethrow_exception(e);
  } catch (const std::exception& x) {
    return x.what();
  } catch (...) {
    return "(not a std::exception)";
  }
}

// True when the rank threw an orrery::TrainingFailedError.
inline bool IsTrainingFailed(const std::exception_ptr& e) {
  if (!e) return false;
  try {
    std::rethrow_exception(e);
  } catch (const TrainingFailedError&) {
    return true;
  } catch (...) {
    return false;
  }
}

// The errors of all ranks as one line, for failure messages ("" when none threw).
inline std::string ErrorsText(const std::vector<std::exception_ptr>& errors) {
  std::string out;
  for (size_t r = 0; r < errors.size(); ++r)
    if (errors[r]) out += "rank " + std::to_string(r) + ": " + MessageOf(errors[r]) + "\n";
  return out;
}

// A Context over one rank's group; what the collectives do not use is a stub.
class GroupContext final : public GroupCollectives {
 public:
  explicit GroupContext(CollectiveGroup* group) : GroupCollectives(group) {}

  int WorldRank() const override { return group_->rank(); }
  int WorldSize() const override { return group_->size(); }
  int LocalRank() const override { return group_->rank(); }
  int LocalWorldSize() const override { return group_->size(); }
  int NodeRank() const override { return 0; }
  const std::string& Device() const override { return device_; }
  const DeviceMesh& Mesh() const override { return mesh_; }
  const nlohmann::json& Config() const override { return config_; }
  const std::map<std::string, std::string>& Environment() const override { return env_; }
  const std::string& RunName() const override { return device_; }
  const std::string& RunPath() const override { return device_; }
  void Report(const Metrics&) override {}
  void Report(const Metrics&, const Checkpoint&) override {}
  std::optional<Checkpoint> GetCheckpoint() const override { return std::nullopt; }

 private:
  std::string device_ = "cpu";
  DeviceMesh mesh_;
  nlohmann::json config_;
  std::map<std::string, std::string> env_;
};

// Deterministic input of `rank` for an all-reduce with `op`: values for which the serial
// reduction cannot overflow (small factors for kProduct). A splitmix64 stream: the vectors
// are megabytes, and the standard engines and distributions cost more than the collectives.
template <typename T>
std::vector<T> MakeInput(int rank, size_t count, ReduceOp op, uint32_t seed) {
  uint64_t state = uint64_t(seed) * 7919u + uint64_t(rank) * 104729u + uint64_t(op);
  auto next = [&state] {
    uint64_t z = (state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  };
  std::vector<T> v(count);
  if constexpr (std::is_floating_point_v<T>) {
    for (auto& x : v) {
      const double unit = double(next() >> 11) * 0x1.0p-53;  // [0, 1)
      x = T(op == ReduceOp::kProduct ? 0.5 + unit : 2 * unit - 1);
    }
  } else {
    const uint64_t big = sizeof(T) == 8 ? uint64_t(1) << 40 : 1000;
    for (auto& x : v) {
      const uint64_t z = next();
      const int64_t f = int64_t(z % 6) - 2;  // -2 .. 3
      x = T(op == ReduceOp::kProduct ? (f == 0 ? 1 : f)
                                     : int64_t(z % (2 * big + 1)) - int64_t(big));
    }
  }
  return v;
}

// The reduction of inputs[0], inputs[1], ... in rank order, as one process would do it.
template <typename T>
std::vector<T> SerialReduce(const std::vector<std::vector<T>>& inputs, ReduceOp op) {
  std::vector<T> out = inputs.at(0);
  for (size_t r = 1; r < inputs.size(); ++r) {
    for (size_t i = 0; i < out.size(); ++i) {
      const T x = inputs[r][i];
      switch (op) {
        case ReduceOp::kSum:
        case ReduceOp::kAvg:
          out[i] += x;
          break;
        case ReduceOp::kProduct:
          out[i] *= x;
          break;
        case ReduceOp::kMin:
          out[i] = x < out[i] ? x : out[i];
          break;
        case ReduceOp::kMax:
          out[i] = x > out[i] ? x : out[i];
          break;
      }
    }
  }
  if (op == ReduceOp::kAvg)
    for (auto& x : out) x /= T(inputs.size());
  return out;
}

}  // namespace orrery::train::test_support
