#include "worker/timer/timer.h"

#include <memory>
#include <vector>

#include "absl/strings/match.h"
#include "gtest/gtest.h"
#include "tests/support/gpu_test.h"
#include "worker/compile/compile_pool.h"
#include "worker/timer/kernel_activity.h"

namespace forge::timer {
namespace {

TEST(RooflineFloorTest, TakesTheSlowerCeiling) {
  // 1 GFLOP at 1 TFLOP/s is 1000 us; 1 GB at 4 TB/s is 250 us.
  EXPECT_DOUBLE_EQ(RooflineFloorUs(1'000'000'000, 1'000'000'000, 1e12, 4e12), 1000);
  EXPECT_DOUBLE_EQ(RooflineFloorUs(1'000, 1'000'000'000, 1e12, 4e12), 250);
  EXPECT_DOUBLE_EQ(RooflineFloorUs(1'000'000'000, 1'000'000'000, 0, 4e12), 250);  // no peak known
  EXPECT_DOUBLE_EQ(RooflineFloorUs(10, 10, 0, 0), 0);
}

TEST(KernelActivityRecorderTest, UnavailableWithoutAGpu) {
  if (gpu::DriverStatus().ok()) GTEST_SKIP() << "a GPU is present";
  auto recorder = KernelActivityRecorder::Start();
  EXPECT_EQ(recorder.status().code(), absl::StatusCode::kUnavailable);
}

class TimerTest : public forge::testing::GpuTest {
 protected:
  void SetUpDevice() override {
    auto timer = Timer::Create(*device_);
    ASSERT_TRUE(timer.ok()) << timer.status();
    timer_ = *std::move(timer);
  }
  std::unique_ptr<Timer> timer_;
};

TEST_F(TimerTest, TimesAKernelWithEventsAndCupti) {
  auto pool = compile::CompilePool::Create({.threads = 1});
  ASSERT_TRUE(pool.ok()) << pool.status();
  compile::CompileRequest request;
  request.source = R"(extern "C" __global__ void scale(float* x, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] = x[i] * 0.5f + 1.0f;
  })";
  request.name_expressions = {"scale"};
  request.arch = device_->properties().arch();
  compile::CompileResult compiled = (*pool)->Compile(request);
  ASSERT_TRUE(compiled.ok()) << compiled.status << compiled.log;
  auto module = device_->LoadModule(compiled.cubin);
  ASSERT_TRUE(module.ok()) << module.status();
  auto kernel = module->GetKernel("scale");
  ASSERT_TRUE(kernel.ok()) << kernel.status();
  constexpr int kCount = 1 << 22;
  auto buffer = device_->Allocate(kCount * sizeof(float));
  ASSERT_TRUE(buffer.ok()) << buffer.status();
  CUdeviceptr address = buffer->address();
  int count = kCount;
  gpu::LaunchShape shape;
  shape.grid[0] = kCount / 256;
  shape.block[0] = 256;

  int hook_calls = 0;
  TimerOptions options;
  options.before_each_rep = [&](gpu::Stream& stream) {
    ++hook_calls;
    return buffer->Fill32(0, stream);
  };
  // The untimed run amid the reps launches the kernel three times: none of them counts.
  int untimed_runs = 0;
  options.between_reps = [&]() -> absl::Status {
    ++untimed_runs;
    auto stream = device_->CreateStream();
    if (!stream.ok()) return stream.status();
    void* args[] = {&address, &count};
    for (int i = 0; i < 3; ++i) {
      if (absl::Status launched = kernel->Launch(shape, args, *stream); !launched.ok()) {
        return launched;
      }
    }
    return stream->Synchronize();
  };
  auto timing = timer_->Time(
      [&](gpu::Stream& stream) {
        void* args[] = {&address, &count};
        return kernel->Launch(shape, args, stream);
      },
      options);
  ASSERT_TRUE(timing.ok()) << timing.status();
  EXPECT_EQ(hook_calls, 20);
  EXPECT_EQ(untimed_runs, 1);
  EXPECT_EQ(timing->rep_us.size(), 20u);
  EXPECT_GT(timing->summary.median, 0);
  EXPECT_LE(timing->summary.min, timing->summary.median);
  EXPECT_GE(timing->summary.max, timing->summary.median);
  if (timing->kernel_status.ok()) {
    EXPECT_EQ(timing->kernels_per_rep, 1);
    ASSERT_TRUE(timing->kernel_summary.has_value());
    EXPECT_GT(timing->kernel_summary->median, 0);
    // The kernel alone cannot take longer than the events around it.
    EXPECT_LE(timing->kernel_summary->min, timing->summary.max);
  } else {
    std::cerr << "CUPTI unavailable: " << timing->kernel_status << "\n";
  }
}

TEST_F(TimerTest, RejectsTooFewReps) {
  TimerOptions options;
  options.reps = 5;
  auto timing = timer_->Time([](gpu::Stream&) { return absl::OkStatus(); }, options);
  EXPECT_EQ(timing.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(TimerTest, ReportsLaunchErrors) {
  auto timing = timer_->Time([](gpu::Stream&) { return absl::InternalError("launch refused"); });
  EXPECT_EQ(timing.status().code(), absl::StatusCode::kInternal);
  EXPECT_TRUE(absl::StrContains(timing.status().message(), "launch refused"));
}

TEST_F(TimerTest, MeasuresCopyBandwidthOnce) {
  auto bandwidth = timer_->CopyBandwidth();
  ASSERT_TRUE(bandwidth.ok()) << bandwidth.status();
  EXPECT_GT(*bandwidth, 1e10);  // any GPU copies faster than 10 GB/s
  EXPECT_EQ(*timer_->CopyBandwidth(), *bandwidth);
  std::cerr << "device-to-device copy bandwidth: " << *bandwidth / 1e12 << " TB/s\n";
}

}  // namespace
}  // namespace forge::timer
