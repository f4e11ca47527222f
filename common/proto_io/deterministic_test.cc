#include "common/proto_io/deterministic.h"

#include "forge/v1/task.pb.h"
#include "gtest/gtest.h"

namespace forge {
namespace {

TEST(SerializeDeterministicTest, MapsFilledInAnyOrderGiveTheSameBytes) {
  forge::v1::JobOptions forward, backward;
  for (int i = 0; i < 32; ++i) (*forward.mutable_labels())[std::to_string(i)] = "v";
  for (int i = 31; i >= 0; --i) (*backward.mutable_labels())[std::to_string(i)] = "v";
  EXPECT_EQ(SerializeDeterministic(forward), SerializeDeterministic(backward));

  forge::v1::JobOptions parsed;
  ASSERT_TRUE(parsed.ParseFromString(SerializeDeterministic(forward)));
  EXPECT_EQ(parsed.labels_size(), 32);
  EXPECT_EQ(SerializeDeterministic(forge::v1::JobOptions()), "");
}

}  // namespace
}  // namespace forge
