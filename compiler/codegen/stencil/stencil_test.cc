#include "compiler/codegen/stencil/stencil.h"

#include <array>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "compiler/codegen/stencil/analysis.h"
#include "compiler/codegen/testing/codegen_test_util.h"
#include "compiler/graph/partition.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace forge::codegen {
namespace {

using ::forge::codegen::testing::AffineReluMaxPoolTask;
using ::forge::codegen::testing::AvgPoolTask;
using ::forge::codegen::testing::DepthwiseConvTask;
using ::forge::codegen::testing::EvenSample;
using ::forge::codegen::testing::ExpectCompiles;
using ::forge::codegen::testing::IntArg;
using ::forge::codegen::testing::IntsArg;
using ::forge::codegen::testing::StringArg;
using ::forge::codegen::testing::TaskBuilder;
using ::forge::codegen::testing::TensorArg;
using ::forge::codegen::testing::ValidPoints;
using ::forge::codegen::testing::Window2d;
using ::forge::v1::DType;
using ::forge::v1::KernelTask;
using ::testing::HasSubstr;

constexpr DType kF32 = forge::v1::DTYPE_FLOAT32;
constexpr DType kBF16 = forge::v1::DTYPE_BFLOAT16;
constexpr DType kF16 = forge::v1::DTYPE_FLOAT16;
constexpr DType kF64 = forge::v1::DTYPE_FLOAT64;
constexpr auto kStencil = forge::v1::KERNEL_FAMILY_STENCIL;

KernelTask AdaptiveAvgPoolTask(DType dtype, const std::vector<int64_t>& shape,
                               const std::vector<int64_t>& output_size) {
  TaskBuilder builder;
  builder.Input("x", dtype, shape)
      .Node("y", "adaptive_avg_pool2d", "default",
            {TensorArg("self", "x"), IntsArg("output_size", output_size)}, dtype,
            {shape[0], shape[1], output_size[0], output_size[1]})
      .Output("y");
  return builder.Build(kStencil);
}

std::string Label(const SchedulePoint& point) {
  std::string label = point.template_name;
  for (const auto& [name, value] : point.parameters) absl::StrAppend(&label, " ", name, "=", value);
  return label;
}

// Adds `count` of the points of `template_name` Validate accepts for `task` (evenly spread, more
// than `minimum` required), generated, to `kernels` and `labels`.
void AddTemplateSample(const KernelTask& task, const std::string& name,
                       const std::string& template_name, size_t minimum, size_t count,
                       std::vector<GeneratedKernel>& kernels, std::vector<std::string>& labels) {
  StencilFamily family;
  std::vector<SchedulePoint> points;
  for (const SchedulePoint& valid : ValidPoints(family, task)) {
    if (valid.template_name == template_name) points.push_back(valid);
  }
  ASSERT_GT(points.size(), minimum) << name;
  for (const SchedulePoint& sample : EvenSample(points, count)) {
    absl::StatusOr<GeneratedKernel> generated = family.Generate(task, sample);
    ASSERT_TRUE(generated.ok()) << name << " " << Label(sample) << ": " << generated.status();
    kernels.push_back(*generated);
    labels.push_back(absl::StrCat(name, " ", Label(sample)));
  }
}

// tiled's default for ConvNeXt's depthwise 7x7 bf16 over 56 x 56: 4 x 8 outputs a thread, 8 x 16
// threads a plane, vectors of 8 columns.
SchedulePoint TiledDepthwise7x7Point() {
  return {"tiled",
          {{"threads_x", 8},
           {"threads_y", 16},
           {"columns_per_thread", 8},
           {"rows_per_thread", 4},
           {"planes_per_block", 1},
           {"vector_width", 8}}};
}

GeneratedKernel GenerateDefault(const KernelTask& task, const std::string& label) {
  StencilFamily family;
  EXPECT_TRUE(family.Applies(task).ok()) << label << ": " << family.Applies(task);
  absl::StatusOr<std::vector<TemplateSpace>> space = family.ScheduleSpace(task);
  EXPECT_TRUE(space.ok()) << label << ": " << space.status();
  if (!space.ok()) return {};
  const SchedulePoint point = DefaultPoint(space->front());
  EXPECT_TRUE(family.Validate(task, point).ok()) << label << ": " << family.Validate(task, point);
  absl::StatusOr<GeneratedKernel> kernel = family.Generate(task, point);
  EXPECT_TRUE(kernel.ok()) << label << ": " << kernel.status();
  return kernel.ok() ? *kernel : GeneratedKernel{};
}

TEST(WindowOutputSizeTest, FollowsATen) {
  EXPECT_EQ(stencil::WindowOutputSize(56, 7, 1, 3, 1, false), 56);   // ConvNeXt's depthwise
  EXPECT_EQ(stencil::WindowOutputSize(112, 3, 2, 1, 1, false), 56);  // ResNet's max pool
  EXPECT_EQ(stencil::WindowOutputSize(6, 3, 2, 0, 1, false), 2);
  EXPECT_EQ(stencil::WindowOutputSize(6, 3, 2, 0, 1, true), 3);
  // ceil_mode drops a last window that would start in the right padding.
  EXPECT_EQ(stencil::WindowOutputSize(5, 2, 2, 1, 1, true), 3);
  EXPECT_EQ(stencil::WindowOutputSize(10, 3, 1, 0, 2, false), 6);
  EXPECT_LE(stencil::WindowOutputSize(2, 5, 1, 0, 1, false), 0);
}

// Every kind of window, dtype and memory order the family takes compiles at its default point
// (tiled for an NCHW depthwise convolution, planar for NCHW pools, channels_last for NHWC).
TEST(StencilTest, EveryOpDtypeAndLayoutGeneratesAndCompiles) {
  std::vector<GeneratedKernel> kernels;
  std::vector<std::string> labels;
  auto add = [&](const KernelTask& task, const std::string& label, const char* expected) {
    kernels.push_back(GenerateDefault(task, label));
    labels.push_back(label);
    EXPECT_EQ(kernels.back().template_name, expected) << label;
  };
  for (DType dtype : {kF32, kBF16, kF16, kF64}) {
    const std::string name = forge::v1::DType_Name(dtype);
    add(DepthwiseConvTask(dtype, {2, 96, 28, 28}, {7, 1, 3, 1}, true, true),
        "depthwise 7x7 + bias + gelu " + name, "tiled");
    add(DepthwiseConvTask(dtype, {2, 96, 28, 28}, {7, 1, 3, 1}, true, true, true),
        "depthwise 7x7 channels-last " + name, "channels_last");
    add(AffineReluMaxPoolTask(dtype, {2, 64, 56, 56}, {3, 2, 1, 1}),
        "affine + relu + max pool 3x3/2 " + name, "planar");
    add(AvgPoolTask(dtype, {2, 32, 15, 15}, {3, 2, 1, 1}, true, false),
        "avg pool ceil_mode, no pad count " + name, "planar");
  }
  add(DepthwiseConvTask(kBF16, {4, 144, 56, 56}, {3, 2, 1, 1}, false, false),
      "depthwise 3x3/2 no bias", "tiled");
  add(DepthwiseConvTask(kF32, {2, 32, 30, 30}, {3, 1, 2, 2}, true, false), "dilated depthwise",
      "tiled");
  add(DepthwiseConvTask(kF16, {2, 8, 40, 40}, {11, 1, 5, 1}, true, false),
      "depthwise 11x11: weights read per tap", "tiled");
  add(AvgPoolTask(kF32, {2, 24, 16, 16}, {2, 2, 0, 1}, false, true, true),
      "avg pool 2x2 channels-last", "channels_last");
  add(AdaptiveAvgPoolTask(kF32, {2, 64, 14, 14}, {7, 7}), "adaptive avg pool 14 -> 7", "planar");
  add(AdaptiveAvgPoolTask(kBF16, {2, 64, 7, 7}, {1, 1}), "global avg pool", "planar");
  ExpectCompiles(kernels, labels, /*expect_no_spills=*/true, {"sm_90"});
}

// Every template the family offers has a valid default, on the tasks above and on extremes: a
// 16x16 float64 window (the tiled templates' largest), a 1-wide output, a single plane.
TEST(StencilTest, EveryOfferedTemplateHasAValidDefault) {
  StencilFamily family;
  for (const KernelTask& task : {
           DepthwiseConvTask(kBF16, {32, 384, 56, 56}, {7, 1, 3, 1}, true, false),
           DepthwiseConvTask(kBF16, {32, 384, 56, 56}, {7, 1, 3, 1}, true, false, true),
           DepthwiseConvTask(kF64, {1, 8, 64, 64}, {16, 1, 7, 1}, true, false),
           DepthwiseConvTask(kF64, {1, 8, 64, 64}, {16, 1, 7, 1}, true, false, true),
           DepthwiseConvTask(kF32, {1, 1, 9, 3}, {3, 1, 0, 1}, false, false),
           AffineReluMaxPoolTask(kF16, {2, 64, 56, 56}, {3, 2, 1, 1}),
           AvgPoolTask(kF32, {2, 24, 16, 16}, {2, 2, 0, 1}, false, true, true),
           AvgPoolTask(kBF16, {8, 256, 56, 56}, {56, 56, 0, 1}, false, true),
           AdaptiveAvgPoolTask(kF64, {2, 3, 40, 24}, {1, 1})}) {
    absl::StatusOr<std::vector<TemplateSpace>> spaces = family.ScheduleSpace(task);
    ASSERT_TRUE(spaces.ok()) << spaces.status();
    for (const TemplateSpace& space : *spaces) {
      const SchedulePoint point = DefaultPoint(space);
      EXPECT_TRUE(family.Validate(task, point).ok())
          << Label(point) << ": " << family.Validate(task, point);
    }
  }
  // The 16x16 float64 window's staged tiles fit only a smaller tile than tiled's first guess.
  absl::StatusOr<std::vector<TemplateSpace>> spaces =
      family.ScheduleSpace(DepthwiseConvTask(kF64, {1, 8, 64, 64}, {16, 1, 7, 1}, true, false));
  ASSERT_TRUE(spaces.ok());
  EXPECT_EQ(spaces->size(), 4u);
}

// A sample of every template's valid points, for ConvNeXt's depthwise 7x7 in bf16 (both memory
// orders) and ResNet's max pool, compiles without spills.
TEST(StencilTest, ASampleOfValidPointsCompiles) {
  StencilFamily family;
  std::vector<GeneratedKernel> kernels;
  std::vector<std::string> labels;
  for (const auto& [task, name] : std::vector<std::pair<KernelTask, std::string>>{
           {DepthwiseConvTask(kBF16, {2, 384, 14, 14}, {7, 1, 3, 1}, true, true), "dw7 nchw"},
           {DepthwiseConvTask(kBF16, {2, 384, 14, 14}, {7, 1, 3, 1}, true, true, true), "dw7 nhwc"},
           {AffineReluMaxPoolTask(kF16, {2, 64, 56, 56}, {3, 2, 1, 1}), "maxpool"}}) {
    const std::vector<SchedulePoint> points = ValidPoints(family, task);
    ASSERT_GT(points.size(), 10u) << name;
    for (const SchedulePoint& point : EvenSample(points, 8)) {
      absl::StatusOr<GeneratedKernel> kernel = family.Generate(task, point);
      ASSERT_TRUE(kernel.ok()) << name << " " << Label(point) << ": " << kernel.status();
      kernels.push_back(*kernel);
      labels.push_back(absl::StrCat(name, " ", Label(point)));
    }
  }
  ExpectCompiles(kernels, labels, /*expect_no_spills=*/true, {"sm_90"});
}

TEST(StencilTest, DefaultsFollowTheMemoryOrder) {
  StencilFamily family;
  // ConvNeXt's depthwise 7x7 bf16 (N32 C384 H56 W56), NCHW: the register-tiled template first,
  // so it is the default: on the H200 (session 20) it ran this anchor at 51% of its DRAM floor,
  // 9.09x eager, where planar had reached 8% (each output reading 49 staged inputs, each thread
  // loading 49 weights). 4 x 8 outputs a thread, 8 x 16 threads covering the 56 x 56 plane,
  // staged and stored in vectors of 8 columns.
  absl::StatusOr<std::vector<TemplateSpace>> spaces =
      family.ScheduleSpace(DepthwiseConvTask(kBF16, {32, 384, 56, 56}, {7, 1, 3, 1}, true, false));
  ASSERT_TRUE(spaces.ok()) << spaces.status();
  ASSERT_EQ(spaces->size(), 4u);
  EXPECT_EQ((*spaces)[0].template_name, "tiled");
  EXPECT_EQ(DefaultPoint((*spaces)[0]).parameters, TiledDepthwise7x7Point().parameters);
  // planar (a warp across a row, 8 rows, the input tile staged in shared memory) and
  // channels_last are still searched.
  EXPECT_EQ((*spaces)[1].template_name, "planar");
  EXPECT_EQ(
      DefaultPoint((*spaces)[1]).parameters,
      (std::map<std::string, int64_t>{
          {"threads_x", 32}, {"threads_y", 8}, {"outputs_per_thread", 1}, {"stage_in_shared", 1}}));
  EXPECT_EQ((*spaces)[2].template_name, "channels_last");
  // Pools keep planar first (tiled was not measured on them).
  spaces = family.ScheduleSpace(AffineReluMaxPoolTask(kBF16, {2, 64, 56, 56}, {3, 2, 1, 1}));
  ASSERT_TRUE(spaces.ok()) << spaces.status();
  EXPECT_EQ(spaces->front().template_name, "planar");
  // Channels-last: channel vectors of 16 bytes (8 bf16) first.
  spaces = family.ScheduleSpace(
      DepthwiseConvTask(kBF16, {32, 384, 56, 56}, {7, 1, 3, 1}, true, false, true));
  ASSERT_TRUE(spaces.ok()) << spaces.status();
  EXPECT_EQ((*spaces)[0].template_name, "channels_last");
  EXPECT_EQ(DefaultPoint((*spaces)[0]).parameters,
            (std::map<std::string, int64_t>{
                {"vector_width", 8}, {"outputs_per_thread", 1}, {"threads_per_block", 128}}));
  // Its register-tiled template is offered last: 128 channels x 8 columns x 4 rows a block.
  EXPECT_EQ(spaces->back().template_name, "channels_last_tiled");
  EXPECT_EQ(DefaultPoint(spaces->back()).parameters,
            (std::map<std::string, int64_t>{{"channel_threads", 16},
                                            {"column_threads", 2},
                                            {"row_threads", 4},
                                            {"columns_per_thread", 4},
                                            {"vector_width", 8}}));
  // Windows that do not overlap (a 2x2/2 pool) gain nothing from staging.
  spaces = family.ScheduleSpace(AvgPoolTask(kF32, {2, 24, 16, 16}, {2, 2, 0, 1}, false, true));
  ASSERT_TRUE(spaces.ok()) << spaces.status();
  EXPECT_EQ(DefaultPoint((*spaces)[0]).parameters.at("stage_in_shared"), 0);
}

TEST(StencilTest, PlanLaunchesATilePerBlockAndHintsVectors) {
  StencilFamily family;
  const KernelTask task = DepthwiseConvTask(kBF16, {32, 384, 56, 56}, {7, 1, 3, 1}, true, false);
  absl::StatusOr<LaunchPlan> plan = family.Plan(
      task,
      {"planar",
       {{"threads_x", 32}, {"threads_y", 8}, {"outputs_per_thread", 2}, {"stage_in_shared", 1}}});
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->kernel_name, "forge_stencil");
  // 32 x 384 planes x 7 tiles of 8 rows x 1 tile of 64 columns.
  EXPECT_EQ(plan->launch.grid, (std::array<uint32_t, 3>{32 * 384 * 7, 1, 1}));
  EXPECT_EQ(plan->launch.block, (std::array<uint32_t, 3>{32, 8, 1}));
  EXPECT_EQ(plan->hints.unrolled_elements, 2);
  EXPECT_EQ(plan->generator_version, "stencil-2");

