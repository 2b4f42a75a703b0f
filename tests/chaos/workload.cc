#include "tests/chaos/workload.h"

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <optional>
#include <thread>
#include <vector>

#include "orrery/orrery.h"

namespace orrery_chaos {

namespace fs = std::filesystem;
namespace train = orrery::train;

int64_t Twice(int64_t x) { return 2 * x + 1; }

namespace {

// Closes ledger entry `id` from the exception in flight (call inside a catch block).
void CloseWithCurrentException(Ledger& ledger, int64_t id, std::string* kind) {
  try {
    throw;
  } catch (const orrery::GetTimeoutError& e) {
    ledger.Close(id, Ledger::Outcome::kTimedOut, std::string("GetTimeoutError: ") + e.what());
    *kind = e.kind();
  } catch (const orrery::Error& e) {
    // The base class itself says nothing about what went wrong: the API promises subclasses.
    bool subclass = std::string(e.kind()) != "Error";
    ledger.Close(id, subclass ? Ledger::Outcome::kTypedError : Ledger::Outcome::kUntyped,
                 subclass ? e.kind() + std::string(": ") + e.what()
                          : std::string("orrery::Error itself: ") + e.what());
    *kind = e.kind();
  } catch (const std::exception& e) {
    ledger.Close(id, Ledger::Outcome::kUntyped, e.what());
    *kind = "untyped";
  } catch (...) {
    ledger.Close(id, Ledger::Outcome::kUntyped, "(not a std::exception)");
    *kind = "untyped";
  }
}

}  // namespace

// Two workers all-reduce a 512 KiB vector (the ring or shared-memory path) every step,
// checkpoint every 10 steps, and stop together once rank 0 sees the stop file.
void ChaosTrainLoop(train::Context& ctx) {
  int64_t step = 0;
  if (auto ckpt = ctx.GetCheckpoint()) std::ifstream(ckpt->Path() + "/step") >> step;
  const std::string stop_file = ctx.Config().at("stop_file").get<std::string>();
  const int world = ctx.WorldSize();
  const float want = float(world * (world + 1) / 2);
  std::vector<float> grad(1 << 17);
  for (int i = 0; i < 100000; ++i) {
    ++step;
    std::fill(grad.begin(), grad.end(), float(ctx.WorldRank() + 1));
    ctx.AllReduce(grad);
    bool ok = std::all_of(grad.begin(), grad.end(), [&](float v) { return v == want; });
    std::vector<int64_t> stop{fs::exists(stop_file) ? 1 : 0};
    ctx.Broadcast(stop, 0);
    train::Metrics m{{"step", double(step)}, {"allreduce_ok", ok ? 1.0 : 0.0}};
    if (step % 10 == 0 && ctx.WorldRank() == 0) {
      std::string dir = ctx.RunPath() + "/ckpt_src";
      fs::create_directories(dir);
      std::ofstream(dir + "/step") << step;
      ctx.Report(m, train::Checkpoint(dir));
    } else {
      ctx.Report(m);
    }
    if (stop[0] != 0) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
}

ORRERY_REMOTE(Echo::Create, &Echo::Call, Twice, ChaosTrainLoop);

void Nap(int ms) { std::this_thread::sleep_for(std::chrono::milliseconds(ms)); }

// Calls one named actor in a loop; even-numbered threads' actors restart (with retried
// calls), odd ones die for good. A dead actor is replaced by the next generation.
void ActorLoad(int index, Load* load) {
  int generation = 0, died_in_a_row = 0;
  int64_t salt = 0, seq = 0;
  std::optional<orrery::ActorHandle<Echo>> actor;
  const bool restartable = index % 2 == 0;
  while (!load->stop) {
    std::string kind;
    if (!actor) {
      salt = int64_t(index) * 1000000 + generation;
      std::string name = "chaos-a" + std::to_string(index) + "-g" + std::to_string(generation++);
      int64_t id = load->ledger.Submit("actor create");
      try {
        auto creator = orrery::Actor(Echo::Create).SetName(name).SetResources({{"CPU", 1}});
        if (restartable) creator.SetMaxRestarts(-1).SetMaxTaskRetries(3);
        actor = creator.Remote(salt);
        load->ledger.Close(id, Ledger::Outcome::kOk, "");
        load->Named(name);
      } catch (...) {
        CloseWithCurrentException(load->ledger, id, &kind);
        Nap(200);
        continue;
      }
    }
    const int64_t x = ++seq;
    int64_t id = load->ledger.Submit("actor call");
    try {
      auto v = orrery::Get(actor->Task(&Echo::Call).Remote(x), kGetTimeoutMs);
      if (*v == x * 3 + salt) {
        load->ledger.Close(id, Ledger::Outcome::kOk, "");
      } else {
        load->ledger.Close(id, Ledger::Outcome::kWrongValue,
                           "Call(" + std::to_string(x) + ") = " + std::to_string(*v) + ", want " +
                               std::to_string(x * 3 + salt));
      }
      died_in_a_row = 0;
    } catch (...) {
      CloseWithCurrentException(load->ledger, id, &kind);
    }
    // A restartable actor answers again after a restart; one that keeps failing as dead, or
    // any other actor that died, is replaced (and killed, in case it is only unreachable).
    if (kind == "ActorDiedError" && (!restartable || ++died_in_a_row >= 3)) {
      try {
        actor->Kill();
      } catch (const std::exception&) {
      }
      actor.reset();
      died_in_a_row = 0;
    }
    Nap(kind.empty() ? 100 : 300);
  }
}

// Submits tasks four at a time and gets each.
void TaskLoad(Load* load) {
  int64_t seq = 0;
  while (!load->stop) {
    struct Pending {
      int64_t id, x;
      orrery::ObjectRef<int64_t> ref;
    };
    std::vector<Pending> batch;
    std::string kind;
    for (int i = 0; i < 4; ++i) {
      const int64_t x = ++seq;
      int64_t id = load->ledger.Submit("task");
      try {
        batch.push_back({id, x, orrery::Task(Twice).SetMaxRetries(3).Remote(x)});
      } catch (...) {
        CloseWithCurrentException(load->ledger, id, &kind);
      }
    }
    // Each task gets kGetTimeoutMs from its submission, not from the previous Get's end.
    const auto deadline =
        std::chrono::steady_clock::now() + std::chrono::milliseconds(kGetTimeoutMs);
    for (auto& p : batch) {
      try {
        auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
            deadline - std::chrono::steady_clock::now());
        auto v = orrery::Get(p.ref, int(std::max<int64_t>(1, left.count())));
        if (*v == 2 * p.x + 1) {
          load->ledger.Close(p.id, Ledger::Outcome::kOk, "");
        } else {
          load->ledger.Close(p.id, Ledger::Outcome::kWrongValue,
                             "Twice(" + std::to_string(p.x) + ") = " + std::to_string(*v));
        }
      } catch (...) {
        CloseWithCurrentException(load->ledger, p.id, &kind);
      }
    }
    Nap(kind.empty() ? 250 : 500);
  }
}

}  // namespace orrery_chaos
