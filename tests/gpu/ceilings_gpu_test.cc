// The measured ceilings on the GPU: measured once, cached per process and on disk, and within a
// sane range of the arch table's figures for the card (which are themselves measured on the H200:
// a ceiling far off them means a broken measurement, not a fast or slow card).
#include <cstdio>
#include <memory>
#include <string>

#include "absl/strings/strip.h"
#include "common/arch/arch.h"
#include "gtest/gtest.h"
#include "tests/support/subprocess.h"
#include "worker/gpu/device.h"
#include "worker/timer/ceilings.h"
#include "worker/timer/timer.h"

namespace forge::timer {
namespace {

class CeilingsGpuTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (absl::Status status = gpu::DriverStatus(); !status.ok()) {
      GTEST_SKIP() << "no GPU: " << status;
    }
    absl::StatusOr<std::unique_ptr<gpu::Device>> device = gpu::Device::Open(0);
    ASSERT_TRUE(device.ok()) << device.status();
    device_ = *std::move(device);
    absl::StatusOr<std::unique_ptr<Timer>> timer = Timer::Create(*device_);
    ASSERT_TRUE(timer.ok()) << timer.status();
    timer_ = *std::move(timer);
  }

  std::unique_ptr<gpu::Device> device_;
  std::unique_ptr<Timer> timer_;
};

void ExpectWithin(const char* what, double measured, double table, double low, double high) {
  const double ratio = measured / table;
  std::printf("  %-28s %10.2f T/s  (table %8.2f T/s, ratio %.3f)\n", what, measured / 1e12,
              table / 1e12, ratio);
  EXPECT_GE(ratio, low) << what;
  EXPECT_LE(ratio, high) << what;
}

TEST_F(CeilingsGpuTest, MeasuresOnceCachesAndMatchesTheTable) {
  forge::testing::TempDir cache_dir;
  const gpu::DeviceProperties& properties = device_->properties();
  absl::StatusOr<MeasuredCeilings> ceilings = CachedCeilings(*timer_, cache_dir.path());
  ASSERT_TRUE(ceilings.ok()) << ceilings.status();
  EXPECT_EQ(ceilings->device_name, properties.name);
  EXPECT_EQ(ceilings->driver_version, properties.driver_version);

  // The process cache answers the second call, and the disk cache holds the same numbers.
  absl::StatusOr<MeasuredCeilings> again = CachedCeilings(*timer_);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(*again, *ceilings);
  absl::StatusOr<MeasuredCeilings> stored = ReadCeilingsFile(
      CeilingsFilePath(cache_dir.path(), properties.name, properties.driver_version));
  ASSERT_TRUE(stored.ok()) << stored.status();
  EXPECT_EQ(*stored, *ceilings);

  absl::StatusOr<GpuArch> table = FindGpu(absl::StripPrefix(properties.name, "NVIDIA "));
  ASSERT_TRUE(table.ok()) << table.status();
  std::printf("Measured ceilings of %s (driver %d, %s):\n", properties.name.c_str(),
              properties.driver_version,
              absl::FormatTime(absl::RFC3339_sec, ceilings->measured_at, absl::UTCTimeZone())
                  .c_str());
  ExpectWithin("copy (bytes/s)", ceilings->copy_bytes_per_second, table->dram_bytes_per_second,
               0.5, 1.2);
  ExpectWithin("bf16 matmul (FLOP/s)", ceilings->bf16_flops_per_second, table->peak_bf16_flops,
               0.5, 1.2);
  // fp16 runs on the same tensor cores at the bf16 rate.
  ExpectWithin("fp16 matmul (FLOP/s)", ceilings->fp16_flops_per_second, table->peak_bf16_flops,
               0.5, 1.2);
  ExpectWithin("fp32 matmul, no TF32 (FLOP/s)", ceilings->fp32_flops_per_second,
               table->peak_fp32_flops, 0.5, 1.3);

  // A bf16 8192^3 product at the measured ceilings is compute-bound at its own measured time.
  const double size = kHalfPrecisionMatmulSize;
  absl::StatusOr<Roofline> floor =
      FloorFromCeilings(*ceilings, 2 * size * size * size, 3 * size * size * 2, MathMode::kBf16);
  ASSERT_TRUE(floor.ok()) << floor.status();
  EXPECT_EQ(floor->bound, Bound::kCompute);
  std::printf("  floor of a bf16 %.0f^3 product: %.1f us (%s)\n", size, floor->seconds * 1e6,
              std::string(BoundName(floor->bound)).c_str());
}

}  // namespace
}  // namespace forge::timer