  const KernelTask nhwc =
      DepthwiseConvTask(kBF16, {32, 384, 56, 56}, {7, 1, 3, 1}, true, false, true);
  plan = family.Plan(
      nhwc, {"channels_last",
             {{"vector_width", 8}, {"outputs_per_thread", 2}, {"threads_per_block", 256}}});
  ASSERT_TRUE(plan.ok()) << plan.status();
  // 32 x 56 rows x 28 column pairs x 48 channel vectors, 256 a block.
  EXPECT_EQ(plan->launch.grid, (std::array<uint32_t, 3>{32 * 56 * 28 * 48 / 256, 1, 1}));
  EXPECT_EQ(plan->launch.block, (std::array<uint32_t, 3>{256, 1, 1}));
  EXPECT_EQ(plan->hints.vector_width, 8);
  EXPECT_EQ(plan->hints.unrolled_elements, 16);
  EXPECT_EQ(plan->hints.bytes_in_flight_per_thread, 32);  // 16 bf16 of x
}

TEST(StencilTest, SourceFusesPrologueEpilogueAndVectors) {
  StencilFamily family;
  absl::StatusOr<GeneratedKernel> kernel = family.Generate(
      DepthwiseConvTask(kBF16, {2, 64, 14, 14}, {7, 1, 3, 1}, true, true, true),
      {"channels_last",
       {{"vector_width", 8}, {"outputs_per_thread", 1}, {"threads_per_block", 128}}});
  ASSERT_TRUE(kernel.ok()) << kernel.status();
  EXPECT_THAT(kernel->source, HasSubstr("constexpr int kStencilOp = 0;"));
  EXPECT_THAT(kernel->source, HasSubstr("ForgeVec<ForgeBFloat16, 8>"));  // x's channel vector
  EXPECT_THAT(kernel->source, HasSubstr("forge_gelu"));                  // the fused epilogue
  EXPECT_THAT(kernel->source, HasSubstr("in2[c * 1]"));                  // the bias

  kernel = family.Generate(
      AffineReluMaxPoolTask(kF32, {2, 64, 56, 56}, {3, 2, 1, 1}),
      {"planar",
       {{"threads_x", 32}, {"threads_y", 8}, {"outputs_per_thread", 1}, {"stage_in_shared", 1}}});
  ASSERT_TRUE(kernel.ok()) << kernel.status();
  EXPECT_THAT(kernel->source, HasSubstr("constexpr int kStencilOp = 1;"));
  EXPECT_THAT(kernel->source, HasSubstr("constexpr int kStageInShared = 1;"));
  EXPECT_THAT(kernel->source, HasSubstr("forge_max"));  // relu, and the window's max

  kernel = family.Generate(
      AvgPoolTask(kF32, {2, 32, 15, 15}, {3, 2, 1, 1}, true, false),
      DefaultPoint(
          family.ScheduleSpace(AvgPoolTask(kF32, {2, 32, 15, 15}, {3, 2, 1, 1}, true, false))
              ->front()));
  ASSERT_TRUE(kernel.ok()) << kernel.status();
  EXPECT_THAT(kernel->source, HasSubstr("constexpr int kCountIncludePad = 0;"));
  EXPECT_THAT(kernel->source, HasSubstr("constexpr int kOH = 8;"));  // ceil_mode
}

