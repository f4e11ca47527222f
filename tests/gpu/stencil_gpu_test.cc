// The stencil family on the GPU (compiler/codegen/stencil): depthwise convolutions (ConvNeXt's
// 7x7, MobileNet's strided 3x3, dilated) and pooling (max after a fused affine + ReLU, average
// with ceil_mode and count_include_pad), global pools, NCHW and channels-last, each template's
// default point (planar, channels_last, tiled, channels_last_tiled, window_reduce where offered)
// compiled with NVRTC, launched and judged against the float64 reference; ConvNeXt's depthwise
// 7x7 bf16 (C384 56x56, NCHW and channels-last), ResNet's max pool 3x3/2 and a global average
// pool also timed, with their DRAM floor.
// Skips without a GPU.
#include <cstdint>
#include <iostream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "aten/aten.h"
#include "compiler/codegen/stencil/stencil.h"
#include "compiler/codegen/testing/codegen_test_util.h"
#include "gtest/gtest.h"
#include "tests/support/gpu_test.h"
#include "worker/gpu/device.h"
#include "worker/judge/judge.h"
#include "worker/timer/timer.h"

namespace forge {
namespace {

using codegen::GeneratedKernel;
using codegen::SchedulePoint;
using codegen::StencilFamily;
using codegen::testing::AffineReluMaxPoolTask;
using codegen::testing::AvgPoolTask;
using codegen::testing::DepthwiseConvTask;
using codegen::testing::Window2d;
using forge::v1::KernelTask;

constexpr auto kF32 = forge::v1::DTYPE_FLOAT32;
constexpr auto kF16 = forge::v1::DTYPE_FLOAT16;
constexpr auto kBF16 = forge::v1::DTYPE_BFLOAT16;

// H200's DRAM bandwidth, for the printed share of the floor (the bench's report has the card's).
constexpr double kDramBytesPerSecond = 4.8e12;

class StencilGpuTest : public testing::GpuTest {
 protected:
  void SetUpDevice() override { ASSERT_TRUE(device_->MakeCurrent().ok()); }

  // Every template's default point for `task`, compiled, loaded and judged against the float64
  // reference; expects each to pass. With `min_bytes` > 0 each is also timed and its share of
  // the DRAM floor for that many bytes printed.
  void ExpectAccepted(const KernelTask& task, const std::string& label, double min_bytes = 0) {
    const StencilFamily family;
    auto spaces = family.ScheduleSpace(task);
    ASSERT_TRUE(spaces.ok()) << label << ": " << spaces.status();
    for (const codegen::TemplateSpace& space : *spaces) {
      const SchedulePoint point = codegen::DefaultPoint(space);
      auto kernel = family.Generate(task, point);
      ASSERT_TRUE(kernel.ok()) << label << ": " << kernel.status();
      const std::string name = absl::StrCat(label, " (", point.template_name, ")");
      compile::CompileResult compiled = codegen::testing::Pool().Compile(
          codegen::testing::RequestFor(*kernel, device_->properties().arch()));
      ASSERT_TRUE(compiled.ok()) << name << ": " << compiled.status << "\n" << compiled.log;
      auto launch = judge::LoadGeneratedKernel(*device_, compiled.cubin, *kernel);
      ASSERT_TRUE(launch.ok()) << name << ": " << launch.status();
      // TaskBuilder writes placeholder schemas; the reference finds each operator by name.
      KernelTask judged_task = task;
      for (forge::v1::Node& node : *judged_task.mutable_group()->mutable_nodes()) {
        node.clear_schema();
      }
      auto judged =
          judge::Judge(*device_, judged_task, *std::move(launch), aten::Float64Reference());
      ASSERT_TRUE(judged.ok()) << name << ": " << judged.status();
      const judge::JudgeVerdict& verdict = (*judged)->verdict();
      EXPECT_TRUE(verdict.passed()) << name << ": " << verdict.detail;
      std::cout << name << ": max abs error " << verdict.evidence.max_abs_error()
                << ", rel norm error " << verdict.evidence.rel_norm_error() << "\n";
      if (min_bytes > 0) Time(**judged, name, min_bytes);
    }
  }

