// `--history-ttl` durations (cli/src/duration.h).
#include "cli/src/duration.h"

#include <gtest/gtest.h>

namespace orrery::cli {
namespace {

TEST(DurationTest, SecondsMinutesHoursDays) {
  EXPECT_EQ(ParseDuration("45").value(), 45);
  EXPECT_EQ(ParseDuration("45s").value(), 45);
  EXPECT_EQ(ParseDuration("30m").value(), 1800);
  EXPECT_EQ(ParseDuration("12h").value(), 43200);
  EXPECT_EQ(ParseDuration("7d").value(), 604800);
  EXPECT_EQ(ParseDuration("2s").value(), 2);
  EXPECT_EQ(ParseDuration("0").value(), 0);
  EXPECT_EQ(ParseDuration("36500d").value(), kMaxDurationS);
}

TEST(DurationTest, AnythingElseIsRefusedSayingWhy) {
  for (const char* bad : {"", "d", "s", "-5", "+5", "1.5h", "5w", "5 d", " 5", "5dd", "1e3",
                          "36501d", "99999999999999999999999", "5\xff"}) {
    auto d = ParseDuration(bad);
    ASSERT_FALSE(d.ok()) << bad;
    EXPECT_EQ(d.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(d.status().message().find("is not a duration"), std::string::npos)
        << d.status().message();
  }
  EXPECT_EQ(CheckDuration("7d"), "");
  EXPECT_NE(CheckDuration("7x"), "");
}

}  // namespace
}  // namespace orrery::cli
