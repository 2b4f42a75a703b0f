// The registry of peers known to be gone (core/src/gone_peers.h): a thread that looks again
// sees only what was marked since, so a socket it opened to a later peer at an address that
// was marked before is left alone.
#include "core/src/gone_peers.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace orrery::transport {
namespace {

std::vector<std::string> Since(GonePeers& gone, uint64_t* seen) {
  std::vector<std::string> got;
  *seen = gone.Since(*seen, [&got](const std::string& a) { got.push_back(a); });
  return got;
}

TEST(GonePeersTest, ALookSeesOnlyWhatWasMarkedSinceTheLastOne) {
  GonePeers gone;
  uint64_t seen = 0;
  EXPECT_EQ(gone.generation(), 0u);
  EXPECT_TRUE(Since(gone, &seen).empty());

  gone.Mark("tcp://127.0.0.1:1000");
  EXPECT_EQ(gone.generation(), 1u);
  EXPECT_EQ(Since(gone, &seen), std::vector<std::string>{"tcp://127.0.0.1:1000"});
  EXPECT_EQ(seen, 1u);

  // A later process is given port 1000 and this thread opens a socket to it; then another
  // peer goes. The next look must not name port 1000 again.
  gone.Mark("tcp://127.0.0.1:2000");
  EXPECT_EQ(Since(gone, &seen), std::vector<std::string>{"tcp://127.0.0.1:2000"});
  EXPECT_TRUE(Since(gone, &seen).empty());

  // A thread that never looked sees everything kept.
  uint64_t fresh = 0;
  EXPECT_EQ(Since(gone, &fresh).size(), 2u);
}

TEST(GonePeersTest, OnlyTheLatestMarksAreKept) {
  GonePeers gone(4);
  for (int i = 0; i < 10; ++i) gone.Mark("tcp://127.0.0.1:" + std::to_string(1000 + i));
  uint64_t seen = 0;
  std::vector<std::string> got = Since(gone, &seen);
  EXPECT_LE(got.size(), 4u);
  ASSERT_FALSE(got.empty());
  EXPECT_EQ(got.back(), "tcp://127.0.0.1:1009");
  EXPECT_EQ(seen, 10u);
}

}  // namespace
}  // namespace orrery::transport
