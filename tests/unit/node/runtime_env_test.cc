// Runtime envs on the node: a worker starts with the variables and working folder its
// request names, workers of different envs are never shared, a worker with an env is never
// a prestarted one, and an env the node cannot give (malformed, a folder it lacks) fails its
// request with the reason instead of starting anything. And the check itself.
#include "core/internal/runtime_env.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <climits>
#include <optional>
#include <string>

#include "tests/unit/node/node_harness.h"

namespace orrery::node {
namespace {

using proto::MsgType;
using testing::NodeHarness;

std::string ThisFolder() {
  char buf[PATH_MAX];
  return getcwd(buf, sizeof(buf)) ? buf : "/";
}

proto::RuntimeEnvMsg Env(std::map<std::string, std::string> vars, std::string dir = "") {
  return proto::RuntimeEnvMsg{std::move(vars), std::move(dir)};
}

TEST(RuntimeEnvCheckTest, AcceptsPlainVariablesAndAnAbsoluteFolder) {
  EXPECT_TRUE(runtime_env::Check(Env({})).ok());
  EXPECT_TRUE(runtime_env::Check(Env({{"MODEL", "small"}, {"EMPTY", ""}}, "/tmp")).ok());
}

TEST(RuntimeEnvCheckTest, RefusesWhatAWorkerCannotBeGiven) {
  for (const auto& [env, why] : std::vector<std::pair<proto::RuntimeEnvMsg, std::string>>{
           {Env({{"", "x"}}), "no name"},
           {Env({{"A=B", "x"}}), "'='"},
           {Env({{std::string("A\0B", 3), "x"}}), "NUL"},
           {Env({{"A", std::string("x\0y", 3)}}), "NUL"},
           {Env({{"ORRERY_HEAD_ADDRESS", "tcp://elsewhere"}}), "runtime's own"},
           {Env({}, "relative/dir"), "not absolute"},
           {Env({}, std::string("/tmp\0x", 6)), "NUL"},
       }) {
    Status s = runtime_env::Check(env);
    EXPECT_FALSE(s.ok()) << why;
    EXPECT_NE(s.message().find(why), std::string::npos) << s.message();
  }
  std::map<std::string, std::string> many;
  for (size_t i = 0; i <= runtime_env::kMaxVars; ++i) many["V" + std::to_string(i)] = "1";
  EXPECT_FALSE(runtime_env::Check(Env(many)).ok());
  EXPECT_FALSE(runtime_env::Check(Env({{"BIG", std::string(runtime_env::kMaxBytes, 'x')}})).ok());
}

TEST(RuntimeEnvCheckTest, FolderProblemNamesWhatIsWrong) {
  EXPECT_EQ(runtime_env::FolderProblem(ThisFolder()), "");
  EXPECT_NE(runtime_env::FolderProblem("/nonexistent-orrery-folder").find("No such file"),
            std::string::npos);
  EXPECT_NE(runtime_env::FolderProblem("/proc/self/stat").find("not a folder"), std::string::npos);
}

TEST(NodeRuntimeEnvTest, AWorkerStartsWithTheVariablesAndFolderOfItsRequest) {
  NodeHarness h;
  auto lease = NodeHarness::Lease({{"CPU", 1}});
  lease.request.runtime_env = Env({{"MODEL", "small"}}, ThisFolder());
  ASSERT_TRUE(h.Feed(MsgType::kGrantLease, lease).ok());
  ASSERT_EQ(h.processes->spawns.size(), 1u);
  const auto& env = h.processes->spawns[0].env;
  EXPECT_EQ(env.at("MODEL"), "small");
  EXPECT_EQ(env.at(runtime_env::kWorkingDirVar), ThisFolder());
  EXPECT_EQ(env.at("ORRERY_ROLE"), "worker");
}

TEST(NodeRuntimeEnvTest, AnIdleWorkerServesOnlyLeasesOfItsOwnEnv) {
  NodeHarness h;
  auto first = NodeHarness::Lease({{"CPU", 1}});
  first.request.runtime_env = Env({{"MODEL", "small"}});
  ASSERT_TRUE(h.Feed(MsgType::kGrantLease, first).ok());
  h.Accept(h.StartWorker(0, 5000, "tcp://w1"));
  ASSERT_TRUE(h.Feed(MsgType::kReleaseLease, proto::ReleaseLeaseMsg{first.request.lease_id}).ok());

  auto other = NodeHarness::Lease({{"CPU", 1}});
  other.request.runtime_env = Env({{"MODEL", "large"}});
  ASSERT_TRUE(h.Feed(MsgType::kGrantLease, other).ok());
  EXPECT_EQ(h.processes->spawns.size(), 2u) << "a worker of another env was reused";
  h.Accept(h.StartWorker(1, 5001, "tcp://w2"));
  ASSERT_TRUE(h.Feed(MsgType::kReleaseLease, proto::ReleaseLeaseMsg{other.request.lease_id}).ok());

  auto none = NodeHarness::Lease({{"CPU", 1}});
  ASSERT_TRUE(h.Feed(MsgType::kGrantLease, none).ok());
  EXPECT_EQ(h.processes->spawns.size(), 3u) << "a worker with an env served a lease without";

  auto same = NodeHarness::Lease({{"CPU", 1}});
  same.request.runtime_env = Env({{"MODEL", "small"}});
  ASSERT_TRUE(h.Feed(MsgType::kGrantLease, same).ok());
  EXPECT_EQ(h.processes->spawns.size(), 3u) << "the idle worker of the same env was not reused";
}

TEST(NodeRuntimeEnvTest, AFolderTheNodeLacksFailsTheRequestWithoutAProcess) {
  NodeHarness h;
  auto lease = NodeHarness::Lease({{"CPU", 1}});
  lease.request.runtime_env = Env({}, "/nonexistent-orrery-folder");
  ASSERT_TRUE(h.Feed(MsgType::kGrantLease, lease).ok());
  EXPECT_TRUE(h.processes->spawns.empty());
  auto reply = h.outbox.Take<proto::LeaseReplyMsg>(MsgType::kLeaseReply, "tcp://driver");
  ASSERT_TRUE(reply);
  EXPECT_FALSE(reply->ok);
  EXPECT_NE(reply->message.find("/nonexistent-orrery-folder"), std::string::npos) << reply->message;

  auto actor = NodeHarness::Actor({{"CPU", 1}});
  actor.spec.options.runtime_env = Env({{"ORRERY_NODE_ADDRESS", "tcp://forged"}});
  ASSERT_TRUE(h.Feed(MsgType::kStartActor, actor).ok());
  EXPECT_TRUE(h.processes->spawns.empty()) << "a forged runtime variable reached a process";
  // Its creation failed (no restart would change that), with the reason.
  std::optional<proto::WorkerEventMsg> died;
  while (auto ev = h.outbox.Take<proto::WorkerEventMsg>(MsgType::kWorkerEvent, NodeHarness::kHead))
    if (ev->kind == int(proto::WorkerEventKind::kActorDied)) died = ev;
  ASSERT_TRUE(died) << "the actor's failure was not reported";
  EXPECT_EQ(died->error_kind, proto::ErrorKind::kCreationFailed);
  EXPECT_NE(died->cause.find("ORRERY_NODE_ADDRESS"), std::string::npos) << died->cause;
}

}  // namespace
}  // namespace orrery::node
