#include "compiler/codegen/reduction.h"

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "compiler/codegen/codegen_test_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace forge::codegen {
namespace {

using ::forge::codegen::testing::BoolArg;
using ::forge::codegen::testing::ExpectCompiles;
using ::forge::codegen::testing::FloatArg;
using ::forge::codegen::testing::IntArg;
using ::forge::codegen::testing::IntsArg;
using ::forge::codegen::testing::OptionalTensorArg;
using ::forge::codegen::testing::StringArg;
using ::forge::codegen::testing::TaskBuilder;
using ::forge::codegen::testing::TensorArg;
using ::forge::v1::DType;
using ::forge::v1::KernelTask;
using ::testing::HasSubstr;

constexpr DType kF32 = forge::v1::DTYPE_FLOAT32;
constexpr DType kF16 = forge::v1::DTYPE_FLOAT16;
constexpr DType kBF16 = forge::v1::DTYPE_BFLOAT16;
constexpr DType kF64 = forge::v1::DTYPE_FLOAT64;
constexpr auto kReduction = forge::v1::KERNEL_FAMILY_REDUCTION;

KernelTask Softmax(DType dtype, std::vector<int64_t> shape, const char* op = "softmax") {
  return TaskBuilder()
      .Input("x", dtype, shape)
      .Node("softmax", op, "int", {TensorArg("self", "x"), IntArg("dim", -1)}, dtype, shape)
      .Output("softmax")
      .Build(kReduction);
}

// layer_norm(x, (C,), w, b, 1e-5) then gelu, as the layer-norm+GELU test model exports it.
KernelTask LayerNormGelu(DType dtype, int64_t rows, int64_t columns) {
  return TaskBuilder()
      .Input("x", dtype, {rows, columns})
      .Input("w", dtype, {columns})
      .Input("b", dtype, {columns})
      .Node("layer_norm", "layer_norm", "default",
            {TensorArg("input", "x"), IntsArg("normalized_shape", {columns}),
             OptionalTensorArg("weight", "w"), OptionalTensorArg("bias", "b"),
             FloatArg("eps", 1e-5), BoolArg("cudnn_enable", false)},
            dtype, {rows, columns})
      .Node("gelu", "gelu", "default", {TensorArg("self", "layer_norm")}, dtype, {rows, columns})
      .Output("gelu")
      .Build(kReduction);
}

// The RMSNorm pattern of the Llama block: x * rsqrt(mean(x^2, -1, keepdim) + eps) * w.
KernelTask RmsNorm(DType dtype, int64_t rows, int64_t columns) {
  return TaskBuilder()
      .Input("x", dtype, {rows, columns})
      .Input("w", dtype, {columns})
      .Node("pow", "pow", "Tensor_Scalar", {TensorArg("self", "x"), IntArg("exponent", 2)}, dtype, {rows, columns})
      .Node("mean", "mean", "dim", {TensorArg("self", "pow"), IntsArg("dim", {-1}), BoolArg("keepdim", true)}, dtype, {rows, 1})
      .Node("add", "add", "Tensor", {TensorArg("self", "mean"), FloatArg("other", 1e-6)}, dtype, {rows, 1})
      .Node("rsqrt", "rsqrt", "default", {TensorArg("self", "add")}, dtype, {rows, 1})
      .Node("mul", "mul", "Tensor", {TensorArg("self", "x"), TensorArg("other", "rsqrt")}, dtype, {rows, columns})
      .Node("mul_1", "mul", "Tensor", {TensorArg("self", "mul"), TensorArg("other", "w")}, dtype, {rows, columns})
      .Output("mul_1")
      .Build(kReduction);
}

KernelTask RowStatistic(const char* op, const char* overload, bool keepdim, DType dtype = kF32) {
  const std::vector<int64_t> out_shape = keepdim ? std::vector<int64_t>{6, 5, 1} : std::vector<int64_t>{6, 5};
  return TaskBuilder()
      .Input("x", dtype, {6, 5, 100})
      .Node("scaled", "mul", "Tensor", {TensorArg("self", "x"), IntArg("other", 2)}, dtype, {6, 5, 100})
      .Node("r", op, overload, {TensorArg("self", "scaled"), IntsArg("dim", {-1}), BoolArg("keepdim", keepdim)}, dtype, out_shape)
      .Output("r")
      .Build(kReduction);
}

std::vector<std::pair<std::string, KernelTask>> Cases() {
  std::vector<std::pair<std::string, KernelTask>> cases;
  cases.emplace_back("softmax_f32_1000", Softmax(kF32, {8, 1000}));
  cases.emplace_back("softmax_f64_3d", Softmax(kF64, {2, 3, 257}));
  cases.emplace_back("log_softmax_f16_4096", Softmax(kF16, {4, 4096}, "log_softmax"));
  cases.emplace_back("softmax_f32_393216", Softmax(kF32, {16, 393216}));
  cases.emplace_back("layer_norm_gelu_bf16_4096", LayerNormGelu(kBF16, 16, 4096));
  cases.emplace_back("layer_norm_gelu_f32_768", LayerNormGelu(kF32, 10, 768));
  cases.emplace_back("rms_norm_f32_4096", RmsNorm(kF32, 4, 4096));
  cases.emplace_back("rms_norm_bf16_512", RmsNorm(kBF16, 7, 512));
  cases.emplace_back("sum_keepdim", RowStatistic("sum", "dim_IntList", true));
  cases.emplace_back("sum", RowStatistic("sum", "dim_IntList", false));
  cases.emplace_back("mean", RowStatistic("mean", "dim", false, kF16));
  cases.emplace_back("amax_keepdim", RowStatistic("amax", "default", true));
  cases.emplace_back("amin", RowStatistic("amin", "default", false, kF64));
  // Softmax of a layer norm's output, and its row max as a second output.
  cases.emplace_back(
      "layer_norm_then_softmax_and_amax",
      TaskBuilder()
          .Input("x", kF32, {32, 256})
          .Node("ln", "layer_norm", "default", {TensorArg("input", "x"), IntsArg("normalized_shape", {256})}, kF32, {32, 256})
          .Node("sm", "softmax", "int", {TensorArg("self", "ln"), IntArg("dim", 1)}, kF32, {32, 256})
          .Node("mx", "amax", "default", {TensorArg("self", "ln"), IntsArg("dim", {1}), BoolArg("keepdim", true)}, kF32, {32, 1})
          .Output("sm")
          .Output("mx")
          .Build(kReduction));
  return cases;
}

TEST(ReductionTest, DefaultSchedulesCompileWithoutSpills) {
  ReductionFamily family;
  std::vector<GeneratedKernel> kernels;
  std::vector<std::string> labels;
  for (const auto& [label, task] : Cases()) {
    ASSERT_TRUE(family.Applies(task).ok()) << label << ": " << family.Applies(task);
    absl::StatusOr<std::vector<TemplateSpace>> space = family.ScheduleSpace(task);
    ASSERT_TRUE(space.ok()) << label << ": " << space.status();
    const SchedulePoint point = DefaultPoint(space->front());
    ASSERT_TRUE(family.Validate(task, point).ok()) << label << ": " << family.Validate(task, point);
    absl::StatusOr<GeneratedKernel> kernel = family.Generate(task, point);
    ASSERT_TRUE(kernel.ok()) << label << ": " << kernel.status();
    kernels.push_back(*kernel);
    labels.push_back(label);
  }
  ExpectCompiles(kernels, labels, /*expect_no_spills=*/true);
}

TEST(ReductionTest, ScheduleSpaceSampleCompiles) {
  ReductionFamily family;
  std::vector<GeneratedKernel> kernels;
  std::vector<std::string> labels;
  for (const KernelTask& task : {Softmax(kF32, {64, 2048}), LayerNormGelu(kBF16, 64, 1024)}) {
    absl::StatusOr<std::vector<TemplateSpace>> space = family.ScheduleSpace(task);
    ASSERT_TRUE(space.ok()) << space.status();
    std::vector<SchedulePoint> valid;
    for (const SchedulePoint& point : EnumeratePoints(space->front())) {
      if (family.Validate(task, point).ok()) valid.push_back(point);
    }
    // An evenly spread sample of 25 valid points per task.
    ASSERT_GE(valid.size(), 25u);
    for (size_t i = 0; i < 25; ++i) {
      const SchedulePoint& point = valid[i * valid.size() / 25];
      absl::StatusOr<GeneratedKernel> kernel = family.Generate(task, point);
      ASSERT_TRUE(kernel.ok()) << kernel.status();
      kernels.push_back(*kernel);
      std::string label;
      for (const auto& [name, value] : point.parameters) absl::StrAppend(&label, name, "=", value, " ");
      labels.push_back(label);
    }
  }
  ExpectCompiles(kernels, labels, /*expect_no_spills=*/false);
}

TEST(ReductionTest, ScheduleSpaceOffersAlgorithmChoicesOnlyWhereTheyApply) {
  ReductionFamily family;
  auto names = [&](const KernelTask& task) {
    absl::StatusOr<std::vector<TemplateSpace>> space = family.ScheduleSpace(task);
    std::vector<std::string> result;
    for (const ScheduleParameter& p : space->front().parameters) result.push_back(p.name);
    return result;
  };
  EXPECT_THAT(names(Softmax(kF32, {8, 1000})), ::testing::Contains("online_softmax"));
  EXPECT_THAT(names(Softmax(kF32, {8, 1000})), ::testing::Not(::testing::Contains("welford")));
  EXPECT_THAT(names(LayerNormGelu(kF32, 8, 768)), ::testing::Contains("welford"));
  EXPECT_THAT(names(RmsNorm(kF32, 8, 768)), ::testing::Not(::testing::Contains("online_softmax")));
}

TEST(ReductionTest, IdenticalCandidatesGiveIdenticalSource) {
  ReductionFamily family;
  const KernelTask task = LayerNormGelu(kBF16, 64, 1024);
  const SchedulePoint point = DefaultPoint(family.ScheduleSpace(task)->front());
  absl::StatusOr<GeneratedKernel> first = family.Generate(task, point);
  absl::StatusOr<GeneratedKernel> second = family.Generate(LayerNormGelu(kBF16, 64, 1024), point);
  ASSERT_TRUE(first.ok() && second.ok());
  EXPECT_EQ(first->source, second->source);
  EXPECT_EQ(first->generator_version, "reduction-1");
  SchedulePoint two_pass = point;
  two_pass.parameters["welford"] = 0;
  absl::StatusOr<GeneratedKernel> third = family.Generate(task, two_pass);
  ASSERT_TRUE(third.ok());
  EXPECT_NE(first->source, third->source);
  EXPECT_THAT(first->source, HasSubstr("forge_welford_add(acc0_0"));
  EXPECT_THAT(third->source, ::testing::Not(HasSubstr("forge_welford_add(acc0_0")));
}

SchedulePoint Point(int64_t threads, int64_t rows, int64_t width, int64_t cache, int64_t online) {
  return {"row_reduce",
          {{"threads_per_row", threads}, {"rows_per_block", rows}, {"vector_width", width},
           {"cache_row", cache}, {"online_softmax", online}}};
}

TEST(ReductionTest, LaunchCoversEveryRow) {
  ReductionFamily family;
  const KernelTask task = Softmax(kF32, {3, 7, 1000});  // 21 rows
  absl::StatusOr<GeneratedKernel> kernel = family.Generate(task, Point(32, 4, 4, 1, 1));
  ASSERT_TRUE(kernel.ok()) << kernel.status();
  EXPECT_EQ(kernel->launch.block[0], 128u);
  EXPECT_EQ(kernel->launch.grid[0], 6u);  // ceil(21 / 4)
  EXPECT_THAT(kernel->source, HasSubstr("const bool active = row_wide < 21LL;"));
}

TEST(ReductionTest, ValidateRejectsInvalidPoints) {
  ReductionFamily family;
  const KernelTask odd = Softmax(kF32, {64, 1001});
  EXPECT_TRUE(family.Validate(odd, Point(128, 1, 1, 0, 1)).ok());
  EXPECT_THAT(family.Validate(odd, Point(128, 1, 4, 0, 1)).message(),
              HasSubstr("vector_width 4 does not divide the row length 1001"));
  const KernelTask wide = Softmax(kF32, {64, 4096});
  EXPECT_THAT(family.Validate(wide, Point(1024, 2, 4, 0, 1)).message(),
              HasSubstr("threads_per_row 1024 x rows_per_block 2 exceeds 1024 threads per block"));
  EXPECT_THAT(family.Validate(wide, Point(128, 1, 8, 0, 1)).message(),
              HasSubstr("vector_width 8 of 4-byte elements exceeds a 16-byte vector access"));
  EXPECT_THAT(family.Validate(wide, Point(32, 1, 4, 1, 1)).message(),
              HasSubstr("cache_row keeps 128 elements"));
  EXPECT_THAT(family.Validate(Softmax(kF32, {64, 100}), Point(512, 1, 1, 0, 1)).message(),
              HasSubstr("threads_per_row 512 leaves half the row's threads idle"));
  EXPECT_THAT(family.Validate(Softmax(kF32, {2, 4096}), Point(128, 8, 4, 0, 1)).message(),
              HasSubstr("rows_per_block 8 leaves half the block idle for 2 rows"));
  SchedulePoint with_welford = Point(128, 1, 4, 0, 1);
  with_welford.parameters["welford"] = 1;
  EXPECT_THAT(family.Validate(wide, with_welford).message(), HasSubstr("has no parameter 'welford'"));
}

TEST(ReductionTest, RejectsWhatItCannotGenerate) {
  ReductionFamily family;
  absl::Status first_dim = family.Applies(
      TaskBuilder()
          .Input("x", kF32, {8, 16})
          .Node("s", "softmax", "int", {TensorArg("self", "x"), IntArg("dim", 0)}, kF32, {8, 16})
          .Output("s")
          .Build(kReduction));
  EXPECT_EQ(first_dim.code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(first_dim.message(), HasSubstr("only the last dimension is supported"));

  absl::Status view = family.Applies(
      TaskBuilder()
          .Input("x", kF32, {8, 16})
          .Node("t", "t", "default", {TensorArg("self", "x")}, kF32, {16, 8})
          .Node("s", "softmax", "int", {TensorArg("self", "t"), IntArg("dim", -1)}, kF32, {16, 8})
          .Output("s")
          .Build(kReduction));
  EXPECT_THAT(view.message(), HasSubstr("aten::t.default (node t) is a view op"));

  absl::Status no_reduction = family.Applies(
      TaskBuilder()
          .Input("x", kF32, {8})
          .Node("n", "neg", "default", {TensorArg("self", "x")}, kF32, {8})
          .Output("n")
          .Build(kReduction));
  EXPECT_THAT(no_reduction.message(), HasSubstr("has no reduction"));

  absl::Status two_dims = family.Applies(
      TaskBuilder()
          .Input("x", kF32, {8, 16, 4})
          .Node("ln", "layer_norm", "default", {TensorArg("input", "x"), IntsArg("normalized_shape", {16, 4})}, kF32, {8, 16, 4})
          .Output("ln")
          .Build(kReduction));
  EXPECT_THAT(two_dims.message(), HasSubstr("normalizes more than the last dimension"));

  absl::Status integer = family.Applies(
      TaskBuilder()
          .Input("x", forge::v1::DTYPE_INT64, {8, 16})
          .Node("s", "sum", "dim_IntList", {TensorArg("self", "x"), IntsArg("dim", {-1})}, forge::v1::DTYPE_INT64, {8})
          .Output("s")
          .Build(kReduction));
  EXPECT_THAT(integer.message(), HasSubstr("reduces a non-floating tensor"));
}

}  // namespace
}  // namespace forge::codegen
