#include "compiler/codegen/cutlass_gemm/cutlass_gemm.h"

#include <bit>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

#include "compiler/codegen/testing/codegen_test_util.h"

namespace forge::codegen {
namespace {

using forge::v1::KernelTask;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using testing::OptionalTensorArg;
using testing::TaskBuilder;
using testing::TensorArg;

constexpr auto kF32 = forge::v1::DTYPE_FLOAT32;
constexpr auto kBF16 = forge::v1::DTYPE_BFLOAT16;
constexpr auto kF16 = forge::v1::DTYPE_FLOAT16;
constexpr auto kF64 = forge::v1::DTYPE_FLOAT64;
constexpr auto kGemm = forge::v1::KERNEL_FAMILY_GEMM;

const CutlassGemmFamily kFamily;

int64_t Bits(double value) { return std::bit_cast<int64_t>(value); }

// The default point of the task's first template (float32: sm90_3xtf32).
SchedulePoint DefaultOf(const KernelTask& task) {
  auto spaces = kFamily.ScheduleSpace(task);
  EXPECT_TRUE(spaces.ok()) << spaces.status();
  if (!spaces.ok() || spaces->empty()) return {};
  return DefaultPoint(spaces->front());
}

LaunchPlan PlanOf(const KernelTask& task, const SchedulePoint& point) {
  auto plan = kFamily.Plan(task, point);
  EXPECT_TRUE(plan.ok()) << plan.status();
  return plan.ok() ? *plan : LaunchPlan{};
}

std::vector<int64_t> ArgsOf(const KernelTask& task) {
  return PlanOf(task, DefaultOf(task)).runtime_args;
}

KernelTask LinearTask(forge::v1::DType dtype, int64_t m, int64_t n, int64_t k, bool bias = true,
                      const std::string& activation = "", const std::string& approximate = "") {
  return testing::LinearActivationTask(dtype, m, n, k, bias, activation, approximate);
}

KernelTask ScaleResidualTask(forge::v1::DType dtype, int64_t m, int64_t n, int64_t k) {
  return testing::ScaleResidualTask(dtype, m, n, k, 0.125);
}

TEST(CutlassGemmTest, EachDTypeHasItsTemplate) {
  auto names = [](const KernelTask& task) {
    std::vector<std::string> result;
    auto spaces = kFamily.ScheduleSpace(task);
    EXPECT_TRUE(spaces.ok()) << spaces.status();
    if (spaces.ok()) {
      for (const TemplateSpace& space : *spaces) result.push_back(space.template_name);
    }
    return result;
  };
  EXPECT_THAT(names(LinearTask(kBF16, 256, 512, 128)), ElementsAre("sm90_tma_ws"));
  EXPECT_THAT(names(LinearTask(kF16, 256, 512, 128)), ElementsAre("sm90_tma_ws"));
  EXPECT_THAT(names(LinearTask(kF32, 256, 512, 128)), ElementsAre("sm90_3xtf32", "sm80_3xtf32"));
  // sm90_3xtf32's TMA epilogue needs D's rows 16-byte aligned (66 floats are not); sm80 runs it.
  EXPECT_THAT(names(LinearTask(kF32, 64, 66, 32)), ElementsAre("sm80_3xtf32"));
}

TEST(CutlassGemmTest, DeclinesWithReasons) {
  const absl::Status float64 = kFamily.Applies(LinearTask(kF64, 64, 64, 64));
  EXPECT_EQ(float64.code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(std::string(float64.message()), HasSubstr("float64"));

  // TMA needs 16-byte leading dimensions: K = 100 bf16 elements is 200 bytes.
  const absl::Status misaligned = kFamily.Applies(LinearTask(kBF16, 64, 64, 100));
  EXPECT_EQ(misaligned.code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(std::string(misaligned.message()), HasSubstr("not a multiple of 16 bytes"));
  // float32 has no such limit: K = 101 runs with one-element accesses.
  EXPECT_TRUE(kFamily.Applies(LinearTask(kF32, 64, 64, 101)).ok());

  // An activation before the residual add is not CUTLASS's activation(... + beta * C).
  const KernelTask act_then_add =
      TaskBuilder()
          .Input("a", kBF16, {64, 64})
          .Input("b", kBF16, {64, 64})
          .Input("r", kBF16, {64, 64})
          .Node("mm", "mm", "", {TensorArg("self", "a"), TensorArg("mat2", "b")}, kBF16, {64, 64})
          .Node("act", "relu", "", {TensorArg("self", "mm")}, kBF16, {64, 64})
          .Node("sum", "add", "Tensor", {TensorArg("self", "act"), TensorArg("other", "r")}, kBF16,
                {64, 64})
          .Output("sum")
          .Build(kGemm);
  const absl::Status inexpressible = kFamily.Applies(act_then_add);
  EXPECT_EQ(inexpressible.code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(std::string(inexpressible.message()),
              HasSubstr("(node sum) is not expressible in a CUTLASS epilogue"));

  // sm80_3xtf32's bias is its C operand: not with a residual too.
  const KernelTask bias_and_residual =
      TaskBuilder()
          .Input("x", kF32, {64, 32})
          .Input("w", kF32, {16, 32})
          .Input("bias", kF32, {16})
          .Input("r", kF32, {64, 16})
          .Node("linear", "linear", "",
                {TensorArg("input", "x"), TensorArg("weight", "w"), OptionalTensorArg("bias", "bias")},
                kF32, {64, 16})
          .Node("sum", "add", "Tensor", {TensorArg("self", "linear"), TensorArg("other", "r")},
                kF32, {64, 16})
          .Output("sum")
          .Build(kGemm);
  // sm90_3xtf32 has both in its epilogue, so only sm80_3xtf32 declines it.
  EXPECT_TRUE(kFamily.Applies(bias_and_residual).ok());
  EXPECT_THAT(std::string(kFamily.Validate(bias_and_residual, {"sm80_3xtf32", {{"config", 0}}})
                              .message()),
              HasSubstr("not a bias and a residual together"));

  // A bf16 broadcast batch has no TMA descriptor; float32 runs it.
  EXPECT_THAT(std::string(kFamily.Applies(testing::MatmulTask(kBF16, 4, 1, 64, 64, 64)).message()),
              HasSubstr("broadcast batch"));
  EXPECT_TRUE(kFamily.Applies(testing::MatmulTask(kF32, 4, 1, 64, 64, 64)).ok());
}

TEST(CutlassGemmTest, ValidateEnforcesTheScheduleRules) {
  const KernelTask task = LinearTask(kBF16, 256, 512, 128);
  SchedulePoint point = DefaultOf(task);
  EXPECT_TRUE(kFamily.Validate(task, point).ok());
  point.parameters["tile_m"] = 64;  // cooperative needs two 64-row warp groups
  EXPECT_THAT(std::string(kFamily.Validate(task, point).message()),
              HasSubstr("needs tile_m >= 128"));
  point.parameters["schedule"] = 1;  // ping-pong 64 x 256 is fine
  EXPECT_TRUE(kFamily.Validate(task, point).ok());
  point.parameters["tile_m"] = 128;  // ping-pong 128 x 256: too many accumulators
  EXPECT_THAT(std::string(kFamily.Validate(task, point).message()),
              HasSubstr("256 float accumulator registers"));
  point.parameters["tile_m"] = 256;
  EXPECT_THAT(std::string(kFamily.Validate(task, point).message()),
              HasSubstr("needs tile_m <= 128"));
  point.parameters["schedule"] = 0;  // cooperative 256 x 256: too many accumulators
  EXPECT_THAT(std::string(kFamily.Validate(task, point).message()),
              HasSubstr("256 float accumulator registers"));
  point.parameters["tile_n"] = 128;
  EXPECT_TRUE(kFamily.Validate(task, point).ok());
  point.parameters["tile_k"] = 32;
  EXPECT_EQ(kFamily.Validate(task, point).code(), absl::StatusCode::kInvalidArgument);
  // The float32 template's point is not the bf16 task's.
  EXPECT_THAT(std::string(kFamily.Validate(task, {"sm80_3xtf32", {{"config", 0}}}).message()),
              HasSubstr("its templates are 'sm90_tma_ws'"));
}

TEST(CutlassGemmTest, SpaceSizes) {
  auto valid_points = [](const KernelTask& task, size_t template_index = 0) {
    auto spaces = kFamily.ScheduleSpace(task);
    EXPECT_TRUE(spaces.ok()) << spaces.status();
    int valid = 0, all = 0;
    for (const SchedulePoint& point : EnumeratePoints(spaces->at(template_index))) {
      ++all;
      valid += kFamily.Validate(task, point).ok();
    }
    return std::make_pair(valid, all);
  };
  // tile_m 3 x tile_n 3 x cluster 4 x schedule 2 x raster 3 x swizzle 4; of the 18 (tile,
  // schedule) pairs, cooperative allows 128 x {64, 128, 256} and 256 x {64, 128}, ping-pong
  // 64 x {64, 128, 256} and 128 x {64, 128}: 10.
  EXPECT_EQ(valid_points(LinearTask(kBF16, 256, 512, 128)), std::make_pair(10 * 4 * 12, 864));
  // sm90_3xtf32: tile_m 2 x tile_n 2 x cluster 4 x raster 3 x swizzle 4 x promotion 2, all valid.
  EXPECT_EQ(valid_points(LinearTask(kF32, 256, 512, 128)), std::make_pair(384, 384));
  EXPECT_EQ(valid_points(LinearTask(kF32, 256, 512, 128), 1),
            std::make_pair(static_cast<int>(kSm80Configs.size()),
                           static_cast<int>(kSm80Configs.size())));
}

TEST(CutlassGemmTest, LinearBiasGeluPlan) {
  const KernelTask task = LinearTask(kBF16, 256, 512, 128, true, "gelu", "tanh");
  SchedulePoint point = DefaultOf(task);
  point.parameters["raster"] = 2;
  point.parameters["swizzle"] = 4;
  const LaunchPlan plan = PlanOf(task, point);
  EXPECT_EQ(plan.kernel_name, "cutlass_sm90_bf16_tn_128x256x64_2x1x1_cooperative_bias_gelu_tanh");
  EXPECT_EQ(plan.hints.executor, Executor::kHostLaunched);
  EXPECT_EQ(plan.compile_output, CompileOutput::kNvccSharedObject);
  EXPECT_THAT(plan.compile_options, ::testing::Contains("--expt-relaxed-constexpr"));
  // x is A (row-major, ld k), w[n, k] is B stored transposed (ld k), the bias is input 2, the
  // output is buffer 3 (after the three inputs); no C.
  EXPECT_THAT(plan.runtime_args,
              ElementsAre(256, 512, 128, 1, 0, 128, 0, 1, 128, 0, 2, -1, 512, 0, 3, 512, 0,
                          Bits(1.0), Bits(0.0), 2, 4, 0, 0, 0, -1));
  EXPECT_EQ(plan.hints.gemm_math, GemmMath::kTensorCore16Bit);
  EXPECT_EQ(plan.hints.gemm_ctas, 2 * 2);
  EXPECT_DOUBLE_EQ(plan.hints.gemm_tile_utilization, 1.0);
  auto source = kFamily.Emit(task, plan);
  ASSERT_TRUE(source.ok()) << source.status();
  EXPECT_THAT(*source, HasSubstr("#define FORGE_ACTIVATION forge_cutlass::GeluTanh\n"));
  EXPECT_THAT(*source, HasSubstr("#define FORGE_HAS_BIAS 1\n"));
  EXPECT_THAT(*source, HasSubstr("#define FORGE_ARG_SWIZZLE 20\n"));
  EXPECT_THAT(*source, HasSubstr("KernelTmaWarpSpecializedCooperative"));
  EXPECT_THAT(*source, HasSubstr("#include \"compiler/codegen/host_launch_abi.h\""));
}

TEST(CutlassGemmTest, ActivationsMapToFunctors) {
  const std::vector<std::pair<std::pair<std::string, std::string>, std::string>> cases = {
      {{"relu", ""}, "cutlass::epilogue::thread::ReLu"},
      {{"gelu", ""}, "cutlass::epilogue::thread::GELU"},
      {{"gelu", "none"}, "cutlass::epilogue::thread::GELU"},
      {{"gelu", "tanh"}, "forge_cutlass::GeluTanh"},
      {{"silu", ""}, "forge_cutlass::Silu"},
      {{"sigmoid", ""}, "forge_cutlass::Sigmoid"},
      {{"tanh", ""}, "forge_cutlass::Tanh"},
      {{"", ""}, "cutlass::epilogue::thread::Identity"}};
  for (forge::v1::DType dtype : {kBF16, kF32}) {
    for (const auto& [activation, functor] : cases) {
      const KernelTask task = LinearTask(dtype, 64, 64, 64, true, activation.first, activation.second);
      auto source = kFamily.Generate(task, DefaultOf(task));
      ASSERT_TRUE(source.ok()) << activation.first << ": " << source.status();
      EXPECT_THAT(source->source, HasSubstr("#define FORGE_ACTIVATION " + functor + "\n"))
          << activation.first;
    }
  }
}

// linear(x[64, 64], w[64, 64]) * 2, then `op`: the anchor linear x2 + leaky ReLU's epilogue
// and the clamps.
KernelTask ScaledActivationTask(forge::v1::DType dtype, const std::string& op,
                                std::vector<forge::v1::Argument> arguments) {
  return testing::ScaledActivationTask(dtype, 64, 64, 64, op, std::move(arguments));
}

TEST(CutlassGemmTest, ParameterizedActivationsCompileTheirConstantsIn) {
  const struct {
    std::string op;
    std::vector<forge::v1::Argument> arguments;
    std::string functor, p0, p1;
  } cases[] = {
      {"leaky_relu", {}, "LeakyRelu", "(0x1.47ae147ae147bp-7)", "(0x0p+0)"},  // 0.01
      {"leaky_relu", {testing::FloatArg("negative_slope", 0.2)}, "LeakyRelu",
       "(0x1.999999999999ap-3)", "(0x0p+0)"},
      {"hardtanh", {}, "Clamp", "(-0x1p+0)", "(0x1p+0)"},
      {"relu6", {}, "Clamp", "(0x0p+0)", "(0x1.8p+2)"},
      {"clamp", {testing::FloatArg("min", -0.5), testing::NoneArg("max")}, "Clamp", "(-0x1p-1)",
       "(__builtin_huge_val())"},
      {"clamp_max", {testing::IntArg("max", 3)}, "Clamp", "(-__builtin_huge_val())",
       "(0x1.8p+1)"},
  };
  for (forge::v1::DType dtype : {kBF16, kF32}) {
    for (const auto& test : cases) {
      SCOPED_TRACE(test.op + " " + test.p0);
      const KernelTask task = ScaledActivationTask(dtype, test.op, test.arguments);
      auto kernel = kFamily.Generate(task, DefaultOf(task));
      ASSERT_TRUE(kernel.ok()) << kernel.status();
      EXPECT_THAT(kernel->source,
                  HasSubstr("#define FORGE_ACTIVATION forge_cutlass::" + test.functor + "\n"));
      EXPECT_THAT(kernel->source, HasSubstr("#define FORGE_ACTIVATION_P0 " + test.p0 + "\n"));
      EXPECT_THAT(kernel->source, HasSubstr("#define FORGE_ACTIVATION_P1 " + test.p1 + "\n"));
      EXPECT_EQ(kernel->runtime_args[kArgAlpha], Bits(2.0));  // the scale stays alpha
    }
  }
  // Without parameters, no constants.
  auto relu = kFamily.Generate(LinearTask(kBF16, 64, 64, 64, true, "relu"),
                               DefaultOf(LinearTask(kBF16, 64, 64, 64, true, "relu")));
  ASSERT_TRUE(relu.ok());
  EXPECT_THAT(relu->source, ::testing::Not(HasSubstr("#define FORGE_ACTIVATION_P0")));
  // A tensor bound is not a constant: declined, the task keeps gemm_library's candidates.
  const absl::Status tensor_bound = kFamily.Applies(
      ScaledActivationTask(kBF16, "clamp", {TensorArg("min", "low")}));
  EXPECT_EQ(tensor_bound.code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(std::string(tensor_bound.message()), HasSubstr("(node act) is not expressible"));
}

TEST(CutlassGemmTest, ScaleAndResidualAreAlphaAndC) {
  // bf16: the residual is C (input 2, ld n), beta 1; the scale is alpha.
  const std::vector<int64_t> bf16 = ArgsOf(ScaleResidualTask(kBF16, 64, 128, 32));
  EXPECT_EQ(bf16[kArgBias], -1);
  EXPECT_EQ(bf16[kArgC], 2);
  EXPECT_EQ(bf16[kArgLdc], 128);
  EXPECT_EQ(bf16[kArgAlpha], Bits(0.125));
  EXPECT_EQ(bf16[kArgBeta], Bits(1.0));
  EXPECT_EQ(bf16[kArgD], 3);
  // float32: the same through sm90_3xtf32 (the default) ...
  const std::vector<int64_t> f32 = ArgsOf(ScaleResidualTask(kF32, 64, 128, 32));
  EXPECT_EQ(f32[kArgC], 2);
  EXPECT_EQ(f32[kArgLdc], 128);
  EXPECT_EQ(f32[kArgAlpha], Bits(0.125));
  EXPECT_EQ(ArgsOf(LinearTask(kF32, 64, 128, 32))[kArgBias], 2);
  // ... and through the 2.x kernel, whose bias is C broadcast over rows: ld 0, beta 1.
  const KernelTask linear = LinearTask(kF32, 64, 128, 32);
  const std::vector<int64_t> bias =
      PlanOf(linear, {"sm80_3xtf32", {{"config", 7}}}).runtime_args;
  EXPECT_EQ(bias[kArgBias], -1);
  EXPECT_EQ(bias[kArgC], 2);
  EXPECT_EQ(bias[kArgLdc], 0);
  EXPECT_EQ(bias[kArgBatchStrideC], 0);
  EXPECT_EQ(bias[kArgBeta], Bits(1.0));
}

TEST(CutlassGemmTest, BatchedTransposedAndBroadcastOperands) {
  // b stored as [batch, n, k]: B is column-major with ld k and batch stride n * k.
  const KernelTask transposed = testing::MatmulTask(kBF16, 3, 3, 64, 32, 16, true);
  const LaunchPlan plan = PlanOf(transposed, DefaultOf(transposed));
  EXPECT_THAT(plan.kernel_name, HasSubstr("_tn_"));
  EXPECT_THAT(plan.runtime_args,
              ElementsAre(64, 32, 16, 3, 0, 16, 64 * 16, 1, 16, 32 * 16, -1, -1, 32, 64 * 32, 2,
                          32, 64 * 32, Bits(1.0), Bits(0.0), 0, 1, 0, 0, 0, -1));
  // Row-major b: B is row-major (ld n).
  const std::vector<int64_t> plain = ArgsOf(testing::MatmulTask(kBF16, 3, 3, 64, 32, 16));
  EXPECT_EQ(plain[kArgLdb], 32);
  EXPECT_EQ(plain[kArgBatchStrideB], 16 * 32);
  // A broadcast batch (float32): b's one matrix serves the 4 batches.
  const std::vector<int64_t> broadcast = ArgsOf(testing::MatmulTask(kF32, 4, 1, 8, 12, 20));
  EXPECT_EQ(broadcast[kArgBatch], 4);
  EXPECT_EQ(broadcast[kArgBatchStrideA], 8 * 20);
  EXPECT_EQ(broadcast[kArgBatchStrideB], 0);
  EXPECT_EQ(broadcast[kArgBatchStrideD], 8 * 12);
}

TEST(CutlassGemmTest, SourceDependsOnTheConfigurationOnly) {
  // Two shapes, the same configuration: byte-identical sources, different runtime arguments.
  const KernelTask small = LinearTask(kBF16, 64, 128, 64, true, "relu");
  const KernelTask large = LinearTask(kBF16, 4096, 1024, 512, true, "relu");
  const SchedulePoint point = DefaultOf(small);
  auto first = kFamily.Generate(small, point);
  auto second = kFamily.Generate(large, point);
  ASSERT_TRUE(first.ok()) << first.status();
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_EQ(first->source, second->source);
  EXPECT_EQ(first->kernel_name, second->kernel_name);
  EXPECT_NE(first->runtime_args, second->runtime_args);
  // Raster and swizzle are run-time arguments too.
  SchedulePoint swizzled = point;
  swizzled.parameters["swizzle"] = 8;
  auto third = kFamily.Generate(small, swizzled);
  ASSERT_TRUE(third.ok()) << third.status();
  EXPECT_EQ(first->source, third->source);
  // Emit is deterministic.
  auto again = kFamily.Generate(small, point);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(first->source, again->source);
  // A different epilogue is a different configuration.
  auto gelu = kFamily.Generate(LinearTask(kBF16, 64, 128, 64, true, "gelu"), point);
  ASSERT_TRUE(gelu.ok());
  EXPECT_NE(first->source, gelu->source);
  // float32: the same for its default template (sm90_3xtf32).
  const KernelTask f32_small = LinearTask(kF32, 32, 64, 16);
  const KernelTask f32_large = LinearTask(kF32, 1024, 2048, 4096);
  auto f32_first = kFamily.Generate(f32_small, DefaultOf(f32_small));
  auto f32_second = kFamily.Generate(f32_large, DefaultOf(f32_large));
  ASSERT_TRUE(f32_first.ok() && f32_second.ok());
  EXPECT_EQ(f32_first->source, f32_second->source);
}

TEST(CutlassGemmTest, TileQuantizationShowsInTheHints) {
  const KernelTask task = LinearTask(kBF16, 200, 512, 64);
  SchedulePoint point = DefaultOf(task);  // 128 x 256 tiles: 2 x 2, rows padded to 256
  const LaunchPlan plan = PlanOf(task, point);
  EXPECT_EQ(plan.hints.gemm_ctas, 4);
  EXPECT_DOUBLE_EQ(plan.hints.gemm_tile_utilization, 200.0 / 256.0);
}

TEST(CutlassGemmTest, ArchRules) {
  const KernelTask bf16 = LinearTask(kBF16, 64, 64, 64);
  const KernelTask f32 = LinearTask(kF32, 64, 64, 64);
  EXPECT_TRUE(kFamily.SupportsArch(bf16, DefaultOf(bf16), "sm_90").ok());
  EXPECT_EQ(kFamily.SupportsArch(bf16, DefaultOf(bf16), "sm_80").code(),
            absl::StatusCode::kFailedPrecondition);
  const SchedulePoint sm80 = {"sm80_3xtf32", {{"config", 7}}};
  EXPECT_TRUE(kFamily.SupportsArch(f32, sm80, "sm_80").ok());
  EXPECT_TRUE(kFamily.SupportsArch(f32, sm80, "sm_90").ok());
  EXPECT_EQ(kFamily.SupportsArch(f32, sm80, "sm_75").code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(kFamily.SupportsArch(f32, DefaultOf(f32), "sm_90").ok());  // sm90_3xtf32
  EXPECT_EQ(kFamily.SupportsArch(f32, DefaultOf(f32), "sm_80").code(),
            absl::StatusCode::kFailedPrecondition);
}

TEST(CutlassGemmTest, RegisteredBeforeTheLibraryFamily) {
  const KernelFamily* family = FindFamily(forge::v1::KERNEL_FAMILY_CUTLASS_GEMM);
  ASSERT_NE(family, nullptr);
  EXPECT_EQ(family->name(), "cutlass_gemm");
  std::vector<std::string> names;
  for (const KernelFamily* applicable : ApplicableFamilies(LinearTask(kBF16, 64, 64, 64))) {
    names.emplace_back(applicable->name());
  }
  EXPECT_THAT(names, ElementsAre("cutlass_gemm", "gemm_library", "aten"));
}

TEST(CutlassGemmTest, ThreeTf32OnSm90ReadsAnyLayoutThroughRuntimeArguments) {
  // The same product with B stored transposed or not: one configuration, one source; the layout
  // travels in the runtime arguments, which the split kernel reads.
  const KernelTask plain = testing::MatmulTask(kF32, 0, 0, 96, 80, 40, false);
  const KernelTask transposed = testing::MatmulTask(kF32, 0, 0, 96, 80, 40, true);
  const SchedulePoint point = DefaultOf(plain);
  ASSERT_EQ(point.template_name, "sm90_3xtf32");
  const LaunchPlan plain_plan = PlanOf(plain, point);
  const LaunchPlan transposed_plan = PlanOf(transposed, point);
  EXPECT_EQ(plain_plan.hints.gemm_math, GemmMath::kTensorCore3xTf32Wgmma);
  EXPECT_EQ(plain_plan.runtime_args[kArgBRowMajor], 1);
  EXPECT_EQ(transposed_plan.runtime_args[kArgBRowMajor], 0);
  EXPECT_EQ(plain_plan.runtime_args[kArgARowMajor], 1);
  EXPECT_EQ(plain_plan.runtime_args[kArgPromotion], 4);
  auto plain_source = kFamily.Emit(plain, plain_plan);
  auto transposed_source = kFamily.Emit(transposed, transposed_plan);
  ASSERT_TRUE(plain_source.ok()) << plain_source.status();
  ASSERT_TRUE(transposed_source.ok()) << transposed_source.status();
  EXPECT_EQ(*plain_source, *transposed_source);
  EXPECT_THAT(*plain_source, HasSubstr("#define FORGE_ARG_PROMOTION 23"));
  EXPECT_THAT(*plain_source, HasSubstr("MainloopSm90TmaGmmaWarpSpecializedFP8"));
  // It needs Hopper.
  EXPECT_EQ(kFamily.SupportsArch(plain, point, "sm_80").code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(kFamily.SupportsArch(plain, point, "sm_90").ok());
}

// ---- Gated products (SwiGLU: silu(x Wg^T) * (x Wu^T)) ----

KernelTask GatedTask(forge::v1::DType dtype, int64_t m, int64_t n, int64_t k,
                     const std::string& activation = "silu") {
  return testing::GatedLinearTask(dtype, m, n, k, activation);
}

// silu(x Wg^T) * (x Wu^T) with x[m, k] and each weight [n, k] of `dtype`, its pieces changed
// by the caller: `tail` (an op applied after the mul, "" for none), a bias on the gate, an up
// projection that reads another A.
KernelTask GatedVariant(forge::v1::DType dtype, const std::string& tail, bool gate_bias,
                        bool other_a) {
  TaskBuilder builder;
  builder.Input("x", dtype, {64, 64}).Input("wg", dtype, {32, 64}).Input("wu", dtype, {32, 64});
  std::vector<forge::v1::Argument> gate = {TensorArg("input", "x"), TensorArg("weight", "wg")};
  if (gate_bias) {
    builder.Input("bias", dtype, {32});
    gate.push_back(OptionalTensorArg("bias", "bias"));
  }
  if (other_a) builder.Input("x2", dtype, {64, 64});
  builder.Node("gate", "linear", "", gate, dtype, {64, 32})
      .Node("up", "linear", "",
            {TensorArg("input", other_a ? "x2" : "x"), TensorArg("weight", "wu")}, dtype, {64, 32})
      .Node("act", "silu", "", {TensorArg("self", "gate")}, dtype, {64, 32})
      .Node("gated", "mul", "Tensor", {TensorArg("self", "up"), TensorArg("other", "act")}, dtype,
            {64, 32});
  if (tail.empty()) return builder.Output("gated").Build(kGemm);
  return builder.Node("tail", tail, "", {TensorArg("self", "gated")}, dtype, {64, 32})
      .Output("tail")
      .Build(kGemm);
}

TEST(CutlassGemmGatedTest, SwiGluIsOneGatedGemm) {
  const KernelTask task = GatedTask(kBF16, 256, 512, 128);
  auto spaces = kFamily.ScheduleSpace(task);
  ASSERT_TRUE(spaces.ok()) << spaces.status();
  ASSERT_EQ(spaces->size(), 1u);
  EXPECT_EQ(spaces->front().template_name, "sm90_gated");
  const LaunchPlan plan = PlanOf(task, DefaultOf(task));
  EXPECT_EQ(plan.kernel_name, "cutlass_sm90_gated_bf16_t_128x256x64_2x1x1_cooperative_silu_gated");
  // x is A (buffer 0, ld 128); wg (buffer 1) is B stored transposed (ld 128, B_ROW_MAJOR 0);
  // wu is buffer 2 (B_UP); the output is buffer 3, n = 512 wide.
  EXPECT_THAT(plan.runtime_args,
              ElementsAre(256, 512, 128, 1, 0, 128, 0, 1, 128, 0, -1, -1, 512, 0, 3, 512, 0,
                          Bits(1.0), Bits(0.0), 0, 1, 0, 0, 0, 2));
  // The GEMM runs over 2n = 1024 packed columns: 2 x 4 tiles; the packing kernel launches first.
  EXPECT_EQ(plan.hints.gemm_ctas, 2 * 4);
  EXPECT_EQ(plan.hints.kernel_launches, 2);
  EXPECT_EQ(plan.launch.grid[1], 4u);
  auto source = kFamily.Emit(task, plan);
  ASSERT_TRUE(source.ok()) << source.status();
  EXPECT_THAT(*source, HasSubstr("#define FORGE_ACTIVATION forge_cutlass::Silu\n"));
  EXPECT_THAT(*source, HasSubstr("#define FORGE_ARG_B_UP 24\n"));
  EXPECT_THAT(*source, HasSubstr("class GatedEpilogue"));
  EXPECT_THAT(*source, HasSubstr("PackGatedWeights"));
  // Compile once, launch everywhere: another shape, the same source.
  auto other = kFamily.Generate(GatedTask(kBF16, 4096, 14336, 4096), DefaultOf(task));
  ASSERT_TRUE(other.ok()) << other.status();
  EXPECT_EQ(other->source, *source);
  // GeGLU is the same template with gelu's functor.
  const LaunchPlan geglu = PlanOf(GatedTask(kF16, 256, 512, 128, "gelu"), DefaultOf(task));
  EXPECT_EQ(geglu.kernel_name, "cutlass_sm90_gated_f16_t_128x256x64_2x1x1_cooperative_gelu_gated");
  // Hopper only; the schedule rules are sm90_tma_ws's.
  EXPECT_EQ(kFamily.SupportsArch(task, DefaultOf(task), "sm_80").code(),
            absl::StatusCode::kFailedPrecondition);
  SchedulePoint narrow = DefaultOf(task);
  narrow.parameters["tile_m"] = 64;
  EXPECT_THAT(std::string(kFamily.Validate(task, narrow).message()),
              HasSubstr("needs tile_m >= 128"));
}

TEST(CutlassGemmGatedTest, DeclinesWithReasons) {
  auto reason = [](const KernelTask& task) {
    const absl::Status status = kFamily.Applies(task);
    EXPECT_EQ(status.code(), absl::StatusCode::kUnimplemented) << status;
    return std::string(status.message());
  };
  EXPECT_TRUE(kFamily.Applies(GatedVariant(kBF16, "", false, false)).ok());
  EXPECT_THAT(reason(GatedTask(kF32, 64, 64, 64)),
              HasSubstr("sm90_gated runs bfloat16 and float16 gated products, not float32"));
  EXPECT_THAT(reason(GatedTask(kBF16, 64, 64, 100)),
              HasSubstr("sm90_gated: A's leading dimension (100 elements) is not a multiple of 16 "
                        "bytes"));
  EXPECT_THAT(reason(GatedVariant(kBF16, "", true, false)), HasSubstr("has a bias"));
  EXPECT_THAT(reason(GatedVariant(kBF16, "", false, true)),
              HasSubstr("do not read the same A"));
  EXPECT_THAT(reason(GatedVariant(kBF16, "neg", false, false)),
              HasSubstr("(node tail) is not expressible in a CUTLASS epilogue (supported: "
                        "act(A B_gate) * (A B_up))"));
  EXPECT_THAT(reason(GatedTask(kBF16, 64, 64, 64, "neg")),
              HasSubstr("is not an activation the epilogue has"));
  // The single-product template's point is not the gated task's.
  EXPECT_THAT(std::string(kFamily.Validate(GatedTask(kBF16, 64, 64, 64),
                                           DefaultOf(LinearTask(kBF16, 64, 64, 64)))
                              .message()),
              HasSubstr("does not apply to a bfloat16 gated product"));
}

TEST(CutlassGemmGatedTest, OnlyCutlassAndAtenRunAGatedTask) {
  // cuBLASLt and the GEMV have one product each: they decline, and ATen runs the unfused ops.
  std::vector<std::string> names;
  for (const KernelFamily* applicable : ApplicableFamilies(GatedTask(kBF16, 64, 64, 64))) {
    names.emplace_back(applicable->name());
  }
  EXPECT_THAT(names, ElementsAre("cutlass_gemm", "aten"));
}

}  // namespace
}  // namespace forge::codegen