  void Time(judge::JudgedCandidate& judged, const std::string& name, double min_bytes) {
    auto timer = timer::Timer::Create(*device_);
    ASSERT_TRUE(timer.ok()) << timer.status();
    timer::TimerOptions options;
    options.before_each_rep = [&](gpu::Stream& stream) { return judged.PoisonOutputs(stream); };
    auto timing =
        (*timer)->Time([&](gpu::Stream& stream) { return judged.Launch(stream); }, options);
    ASSERT_TRUE(timing.ok()) << timing.status();
    const double floor_us = min_bytes / kDramBytesPerSecond * 1e6;
    std::cout << name << ": median " << timing->summary.median << " us, floor " << floor_us
              << " us (" << 100 * floor_us / timing->summary.median << "% of it)\n";
    auto rechecked = judged.RecheckTimedOutputs();
    ASSERT_TRUE(rechecked.ok()) << rechecked.status();
    EXPECT_TRUE(rechecked->passed()) << rechecked->detail;
  }
};

// ConvNeXt's depthwise 7x7 (padding 3) with its bias, at each stage's channels and size: bf16
// NCHW with a fused GELU epilogue, float32 channels-last.
TEST_F(StencilGpuTest, ConvNextDepthwise7x7) {
  const std::vector<std::vector<int64_t>> stages = {
      {2, 96, 56, 56}, {2, 192, 28, 28}, {2, 384, 14, 14}, {2, 768, 7, 7}};
  for (const std::vector<int64_t>& shape : stages) {
    const std::string label = absl::StrCat("depthwise 7x7 C", shape[1]);
    ExpectAccepted(DepthwiseConvTask(kBF16, shape, {7, 1, 3, 1}, true, true), label + " bf16");
    ExpectAccepted(DepthwiseConvTask(kF32, shape, {7, 1, 3, 1}, true, false, true),
                   label + " f32 channels-last");
  }
}

// MobileNet's inverted residual: a strided depthwise 3x3 without bias; and a dilated one.
TEST_F(StencilGpuTest, StridedAndDilatedDepthwise3x3) {
  ExpectAccepted(DepthwiseConvTask(kF16, {4, 144, 56, 56}, {3, 2, 1, 1}, false, false),
                 "depthwise 3x3/2 f16");
  ExpectAccepted(DepthwiseConvTask(kF32, {2, 32, 29, 31}, {3, 2, 1, 1}, true, false, true),
                 "depthwise 3x3/2 odd f32 channels-last");
  ExpectAccepted(DepthwiseConvTask(kF32, {2, 32, 30, 30}, {3, 1, 2, 2}, true, false),
                 "depthwise 3x3 dilation 2 f32");
}

TEST_F(StencilGpuTest, MaxAndAveragePooling) {
  ExpectAccepted(AffineReluMaxPoolTask(kF32, {2, 64, 56, 56}, {3, 2, 1, 1}),
                 "affine + relu + max pool 3x3/2 f32");
  ExpectAccepted(AffineReluMaxPoolTask(kBF16, {2, 64, 15, 15}, {3, 2, 0, 1}, true, true),
                 "affine + relu + max pool ceil_mode bf16 channels-last");
  ExpectAccepted(AvgPoolTask(kF32, {2, 32, 15, 15}, {3, 2, 1, 1}, true, false),
                 "avg pool 3x3/2 ceil_mode, padding not counted f32");
  ExpectAccepted(AvgPoolTask(kF16, {4, 48, 33, 32}, {2, 2, 0, 1}, false, true, true),
                 "avg pool 2x2 f16 channels-last");
}

// Global pools (window_reduce, the default of large NCHW windows, beside planar and the tiled
// templates): an average over 56 x 56 (an SE block's squeeze), timed, and a max over 20 x 20
// after an affine + ReLU prologue.
TEST_F(StencilGpuTest, GlobalPoolsAreReductions) {
  ExpectAccepted(AvgPoolTask(kBF16, {8, 256, 56, 56}, {56, 56, 0, 1}, false, true),
                 "global avg pool bf16 8x256x56x56", 8.0 * 256 * 56 * 56 * 2);
  ExpectAccepted(AffineReluMaxPoolTask(kF32, {4, 64, 20, 20}, {20, 20, 0, 1}),
                 "affine + relu + global max pool f32");
}

// The bench's anchors at a quarter of their batch (the judge's float64 CPU reference of the full
// batch takes minutes; `run_families_check.sh anchor` times the full ones): ConvNeXt's depthwise
// 7x7 bf16 (one read of x and one write of y: 2 x 19 MB) and ResNet's stem max pool (a read of
// 13 MB, a write of 3 MB).
TEST_F(StencilGpuTest, AnchorsAreTimed) {
  const double conv_bytes = 2.0 * 8 * 384 * 56 * 56 * 2;
  ExpectAccepted(DepthwiseConvTask(kBF16, {8, 384, 56, 56}, {7, 1, 3, 1}, true, false),
                 "depthwise 7x7 bf16 8x384x56x56", conv_bytes);
  ExpectAccepted(DepthwiseConvTask(kBF16, {8, 384, 56, 56}, {7, 1, 3, 1}, true, false, true),
                 "depthwise 7x7 bf16 channels-last 8x384x56x56", conv_bytes);
  const double pool_bytes = (8.0 * 64 * 112 * 112 + 8.0 * 64 * 56 * 56) * 2;
  ExpectAccepted(AffineReluMaxPoolTask(kBF16, {8, 64, 112, 112}, {3, 2, 1, 1}),
                 "affine + relu + max pool 3x3/2 bf16 8x64x112x112", pool_bytes);
}

}  // namespace
}  // namespace forge