// The tiled template: a block stages each of its planes' input tile (vectors of columns, aligned
// in the input), a thread reads each input row its 4 x 8 outputs need once and keeps the 49
// weights in registers. Every point the sample draws compiles for sm_90 without spills.
TEST(StencilTest, TiledReusesInputsAcrossOutputs) {
  StencilFamily family;
  const KernelTask task = DepthwiseConvTask(kBF16, {32, 384, 56, 56}, {7, 1, 3, 1}, true, false);
  const SchedulePoint point = TiledDepthwise7x7Point();
  absl::StatusOr<LaunchPlan> plan = family.Plan(task, point);
  ASSERT_TRUE(plan.ok()) << plan.status();
  // One block a plane: 64 x 64 outputs cover 56 x 56.
  EXPECT_EQ(plan->launch.grid, (std::array<uint32_t, 3>{32 * 384, 1, 1}));
  EXPECT_EQ(plan->launch.block, (std::array<uint32_t, 3>{8, 16, 1}));
  EXPECT_EQ(plan->hints.vector_width, 8);
  absl::StatusOr<GeneratedKernel> kernel = family.Generate(task, point);
  ASSERT_TRUE(kernel.ok()) << kernel.status();
  EXPECT_THAT(kernel->source, HasSubstr("constexpr int kRowsPerThread = 4;"));
  // Rows of 75 staged columns (5 before the window: vectors of 8 aligned) rounded to 80, padded
  // to 81: a warp's 4 rows of threads then read 4 words of a bank, not 8.
  EXPECT_THAT(kernel->source, HasSubstr("constexpr int kStagedPitch = 81;"));
  EXPECT_THAT(kernel->source, HasSubstr("ForgeVec<ForgeBFloat16, 8>"));  // 8 columns of x
  // Two planes a block of a small plane, with an affine + ReLU prologue before a max pool.
  SchedulePoint pool_point = {"tiled",
                              {{"threads_x", 4},
                               {"threads_y", 4},
                               {"columns_per_thread", 2},
                               {"rows_per_thread", 2},
                               {"planes_per_block", 2},
                               {"vector_width", 1}}};
  const KernelTask pool = AffineReluMaxPoolTask(kF32, {2, 64, 14, 14}, {3, 2, 1, 1});
  plan = family.Plan(pool, pool_point);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->launch.grid, (std::array<uint32_t, 3>{64, 1, 1}));  // 128 planes, 2 a block
  EXPECT_EQ(plan->launch.block, (std::array<uint32_t, 3>{4, 4, 2}));

  std::vector<GeneratedKernel> kernels = {*kernel};
  std::vector<std::string> labels = {"dw7 bf16 default"};
  for (const auto& [sampled, name] : std::vector<std::pair<KernelTask, std::string>>{
           {task, "dw7 bf16"},
           {DepthwiseConvTask(kF16, {4, 144, 56, 56}, {3, 2, 1, 1}, false, true), "dw3/2 f16"},
           {DepthwiseConvTask(kF32, {2, 32, 30, 30}, {3, 1, 2, 2}, true, false), "dilated f32"},
           {AvgPoolTask(kF64, {2, 32, 15, 15}, {3, 2, 1, 1}, true, false), "avg pool f64"},
           {pool, "affine relu max pool f32"}}) {
    AddTemplateSample(sampled, name, "tiled", 10, 6, kernels, labels);
  }
  ExpectCompiles(kernels, labels, /*expect_no_spills=*/true, {"sm_90"});
}

