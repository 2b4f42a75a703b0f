// The dashboard's change feed (dashboard/src/events.h): versions move only on a change.
#include "dashboard/src/events.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

namespace orrery::dashboard {
namespace {

TEST(ChangeFeedTest, TheVersionMovesOnlyWhenWhatThePagesShowChanged) {
  ChangeFeed feed(nullptr);
  std::map<std::string, uint64_t> d{{"nodes", 1}, {"actors", 2}};
  FeedState s = feed.Observe(d, true, "");
  EXPECT_EQ(s.version, 1u);
  EXPECT_EQ(feed.Observe(d, true, "").version, 1u);  // nothing changed
  d["actors"] = 3;
  s = feed.Observe(d, true, "");
  EXPECT_EQ(s.version, 2u);
  EXPECT_EQ(s.changed, std::vector<std::string>{"actors"});
  s = feed.Observe({}, false, "Redis is down");
  EXPECT_EQ(s.version, 3u);
  EXPECT_FALSE(s.redis_ok);
  EXPECT_EQ(feed.Observe({}, false, "Redis is down").version, 3u);
  s = feed.Observe(d, true, "");
  EXPECT_EQ(s.version, 4u);
  EXPECT_EQ(s.changed, (std::vector<std::string>{"nodes", "actors"}));
}

TEST(ChangeFeedTest, WithoutRedisTheStateSaysSo) {
  ChangeFeed feed(nullptr);
  FeedState s = feed.Current(ChangeFeed::Clock::now());
  EXPECT_EQ(s.version, 1u);
  EXPECT_FALSE(s.redis_ok);
  EXPECT_FALSE(s.redis_error.empty());
}

TEST(ChangeFeedTest, StreamsAreBounded) {
  ChangeFeed feed(nullptr);
  for (int i = 0; i < ChangeFeed::kMaxStreams; ++i) EXPECT_TRUE(feed.OpenStream());
  EXPECT_FALSE(feed.OpenStream());
  feed.CloseStream();
  EXPECT_TRUE(feed.OpenStream());
}

TEST(ChangeFeedTest, DigestsTellTablesApart) {
  EXPECT_EQ(TableDigest({{"a", "1"}}), TableDigest({{"a", "1"}}));
  EXPECT_NE(TableDigest({{"a", "1"}}), TableDigest({{"a", "2"}}));
  EXPECT_NE(TableDigest({{"ab", ""}}), TableDigest({{"a", "b"}}));
  EXPECT_NE(TableDigest({}), TableDigest({{"", ""}}));
}

TEST(ChangeFeedTest, AnEventIsOneIdOneNameAndOneLineOfJson) {
  FeedState s{7, {"actors"}, false, "line one\nline two \xff"};
  std::string e = FormatEvent(s);
  ASSERT_EQ(e.rfind("id: 7\nevent: change\ndata: ", 0), 0u) << e;
  ASSERT_EQ(e.substr(e.size() - 2), "\n\n");
  std::string data = e.substr(e.find("data: ") + 6);
  data.resize(data.size() - 2);
  EXPECT_EQ(data.find('\n'), std::string::npos);
  auto j = nlohmann::json::parse(data);
  EXPECT_EQ(j["version"], 7);
  EXPECT_EQ(j["changed"], nlohmann::json::array({"actors"}));
  EXPECT_EQ(j["redis"]["ok"], false);
}

}  // namespace
}  // namespace orrery::dashboard
