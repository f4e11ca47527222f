#include "common/text/utf8.h"

#include "gtest/gtest.h"

namespace forge {
namespace {

TEST(Utf8SequenceLengthTest, WellFormedSequences) {
  EXPECT_EQ(Utf8SequenceLength("a"), 1u);
  EXPECT_EQ(Utf8SequenceLength("\xC3\xA9rest"), 2u);          // é
  EXPECT_EQ(Utf8SequenceLength("\xE2\x82\xAC"), 3u);          // €
  EXPECT_EQ(Utf8SequenceLength("\xF0\x9F\x98\x80"), 4u);      // 😀
  EXPECT_EQ(Utf8SequenceLength("\xF4\x8F\xBF\xBF"), 4u);      // U+10FFFF
}

TEST(Utf8SequenceLengthTest, IllFormedSequences) {
  EXPECT_EQ(Utf8SequenceLength(""), 0u);
  EXPECT_EQ(Utf8SequenceLength("\x80"), 0u);                  // lone continuation byte
  EXPECT_EQ(Utf8SequenceLength("\xC0\xAF"), 0u);              // overlong '/'
  EXPECT_EQ(Utf8SequenceLength("\xE0\x80\xAF"), 0u);          // overlong, 3 bytes
  EXPECT_EQ(Utf8SequenceLength("\xED\xA0\x80"), 0u);          // surrogate U+D800
  EXPECT_EQ(Utf8SequenceLength("\xF4\x90\x80\x80"), 0u);      // above U+10FFFF
  EXPECT_EQ(Utf8SequenceLength("\xE2\x82"), 0u);              // truncated
  EXPECT_EQ(Utf8SequenceLength("\xE2\x28\xA1"), 0u);          // bad continuation
  EXPECT_EQ(Utf8SequenceLength("\xFF"), 0u);
}

}  // namespace
}  // namespace forge