// The channels_last_tiled template: a block stages its 128 channels' weights tap-major in shared
// memory; a thread loads each input vector of 8 channels once per kernel row for its 4 columns.
// A sample of its points compiles for sm_90 without spills.
TEST(StencilTest, ChannelsLastTiledReusesInputVectors) {
  StencilFamily family;
  const KernelTask task =
      DepthwiseConvTask(kBF16, {32, 384, 56, 56}, {7, 1, 3, 1}, true, false, true);
  const SchedulePoint point = {"channels_last_tiled",
                               {{"channel_threads", 16},
                                {"column_threads", 2},
                                {"row_threads", 4},
                                {"columns_per_thread", 4},
                                {"vector_width", 8}}};
  absl::StatusOr<LaunchPlan> plan = family.Plan(task, point);
  ASSERT_TRUE(plan.ok()) << plan.status();
  // 32 samples x 14 row tiles x 7 column tiles x 3 chunks of 128 channels.
  EXPECT_EQ(plan->launch.grid, (std::array<uint32_t, 3>{32 * 14 * 7 * 3, 1, 1}));
  EXPECT_EQ(plan->launch.block, (std::array<uint32_t, 3>{16, 2, 4}));
  absl::StatusOr<GeneratedKernel> kernel = family.Generate(task, point);
  ASSERT_TRUE(kernel.ok()) << kernel.status();
  EXPECT_THAT(kernel->source, HasSubstr("constexpr int kChannelThreads = 16;"));
  EXPECT_THAT(kernel->source, HasSubstr("ForgeVec<ForgeBFloat16, 8>"));  // 8 channels of x

  SchedulePoint wide = point;
  wide.parameters["columns_per_thread"] = 8;
  EXPECT_THAT(std::string(family.Validate(task, wide).message()),
              HasSubstr("keeps 176 inputs and accumulators per thread"));
  SchedulePoint many = point;
  many.parameters["channel_threads"] = 32;
  EXPECT_THAT(std::string(family.Validate(task, many).message()),
              HasSubstr("bytes of shared memory"));

  std::vector<GeneratedKernel> kernels = {*kernel};
  std::vector<std::string> labels = {"dw7 nhwc bf16 default"};
  for (const auto& [sampled, name] : std::vector<std::pair<KernelTask, std::string>>{
           {task, "dw7 nhwc bf16"},
           {DepthwiseConvTask(kF32, {2, 32, 29, 31}, {3, 2, 1, 1}, true, true, true),
            "dw3/2 nhwc f32 gelu"},
           {AffineReluMaxPoolTask(kBF16, {2, 64, 15, 15}, {3, 2, 0, 1}, true, true),
            "affine relu max pool ceil nhwc bf16"},
           {AvgPoolTask(kF16, {4, 48, 33, 32}, {2, 2, 0, 1}, false, true, true),
            "avg pool nhwc f16"}}) {
    AddTemplateSample(sampled, name, "channels_last_tiled", 10, 5, kernels, labels);
  }
  ExpectCompiles(kernels, labels, /*expect_no_spills=*/true, {"sm_90"});
}

