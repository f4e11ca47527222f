#include "worker/timer/ceilings.h"

#include <filesystem>
#include <fstream>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/support/subprocess.h"

namespace forge::timer {
namespace {

using ::testing::HasSubstr;

MeasuredCeilings H200LikeCeilings() {
  MeasuredCeilings ceilings;
  ceilings.device_name = "NVIDIA H200";
  ceilings.driver_version = 13000;
  ceilings.measured_at = absl::FromUnixNanos(1796000000123456789);
  ceilings.copy_bytes_per_second = 4.0e12;
  ceilings.bf16_flops_per_second = 800.0e12;
  ceilings.fp16_flops_per_second = 810.0e12;
  ceilings.fp32_flops_per_second = 50.0e12;
  return ceilings;
}

TEST(MatmulFlopsTest, PicksTheMeasuredThroughputOfEachMode) {
  const MeasuredCeilings ceilings = H200LikeCeilings();
  // bf16 mode covers bf16 and fp16 data: the faster of the two bounds it.
  EXPECT_EQ(ceilings.MatmulFlops(MathMode::kBf16).value(), 810.0e12);
  EXPECT_EQ(ceilings.MatmulFlops(MathMode::kFp32).value(), 50.0e12);
  for (MathMode unmeasured : {MathMode::kTf32, MathMode::kFp8, MathMode::kFp64}) {
    absl::StatusOr<double> flops = ceilings.MatmulFlops(unmeasured);
    EXPECT_TRUE(absl::IsNotFound(flops.status())) << MathModeName(unmeasured);
    EXPECT_THAT(flops.status().message(), HasSubstr(MathModeName(unmeasured)));
    EXPECT_THAT(flops.status().message(), HasSubstr("NVIDIA H200"));
  }
}

TEST(FloorFromCeilingsTest, ComputeBoundTakesTheModesThroughput) {
  // 2 * 4096^3 flops over 3 * 4096^2 * 2 bytes: far past the ridge point.
  const double flops = 2.0 * 4096 * 4096 * 4096;
  const double bytes = 3.0 * 4096 * 4096 * 2;
  absl::StatusOr<Roofline> bf16 = FloorFromCeilings(H200LikeCeilings(), flops, bytes, MathMode::kBf16);
  ASSERT_TRUE(bf16.ok()) << bf16.status();
  EXPECT_EQ(bf16->bound, Bound::kCompute);
  EXPECT_DOUBLE_EQ(bf16->seconds, flops / 810.0e12);
  absl::StatusOr<Roofline> fp32 = FloorFromCeilings(H200LikeCeilings(), flops, bytes, MathMode::kFp32);
  ASSERT_TRUE(fp32.ok()) << fp32.status();
  EXPECT_EQ(fp32->bound, Bound::kCompute);
  EXPECT_DOUBLE_EQ(fp32->seconds, flops / 50.0e12);
}

TEST(FloorFromCeilingsTest, MemoryBoundTakesTheCopyBandwidth) {
  // A float32 add of 2^24 elements: 1 flop per 12 bytes.
  const double elements = 1 << 24;
  absl::StatusOr<Roofline> floor =
      FloorFromCeilings(H200LikeCeilings(), elements, 12 * elements, MathMode::kFp32);
  ASSERT_TRUE(floor.ok()) << floor.status();
  EXPECT_EQ(floor->bound, Bound::kMemory);
  EXPECT_DOUBLE_EQ(floor->seconds, 12 * elements / 4.0e12);
}

TEST(FloorFromCeilingsTest, TieIsMemoryBound) {
  // 50e12 FLOP/s against 4e12 B/s: 12.5 flops per byte is the ridge.
  absl::StatusOr<Roofline> floor =
      FloorFromCeilings(H200LikeCeilings(), 12.5e9, 1e9, MathMode::kFp32);
  ASSERT_TRUE(floor.ok()) << floor.status();
  EXPECT_EQ(floor->bound, Bound::kMemory);
  EXPECT_DOUBLE_EQ(floor->seconds, 1e9 / 4.0e12);
}

TEST(FloorFromCeilingsTest, DataMovementNeedsNoMeasuredMode) {
  // A copy has no arithmetic, so a mode without a measured throughput does not matter.
  absl::StatusOr<Roofline> floor = FloorFromCeilings(H200LikeCeilings(), 0, 8e9, MathMode::kFp64);
  ASSERT_TRUE(floor.ok()) << floor.status();
  EXPECT_EQ(floor->bound, Bound::kMemory);
  EXPECT_DOUBLE_EQ(floor->seconds, 2e-3);
}

TEST(FloorFromCeilingsTest, RejectsWhatItCannotBound) {
  const MeasuredCeilings ceilings = H200LikeCeilings();
  EXPECT_TRUE(absl::IsInvalidArgument(FloorFromCeilings(ceilings, -1, 0, MathMode::kFp32).status()));
  EXPECT_TRUE(absl::IsInvalidArgument(FloorFromCeilings(ceilings, 0, -1, MathMode::kFp32).status()));
  EXPECT_TRUE(absl::IsNotFound(FloorFromCeilings(ceilings, 1e9, 1e6, MathMode::kTf32).status()));

  MeasuredCeilings unmeasured;
  unmeasured.device_name = "NVIDIA H200";
  absl::StatusOr<Roofline> compute = FloorFromCeilings(unmeasured, 1e9, 0, MathMode::kBf16);
  EXPECT_TRUE(absl::IsFailedPrecondition(compute.status())) << compute.status();
  EXPECT_THAT(compute.status().message(), HasSubstr("bf16"));
  absl::StatusOr<Roofline> memory = FloorFromCeilings(unmeasured, 0, 1e6, MathMode::kBf16);
  EXPECT_TRUE(absl::IsFailedPrecondition(memory.status())) << memory.status();
  EXPECT_THAT(memory.status().message(), HasSubstr("copy bandwidth"));
}

TEST(CeilingsFileTest, PathNamesDeviceAndDriver) {
  EXPECT_EQ(CeilingsFilePath("/var/cache/forge", "NVIDIA H200", 13000),
            "/var/cache/forge/ceilings-NVIDIA_H200-driver13000.txt");
  EXPECT_EQ(CeilingsFilePath("cache", "NVIDIA GeForce RTX 4090 (D)", 12080),
            "cache/ceilings-NVIDIA_GeForce_RTX_4090__D_-driver12080.txt");
}

TEST(CeilingsFileTest, WritesAndReadsBackExactly) {
  forge::testing::TempDir dir;
  const std::string path = CeilingsFilePath(dir.path() + "/nested", "NVIDIA H200", 13000);
  const MeasuredCeilings ceilings = H200LikeCeilings();
  ASSERT_TRUE(WriteCeilingsFile(path, ceilings).ok());
  absl::StatusOr<MeasuredCeilings> read = ReadCeilingsFile(path);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(*read, ceilings);
  // Only the file itself remains: the temporary was renamed over it.
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(dir.path() + "/nested"),
                          std::filesystem::directory_iterator()),
            1);
}

