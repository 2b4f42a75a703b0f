// `orrery metrics targets`: the file_sd JSON from Redis records, hostile ones included.
#include "cli/src/metrics_targets.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

namespace orrery::cli {
namespace {

const std::string kNode1 = "0123456789abcdef0123456789abcdef";
const std::string kNode2 = "fedcba9876543210fedcba9876543210";

TEST(MetricsTargets, ListsTheHeadAndEachAliveNode) {
  std::map<std::string, std::string> head = {{"head", R"({"metrics_address": "127.0.0.1:9100"})"}};
  std::map<std::string, std::string> nodes = {
      {kNode1, R"({"alive": true, "metrics_address": "127.0.0.1:9101"})"},
      {kNode2, R"({"alive": false, "metrics_address": "127.0.0.1:9102"})"}};
  auto j = nlohmann::json::parse(MetricsTargetsJson(head, nodes));
  ASSERT_EQ(j.size(), 2u) << j.dump();
  EXPECT_EQ(j[0]["targets"][0], "127.0.0.1:9100");
  EXPECT_EQ(j[0]["labels"]["role"], "head");
  EXPECT_EQ(j[1]["targets"][0], "127.0.0.1:9101");
  EXPECT_EQ(j[1]["labels"]["role"], "node");
  EXPECT_EQ(j[1]["labels"]["node_id"], kNode1);
}

TEST(MetricsTargets, LeavesOutWhatIsNotATarget) {
  std::map<std::string, std::string> head = {{"head", R"({"metrics_address": ""})"}};
  std::map<std::string, std::string> nodes = {
      {kNode1, "not json"},
      {kNode2, R"({"alive": true, "metrics_address": "evil\"]:80"})"},
      {"notanid", R"({"alive": true, "metrics_address": "127.0.0.1:9101"})"},
      {"00000000000000000000000000000001", R"({"alive": "yes", "metrics_address": "a:1"})"},
      {"00000000000000000000000000000002", R"({"alive": true, "metrics_address": "a:99999"})"},
      {"00000000000000000000000000000003", R"({"alive": true, "metrics_address": 5})"},
      {"00000000000000000000000000000004", R"([1, 2])"}};
  EXPECT_EQ(MetricsTargetsJson(head, nodes), "[]\n");
  EXPECT_EQ(MetricsTargetsJson({}, {}), "[]\n");
}

TEST(MetricsTargets, AddressCheck) {
  EXPECT_TRUE(IsTargetAddress("127.0.0.1:9100"));
  EXPECT_TRUE(IsTargetAddress("host-a.example:1"));
  EXPECT_TRUE(IsTargetAddress("[::1]:9100"));
  EXPECT_FALSE(IsTargetAddress(":9100"));
  EXPECT_FALSE(IsTargetAddress("host"));
  EXPECT_FALSE(IsTargetAddress("host:0"));
  EXPECT_FALSE(IsTargetAddress("host:abc"));
  EXPECT_FALSE(IsTargetAddress("ho st:1"));
  EXPECT_FALSE(IsTargetAddress(std::string(300, 'a') + ":1"));
}

}  // namespace
}  // namespace orrery::cli