TEST(StencilTest, TiledValidateNamesTheViolatedConstraint) {
  StencilFamily family;
  const KernelTask bf16 = DepthwiseConvTask(kBF16, {2, 36, 56, 56}, {7, 1, 3, 1}, true, false);
  auto reason = [&](std::map<std::string, int64_t> changes, const KernelTask* task = nullptr) {
    SchedulePoint point = TiledDepthwise7x7Point();
    for (const auto& [name, value] : changes) point.parameters[name] = value;
    return std::string(family.Validate(task == nullptr ? bf16 : *task, point).message());
  };
  EXPECT_EQ(reason({}), "");
  EXPECT_THAT(reason({{"columns_per_thread", 4}}), HasSubstr("must divide columns_per_thread 4"));
  EXPECT_THAT(reason({{"threads_x", 32}}), HasSubstr("past the 56 output columns"));
  EXPECT_THAT(reason({{"threads_y", 32}}), HasSubstr("past the 56 output rows"));
  EXPECT_THAT(reason({{"threads_y", 2}, {"threads_x", 1}}), HasSubstr("needs a warp"));
  EXPECT_THAT(reason({{"threads_y", 32}, {"planes_per_block", 8}, {"rows_per_thread", 1}}),
              HasSubstr("to 1024 threads"));
  // 8 planes of 70 x 81 staged floats: 181 KB.
  EXPECT_THAT(reason({{"planes_per_block", 8}}), HasSubstr("bytes of shared memory"));
  EXPECT_THAT(reason({{"rows_per_thread", 1}, {"planes_per_block", 64}}),
              HasSubstr("planes_per_block"));
  // float32 weights: 4-byte elements, at most 4 to a 16-byte vector.
  const KernelTask f32 = DepthwiseConvTask(kF32, {2, 36, 56, 56}, {7, 1, 3, 1}, true, false);
  EXPECT_THAT(reason({}, &f32), HasSubstr("exceeds a 16-byte access"));
  // A 31 x 31 kernel is not unrolled: the template is not offered.
  const KernelTask large = DepthwiseConvTask(kF32, {1, 8, 64, 64}, {31, 1, 15, 1}, false, false);
  EXPECT_THAT(std::string(family.Validate(large, {"tiled", {}}).message()),
              HasSubstr("is not one of the task's: planar, channels_last"));
}

