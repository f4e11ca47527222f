#include "compiler/codegen/cudnn_conv/cudnn_conv.h"

#include <cstdlib>
#include <fstream>
#include <limits>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

#include "compiler/codegen/testing/codegen_test_util.h"
#include "compiler/graph/partition.h"

namespace forge::codegen {
namespace {

using forge::v1::KernelTask;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using testing::ConvEpilogueTask;
using testing::OptionalTensorArg;
using testing::ConvShape;
using testing::FloatArg;
using testing::IntArg;
using testing::IntsArg;
using testing::NoneArg;
using testing::StringArg;
using testing::TaskBuilder;
using testing::TensorArg;

constexpr auto kF32 = forge::v1::DTYPE_FLOAT32;
constexpr auto kBF16 = forge::v1::DTYPE_BFLOAT16;
constexpr auto kF16 = forge::v1::DTYPE_FLOAT16;

SchedulePoint Point(int heuristic, int engine) {
  return {CudnnConvFamily::kGraphTemplate, {{"heuristic", heuristic}, {"engine", engine}}};
}

// N32 C64 H56 W56 -> 64, 3x3, padding 1: the benchmark's shape.
constexpr ConvShape kResnetShape = {.n = 32, .c = 64, .h = 56, .w = 56, .k = 64, .r = 3, .s = 3,
                                    .padding = 1};

std::vector<ConvStep> Steps(const CudnnConvCall& call) {
  std::vector<ConvStep> steps;
  for (const CudnnConvStep& step : call.epilogue) steps.push_back(step.step);
  return steps;
}

struct EpilogueCase {
  std::vector<std::string> epilogue;
  std::vector<ConvStep> steps;  // after the conv's own bias step
};

class CudnnConvEpilogueTest : public ::testing::TestWithParam<EpilogueCase> {};

// Every epilogue the family expresses: each step becomes one pointwise node of the graph, in the
// task's order, after the conv's own bias.
TEST_P(CudnnConvEpilogueTest, DescribesTheStepsInOrder) {
  for (const auto dtype : {kF32, kBF16, kF16}) {
    const KernelTask task = ConvEpilogueTask(dtype, kResnetShape, /*bias=*/true, GetParam().epilogue);
    ASSERT_TRUE(CudnnConvFamily().Applies(task).ok()) << CudnnConvFamily().Applies(task);
    auto call = DescribeCudnnConv(task, Point(1, 3));
    ASSERT_TRUE(call.ok()) << call.status();
    std::vector<ConvStep> expected = {ConvStep::kBias};
    expected.insert(expected.end(), GetParam().steps.begin(), GetParam().steps.end());
    EXPECT_EQ(Steps(*call), expected);
    EXPECT_EQ(call->dtype, dtype);
    EXPECT_EQ(call->epilogue[0].input, 2);  // x, weight, bias
    EXPECT_EQ(call->heuristic, 1);
    EXPECT_EQ(call->engine, 3);
    auto plan = CudnnConvFamily().Plan(task, Point(1, 3));
    ASSERT_TRUE(plan.ok()) << plan.status();
    EXPECT_EQ(plan->hints.executor, Executor::kCudnn);
    EXPECT_TRUE(plan->kernel_name.empty());  // nothing to compile
    auto kernel = CudnnConvFamily().Generate(task, Point(1, 3));
    ASSERT_TRUE(kernel.ok()) << kernel.status();
    EXPECT_EQ(kernel->source, absl::StrCat("// forge library call: ", DescribeCall(*call), "\n"));
  }
}

INSTANTIATE_TEST_SUITE_P(
    Epilogues, CudnnConvEpilogueTest,
    ::testing::Values(
        EpilogueCase{{}, {}}, EpilogueCase{{"relu"}, {ConvStep::kRelu}},
        EpilogueCase{{"gelu"}, {ConvStep::kGelu}},
        EpilogueCase{{"gelu_tanh"}, {ConvStep::kGeluTanh}},
        EpilogueCase{{"silu"}, {ConvStep::kSilu}},
        EpilogueCase{{"sigmoid"}, {ConvStep::kSigmoid}},
        EpilogueCase{{"tanh"}, {ConvStep::kTanh}},
        EpilogueCase{{"scale"}, {ConvStep::kScale}},
        EpilogueCase{{"residual", "relu"}, {ConvStep::kResidual, ConvStep::kRelu}},
        EpilogueCase{{"channel_bias", "scale", "residual", "silu"},
                     {ConvStep::kBias, ConvStep::kScale, ConvStep::kResidual, ConvStep::kSilu}},
        EpilogueCase{{"relu6"}, {ConvStep::kClamp}},
        EpilogueCase{{"hardtanh"}, {ConvStep::kClamp}},
        EpilogueCase{{"clamp"}, {ConvStep::kClamp}},
        EpilogueCase{{"batch_norm"}, {ConvStep::kBatchNorm}},
        EpilogueCase{{"batch_norm", "relu6"}, {ConvStep::kBatchNorm, ConvStep::kClamp}},
        EpilogueCase{{"batch_norm", "relu"}, {ConvStep::kBatchNorm, ConvStep::kRelu}},
        EpilogueCase{{"batch_norm", "residual", "relu"},
                     {ConvStep::kBatchNorm, ConvStep::kResidual, ConvStep::kRelu}},
        EpilogueCase{{"batch_norm_eval", "silu"}, {ConvStep::kBatchNorm, ConvStep::kSilu}}),
    [](const ::testing::TestParamInfo<EpilogueCase>& info) {
      return info.param.epilogue.empty() ? std::string("none")
                                         : absl::StrJoin(info.param.epilogue, "_");
    });

TEST(CudnnConvTest, DescribesTheConvolution) {
  const ConvShape shape = {.n = 2, .c = 8, .h = 17, .w = 13, .k = 12, .r = 3, .s = 3, .stride = 2,
                           .padding = 2, .dilation = 2, .groups = 4};
  const KernelTask task = ConvEpilogueTask(kBF16, shape, /*bias=*/false, {"residual", "relu"});
  auto call = DescribeCudnnConv(task, Point(0, 0));
  ASSERT_TRUE(call.ok()) << call.status();
  EXPECT_EQ(call->x_input, 0);
  EXPECT_EQ(call->w_input, 1);
  EXPECT_THAT(call->x.dims, ElementsAre(2, 8, 17, 13));
  EXPECT_THAT(call->x.strides, ElementsAre(8 * 17 * 13, 17 * 13, 13, 1));
  EXPECT_THAT(call->w.dims, ElementsAre(12, 2, 3, 3));
  // (17 + 4 - 4 - 1) / 2 + 1 = 9, (13 + 4 - 4 - 1) / 2 + 1 = 7
  EXPECT_THAT(call->y.dims, ElementsAre(2, 12, 9, 7));
  EXPECT_THAT(call->y.strides, ElementsAre(12 * 63, 63, 7, 1));
  EXPECT_THAT(call->padding, ElementsAre(2, 2));
  EXPECT_THAT(call->stride, ElementsAre(2, 2));
  EXPECT_THAT(call->dilation, ElementsAre(2, 2));
  EXPECT_EQ(call->groups, 4);
  ASSERT_EQ(call->epilogue.size(), 2u);
  EXPECT_EQ(call->epilogue[0].input, 2);
  ASSERT_EQ(call->residuals.size(), 1u);
  EXPECT_EQ(call->residuals[0].dims, call->y.dims);
  EXPECT_THAT(DescribeCall(*call),
              HasSubstr("groups 4 epilogue [residual(input 2 [2,12,9,7]/[756,63,7,1]) relu]"));
}

// An eval-mode batch norm is one step whose [K] operands are task inputs (weight and bias
// optional), kept with their dtypes and eps for the candidate's fold.
TEST(CudnnConvTest, DescribesTheBatchNormOperands) {
  const KernelTask task = ConvEpilogueTask(kBF16, kResnetShape, /*bias=*/false,
                                           {"batch_norm", "relu"});
  auto call = DescribeCudnnConv(task, Point(0, 0));
  ASSERT_TRUE(call.ok()) << call.status();
  ASSERT_EQ(call->batch_norms.size(), 1u);
  const CudnnBatchNorm& norm = call->batch_norms[0];
  // Inputs: x, weight, then the batch norm's running_mean, running_var, weight, bias.
  EXPECT_EQ(norm.mean, (ChannelOperand{2, kBF16}));
  EXPECT_EQ(norm.var, (ChannelOperand{3, kBF16}));
  EXPECT_EQ(norm.weight, (ChannelOperand{4, kBF16}));
  EXPECT_EQ(norm.bias, (ChannelOperand{5, kBF16}));
  EXPECT_DOUBLE_EQ(norm.eps, 1e-5);
  EXPECT_THAT(DescribeCall(*call),
              HasSubstr("epilogue [batch_norm(mean 2 bfloat16, var 3 bfloat16, weight 4 bfloat16, "
                        "bias 5 bfloat16, eps 1e-05) relu]"));

  // aten::batch_norm in eval mode, without weight and bias, after the conv's own bias.
  auto bare = DescribeCudnnConv(
      ConvEpilogueTask(kF32, kResnetShape, /*bias=*/true, {"batch_norm_eval"}), Point(0, 0));
  ASSERT_TRUE(bare.ok()) << bare.status();
  EXPECT_EQ(Steps(*bare), (std::vector<ConvStep>{ConvStep::kBias, ConvStep::kBatchNorm}));
  ASSERT_EQ(bare->batch_norms.size(), 1u);
  EXPECT_EQ(bare->batch_norms[0].mean, (ChannelOperand{3, kF32}));
  EXPECT_EQ(bare->batch_norms[0].weight.input, -1);
  EXPECT_EQ(bare->batch_norms[0].bias.input, -1);
  EXPECT_DOUBLE_EQ(bare->batch_norms[0].eps, 1e-3);
  EXPECT_THAT(DescribeCall(*bare), HasSubstr("weight none, bias none, eps 0.001"));
  // Folding changes the call, so the candidate's source differs from the unnormalized one's.
  EXPECT_NE(CudnnConvFamily().Generate(ConvEpilogueTask(kF32, kResnetShape, true, {}), Point(0, 0))->source,
            CudnnConvFamily().Generate(ConvEpilogueTask(kF32, kResnetShape, true, {"batch_norm_eval"}),
                                       Point(0, 0))->source);
}

// relu6, hardtanh and clamp with a scalar min are cuDNN's relu clipped on both sides: the bounds
// are the op's arguments or its schema's defaults; an upper bound may be infinite.
TEST(CudnnConvTest, ClampsReadTheirBounds) {
  struct Bounds {
    std::string step;
    double lower, upper;
  };
  for (const Bounds& b : std::vector<Bounds>{{"relu6", 0, 6},
                                             {"hardtanh", -1, 1},
                                             {"clamp", -0.25, std::numeric_limits<double>::infinity()}}) {
    auto call = DescribeCudnnConv(ConvEpilogueTask(kF16, kResnetShape, false, {b.step}), Point(0, 0));
    ASSERT_TRUE(call.ok()) << b.step << ": " << call.status();
    ASSERT_EQ(call->epilogue.size(), 1u);
    EXPECT_EQ(call->epilogue[0].step, ConvStep::kClamp);
    EXPECT_EQ(call->epilogue[0].scalar, b.lower) << b.step;
    EXPECT_EQ(call->epilogue[0].upper, b.upper) << b.step;
  }
  EXPECT_THAT(DescribeCall(*DescribeCudnnConv(ConvEpilogueTask(kF16, kResnetShape, false, {"relu6"}),
                                              Point(0, 0))),
              HasSubstr("epilogue [clamp(0, 6)]"));
}

// The kernels a run launches around the graph (the batch norm fold, the layout transposes)
// compile with NVRTC for the GPUs cuDNN's graphs run on, without spills.
TEST(CudnnConvTest, RunKernelsCompile) {
  std::vector<GeneratedKernel> kernels;
  const std::vector<std::string> names = {kBatchNormFoldKernel, kTranspose2Kernel,
                                          kTranspose4Kernel};
  for (const std::string& name : names) {
    GeneratedKernel kernel;
    kernel.source = std::string(RunKernelsSource());
    kernel.kernel_name = name;
    kernels.push_back(kernel);
  }
  testing::ExpectCompiles(kernels, names, /*expect_no_spills=*/true);
  EXPECT_EQ(*BatchNormFoldType(kF32), 0);
  EXPECT_EQ(*BatchNormFoldType(kBF16), 1);
  EXPECT_EQ(*BatchNormFoldType(kF16), 2);
  EXPECT_EQ(BatchNormFoldType(forge::v1::DTYPE_FLOAT64).status().code(),
            absl::StatusCode::kInvalidArgument);
}

// "graph_nhwc" describes the graph on channels-last copies of an NCHW task's tensors (x NHWC,
// the filter KRSC, residuals and the result NHWC); a task already channels-last has no such
// template, and Validate names why.
TEST(CudnnConvTest, ChannelsLastInsideConvertsAnNchwTask) {
  const ConvShape shape = {.n = 2, .c = 8, .h = 17, .w = 13, .k = 12, .r = 3, .s = 3, .stride = 2,
                           .padding = 1, .groups = 4};
  const KernelTask task = ConvEpilogueTask(kBF16, shape, true, {"batch_norm", "residual", "relu"});
  SchedulePoint nhwc = Point(1, 2);
  nhwc.template_name = CudnnConvFamily::kChannelsLastTemplate;
  auto call = DescribeCudnnConv(task, nhwc);
  ASSERT_TRUE(call.ok()) << call.status();
  EXPECT_TRUE(call->channels_last_inside);
  EXPECT_THAT(call->x.dims, ElementsAre(2, 8, 17, 13));
  EXPECT_THAT(call->x.strides, ElementsAre(8 * 17 * 13, 1, 13 * 8, 8));
  EXPECT_THAT(call->w.strides, ElementsAre(2 * 9, 1, 3 * 2, 2));  // KRSC of [12, 2, 3, 3]
  EXPECT_THAT(call->y.dims, ElementsAre(2, 12, 9, 7));
  EXPECT_THAT(call->y.strides, ElementsAre(12 * 63, 1, 7 * 12, 12));
  ASSERT_EQ(call->residuals.size(), 1u);
  EXPECT_EQ(call->residuals[0].strides, call->y.strides);
  EXPECT_EQ(call->heuristic, 1);
  EXPECT_EQ(call->engine, 2);
  EXPECT_THAT(DescribeCall(*call), HasSubstr("] channels_last_inside heuristic 1 engine 2"));
  auto plain = DescribeCudnnConv(task, Point(1, 2));
  ASSERT_TRUE(plain.ok()) << plain.status();
  EXPECT_FALSE(plain->channels_last_inside);
  EXPECT_NE(CudnnConvFamily().Generate(task, nhwc)->source,
            CudnnConvFamily().Generate(task, Point(1, 2))->source);
  // The cost hints count the fold and the transposes (x, w, the residual, the result).
  auto plan = CudnnConvFamily().Plan(task, Point(1, 2));
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->hints.kernel_launches, 2);
  EXPECT_FALSE(plan->hints.output_through_scratch);
  auto nhwc_plan = CudnnConvFamily().Plan(task, nhwc);
  ASSERT_TRUE(nhwc_plan.ok()) << nhwc_plan.status();
  EXPECT_EQ(nhwc_plan->hints.kernel_launches, 6);
  EXPECT_TRUE(nhwc_plan->hints.output_through_scratch);

