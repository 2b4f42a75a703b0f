// Escaping text from elsewhere before a terminal or a record shows it.
#include "core/internal/text.h"

#include <gtest/gtest.h>

#include "core/internal/advertised_host.h"

namespace orrery::text {
namespace {

TEST(TextTest, EscapeControlWritesControlBytesAsHex) {
  EXPECT_EQ(EscapeControl("plain text\twith a tab"), "plain text\twith a tab");
  EXPECT_EQ(EscapeControl("\x1b[2J"), "\\x1b[2J");
  EXPECT_EQ(EscapeControl(std::string("a\0b", 3)), "a\\x00b");
  EXPECT_EQ(EscapeControl("line\r\nnext\x7f"), "line\\x0d\\x0anext\\x7f");
  EXPECT_EQ(EscapeControl("caf\xc3\xa9"), "caf\xc3\xa9");  // UTF-8 passes
  EXPECT_EQ(EscapeControl(""), "");
}

TEST(TextTest, PrintableTokensHaveNoSpacesOrControlBytes) {
  EXPECT_TRUE(IsPrintableToken("tcp://127.0.0.1:6380"));
  EXPECT_TRUE(IsPrintableToken(""));
  EXPECT_FALSE(IsPrintableToken("a b"));
  EXPECT_FALSE(IsPrintableToken("a\nb"));
  EXPECT_FALSE(IsPrintableToken("caf\xc3\xa9"));
}

TEST(TextTest, AdvertisedHostsAreIpv4AddressesOrHostNames) {
  for (const char* ok : {"127.0.0.2", "10.8.0.17", "localhost", "orrery-head.orrery.svc",
                         "pod-0.orrery-tpu-slice-a.orrery.svc.cluster.local", "a1-b2"}) {
    EXPECT_TRUE(CheckAdvertisedHost(ok).ok()) << ok;
  }
  EXPECT_FALSE(CheckAdvertisedHost("").ok());
  EXPECT_NE(CheckAdvertisedHost("0.0.0.0").message().find("binds every address"),
            std::string::npos);
  EXPECT_NE(CheckAdvertisedHost("::1").message().find("IPv6"), std::string::npos);
  EXPECT_NE(CheckAdvertisedHost("[fe80::1]").message().find("IPv6"), std::string::npos);
  EXPECT_NE(CheckAdvertisedHost("300.1.1.1").message().find("not a valid IPv4"), std::string::npos);
  EXPECT_NE(CheckAdvertisedHost("1.2.3").message().find("not a valid IPv4"), std::string::npos);
  for (const char* bad : {"-lead.example", "trail-.example", "a..b", "a.", "under_score", "sp ace",
                          "tcp://10.0.0.1", "10.0.0.1:6380", "caf\xc3\xa9"}) {
    Status s = CheckAdvertisedHost(bad);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << bad;
  }
  EXPECT_FALSE(CheckAdvertisedHost(std::string(64, 'a')).ok());
  EXPECT_TRUE(CheckAdvertisedHost(std::string(63, 'a')).ok());
  // A control byte in the value is escaped in the message, not echoed to the terminal.
  EXPECT_NE(CheckAdvertisedHost("a\x1b[2J").message().find("\\x1b"), std::string::npos);
}

}  // namespace
}  // namespace orrery::text