// A global average pool over 56 x 56 (an SE block's squeeze) and other windows that share no
// input, of 64 elements or more, over an NCHW input: a window per 128 threads by default, in
// vectors of 8 columns.
TEST(StencilTest, LargeWindowsAreReducedByManyThreads) {
  StencilFamily family;
  const KernelTask task = AdaptiveAvgPoolTask(kBF16, {32, 256, 56, 56}, {1, 1});
  absl::StatusOr<std::vector<TemplateSpace>> spaces = family.ScheduleSpace(task);
  ASSERT_TRUE(spaces.ok()) << spaces.status();
  ASSERT_EQ(spaces->front().template_name, "window_reduce");
  const SchedulePoint point = DefaultPoint(spaces->front());
  EXPECT_EQ(point.parameters, (std::map<std::string, int64_t>{{"threads_per_window", 128},
                                                              {"windows_per_block", 1},
                                                              {"vector_width", 8}}));
  absl::StatusOr<LaunchPlan> plan = family.Plan(task, point);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->launch.grid, (std::array<uint32_t, 3>{32 * 256, 1, 1}));
  EXPECT_EQ(plan->launch.block, (std::array<uint32_t, 3>{128, 1, 1}));
  absl::StatusOr<GeneratedKernel> kernel = family.Generate(task, point);
  ASSERT_TRUE(kernel.ok()) << kernel.status();
  EXPECT_THAT(kernel->source, HasSubstr("constexpr int kStoreWidth = 1;"));
  EXPECT_THAT(kernel->source, HasSubstr("ForgeVec<ForgeBFloat16, 8>"));

  // ResNet's 7 x 7 global pool (49 elements) keeps planar first, window_reduce offered; a 3 x 3
  // max pool of stride 2 (overlapping windows) is not offered it; channels-last keeps its own.
  spaces = family.ScheduleSpace(AdaptiveAvgPoolTask(kF32, {32, 512, 7, 7}, {1, 1}));
  ASSERT_TRUE(spaces.ok());
  EXPECT_EQ(spaces->front().template_name, "planar");
  EXPECT_EQ(spaces->back().template_name, "window_reduce");
  spaces = family.ScheduleSpace(AffineReluMaxPoolTask(kF32, {2, 64, 56, 56}, {3, 2, 1, 1}));
  ASSERT_TRUE(spaces.ok());
  for (const TemplateSpace& space : *spaces) EXPECT_NE(space.template_name, "window_reduce");
  const KernelTask nhwc = AvgPoolTask(kF16, {4, 64, 32, 32}, {8, 8, 0, 1}, false, true, true);
  spaces = family.ScheduleSpace(nhwc);
  ASSERT_TRUE(spaces.ok());
  EXPECT_EQ(spaces->front().template_name, "channels_last");
  EXPECT_EQ(spaces->back().template_name, "window_reduce");

  const SchedulePoint odd = {"window_reduce",
                             {{"threads_per_window", 32},
                              {"windows_per_block", 4},
                              {"vector_width", 4}}};
  const KernelTask odd_pool = AvgPoolTask(kF32, {2, 8, 30, 30}, {6, 6, 0, 1}, false, true);
  EXPECT_THAT(std::string(family.Validate(odd_pool, odd).message()),
              HasSubstr("a window 6 wide"));
  EXPECT_THAT(std::string(family
                              .Validate(task, {"window_reduce",
                                               {{"threads_per_window", 512},
                                                {"windows_per_block", 4},
                                                {"vector_width", 8}}})
                              .message()),
              HasSubstr("to 1024 threads"));

  std::vector<GeneratedKernel> kernels;
  std::vector<std::string> labels;
  for (const auto& [sampled, name] : std::vector<std::pair<KernelTask, std::string>>{
           {task, "global avg pool bf16"},
           {AdaptiveAvgPoolTask(kF32, {2, 64, 12, 12}, {1, 1}), "global avg pool f32 12x12"},
           {AffineReluMaxPoolTask(kF64, {2, 8, 16, 16}, {8, 8, 0, 1}), "max pool 8/8 f64"},
           {odd_pool, "avg pool 6/6 f32"},
           {nhwc, "avg pool 8/8 channels-last f16"}}) {
    AddTemplateSample(sampled, name, "window_reduce", 3, 4, kernels, labels);
  }
  ExpectCompiles(kernels, labels, /*expect_no_spills=*/true, {"sm_90"});
}

