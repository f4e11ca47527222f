#include "worker/judge/host_tensor.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <utility>
#include <vector>

#include "gtest/gtest.h"

namespace forge::judge {
namespace {

using forge::v1::DType;

forge::v1::TensorSpec Spec(DType dtype, std::vector<int64_t> shape,
                           std::vector<int64_t> strides = {}) {
  forge::v1::TensorSpec spec;
  spec.set_dtype(dtype);
  for (int64_t size : shape) spec.add_shape(size);
  for (int64_t stride : strides) spec.add_strides(stride);
  return spec;
}

TEST(HalfTest, KnownBitPatterns) {
  EXPECT_EQ(FloatToHalfBits(1.0f), 0x3C00);
  EXPECT_EQ(FloatToHalfBits(-2.0f), 0xC000);
  EXPECT_EQ(FloatToHalfBits(65504.0f), 0x7BFF);
  EXPECT_EQ(FloatToHalfBits(65520.0f), 0x7C00);  // rounds up to infinity
  EXPECT_EQ(FloatToHalfBits(std::ldexp(1.0f, -24)), 0x0001);  // smallest subnormal
  EXPECT_EQ(FloatToHalfBits(std::ldexp(1.0f, -26)), 0x0000);  // below half of it: zero
  EXPECT_EQ(FloatToHalfBits(1.0f + std::ldexp(1.0f, -11)), 0x3C00);  // tie to even
  EXPECT_EQ(FloatToHalfBits(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3C02);  // tie to even, up
  EXPECT_TRUE(std::isnan(HalfBitsToFloat(0x7E00)));
  EXPECT_EQ(HalfBitsToFloat(0x3555), 0.333251953125f);
  for (uint32_t bits = 0; bits < 0x7C00; ++bits) {  // every finite positive half round-trips
    ASSERT_EQ(FloatToHalfBits(HalfBitsToFloat(static_cast<uint16_t>(bits))), bits);
  }
}

TEST(Bfloat16Test, KnownBitPatterns) {
  EXPECT_EQ(FloatToBfloat16Bits(1.0f), 0x3F80);
  EXPECT_EQ(FloatToBfloat16Bits(-1.5f), 0xBFC0);
  EXPECT_EQ(FloatToBfloat16Bits(1.0f + std::ldexp(1.0f, -8)), 0x3F80);  // tie to even
  EXPECT_EQ(Bfloat16BitsToFloat(0x4049), 3.140625f);
  EXPECT_TRUE(std::isnan(Bfloat16BitsToFloat(0x7FC0)));
  EXPECT_TRUE(std::isinf(Bfloat16BitsToFloat(0x7F80)));
}

// Rounding to float16, bfloat16 and float8_e5m2 against an oracle that knows nothing of the
// encoder: every finite value of the type (decoded from each bit pattern), the nearest one chosen,
// ties to the even pattern, past the largest one by half a step or more infinity. Random values of
// every magnitude, every midpoint between neighbours, and the neighbours' next doubles.
TEST(RoundToDTypeTest, MatchesTheNearestValueOfTheType) {
  for (DType dtype : {forge::v1::DTYPE_FLOAT16, forge::v1::DTYPE_BFLOAT16,
                      forge::v1::DTYPE_FLOAT8_E5M2}) {
    SCOPED_TRACE(forge::v1::DType_Name(dtype));
    const int bytes = *ElementBytes(dtype);
    std::vector<std::pair<double, uint32_t>> finite;  // non-negative values, ascending
    for (uint32_t bits = 0; bits < (1u << (8 * bytes - 1)); ++bits) {
      std::byte buffer[2] = {};
      std::memcpy(buffer, &bits, bytes);
      const double value = DecodeElement(dtype, buffer);
      if (std::isfinite(value)) finite.push_back({value, bits});
    }
    auto nearest = [&](double magnitude) {
      auto above = std::lower_bound(finite.begin(), finite.end(), std::make_pair(magnitude, 0u));
      if (above == finite.end()) {
        const double step = finite.back().first - finite[finite.size() - 2].first;
        return magnitude >= finite.back().first + step / 2
                   ? std::numeric_limits<double>::infinity() : finite.back().first;
      }
      if (above == finite.begin() || above->first == magnitude) return above->first;
      const auto below = above - 1;
      const double up = above->first - magnitude;
      const double down = magnitude - below->first;
      if (up != down) return up < down ? above->first : below->first;
      return (above->second & 1) == 0 ? above->first : below->first;
    };
    std::vector<double> probes;
    for (size_t i = 0; i + 1 < finite.size(); ++i) {
      const double middle = (finite[i].first + finite[i + 1].first) / 2;
      probes.insert(probes.end(), {middle, std::nextafter(middle, 0.0),
                                   std::nextafter(middle, 1e300), finite[i].first});
    }
    std::mt19937_64 random(11);
    std::uniform_real_distribution<double> exponent(-30, 20);
    for (int i = 0; i < 200000; ++i) probes.push_back(std::exp2(exponent(random)));
    for (double magnitude : probes) {
      for (double value : {magnitude, -magnitude}) {
        const double expected = std::copysign(nearest(magnitude), value);
        ASSERT_EQ(RoundToDType(dtype, value), expected) << "rounding " << value;
      }
    }
  }
}

TEST(RoundToDTypeTest, FollowsEachType) {
  EXPECT_EQ(RoundToDType(forge::v1::DTYPE_FLOAT32, 0.1), static_cast<double>(0.1f));
  EXPECT_EQ(RoundToDType(forge::v1::DTYPE_FLOAT8_E4M3FN, 448.0), 448.0);
  EXPECT_TRUE(std::isnan(RoundToDType(forge::v1::DTYPE_FLOAT8_E4M3FN, 1000.0)));
  EXPECT_EQ(RoundToDType(forge::v1::DTYPE_FLOAT8_E5M2, 57344.0), 57344.0);
  EXPECT_EQ(RoundToDType(forge::v1::DTYPE_INT8, 300.0), 127.0);
  EXPECT_EQ(RoundToDType(forge::v1::DTYPE_INT32, -2.7), -2.0);
  EXPECT_EQ(RoundToDType(forge::v1::DTYPE_BOOL, 0.5), 1.0);
  EXPECT_EQ(RoundToDType(forge::v1::DTYPE_INT64, 1e15), 1e15);
}

TEST(ShapeTest, CountsStridesAndIndices) {
  forge::v1::TensorSpec matrix = Spec(forge::v1::DTYPE_FLOAT32, {1000, 1003});
  EXPECT_EQ(ElementCount(matrix), 1003000);
  EXPECT_EQ(StorageElementCount(matrix), 1003000);
  EXPECT_EQ(Unravel(matrix.shape(), 1003), (std::vector<int64_t>{1, 0}));
  EXPECT_EQ(FormatIndex(Unravel(matrix.shape(), 2005)), "[1, 1002]");
  EXPECT_EQ(DescribeSpec(matrix), "float32[1000, 1003]");

  forge::v1::TensorSpec scalar = Spec(forge::v1::DTYPE_FLOAT64, {});
  EXPECT_EQ(ElementCount(scalar), 1);
  EXPECT_EQ(StorageElementCount(scalar), 1);

  // A transposed 2x3 view of 3x2 storage.
  forge::v1::TensorSpec transposed = Spec(forge::v1::DTYPE_FLOAT32, {2, 3}, {1, 2});
  EXPECT_EQ(StorageElementCount(transposed), 6);
  EXPECT_EQ(StorageOffsetOf(transposed, 1), 2);
  EXPECT_EQ(StorageOffsetOf(transposed, 3), 1);
  EXPECT_EQ(ElementCount(Spec(forge::v1::DTYPE_FLOAT32, {4, 0})), 0);
  EXPECT_EQ(StorageElementCount(Spec(forge::v1::DTYPE_FLOAT32, {4, 0})), 0);
}

TEST(HostTensorTest, SetsAndGetsThroughStrides) {
  auto tensor = HostTensor::Allocate(Spec(forge::v1::DTYPE_BFLOAT16, {2, 3}, {1, 2}));
  ASSERT_TRUE(tensor.ok()) << tensor.status();
  EXPECT_EQ(tensor->storage.size(), 12u);
  for (int i = 0; i < 6; ++i) tensor->Set(i, i + 0.5);
  EXPECT_EQ(tensor->ToDoubles(), (std::vector<double>{0.5, 1.5, 2.5, 3.5, 4.5, 5.5}));
  uint16_t stored = 0;
  std::memcpy(&stored, tensor->storage.data() + 2 * 2, 2);  // storage slot 2 holds element [0, 1]
  EXPECT_EQ(Bfloat16BitsToFloat(stored), 1.5f);

  EXPECT_FALSE(HostTensor::Allocate(Spec(forge::v1::DTYPE_UNSPECIFIED, {2})).ok());
  EXPECT_FALSE(HostTensor::Allocate(Spec(forge::v1::DTYPE_FLOAT32, {-1})).ok());
}

}  // namespace
}  // namespace forge::judge
