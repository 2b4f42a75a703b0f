// The line protocol an Entrypoint's process speaks to its worker (docs/train.md "The line
// protocol"): AnswerRequest against a recording Context. Every request gets one JSON object
// back; malformed and hostile lines get an "error" and change nothing.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "orrery/errors.h"
#include "tests/fakes/temp_dir.h"
#include "train/src/entrypoint_process.h"

namespace orrery::train::internal {
namespace {

using nlohmann::json;

// Records reports; answers the context questions with fixed values.
class RecordingContext : public Context {
 public:
  int WorldRank() const override { return 1; }
  int WorldSize() const override { return 3; }
  int LocalRank() const override { return 0; }
  int LocalWorldSize() const override { return 1; }
  int NodeRank() const override { return 1; }
  const std::string& Device() const override { return device_; }
  const DeviceMesh& Mesh() const override { return mesh_; }
  const nlohmann::json& Config() const override { return config_; }
  const std::map<std::string, std::string>& Environment() const override { return env_; }
  const std::string& RunName() const override { return name_; }
  const std::string& RunPath() const override { return path_; }
  void Report(const Metrics& metrics) override { reports.push_back({metrics, ""}); }
  void Report(const Metrics& metrics, const Checkpoint& checkpoint) override {
    if (checkpoint.Path() == "/refused")
      throw orrery::Error("Report: the checkpoint is not a directory");
    reports.push_back({metrics, checkpoint.Path()});
  }
  std::optional<Checkpoint> GetCheckpoint() const override { return checkpoint; }
  void Barrier() override {}
  void AllReduceRaw(void*, size_t, int, ReduceOp) override {}
  void BroadcastRaw(void*, size_t, int) override {}
  std::vector<std::string> AllGatherRaw(const void*, size_t) override { return {}; }

  std::vector<std::pair<Metrics, std::string>> reports;
  std::optional<Checkpoint> checkpoint;

