#include "common/dtype/dtype.h"

#include "gtest/gtest.h"

namespace forge {
namespace {

TEST(DTypeBytesTest, MatchesTorchElementSizes) {
  EXPECT_EQ(DTypeBytes(forge::v1::DTYPE_FLOAT64), 8);
  EXPECT_EQ(DTypeBytes(forge::v1::DTYPE_COMPLEX64), 8);
  EXPECT_EQ(DTypeBytes(forge::v1::DTYPE_INT32), 4);
  EXPECT_EQ(DTypeBytes(forge::v1::DTYPE_BFLOAT16), 2);
  EXPECT_EQ(DTypeBytes(forge::v1::DTYPE_FLOAT8_E5M2), 1);
  EXPECT_EQ(DTypeBytes(forge::v1::DTYPE_BOOL), 1);
}

TEST(DTypeBytesTest, EveryDTypeButUnspecifiedHasASize) {
  EXPECT_EQ(DTypeBytes(forge::v1::DTYPE_UNSPECIFIED), 0);
  for (int value = forge::v1::DType_MIN; value <= forge::v1::DType_MAX; ++value) {
    const auto dtype = static_cast<forge::v1::DType>(value);
    if (!forge::v1::DType_IsValid(value) || dtype == forge::v1::DTYPE_UNSPECIFIED) continue;
    EXPECT_GT(DTypeBytes(dtype), 0) << forge::v1::DType_Name(dtype);
  }
}

TEST(IsFloatingPointTest, FloatsIncludingFloat8ButNotComplexOrIntegers) {
  EXPECT_TRUE(IsFloatingPoint(forge::v1::DTYPE_FLOAT64));
  EXPECT_TRUE(IsFloatingPoint(forge::v1::DTYPE_BFLOAT16));
  EXPECT_TRUE(IsFloatingPoint(forge::v1::DTYPE_FLOAT8_E4M3FN));
  EXPECT_FALSE(IsFloatingPoint(forge::v1::DTYPE_COMPLEX64));
  EXPECT_FALSE(IsFloatingPoint(forge::v1::DTYPE_INT64));
  EXPECT_FALSE(IsFloatingPoint(forge::v1::DTYPE_BOOL));
  EXPECT_FALSE(IsFloatingPoint(forge::v1::DTYPE_UNSPECIFIED));
}

TEST(DTypeNameTest, SpellsDTypesAsTorchDoes) {
  EXPECT_EQ(DTypeName(forge::v1::DTYPE_FLOAT32), "float32");
  EXPECT_EQ(DTypeName(forge::v1::DTYPE_BFLOAT16), "bfloat16");
  EXPECT_EQ(DTypeName(forge::v1::DTYPE_FLOAT8_E4M3FN), "float8_e4m3fn");
}

}  // namespace
}  // namespace forge
