// The Prometheus text exposition (core/internal/metrics.h) and the /metrics endpoint
// (core/internal/metrics_server.h), including hostile HTTP clients.
#include "core/internal/metrics.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <cmath>
#include <limits>
#include <string>

#include "core/internal/metrics_server.h"

namespace orrery::metrics {
namespace {

TEST(MetricsText, EscapesLabelValuesAndHelp) {
  EXPECT_EQ(EscapeLabelValue("a\\b\"c\nd"), "a\\\\b\\\"c\\nd");
  EXPECT_EQ(EscapeLabelValue(std::string("x\xff y\xc3", 5)), "x? y?");
  EXPECT_EQ(EscapeLabelValue("h\xc3\xa9"), "h\xc3\xa9");  // valid UTF-8 stays
  Exposition e;
  e.Begin("orrery_x", Exposition::Type::kGauge, "line one\nback\\slash");
  e.Add({{"state", "A\"B"}}, 2);
  EXPECT_EQ(e.text(),
            "# HELP orrery_x line one\\nback\\\\slash\n# TYPE orrery_x gauge\n"
            "orrery_x{state=\"A\\\"B\"} 2\n");
}

TEST(MetricsText, FormatsSpecialValues) {
  EXPECT_EQ(FormatValue(std::numeric_limits<double>::infinity()), "+Inf");
  EXPECT_EQ(FormatValue(-std::numeric_limits<double>::infinity()), "-Inf");
  EXPECT_EQ(FormatValue(std::nan("")), "NaN");
  EXPECT_EQ(FormatValue(0.1), "0.1");
  EXPECT_EQ(FormatValue(3), "3");
  EXPECT_EQ(std::stod(FormatValue(1.0 / 3)), 1.0 / 3);
}

TEST(MetricsText, DropsInvalidNamesInsteadOfWritingThem) {
  EXPECT_TRUE(ValidMetricName("orrery_a:b_1"));
  EXPECT_FALSE(ValidMetricName("1abc"));
  EXPECT_FALSE(ValidMetricName("a-b"));
  EXPECT_FALSE(ValidLabelName("__reserved"));
  EXPECT_FALSE(ValidLabelName("a:b"));
  Exposition e;
  e.Begin("bad name", Exposition::Type::kGauge, "h");
  e.Add({}, 1);
  e.Begin("orrery_ok", Exposition::Type::kCounter, "h");
  e.Add({{"bad-label", "v"}}, 1);
  e.Add({{"le", "v"}}, 1);
  e.Add({{"good", "v"}}, 5);
  EXPECT_EQ(e.text(), "# HELP orrery_ok h\n# TYPE orrery_ok counter\norrery_ok{good=\"v\"} 5\n");
}

TEST(MetricsText, HistogramBucketsAreCumulativeAndEndInInf) {
  Histogram h(ExponentialBounds(0.001, 2, 3));  // 0.001 0.002 0.004
  for (double v : {0.0005, 0.001, 0.003, 0.003, 10.0}) h.Observe(v);
  h.Observe(std::nan(""));  // ignored
  EXPECT_EQ(h.count(), 5u);
  Exposition e;
  e.Begin("orrery_lat_seconds", Exposition::Type::kHistogram, "h");
  e.AddHistogram({{"node", "n1"}}, h);
  EXPECT_EQ(e.text(),
            "# HELP orrery_lat_seconds h\n# TYPE orrery_lat_seconds histogram\n"
            "orrery_lat_seconds_bucket{node=\"n1\",le=\"0.001\"} 2\n"
            "orrery_lat_seconds_bucket{node=\"n1\",le=\"0.002\"} 2\n"
            "orrery_lat_seconds_bucket{node=\"n1\",le=\"0.004\"} 4\n"
            "orrery_lat_seconds_bucket{node=\"n1\",le=\"+Inf\"} 5\n"
            "orrery_lat_seconds_sum{node=\"n1\"} 10.0075\n"
            "orrery_lat_seconds_count{node=\"n1\"} 5\n");
}

TEST(MetricsText, MergeAddsBucketsOrFallsBackToInf) {
  Histogram a(ExponentialBounds(1, 2, 2)), b(ExponentialBounds(1, 2, 2)), c({5});
  a.Observe(0.5);
  b.Observe(3);
  c.Observe(1);
  a.Merge(b);
  a.Merge(c);
  EXPECT_EQ(a.counts, (std::vector<uint64_t>{1, 0, 2}));
  EXPECT_DOUBLE_EQ(a.sum, 4.5);
}

// Whether `r` holds a whole response: its head and the Content-Length bytes after it.
bool ResponseComplete(const std::string& r) {
  size_t end = r.find("\r\n\r\n");
  if (end == std::string::npos) return false;
  size_t length = 0;
  size_t at = r.find("Content-Length: ");
  if (at != std::string::npos && at < end) length = std::stoul(r.substr(at + 16));
  return r.size() >= end + 4 + length;
}

// A raw HTTP exchange with the server: sends `request`, returns what came back before the
// server closed the connection, a whole response came, or 5 s passed.
std::string Exchange(int port, const std::string& request) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  timeval tv{5, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(uint16_t(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    close(fd);
    return "<connect failed>";
  }
  size_t sent = 0;
  while (sent < request.size()) {
    ssize_t n = send(fd, request.data() + sent, request.size() - sent, MSG_NOSIGNAL);
    if (n <= 0) break;  // the server may close on a request it refuses
    sent += size_t(n);
  }
  std::string out;
  if (request.empty()) {  // a client that connects and goes at once
    close(fd);
    return out;
  }
  char buf[4096];
  ssize_t n;
  while ((n = recv(fd, buf, sizeof(buf), 0)) > 0) {
    out.append(buf, size_t(n));
    if (ResponseComplete(out)) break;  // the server may keep the connection open
  }
  close(fd);
  return out;
}

class MetricsServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto port = server_.Start("127.0.0.1", 0);
    ASSERT_TRUE(port.ok()) << port.status().message();
    port_ = port.value();
    server_.SetSnapshot("orrery_nodes_alive 2\n");
  }
  void ExpectStillServes() {
    std::string r =
        Exchange(port_, "GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    EXPECT_NE(r.find("HTTP/1.1 200"), std::string::npos) << r;
    EXPECT_NE(r.find("orrery_nodes_alive 2"), std::string::npos) << r;
    EXPECT_NE(r.find("text/plain; version=0.0.4"), std::string::npos) << r;
  }
  MetricsServer server_;
  int port_ = 0;
};

TEST_F(MetricsServerTest, ServesTheSnapshotAndItsUpdates) {
  EXPECT_EQ(server_.address(), "127.0.0.1:" + std::to_string(port_));
  ExpectStillServes();
  server_.SetSnapshot("orrery_nodes_alive 3\n");
  std::string r = Exchange(port_, "GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
  EXPECT_NE(r.find("orrery_nodes_alive 3"), std::string::npos) << r;
}

TEST_F(MetricsServerTest, AnythingButGetMetricsIsNotFound) {
  for (const char* req : {"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
                          "GET /metricsx HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
                          "GET /../metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"}) {
    std::string r = Exchange(port_, req);
    EXPECT_NE(r.find("HTTP/1.1 404"), std::string::npos) << req << " -> " << r;
    EXPECT_EQ(r.find("orrery_nodes_alive"), std::string::npos) << r;
  }
  std::string post = Exchange(port_,
                              "POST /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n"
                              "Connection: close\r\n\r\nabc");
  EXPECT_NE(post.find("HTTP/1.1 404"), std::string::npos) << post;
  ExpectStillServes();
}

TEST_F(MetricsServerTest, SurvivesGarbageAndHugeRequests) {
  std::string r = Exchange(port_, std::string("\x00\xff\x13garbage\r\n\r\n", 14));
  EXPECT_EQ(r.find("HTTP/1.1 200"), std::string::npos) << r;
  ExpectStillServes();
  std::string huge = "GET /metrics HTTP/1.1\r\nHost: x\r\nX-Big: " + std::string(1 << 20, 'a') +
                     "\r\nConnection: close\r\n\r\n";
  r = Exchange(port_, huge);
  EXPECT_EQ(r.find("HTTP/1.1 200"), std::string::npos) << r.substr(0, 200);
  ExpectStillServes();
  std::string body =
      "POST /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: 100000000\r\n"
      "Connection: close\r\n\r\n" +
      std::string(1 << 16, 'b');
  r = Exchange(port_, body);
  EXPECT_EQ(r.find("HTTP/1.1 200"), std::string::npos) << r.substr(0, 200);
  ExpectStillServes();
  r = Exchange(port_, "");  // connect and close at once
  ExpectStillServes();
}

TEST(MetricsServerStart, OffWhenThePortIsMinusOneAndRefusesATakenPort) {
  MetricsServer off;
  auto none = StartIfEnabled(off, "127.0.0.1", -1);
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(none.value(), "");
  MetricsServer a, b;
  auto port = a.Start("127.0.0.1", 0);
  ASSERT_TRUE(port.ok());
  auto taken = b.Start("127.0.0.1", port.value());
  EXPECT_FALSE(taken.ok());
}

}  // namespace
}  // namespace orrery::metrics