 private:
  std::string device_ = "cpu", name_ = "run", path_ = "/runs/run";
  DeviceMesh mesh_;
  nlohmann::json config_ = {{"lr", 0.1}};
  std::map<std::string, std::string> env_;
};

json Ask(Context& ctx, const std::string& line) {
  std::string answer = AnswerRequest(ctx, line);
  EXPECT_EQ(answer.find('\n'), std::string::npos) << "one line: " << answer;
  json j = json::parse(answer, nullptr, false);
  EXPECT_TRUE(j.is_object()) << answer;
  return j;
}

TEST(LineProtocolTest, ContextCheckpointAndReportsAreAnswered) {
  RecordingContext ctx;
  EXPECT_EQ(Ask(ctx, R"({"op":"hello","pid":12})")["ok"], true);
  EXPECT_EQ(Ask(ctx, R"({"op":"heartbeat"})")["ok"], true);
  json c = Ask(ctx, R"({"op":"get_context"})")["context"];
  EXPECT_EQ(c["world_rank"], 1);
  EXPECT_EQ(c["world_size"], 3);
  EXPECT_EQ(c["node_rank"], 1);
  EXPECT_EQ(c["storage_path"], "/runs/run");
  EXPECT_EQ(c["train_loop_config"]["lr"], 0.1);
  EXPECT_TRUE(Ask(ctx, R"({"op":"get_checkpoint"})")["checkpoint"].is_null());
  ctx.checkpoint = Checkpoint("/runs/run/checkpoint_000002");
  EXPECT_EQ(Ask(ctx, R"({"op":"get_checkpoint"})")["checkpoint"], "/runs/run/checkpoint_000002");

  EXPECT_EQ(Ask(ctx, R"({"op":"report","metrics":{"loss":0.5,"ok":true,"name":"x"}})")["ok"], true);
  EXPECT_EQ(Ask(ctx, R"({"op":"report","metrics":{"step":2},"checkpoint_dir":"/tmp/c"})")["ok"],
            true);
  ASSERT_EQ(ctx.reports.size(), 2u);
  EXPECT_EQ(ctx.reports[0].first, (Metrics{{"loss", 0.5}, {"ok", 1}})) << "strings are dropped";
  EXPECT_EQ(ctx.reports[1].second, "/tmp/c");
}

TEST(LineProtocolTest, MalformedAndHostileLinesGetAnErrorAndChangeNothing) {
  RecordingContext ctx;
  for (const char* line : {"", "not json", "[1,2]", "42", "null", R"({"op":7})", R"({"no_op":1})",
                           R"({"op":"rm -rf"})", R"({"op":"report"})",
                           R"({"op":"report","metrics":[1]})", R"({"op":"report","metrics":"x"})",
                           "{\"op\":\"report\",\"metrics\":{\"a\":1}", "{\"op\":\"\xff\xfe\"}"}) {
    json j = Ask(ctx, line);
    EXPECT_TRUE(j.contains("error")) << "line: " << line << " answer: " << j.dump();
  }
  EXPECT_TRUE(ctx.reports.empty());
  json refused = Ask(ctx, R"({"op":"report","metrics":{"a":1},"checkpoint_dir":"/refused"})");
  EXPECT_NE(refused.value("error", "").find("not a directory"), std::string::npos)
      << refused.dump();
}

TEST(LineProtocolTest, DeepNestingIsAnErrorNotACrash) {
  RecordingContext ctx;
  std::string deep = R"({"op":"report","metrics":{"a":)" + std::string(100000, '[') +
                     std::string(100000, ']') + "}}";
  json j = Ask(ctx, deep);
  EXPECT_TRUE(j.contains("error") || j.value("ok", false)) << j.dump().substr(0, 200);
  EXPECT_TRUE(ctx.reports.empty() || ctx.reports[0].first.empty());
}

// The socket folders of workers that were killed go at the next run; a live process's, names
// that are not such folders, files and symbolic links stay (and a link's target with them).
TEST(SocketFolders, OnlyThoseOfEndedProcessesAreRemoved) {
  namespace fs = std::filesystem;
  orrery::testing::TempDir root("orrery_socket_folders");
  ASSERT_FALSE(root.path().empty());
  pid_t ended = fork();
  ASSERT_GE(ended, 0);
  if (ended == 0) _exit(0);
  ASSERT_EQ(waitpid(ended, nullptr, 0), ended);
  const std::string dead = "orrery-train-" + std::to_string(ended) + "-";
  const fs::path r(root.path());
  fs::create_directories(r / (dead + "abcdef"));
  std::ofstream(r / (dead + "abcdef") / "train.sock") << "x";
  fs::create_directories(r / ("orrery-train-" + std::to_string(getpid()) + "-live00"));
  fs::create_directories(r / "orrery-train-Ab12Cd");  // the old names, without a pid
  fs::create_directories(r / "orrery-train-12a-bcdefg");
  fs::create_directories(r / "orrery-train--123456");
  std::ofstream(r / (dead + "file00")) << "x";
  fs::create_directories(r / "elsewhere");
  std::ofstream(r / "elsewhere" / "keep") << "x";
  fs::create_directory_symlink(r / "elsewhere", r / (dead + "link00"));

  RemoveEndedSocketFolders(root.path());
  EXPECT_FALSE(fs::exists(r / (dead + "abcdef")));
  EXPECT_TRUE(fs::exists(r / ("orrery-train-" + std::to_string(getpid()) + "-live00")));
  EXPECT_TRUE(fs::exists(r / "orrery-train-Ab12Cd"));
  EXPECT_TRUE(fs::exists(r / "orrery-train-12a-bcdefg"));
  EXPECT_TRUE(fs::exists(r / "orrery-train--123456"));
  EXPECT_TRUE(fs::exists(r / (dead + "file00")));
  EXPECT_TRUE(fs::is_symlink(r / (dead + "link00")));
  EXPECT_TRUE(fs::exists(r / "elsewhere" / "keep"));
  RemoveEndedSocketFolders(root.path() + "/no such folder");  // nothing to read: no error
}

}  // namespace
}  // namespace orrery::train::internal
