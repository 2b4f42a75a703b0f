// Escaping text from elsewhere before a terminal or a record shows it.
#include "core/src/text.h"

#include <gtest/gtest.h>

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

}  // namespace
}  // namespace orrery::text
