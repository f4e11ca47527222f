#include "common/text/json.h"

#include <string>

#include "gtest/gtest.h"

namespace forge {
namespace {

TEST(JsonStringTest, QuotesPlainText) { EXPECT_EQ(JsonString("relu+add"), "\"relu+add\""); }

TEST(JsonStringTest, EscapesQuotesBackslashesAndControlCharacters) {
  EXPECT_EQ(JsonString("say \"hi\"\\"), R"("say \"hi\"\\")");
  EXPECT_EQ(JsonString("a\nb\tc"), R"("a\nb\tc")");
  EXPECT_EQ(JsonString(std::string("\x01\x1f", 2)), R"("\u0001\u001f")");
}

TEST(JsonStringTest, CopiesNonAsciiBytes) { EXPECT_EQ(JsonString("µs"), "\"µs\""); }

}  // namespace
}  // namespace forge