TEST(CeilingsFileTest, MissingFileIsNotFound) {
  forge::testing::TempDir dir;
  absl::StatusOr<MeasuredCeilings> read = ReadCeilingsFile(dir.path() + "/absent.txt");
  EXPECT_TRUE(absl::IsNotFound(read.status())) << read.status();
  EXPECT_THAT(read.status().message(), HasSubstr("absent.txt"));
}

TEST(CeilingsFileTest, MalformedTextNamesSourceAndLine) {
  const std::string good = FormatCeilings(H200LikeCeilings());
  struct Case {
    std::string text;
    std::string expected;
  };
  const Case cases[] = {
      {good + "tf32_flops_per_second 1\n", "cache.txt:8: unknown key 'tf32_flops_per_second'"},
      {good + "driver_version 12000\n", "cache.txt:8: key 'driver_version' repeated"},
      {"driver_version thirteen\n", "cache.txt:1: bad value for 'driver_version'"},
      {"measured_at yesterday\n", "cache.txt:1: bad value for 'measured_at'"},
      {"copy_bytes_per_second fast\n", "cache.txt:1: bad value for 'copy_bytes_per_second'"},
      {good.substr(0, good.rfind("fp32_flops_per_second")), "missing key 'fp32_flops_per_second'"},
  };
  for (const Case& c : cases) {
    absl::StatusOr<MeasuredCeilings> parsed = ParseCeilings(c.text, "cache.txt");
    EXPECT_TRUE(absl::IsInvalidArgument(parsed.status())) << c.text;
    EXPECT_THAT(parsed.status().message(), HasSubstr(c.expected)) << c.text;
  }
}

}  // namespace
}  // namespace forge::timer