  const KernelTask channels_last = ConvEpilogueTask(kBF16, shape, true, {"relu"}, true);
  auto spaces = CudnnConvFamily().ScheduleSpace(channels_last);
  ASSERT_TRUE(spaces.ok()) << spaces.status();
  EXPECT_EQ(spaces->size(), 1u);
  const absl::Status refused = CudnnConvFamily().Validate(channels_last, nhwc);
  EXPECT_EQ(refused.code(), absl::StatusCode::kInvalidArgument) << refused;
  EXPECT_THAT(refused.message(), HasSubstr("NCHW-contiguous"));
}

// The transposes' launch covers every [rows, columns] element with 32 x 32 tiles and strides
// over batches past the grid's z limit.
TEST(CudnnConvTest, TransposeLaunchCoversTheMatrices) {
  const TransposeShape shape = TransposeLaunch(70000, 64, 56 * 56);
  EXPECT_EQ(shape.grid[0], (56u * 56 + 31) / 32);
  EXPECT_EQ(shape.grid[1], 2u);
  EXPECT_EQ(shape.grid[2], 65535u);
  EXPECT_EQ(shape.block[0] * shape.block[1], 256u);
}

TEST(CudnnConvTest, KeepsChannelsLastStrides) {
  const KernelTask task = ConvEpilogueTask(kF16, kResnetShape, true, {"residual", "relu"},
                                           /*channels_last=*/true);
  auto call = DescribeCudnnConv(task, Point(0, 0));
  ASSERT_TRUE(call.ok()) << call.status();
  EXPECT_THAT(call->x.strides, ElementsAre(64 * 56 * 56, 1, 56 * 64, 64));
  EXPECT_THAT(call->y.strides, ElementsAre(64 * 56 * 56, 1, 56 * 64, 64));
  EXPECT_THAT(call->residuals[0].strides, ElementsAre(64 * 56 * 56, 1, 56 * 64, 64));
}

// The space is cuDNN's: three heuristic modes, eight configurations each, per template (the
// task's layout, and channels-last inside for an NCHW task); anything else is rejected by
// Validate with the reason.
TEST(CudnnConvTest, SpaceIsHeuristicModeTimesEngineIndex) {
  const KernelTask task = ConvEpilogueTask(kF32, kResnetShape, true, {"relu"});
  auto spaces = CudnnConvFamily().ScheduleSpace(task);
  ASSERT_TRUE(spaces.ok()) << spaces.status();
  ASSERT_EQ(spaces->size(), 2u);
  EXPECT_EQ((*spaces)[0].template_name, CudnnConvFamily::kGraphTemplate);
  EXPECT_EQ((*spaces)[1].template_name, CudnnConvFamily::kChannelsLastTemplate);
  EXPECT_EQ(EnumeratePoints(spaces->front()).size(), 24u);
  EXPECT_EQ(DefaultPoint(spaces->front()).parameters, Point(0, 0).parameters);
  EXPECT_EQ(testing::ValidPoints(CudnnConvFamily(), task).size(), 48u);
  EXPECT_EQ(CudnnConvFamily().Validate(task, Point(0, 8)).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(CudnnConvFamily().Validate(task, Point(3, 0)).code(),
            absl::StatusCode::kInvalidArgument);
  SchedulePoint other = Point(0, 0);
  other.template_name = "implicit_gemm";
  EXPECT_EQ(CudnnConvFamily().Validate(task, other).code(), absl::StatusCode::kInvalidArgument);
  // Different points describe different calls, so their candidates differ.
  EXPECT_NE(CudnnConvFamily().Generate(task, Point(0, 0))->source,
            CudnnConvFamily().Generate(task, Point(2, 0))->source);
}

TEST(CudnnConvTest, ReadsConvolutionAndPaddingSame) {
  // aten::convolution with its explicit arguments, and conv2d.padding with "same".
  for (const bool same : {false, true}) {
    TaskBuilder builder;
    builder.Input("x", kF16, {1, 4, 10, 10}).Input("w", kF16, {8, 4, 5, 5});
    if (same) {
      builder.Node("conv", "conv2d", "padding",
                   {TensorArg("input", "x"), TensorArg("weight", "w"), NoneArg("bias"),
                    IntsArg("stride", {1}), StringArg("padding", "same")},
                   kF16, {1, 8, 10, 10});
    } else {
      builder.Node("conv", "convolution", "",
                   {TensorArg("input", "x"), TensorArg("weight", "w"), NoneArg("bias"),
                    IntsArg("stride", {1, 1}), IntsArg("padding", {2, 2}),
                    IntsArg("dilation", {1, 1}), testing::BoolArg("transposed", false),
                    IntsArg("output_padding", {0, 0}), IntArg("groups", 1)},
                   kF16, {1, 8, 10, 10});
    }
    const KernelTask task = builder.Output("conv").Build(forge::v1::KERNEL_FAMILY_CONV);
    auto call = DescribeCudnnConv(task, Point(0, 0));
    ASSERT_TRUE(call.ok()) << same << ": " << call.status();
    EXPECT_THAT(call->padding, ElementsAre(2, 2));
    EXPECT_TRUE(call->epilogue.empty());
  }
}

// What cuDNN's graph cannot express (or the family does not map) is declined at Applies with
// the obstacle named, so the task keeps its other candidates.
TEST(CudnnConvTest, DeclinesWhatTheGraphCannotExpress) {
  struct Case {
    std::string name;
    KernelTask task;
    std::string reason;
  };
  const std::vector<int64_t> y = {1, 8, 8, 8};
  auto conv = [&](TaskBuilder& builder, forge::v1::DType dtype) -> TaskBuilder& {
    return builder.Node("conv", "conv2d", "",
                        {TensorArg("input", "x"), TensorArg("weight", "w"), NoneArg("bias"),
                         IntsArg("stride", {1, 1}), IntsArg("padding", {1, 1})},
                        dtype, y);
  };
  std::vector<Case> cases;
  {
    TaskBuilder b;
    b.Input("x", forge::v1::DTYPE_FLOAT64, {1, 4, 8, 8}).Input("w", forge::v1::DTYPE_FLOAT64, {8, 4, 3, 3});
    cases.push_back({"float64", conv(b, forge::v1::DTYPE_FLOAT64).Output("conv").Build(forge::v1::KERNEL_FAMILY_CONV),
                     "float32, bfloat16 and float16 only"});
  }
  {
    TaskBuilder b;
    b.Input("x", kF16, {1, 4, 8, 8}).Input("w", kF32, {8, 4, 3, 3});
    cases.push_back({"mixed", conv(b, kF16).Output("conv").Build(forge::v1::KERNEL_FAMILY_CONV),
                     "differ in dtype"});
  }
  {
    TaskBuilder b;
    b.Input("x", kF32, {1, 4, 8, 8}).Input("w", kF32, {8, 4, 3, 3});
    conv(b, kF32).Node("act", "hardswish", "", {TensorArg("self", "conv")}, kF32, y);
    cases.push_back({"hardswish", b.Output("act").Build(forge::v1::KERNEL_FAMILY_CONV),
                     "aten::hardswish"});
  }
  {
    // A [K] addend lines up with W, not with the channels: not a bias (and not the output's shape).
    TaskBuilder b;
    b.Input("x", kF32, {1, 4, 8, 8}).Input("w", kF32, {8, 4, 3, 3}).Input("v", kF32, {8});
    conv(b, kF32).Node("sum", "add", "Tensor", {TensorArg("self", "conv"), TensorArg("other", "v")}, kF32, y);
    cases.push_back({"row_vector", b.Output("sum").Build(forge::v1::KERNEL_FAMILY_CONV),
                     "neither a per-channel bias nor of the output's shape"});
  }
  {
    TaskBuilder b;
    b.Input("x", kF32, {1, 4, 8, 8}).Input("w", kF32, {8, 4, 3, 3});
    conv(b, kF32).Node("act", "relu", "", {TensorArg("self", "conv")}, kF32, y);
    cases.push_back({"two_outputs", b.Output("conv").Output("act").Build(forge::v1::KERNEL_FAMILY_CONV),
                     "not one chain"});
  }
  {
    TaskBuilder b;
    b.Input("x", kF32, {1, 4, 8, 8}, {}, 16).Input("w", kF32, {8, 4, 3, 3});
    cases.push_back({"offset", conv(b, kF32).Output("conv").Build(forge::v1::KERNEL_FAMILY_CONV),
                     "storage offset 16"});
  }
  {
    TaskBuilder b;
    b.Input("x", kF32, {1, 4, 8, 8}).Input("w", kF32, {4, 8, 3, 3});
    b.Node("conv", "convolution", "",
           {TensorArg("input", "x"), TensorArg("weight", "w"), NoneArg("bias"),
            IntsArg("stride", {1, 1}), IntsArg("padding", {1, 1}), IntsArg("dilation", {1, 1}),
            testing::BoolArg("transposed", true)},
           kF32, y);
    cases.push_back({"transposed", b.Output("conv").Build(forge::v1::KERNEL_FAMILY_CONV),
                     "transposed convolution"});
  }
  {
    TaskBuilder b;
    b.Input("x", kF32, {1, 4, 8}).Input("w", kF32, {8, 4, 3});
    b.Node("conv", "conv1d", "", {TensorArg("input", "x"), TensorArg("weight", "w")}, kF32, {1, 8, 6});
    cases.push_back({"conv1d", b.Output("conv").Build(forge::v1::KERNEL_FAMILY_CONV),
                     "no convolution"});
  }
  {
    TaskBuilder b;
    b.Input("x", kF32, {1, 4, 8, 8}).Input("w", kF32, {8, 4, 3, 3});
    conv(b, kF32).Node("scaled", "mul", "Tensor", {TensorArg("self", "conv"), FloatArg("other", 2)}, kF32, y);
    b.Node("act", "leaky_relu", "", {TensorArg("self", "scaled"), FloatArg("negative_slope", 0.1)}, kF32, y);
    cases.push_back({"leaky_relu", b.Output("act").Build(forge::v1::KERNEL_FAMILY_CONV),
                     "aten::leaky_relu"});
  }
  {
    // clamp without a min (only max) and hardtanh with bounds the wrong way round.
    TaskBuilder b;
    b.Input("x", kF32, {1, 4, 8, 8}).Input("w", kF32, {8, 4, 3, 3});
    conv(b, kF32).Node("act", "clamp", "", {TensorArg("self", "conv"), NoneArg("min"), FloatArg("max", 1)}, kF32, y);
    cases.push_back({"clamp_max_only", b.Output("act").Build(forge::v1::KERNEL_FAMILY_CONV),
                     "has no scalar min bound"});
    TaskBuilder h;
    h.Input("x", kF32, {1, 4, 8, 8}).Input("w", kF32, {8, 4, 3, 3});
    conv(h, kF32).Node("act", "hardtanh", "", {TensorArg("self", "conv"), FloatArg("min_val", 2), FloatArg("max_val", 1)}, kF32, y);
    cases.push_back({"hardtanh_reversed", h.Output("act").Build(forge::v1::KERNEL_FAMILY_CONV),
                     "clamps to [2, 1]"});
  }
  cases.push_back({"training_batch_norm",
                   ConvEpilogueTask(kF32, kResnetShape, true, {"batch_norm_training", "relu"}),
                   "batch norm in training mode"});
  {
    // Batch norm of float64 statistics: the fold reads float types the conv's graph has.
    KernelTask task = ConvEpilogueTask(kF32, kResnetShape, true, {"batch_norm"});
    task.mutable_inputs(4)->set_dtype(forge::v1::DTYPE_FLOAT64);  // running_var
    cases.push_back({"float64_running_var", task,
                     "the running_var of aten::_native_batch_norm_legit_no_training"});
  }
  {
    // Statistics of another channel count than the conv's output.
    TaskBuilder b;
    b.Input("x", kF32, {1, 4, 8, 8}).Input("w", kF32, {8, 4, 3, 3});
    b.Input("mean", kF32, {4}).Input("var", kF32, {8});
    conv(b, kF32).Node("bn", "batch_norm", "",
                       {TensorArg("input", "conv"), NoneArg("weight"), NoneArg("bias"),
                        OptionalTensorArg("running_mean", "mean"),
                        OptionalTensorArg("running_var", "var"),
                        testing::BoolArg("training", false), FloatArg("momentum", 0.1),
                        FloatArg("eps", 1e-5)},
                       kF32, y);
    cases.push_back({"channels_mismatch", b.Output("bn").Build(forge::v1::KERNEL_FAMILY_CONV),
                     "is not a contiguous [8] float32"});
  }
  for (const Case& c : cases) {
    const absl::Status status = CudnnConvFamily().Applies(c.task);
    EXPECT_EQ(status.code(), absl::StatusCode::kUnimplemented) << c.name << ": " << status;
    EXPECT_THAT(status.message(), HasSubstr(c.reason)) << c.name;
    EXPECT_TRUE(absl::StartsWith(status.message(), "cudnn_conv: ")) << c.name;
    EXPECT_FALSE(CudnnConvFamily().Validate(c.task, Point(0, 0)).ok()) << c.name;
    EXPECT_FALSE(CudnnConvFamily().Plan(c.task, Point(0, 0)).ok()) << c.name;
  }
}

// A hostile group: a conv node without outputs is refused, not read past its end.
TEST(CudnnConvTest, RefusesAConvWithoutOutputs) {
  TaskBuilder b;
  b.Input("x", kF32, {1, 4, 8, 8}).Input("w", kF32, {8, 4, 3, 3});
  b.Node("conv", "conv2d", "", {TensorArg("input", "x"), TensorArg("weight", "w")}, kF32,
         {1, 8, 6, 6});
  KernelTask task = b.Output("conv").Build(forge::v1::KERNEL_FAMILY_CONV);
  task.mutable_group()->mutable_nodes(0)->clear_outputs();
  EXPECT_FALSE(CudnnConvFamily().Applies(task).ok());
  EXPECT_FALSE(CudnnConvFamily().Plan(task, Point(0, 0)).ok());
}

TEST(CudnnConvTest, RejectsInconsistentShapes) {
  TaskBuilder b;
  b.Input("x", kF32, {1, 4, 8, 8}).Input("w", kF32, {8, 4, 3, 3});
  // Padding 1 keeps 8x8; the node claims 6x6.
  b.Node("conv", "conv2d", "",
         {TensorArg("input", "x"), TensorArg("weight", "w"), NoneArg("bias"),
          IntsArg("stride", {1, 1}), IntsArg("padding", {1, 1})},
         kF32, {1, 8, 6, 6});
  const absl::Status status = CudnnConvFamily().Applies(b.Output("conv").Build(forge::v1::KERNEL_FAMILY_CONV));
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  TaskBuilder g;
  g.Input("x", kF32, {1, 6, 8, 8}).Input("w", kF32, {8, 4, 3, 3});
  g.Node("conv", "conv2d", "",
         {TensorArg("input", "x"), TensorArg("weight", "w"), NoneArg("bias"),
          IntsArg("stride", {1, 1}), IntsArg("padding", {1, 1}), IntsArg("dilation", {1, 1}),
          IntArg("groups", 2)},
         kF32, {1, 8, 8, 8});
  EXPECT_THAT(CudnnConvFamily().Applies(g.Output("conv").Build(forge::v1::KERNEL_FAMILY_CONV)).message(),
              HasSubstr("disagree"));
}

// The exported models' convolutions all carry an eval-mode batch norm (the exporter's
// _native_batch_norm_legit_no_training): the family serves every one of their conv tasks,
// the batch norm a step of the call, its running statistics and affine parameters task inputs.
TEST(CudnnConvModelsTest, ExportedConvTasksFoldTheirBatchNorm) {
  const char* directory = std::getenv("FORGE_TEST_MODELS");
  ASSERT_NE(directory, nullptr) << "FORGE_TEST_MODELS is not set; run through ctest";
  for (const std::string model : {"conv_bn_relu", "resnet18"}) {
    forge::v1::Graph graph;
    std::ifstream file(std::string(directory) + "/" + model + "/graph.pb", std::ios::binary);
    ASSERT_TRUE(file && graph.ParseFromIstream(&file)) << model;
    auto partition = forge::graph::Partition(graph);
    ASSERT_TRUE(partition.ok()) << partition.status();
    int conv_tasks = 0;
    for (const KernelTask& task : partition->tasks) {
      if (task.family() != forge::v1::KERNEL_FAMILY_CONV) continue;
      ++conv_tasks;
      auto call = DescribeCudnnConv(task, Point(0, 0));
      ASSERT_TRUE(call.ok()) << model << ": " << call.status();
      ASSERT_EQ(call->batch_norms.size(), 1u) << model << ": " << DescribeCall(*call);
      const CudnnBatchNorm& norm = call->batch_norms[0];
      for (const ChannelOperand* operand : {&norm.mean, &norm.var, &norm.weight, &norm.bias}) {
        ASSERT_GE(operand->input, 0) << DescribeCall(*call);
        EXPECT_EQ(task.inputs(operand->input).shape(0), call->y.dims[1]);
      }
      EXPECT_DOUBLE_EQ(norm.eps, 1e-5);
    }
    EXPECT_GT(conv_tasks, 0) << model;
  }
}

}  // namespace
}  // namespace forge::codegen