TEST(StencilTest, ValidateNamesTheViolatedConstraint) {
  StencilFamily family;
  const KernelTask task = DepthwiseConvTask(kF32, {2, 36, 56, 56}, {7, 1, 3, 1}, true, false);
  auto reason = [&](const SchedulePoint& point) {
    return std::string(family.Validate(task, point).message());
  };
  EXPECT_THAT(
      reason({"channels_last",
              {{"vector_width", 8}, {"outputs_per_thread", 1}, {"threads_per_block", 128}}}),
      HasSubstr("does not divide the 36 channels"));
  EXPECT_THAT(reason({"planar",
                      {{"threads_x", 8},
                       {"threads_y", 2},
                       {"outputs_per_thread", 1},
                       {"stage_in_shared", 0}}}),
              HasSubstr("less than a warp"));
  // 16 rows x 128 columns of outputs of a 31x31 kernel read (15 + 31) x (127 + 31) inputs: in
  // float64, 58 KB of shared memory.
  const KernelTask large = DepthwiseConvTask(kF64, {1, 8, 256, 256}, {31, 1, 15, 1}, false, false);
  EXPECT_THAT(std::string(family
                              .Validate(large, {"planar",
                                                {{"threads_x", 32},
                                                 {"threads_y", 16},
                                                 {"outputs_per_thread", 4},
                                                 {"stage_in_shared", 1}}})
                              .message()),
              HasSubstr("bytes of shared memory"));
  EXPECT_THAT(reason({"direct", {}}), HasSubstr("is not one of the task's"));
  EXPECT_THAT(reason({"planar", {{"threads_x", 12}}}), HasSubstr("threads_x"));
}

