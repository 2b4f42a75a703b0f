// The autoscaler's loop with a fake provider (autoscaler/internal/autoscaler.h): a launch
// that never joins is removed, and a removal the provider fails stays recorded, is retried
// with backoff and keeps its node's name from being given to a new node.
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "autoscaler/internal/autoscaler.h"

namespace orrery::autoscaler {
namespace {

// What the autoscaler asked of the provider; its removals fail while `fail_removals`.
struct Calls {
  std::vector<std::string> created, removed;
  bool fail_removals = false;
};

class FakeProvider : public Provider {
 public:
  explicit FakeProvider(Calls* calls) : calls_(calls) {}
  Status Create(const Unit& unit) override {
    calls_->created.push_back(unit.names[0]);
    return Status::Ok();
  }
  Status Remove(const Unit& unit) override {
    calls_->removed.push_back(unit.names[0]);
    if (calls_->fail_removals) return Status::Unavailable("the cloud said no");
    return Status::Ok();
  }

 private:
  Calls* calls_;
};

constexpr double kLaunchTimeoutS = 10;

// One group that always wants one node, which never joins (the head reports no nodes).
std::unique_ptr<Autoscaler> MakeAutoscaler(Calls* calls) {
  Options o;
  o.head = "127.0.0.1:1";  // never asked: the tests call Grow, not Tick
  o.config.launch_timeout_s = kLaunchTimeoutS;
  GroupConfig g;
  g.name = "cpu";
  g.resources = {{"CPU", 1}};
  g.min = 1;
  g.max = 3;
  o.config.groups.push_back(g);
  o.make_provider = [calls](const GroupConfig&) { return std::make_unique<FakeProvider>(calls); };
  return std::make_unique<Autoscaler>(std::move(o));
}

bool AnyEventSays(const Autoscaler& a, const std::string& words) {
  const auto& events = a.Events();
  return std::any_of(events.begin(), events.end(), [&](const nlohmann::json& e) {
    return e["reason"].get<std::string>().find(words) != std::string::npos;
  });
}

TEST(AutoscalerRemovalTest, NeverReusesTheNameOfANodeWhoseRemovalFailed) {
  Calls calls;
  auto a = MakeAutoscaler(&calls);
  proto::AutoscalerStateMsg none;
  a->Grow(none, 0);
  ASSERT_EQ(calls.created, std::vector<std::string>{"cpu-0"});

  calls.fail_removals = true;
  a->Grow(none, kLaunchTimeoutS + 1);  // cpu-0 did not join: removed, which fails
  ASSERT_EQ(calls.removed, std::vector<std::string>{"cpu-0"});
  EXPECT_TRUE(AnyEventSays(*a, "removing node cpu-0 failed: the cloud said no"));

  // Past the group's backoff: a new node, which must not be called cpu-0 (that machine
  // may still run), and cpu-0's removal is tried again.
  a->Grow(none, kLaunchTimeoutS + 30);
  EXPECT_EQ(calls.created, (std::vector<std::string>{"cpu-0", "cpu-1"}));
  EXPECT_EQ(calls.removed, (std::vector<std::string>{"cpu-0", "cpu-0"}));
}

TEST(AutoscalerRemovalTest, RetriesAFailedRemovalWithBackoffUntilItSucceeds) {
  Calls calls;
  auto a = MakeAutoscaler(&calls);
  proto::AutoscalerStateMsg none;
  a->Grow(none, 0);
  calls.fail_removals = true;
  double t = kLaunchTimeoutS + 1;
  a->Grow(none, t);  // the first removal fails: retried in 1 s, then 2 s, ...
  ASSERT_EQ(calls.removed.size(), 1u);
  a->Grow(none, t + 0.5);
  EXPECT_EQ(calls.removed.size(), 1u) << "retried before its backoff passed";
  a->Grow(none, t + 1);
  EXPECT_EQ(calls.removed.size(), 2u);
  a->Grow(none, t + 2);
  EXPECT_EQ(calls.removed.size(), 2u) << "the backoff did not grow";
  EXPECT_TRUE(AnyEventSays(*a, "retrying in 2 s"));

  calls.fail_removals = false;
  a->Grow(none, t + 3);
  ASSERT_EQ(calls.removed.size(), 3u);
  EXPECT_TRUE(AnyEventSays(*a, "removed node cpu-0"));
  a->Grow(none, t + 1000);
  size_t cpu0_removals = std::count(calls.removed.begin(), calls.removed.end(), "cpu-0");
  EXPECT_EQ(cpu0_removals, 3u) << "a removal that succeeded is tried again";
}

}  // namespace
}  // namespace orrery::autoscaler
