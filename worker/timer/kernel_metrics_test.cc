#include "worker/timer/kernel_metrics.h"

#include <memory>

#include "absl/strings/match.h"
#include "gtest/gtest.h"
#include "tests/support/gpu_test.h"

namespace forge::timer {
namespace {

// CUPTI's host library builds the configuration from its own chip tables: this checks the metric
// names against a real chip (the H100/H200's) without a GPU.
TEST(CounterPassesForChipTest, TheMetricsExistOnHopper) {
  absl::StatusOr<int64_t> passes = CounterPassesForChip("GH100");
  ASSERT_TRUE(passes.ok()) << passes.status();
  EXPECT_GE(*passes, 1);
}

TEST(CounterPassesForChipTest, AnUnknownChipIsAnError) {
  absl::StatusOr<int64_t> passes = CounterPassesForChip("NOT_A_CHIP");
  ASSERT_FALSE(passes.ok());
  EXPECT_TRUE(absl::StrContains(passes.status().message(), "NOT_A_CHIP")) << passes.status();
}

// With a GPU: the counters of a launch that runs no kernel are either unavailable, with a reason,
// or read as (close to) nothing; and a failing launch is the caller's error, not "unavailable".
class KernelCountersTest : public forge::testing::GpuTest {
 protected:
  void SetUpDevice() override {
    auto stream = device_->CreateStream();
    ASSERT_TRUE(stream.ok()) << stream.status();
    stream_ = std::make_unique<gpu::Stream>(*std::move(stream));
  }
  std::unique_ptr<gpu::Stream> stream_;
};

TEST_F(KernelCountersTest, AFailingLaunchIsAnError) {
  absl::StatusOr<CounterReading> reading = ReadKernelCounters(*device_, *stream_, [](gpu::Stream&) {
    return absl::InternalError("planted launch failure");
  });
  ASSERT_FALSE(reading.ok());
  EXPECT_TRUE(absl::StrContains(reading.status().message(), "planted launch failure"));
}

TEST_F(KernelCountersTest, UnreadableCountersSaySo) {
  absl::StatusOr<CounterReading> reading =
      ReadKernelCounters(*device_, *stream_, [](gpu::Stream&) { return absl::OkStatus(); });
  ASSERT_TRUE(reading.ok()) << reading.status();
  if (!reading->counters_status.ok()) {
    EXPECT_FALSE(reading->metrics.counters_available());
    EXPECT_TRUE(absl::StartsWith(reading->counters_status.message(), "counters unavailable: "));
    EXPECT_EQ(reading->metrics.dram_bytes(), 0);
  } else {
    EXPECT_TRUE(reading->metrics.counters_available());
  }
}

}  // namespace
}  // namespace forge::timer