TEST(StencilTest, WhatTheFamilyDoesNotTakeIsNamed) {
  StencilFamily family;
  // A dense convolution (groups 1) is the conv family's.
  TaskBuilder dense;
  dense.Input("x", kF32, {1, 8, 16, 16})
      .Input("w", kF32, {8, 8, 3, 3})
      .Node("y", "conv2d", "default",
            {TensorArg("input", "x"), TensorArg("weight", "w"), IntsArg("padding", {1, 1})}, kF32,
            {1, 8, 16, 16})
      .Output("y");
  EXPECT_THAT(std::string(family.Applies(dense.Build(kStencil)).message()),
              HasSubstr("not depthwise"));
  // An adaptive pool of uneven windows.
  EXPECT_THAT(
      std::string(family.Applies(AdaptiveAvgPoolTask(kF32, {1, 8, 10, 10}, {3, 3})).message()),
      HasSubstr("only even adaptive pools"));
  // A divisor_override.
  TaskBuilder divisor;
  divisor.Input("x", kF32, {1, 8, 16, 16})
      .Node("y", "avg_pool2d", "default",
            {TensorArg("self", "x"), IntsArg("kernel_size", {2}), IntArg("divisor_override", 3)},
            kF32, {1, 8, 8, 8})
      .Output("y");
  EXPECT_THAT(std::string(family.Applies(divisor.Build(kStencil)).message()),
              HasSubstr("divisor_override"));
  // A string padding, and an output shape that disagrees with the window.
  TaskBuilder same;
  same.Input("x", kF32, {1, 8, 16, 16})
      .Input("w", kF32, {8, 1, 3, 3})
      .Node("y", "conv2d", "padding",
            {TensorArg("input", "x"), TensorArg("weight", "w"), StringArg("padding", "same"),
             IntArg("groups", 8)},
            kF32, {1, 8, 16, 16})
      .Output("y");
  EXPECT_THAT(std::string(family.Applies(same.Build(kStencil)).message()), HasSubstr("padding"));
  TaskBuilder wrong;
  wrong.Input("x", kF32, {1, 8, 16, 16})
      .Node("y", "max_pool2d", "default", {TensorArg("self", "x"), IntsArg("kernel_size", {2})},
            kF32, {1, 8, 16, 16})
      .Output("y");
  const absl::Status status = family.Applies(wrong.Build(kStencil));
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  EXPECT_THAT(std::string(status.message()), HasSubstr("not the window's [1, 8, 8, 8]"));
}

// The exported ResNet-18 (tests/fixtures/make_models.py): its stem max pool (3x3/2, padding 1)
// and global average pool are stencil tasks, read from the exporter's own arguments, generated
// and compiled.
TEST(StencilModelsTest, ResnetPoolsGenerate) {
  const char* directory = std::getenv("FORGE_TEST_MODELS");
  ASSERT_NE(directory, nullptr) << "FORGE_TEST_MODELS is not set; run through ctest";
  forge::v1::Graph graph;
  std::ifstream file(absl::StrCat(directory, "/resnet18/graph.pb"), std::ios::binary);
  ASSERT_TRUE(file && graph.ParseFromIstream(&file));
  absl::StatusOr<graph::PartitionResult> partition = graph::Partition(graph);
  ASSERT_TRUE(partition.ok()) << partition.status();
  std::vector<GeneratedKernel> kernels;
  std::vector<std::string> labels;
  for (const KernelTask& task : partition->tasks) {
    if (task.family() != kStencil) continue;
    labels.push_back(task.group().nodes(0).op());
    kernels.push_back(GenerateDefault(task, labels.back()));
  }
  EXPECT_THAT(labels,
              ::testing::UnorderedElementsAre("aten::max_pool2d", "aten::adaptive_avg_pool2d"));
  ExpectCompiles(kernels, labels, /*expect_no_spills=*/true, {"sm_90"});
}

}  // namespace
}  // namespace forge::codegen
