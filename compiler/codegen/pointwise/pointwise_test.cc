#include "compiler/codegen/pointwise/pointwise.h"

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "compiler/codegen/testing/codegen_test_util.h"
#include "compiler/codegen/cuda_expr.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace forge::codegen {
namespace {

using ::forge::codegen::testing::BoolArg;
using ::forge::codegen::testing::DTypeArg;
using ::forge::codegen::testing::ExpectCompiles;
using ::forge::codegen::testing::FloatArg;
using ::forge::codegen::testing::IntArg;
using ::forge::codegen::testing::IntsArg;
using ::forge::codegen::testing::NoneArg;
using ::forge::codegen::testing::OptionalTensorArg;
using ::forge::codegen::testing::StringArg;
using ::forge::codegen::testing::TaskBuilder;
using ::forge::codegen::testing::TensorArg;
using ::forge::v1::Argument;
using ::forge::v1::DType;
using ::forge::v1::KernelTask;
using ::testing::HasSubstr;

constexpr DType kF32 = forge::v1::DTYPE_FLOAT32;
constexpr DType kF16 = forge::v1::DTYPE_FLOAT16;
constexpr DType kBF16 = forge::v1::DTYPE_BFLOAT16;
constexpr DType kF64 = forge::v1::DTYPE_FLOAT64;
constexpr DType kI32 = forge::v1::DTYPE_INT32;
constexpr DType kI64 = forge::v1::DTYPE_INT64;
constexpr DType kBool = forge::v1::DTYPE_BOOL;

// One op applied to inputs x [4, 33] (dtype x_dtype), y [33] (broadcast) and c [4, 33] (bool).
struct OpCase {
  std::string label;
  std::string op;
  std::string overload;
  std::vector<Argument> arguments;
  DType out = kF32;
  DType x_dtype = kF32;
};

KernelTask OpTask(const OpCase& c) {
  return TaskBuilder()
      .Input("x", c.x_dtype, {4, 33})
      .Input("y", c.x_dtype, {33})
      .Input("c", kBool, {4, 33})
      .Node("out", c.op, c.overload, c.arguments, c.out, {4, 33})
      .Output("out")
      .Build(forge::v1::KERNEL_FAMILY_POINTWISE);
}

std::vector<OpCase> AllOpCases() {
  std::vector<OpCase> cases;
  const Argument x = TensorArg("self", "x");
  const Argument y = TensorArg("other", "y");
  for (const char* op :
       {"abs", "acos", "acosh", "asin", "asinh", "atan", "atanh", "ceil", "cos", "cosh", "erf",
        "erfc", "exp", "exp2", "expm1", "floor", "log", "log10", "log1p", "log2", "neg",
        "reciprocal", "relu", "round", "rsqrt", "sigmoid", "sign", "silu", "sin", "sinh", "sqrt",
        "square", "tan", "tanh", "trunc", "mish", "hardswish", "hardsigmoid", "softplus", "clone",
        "alias", "detach", "relu6", "elu"}) {
    cases.push_back({op, op, "default", {x}});
  }
  cases.push_back({"gelu_erf", "gelu", "default", {x}});
  cases.push_back({"gelu_tanh", "gelu", "default", {x, StringArg("approximate", "tanh")}});
  cases.push_back({"leaky_relu", "leaky_relu", "default", {x, FloatArg("negative_slope", 0.2)}});
  cases.push_back({"softplus_beta", "softplus", "default",
                   {x, FloatArg("beta", 2.0), FloatArg("threshold", 10.0)}});
  cases.push_back({"hardtanh", "hardtanh", "default",
                   {x, FloatArg("min_val", -2.0), FloatArg("max_val", 2.0)}});
  cases.push_back({"clamp", "clamp", "default", {x, FloatArg("min", -1.0), FloatArg("max", 2.0)}});
  cases.push_back({"clamp_min_only", "clamp", "default", {x, FloatArg("min", -1.0)}});
  cases.push_back({"clamp_max_none_min", "clamp", "default", {x, NoneArg("min"), IntArg("max", 3)}});
  cases.push_back({"clamp_tensor", "clamp", "Tensor",
                   {x, OptionalTensorArg("min", "y"), OptionalTensorArg("max", "y")}});
  cases.push_back({"clamp_min", "clamp_min", "default", {x, FloatArg("min", 0.5)}});
  cases.push_back({"clamp_max", "clamp_max", "default", {x, FloatArg("max", 0.5)}});
  cases.push_back({"add", "add", "Tensor", {x, y}});
  cases.push_back({"add_alpha", "add", "Tensor", {x, y, IntArg("alpha", 2)}});
  cases.push_back({"add_scalar", "add", "Tensor", {x, FloatArg("other", 1e-6)}});
  cases.push_back({"sub_alpha", "sub", "Tensor", {x, y, FloatArg("alpha", 0.5)}});
  cases.push_back({"rsub", "rsub", "Scalar", {x, FloatArg("other", 1.0)}});
  cases.push_back({"mul_int_scalar", "mul", "Tensor", {x, IntArg("other", 3)}});
  cases.push_back({"mul", "mul", "Tensor", {x, y}});
  cases.push_back({"div", "div", "Tensor", {x, y}});
  cases.push_back({"div_floor", "div", "Tensor_mode", {x, y, StringArg("rounding_mode", "floor")}});
  cases.push_back({"div_trunc", "div", "Tensor_mode", {x, y, StringArg("rounding_mode", "trunc")}});
  cases.push_back({"floor_divide", "floor_divide", "default", {x, y}});
  cases.push_back({"remainder", "remainder", "Tensor", {x, y}});
  cases.push_back({"fmod", "fmod", "Scalar", {x, FloatArg("other", 1.5)}});
  cases.push_back({"atan2", "atan2", "default", {x, y}});
  cases.push_back({"maximum", "maximum", "default", {x, y}});
  cases.push_back({"minimum", "minimum", "default", {x, y}});
  cases.push_back({"pow_square", "pow", "Tensor_Scalar", {x, IntArg("exponent", 2)}});
  cases.push_back({"pow_scalar", "pow", "Tensor_Scalar", {x, FloatArg("exponent", 3.5)}});
  cases.push_back({"pow_tensor", "pow", "Tensor_Tensor", {x, TensorArg("exponent", "y")}});
  cases.push_back({"pow_scalar_base", "pow", "Scalar",
                   {FloatArg("self", 2.0), TensorArg("exponent", "x")}});
  for (const char* op : {"eq", "ne", "lt", "le", "gt", "ge"}) {
    cases.push_back({op, op, "Tensor", {x, y}, kBool});
    cases.push_back({absl::StrCat(op, "_scalar"), op, "Scalar", {x, FloatArg("other", 0.0)}, kBool});
  }
  cases.push_back({"isnan", "isnan", "default", {x}, kBool});
  cases.push_back({"logical_not", "logical_not", "default", {TensorArg("self", "c")}, kBool});
  for (const char* op : {"logical_and", "logical_or", "logical_xor"}) {
    cases.push_back({op, op, "default", {TensorArg("self", "c"), TensorArg("other", "x")}, kBool});
  }
  cases.push_back({"where", "where", "self",
                   {TensorArg("condition", "c"), TensorArg("self", "x"), TensorArg("other", "y")}});
  cases.push_back({"where_scalar", "where", "ScalarOther",
                   {TensorArg("condition", "c"), TensorArg("self", "x"), FloatArg("other", 0.0)}});
  cases.push_back({"masked_fill", "masked_fill", "Scalar",
                   {x, TensorArg("mask", "c"), FloatArg("value", -INFINITY)}});
  cases.push_back({"addcmul", "addcmul", "default",
                   {x, TensorArg("tensor1", "y"), TensorArg("tensor2", "x"), FloatArg("value", 0.5)}});
  cases.push_back({"addcdiv", "addcdiv", "default",
                   {x, TensorArg("tensor1", "y"), TensorArg("tensor2", "x")}});
  // Casts between every pair the exporter produces, and ops on other dtypes.
  const std::vector<DType> dtypes = {kF32, kF16, kBF16, kF64, kI32, kI64, kBool};
  for (DType from : dtypes) {
    for (DType to : dtypes) {
      if (from == to) continue;
      cases.push_back({absl::StrCat("to_copy_", DTypeName(from), "_to_", DTypeName(to)),
                       "_to_copy", "default", {x, DTypeArg("dtype", to)}, to, from});
    }
  }
  cases.push_back({"silu_f16", "silu", "default", {x}, kF16, kF16});
  cases.push_back({"add_bf16", "add", "Tensor", {x, y}, kBF16, kBF16});
  cases.push_back({"gelu_f64", "gelu", "default", {x}, kF64, kF64});
  cases.push_back({"gelu_bf16", "gelu", "default", {x}, kBF16, kBF16});
  cases.push_back({"gelu_f16", "gelu", "default", {x}, kF16, kF16});
  cases.push_back({"add_i32", "add", "Tensor", {x, y}, kI32, kI32});
  cases.push_back({"mul_i64", "mul", "Tensor", {x, IntArg("other", 7)}, kI64, kI64});
  cases.push_back({"div_floor_i32", "div", "Tensor_mode", {x, y, StringArg("rounding_mode", "floor")}, kI32, kI32});
  cases.push_back({"true_div_i32", "div", "Tensor", {x, y}, kF32, kI32});
  cases.push_back({"remainder_i64", "remainder", "Tensor", {x, y}, kI64, kI64});
  cases.push_back({"pow_i32", "pow", "Tensor_Scalar", {x, IntArg("exponent", 3)}, kI32, kI32});
  cases.push_back({"abs_i32", "abs", "default", {x}, kI32, kI32});
  cases.push_back({"add_bool", "add", "Tensor", {x, y}, kBool, kBool});
  return cases;
}

TEST(PointwiseTest, EveryOpCompilesForSm80AndSm90WithoutSpills) {
  PointwiseFamily family;
  std::vector<GeneratedKernel> kernels;
  std::vector<std::string> labels;
  for (const OpCase& c : AllOpCases()) {
    const KernelTask task = OpTask(c);
    ASSERT_TRUE(family.Applies(task).ok()) << c.label << ": " << family.Applies(task);
    absl::StatusOr<std::vector<TemplateSpace>> space = family.ScheduleSpace(task);
    ASSERT_TRUE(space.ok()) << c.label << ": " << space.status();
    absl::StatusOr<GeneratedKernel> kernel = family.Generate(task, DefaultPoint(space->front()));
    ASSERT_TRUE(kernel.ok()) << c.label << ": " << kernel.status();
    kernels.push_back(*kernel);
    labels.push_back(c.label);
  }
  ExpectCompiles(kernels, labels, /*expect_no_spills=*/true);
}

// GELU's erf form takes the degree-6 polynomial where its result is rounded to 16 bits, the
// degree-8 one where it is float32.
TEST(PointwiseTest, GeluPolynomialFollowsTheResultType) {
  PointwiseFamily family;
  auto source = [&](DType dtype) {
    const KernelTask task =
        OpTask({"gelu", "gelu", "default", {TensorArg("self", "x")}, dtype, dtype});
    absl::StatusOr<std::vector<TemplateSpace>> space = family.ScheduleSpace(task);
    EXPECT_TRUE(space.ok()) << space.status();
    absl::StatusOr<GeneratedKernel> kernel = family.Generate(task, DefaultPoint(space->front()));
    EXPECT_TRUE(kernel.ok()) << kernel.status();
    return kernel.ok() ? kernel->source : "";
  };
  EXPECT_THAT(source(kF32), HasSubstr("= forge_gelu_erf("));
  EXPECT_THAT(source(kBF16), HasSubstr("= forge_gelu_erf_16bit("));
  EXPECT_THAT(source(kF16), HasSubstr("= forge_gelu_erf_16bit("));
}

// x [64, 128] f16, bias [128] f16 (broadcast), gate [64, 1] f16; two f16 outputs.
KernelTask BiasGeluTask() {
  return TaskBuilder()
      .Input("x", kF16, {64, 128})
      .Input("bias", kF16, {128})
      .Input("gate", kF16, {64, 1})
      .Node("add", "add", "Tensor", {TensorArg("self", "x"), TensorArg("other", "bias")}, kF16, {64, 128})
      .Node("gelu", "gelu", "default", {TensorArg("self", "add"), StringArg("approximate", "tanh")}, kF16, {64, 128})
      .Node("mul", "mul", "Tensor", {TensorArg("self", "gelu"), TensorArg("other", "gate")}, kF16, {64, 128})
      .Output("mul")
      .Output("add")
      .Build(forge::v1::KERNEL_FAMILY_POINTWISE);
}

TEST(PointwiseTest, ScheduleSpaceSampleCompiles) {
  PointwiseFamily family;
  const KernelTask task = BiasGeluTask();
  absl::StatusOr<std::vector<TemplateSpace>> space = family.ScheduleSpace(task);
  ASSERT_TRUE(space.ok()) << space.status();
  ASSERT_EQ(space->size(), 1u);
  std::vector<GeneratedKernel> kernels;
  std::vector<std::string> labels;
  for (const SchedulePoint& point : EnumeratePoints(space->front())) {
    if (!family.Validate(task, point).ok()) continue;
    absl::StatusOr<GeneratedKernel> kernel = family.Generate(task, point);
    ASSERT_TRUE(kernel.ok()) << kernel.status();
    kernels.push_back(*kernel);
    std::string label;
    for (const auto& [name, value] : point.parameters) absl::StrAppend(&label, name, "=", value, " ");
    labels.push_back(label);
  }
  EXPECT_GE(kernels.size(), 50u);
  ExpectCompiles(kernels, labels, /*expect_no_spills=*/false);
}

TEST(PointwiseTest, DefaultPointUsesTheWidestValidVector) {
  PointwiseFamily family;
  absl::StatusOr<std::vector<TemplateSpace>> space = family.ScheduleSpace(BiasGeluTask());
  ASSERT_TRUE(space.ok());
  const SchedulePoint point = DefaultPoint(space->front());
  EXPECT_EQ(point.parameters.at("vector_width"), 8);  // 8 halves = 16 bytes
  absl::StatusOr<GeneratedKernel> kernel = family.Generate(BiasGeluTask(), point);
  ASSERT_TRUE(kernel.ok());
  // 8192 elements in chunks of 8: 1024 chunks over 256-thread blocks.
  EXPECT_EQ(kernel->launch.block[0] * kernel->launch.grid[0] *
                point.parameters.at("elements_per_thread") * 8,
            8192u);
  EXPECT_THAT(kernel->source, HasSubstr("ForgeVec<ForgeHalf, 8>"));
  // The 8 float16 results are stored as 4 pairs, each rounded and packed by one instruction.
  EXPECT_THAT(kernel->source, HasSubstr("ForgeVec<unsigned, 4> "));
  EXPECT_THAT(kernel->source, HasSubstr(".v[3] = forge_pack_half2("));
  EXPECT_EQ(kernel->generator_version, "pointwise-4");
  EXPECT_EQ(kernel->template_name, "pointwise_flat");
  EXPECT_EQ(kernel->parameters, point.parameters);
}

TEST(PointwiseTest, IdenticalCandidatesGiveIdenticalSource) {
  PointwiseFamily family;
  const KernelTask task = BiasGeluTask();
  const SchedulePoint point{"pointwise_flat",
                            {{"threads_per_block", 128}, {"elements_per_thread", 2}, {"vector_width", 4}}};
  absl::StatusOr<GeneratedKernel> first = family.Generate(task, point);
  const KernelTask copy = task;
  absl::StatusOr<GeneratedKernel> second = family.Generate(copy, point);
  ASSERT_TRUE(first.ok() && second.ok());
  EXPECT_EQ(first->source, second->source);
  SchedulePoint other = point;
  other.parameters["vector_width"] = 2;
  absl::StatusOr<GeneratedKernel> third = family.Generate(task, other);
  ASSERT_TRUE(third.ok());
  EXPECT_NE(first->source, third->source);
}

SchedulePoint Point(int64_t threads, int64_t per_thread, int64_t width) {
  return {"pointwise_flat",
          {{"threads_per_block", threads}, {"elements_per_thread", per_thread}, {"vector_width", width}}};
}

TEST(PointwiseTest, ValidateRejectsInvalidPoints) {
  PointwiseFamily family;
  const KernelTask f32 = TaskBuilder()
                             .Input("x", kF32, {1001, 30})
                             .Node("out", "relu", "default", {TensorArg("self", "x")}, kF32, {1001, 30})
                             .Output("out")
                             .Build(forge::v1::KERNEL_FAMILY_POINTWISE);
  EXPECT_TRUE(family.Validate(f32, Point(256, 1, 2)).ok());
  EXPECT_THAT(family.Validate(f32, Point(256, 1, 4)).message(),
              HasSubstr("vector_width 4 does not divide the 30030 elements"));
  const KernelTask wide = TaskBuilder()
                              .Input("x", kF32, {1024, 32})
                              .Node("out", "relu", "default", {TensorArg("self", "x")}, kF32, {1024, 32})
                              .Output("out")
                              .Build(forge::v1::KERNEL_FAMILY_POINTWISE);
  EXPECT_THAT(family.Validate(wide, Point(256, 1, 8)).message(),
              HasSubstr("exceeds a 16-byte vector access"));
  const KernelTask transposed_out = TaskBuilder()
                                        .Input("x", kF32, {1024, 32})
                                        .Node("out", "relu", "default", {TensorArg("self", "x")}, kF32, {1024, 32})
                                        .Output("out", {1, 1024})
                                        .Build(forge::v1::KERNEL_FAMILY_POINTWISE);
  EXPECT_THAT(family.Validate(transposed_out, Point(256, 1, 4)).message(),
              HasSubstr("needs contiguous outputs; output 0 is strided"));
  EXPECT_TRUE(family.Validate(transposed_out, Point(256, 1, 1)).ok());
  EXPECT_THAT(family.Validate(BiasGeluTask(), Point(1024, 8, 2)).message(),
              HasSubstr("elements_per_thread 8 leaves slots empty: the 8192 elements fit in 7 slots"));
  const KernelTask small = TaskBuilder()
                              .Input("x", kF32, {200})
                              .Node("out", "relu", "default", {TensorArg("self", "x")}, kF32, {200})
                              .Output("out")
                              .Build(forge::v1::KERNEL_FAMILY_POINTWISE);
  EXPECT_THAT(family.Validate(small, Point(512, 1, 1)).message(),
              HasSubstr("threads_per_block 512 leaves half the block idle for 200 elements"));
  EXPECT_TRUE(family.Validate(small, Point(256, 1, 1)).ok());
  EXPECT_THAT(family.Validate(wide, Point(2048, 1, 1)).message(),
              HasSubstr("'threads_per_block' = 2048 is not one of {128, 256, 512, 1024}"));
  SchedulePoint missing = Point(256, 1, 1);
  missing.parameters.erase("vector_width");
  EXPECT_THAT(family.Validate(wide, missing).message(), HasSubstr("'vector_width' is not set"));
  SchedulePoint extra = Point(256, 1, 1);
  extra.parameters["stages"] = 3;
  EXPECT_THAT(family.Validate(wide, extra).message(), HasSubstr("has no parameter 'stages'"));
  EXPECT_EQ(family.Generate(wide, Point(256, 1, 8)).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(PointwiseTest, RejectsWhatItCannotGenerate) {
  PointwiseFamily family;
  const KernelTask matmul = TaskBuilder()
                                .Input("a", kF32, {8, 8})
                                .Input("b", kF32, {8, 8})
                                .Node("mm", "mm", "default", {TensorArg("self", "a"), TensorArg("mat2", "b")}, kF32, {8, 8})
                                .Output("mm")
                                .Build(forge::v1::KERNEL_FAMILY_POINTWISE);
  absl::Status status = family.Applies(matmul);
  EXPECT_EQ(status.code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(status.message(), HasSubstr("aten::mm.default (node mm) is not an elementwise, view or glue op"));

  const KernelTask bad_gelu = TaskBuilder()
                                  .Input("x", kF32, {8})
                                  .Node("g", "gelu", "default", {TensorArg("self", "x"), StringArg("approximate", "cubic")}, kF32, {8})
                                  .Output("g")
                                  .Build(forge::v1::KERNEL_FAMILY_POINTWISE);
  EXPECT_THAT(family.Applies(bad_gelu).message(), HasSubstr("approximate='cubic'"));

  const KernelTask complex = TaskBuilder()
                                 .Input("x", forge::v1::DTYPE_COMPLEX64, {8})
                                 .Node("n", "neg", "default", {TensorArg("self", "x")}, forge::v1::DTYPE_COMPLEX64, {8})
                                 .Output("n")
                                 .Build(forge::v1::KERNEL_FAMILY_POINTWISE);
  EXPECT_THAT(family.Applies(complex).message(), HasSubstr("complex64"));

  const KernelTask as_strided = TaskBuilder()
                                    .Input("x", kF32, {8})
                                    .Node("d", "diagonal", "default", {TensorArg("self", "x")}, kF32, {8})
                                    .Output("d")
                                    .Build(forge::v1::KERNEL_FAMILY_POINTWISE);
  EXPECT_EQ(family.Applies(as_strided).code(), absl::StatusCode::kUnimplemented);

  const KernelTask two_sizes = TaskBuilder()
                                   .Input("x", kF32, {8, 4})
                                   .Input("y", kF32, {4})
                                   .Node("a", "neg", "default", {TensorArg("self", "x")}, kF32, {8, 4})
                                   .Node("b", "neg", "default", {TensorArg("self", "y")}, kF32, {4})
                                   .Output("a")
                                   .Output("b")
                                   .Build(forge::v1::KERNEL_FAMILY_POINTWISE);
  EXPECT_THAT(family.Applies(two_sizes).message(), HasSubstr("different element counts"));
}

// View chains as the exporter writes them, with strided and offset inputs and a 0-d scalar.
TEST(PointwiseTest, ViewOpsAndStridedInputsCompile) {
  PointwiseFamily family;
  std::vector<KernelTask> tasks;
  std::vector<std::string> labels;
  // z = x.t().contiguous().view(4, 2, 4).permute(1, 0, 2).reshape(8, 4)[:, 1:3].unsqueeze(0)
  //       .expand(2, 8, 2) * s, with x [4, 8] read through transposed strides.
  tasks.push_back(
      TaskBuilder()
          .Input("x", kF32, {8, 4}, {1, 8})
          .Input("s", kF32, {})
          .Node("t", "t", "default", {TensorArg("self", "x")}, kF32, {4, 8})
          .Node("clone", "clone", "default", {TensorArg("self", "t")}, kF32, {4, 8})
          .Node("view", "view", "default", {TensorArg("self", "clone"), IntsArg("size", {4, 2, 4})}, kF32, {4, 2, 4})
          .Node("permute", "permute", "default", {TensorArg("self", "view"), IntsArg("dims", {1, 0, 2})}, kF32, {2, 4, 4})
          .Node("reshape", "_unsafe_view", "default", {TensorArg("self", "permute"), IntsArg("size", {8, 4})}, kF32, {8, 4})
          .Node("slice", "slice", "Tensor", {TensorArg("self", "reshape"), IntArg("dim", 1), IntArg("start", 1), IntArg("end", 3)}, kF32, {8, 2})
          .Node("unsqueeze", "unsqueeze", "default", {TensorArg("self", "slice"), IntArg("dim", 0)}, kF32, {1, 8, 2})
          .Node("expand", "expand", "default", {TensorArg("self", "unsqueeze"), IntsArg("size", {2, 8, 2})}, kF32, {2, 8, 2})
          .Node("mul", "mul", "Tensor", {TensorArg("self", "expand"), TensorArg("other", "s")}, kF32, {2, 8, 2})
          .Output("mul")
          .Build(forge::v1::KERNEL_FAMILY_POINTWISE));
  labels.push_back("view_chain");
  tasks.push_back(
      TaskBuilder()
          .Input("x", kBF16, {3, 5, 7}, {70, 14, 2}, 3)
          .Node("sel", "select", "int", {TensorArg("self", "x"), IntArg("dim", 1), IntArg("index", -1)}, kBF16, {3, 7})
          .Node("tr", "transpose", "int", {TensorArg("self", "sel"), IntArg("dim0", 0), IntArg("dim1", 1)}, kBF16, {7, 3})
          .Node("sq", "squeeze", "dim", {TensorArg("self", "tr"), IntArg("dim", 0)}, kBF16, {7, 3})
          .Node("cast", "_to_copy", "default", {TensorArg("self", "sq"), DTypeArg("dtype", kF32)}, kF32, {7, 3})
          .Output("cast")
          .Output("sq")
          .Build(forge::v1::KERNEL_FAMILY_POINTWISE));
  labels.push_back("select_transpose_strided");
  std::vector<GeneratedKernel> kernels;
  for (size_t i = 0; i < tasks.size(); ++i) {
    absl::StatusOr<std::vector<TemplateSpace>> space = family.ScheduleSpace(tasks[i]);
    ASSERT_TRUE(space.ok()) << labels[i] << ": " << space.status();
    absl::StatusOr<GeneratedKernel> kernel = family.Generate(tasks[i], DefaultPoint(space->front()));
    ASSERT_TRUE(kernel.ok()) << labels[i] << ": " << kernel.status();
    kernels.push_back(*kernel);
  }
  ExpectCompiles(kernels, labels, /*expect_no_spills=*/true);
}

TEST(PointwiseTest, LargeTensorsUse64BitIndexing) {
  PointwiseFamily family;
  const int64_t rows = int64_t{1} << 20;
  const KernelTask task = TaskBuilder()
                              .Input("x", kF32, {rows, 2048})
                              .Node("out", "neg", "default", {TensorArg("self", "x")}, kF32, {rows, 2048})
                              .Output("out")
                              .Build(forge::v1::KERNEL_FAMILY_POINTWISE);
  absl::StatusOr<GeneratedKernel> kernel = family.Generate(task, Point(256, 1, 4));
  ASSERT_TRUE(kernel.ok()) << kernel.status();
  EXPECT_THAT(kernel->source, HasSubstr("const long long chunk_start"));
  absl::StatusOr<GeneratedKernel> small = family.Generate(BiasGeluTask(), Point(256, 1, 4));
  ASSERT_TRUE(small.ok());
  EXPECT_THAT(small->source, HasSubstr("const int chunk_start"));
}

}  // namespace
}  // namespace forge::codegen

namespace forge::codegen {
namespace {

// ConvNeXt's layer scale and residual after its second linear: gamma * y with y (N, H, W, C)
// from the GEMM, permuted back to (N, C, H, W) and added to x.
KernelTask PermutedBackTask(int64_t channels, int64_t height, int64_t width) {
  using ::forge::codegen::testing::IntsArg;
  using ::forge::codegen::testing::TaskBuilder;
  using ::forge::codegen::testing::TensorArg;
  const auto bf16 = forge::v1::DTYPE_BFLOAT16;
  return TaskBuilder()
      .Input("y", bf16, {2, height, width, channels})
      .Input("gamma", bf16, {channels})
      .Input("x", bf16, {2, channels, height, width})
      .Node("scaled", "mul", "Tensor", {TensorArg("self", "gamma"), TensorArg("other", "y")}, bf16,
            {2, height, width, channels})
      .Node("back", "permute", "default",
            {TensorArg("self", "scaled"), IntsArg("dims", {0, 3, 1, 2})}, bf16,
            {2, channels, height, width})
      .Node("out", "add", "Tensor", {TensorArg("self", "x"), TensorArg("other", "back")}, bf16,
            {2, channels, height, width})
      .Output("out")
      .Build(forge::v1::KERNEL_FAMILY_POINTWISE);
}

TEST(PointwiseTileTest, APermutedBackReadIsTiledOverItsContiguousDimByDefault) {
  PointwiseFamily family;
  const KernelTask task = PermutedBackTask(40, 6, 7);
  absl::StatusOr<std::vector<TemplateSpace>> spaces = family.ScheduleSpace(task);
  ASSERT_TRUE(spaces.ok()) << spaces.status();
  ASSERT_EQ(spaces->size(), 2);
  EXPECT_EQ(spaces->front().template_name, PointwiseFamily::kTileTemplateName);
  EXPECT_EQ(spaces->back().template_name, PointwiseFamily::kTemplateName);
  const SchedulePoint point = DefaultPoint(spaces->front());
  EXPECT_EQ(point.parameters.at("tile_dim"), 1);  // C: where y is contiguous
  absl::StatusOr<LaunchPlan> plan = family.Plan(task, point);
  ASSERT_TRUE(plan.ok()) << plan.status();
  // 2 samples x ceil(40 / 32) channel tiles x ceil(42 / 32) spatial tiles.
  EXPECT_EQ(plan->launch.grid[0], 2u * 2u * 2u);
  EXPECT_EQ(plan->launch.block[0], 32u);
  EXPECT_EQ(plan->launch.block[1], 8u);
  std::vector<GeneratedKernel> kernels;
  std::vector<std::string> labels;
  for (int64_t threads_y : {4, 8}) {
    SchedulePoint tile = point;
    tile.parameters["threads_y"] = threads_y;
    absl::StatusOr<GeneratedKernel> kernel = family.Generate(task, tile);
    ASSERT_TRUE(kernel.ok()) << kernel.status();
    EXPECT_THAT(kernel->source, ::testing::HasSubstr("__shared__ ForgeBFloat16 tile0[32][33]"));
    kernels.push_back(*kernel);
    labels.push_back(absl::StrCat("tile_threads_y_", threads_y));
  }
  ::forge::codegen::testing::ExpectCompiles(kernels, labels, /*expect_no_spills=*/true);
}

TEST(PointwiseTileTest, ValidateRefusesTilesItCannotRun) {
  PointwiseFamily family;
  const KernelTask task = PermutedBackTask(40, 6, 7);
  SchedulePoint point{std::string(PointwiseFamily::kTileTemplateName),
                      {{"tile_dim", 3}, {"threads_y", 8}}};
  EXPECT_THAT(family.Validate(task, point).message(), ::testing::HasSubstr("tile_dim"));
  point.parameters["tile_dim"] = 2;  // a 6 x 7 plane
  EXPECT_THAT(family.Validate(task, point).message(), ::testing::HasSubstr("too small"));
  point.parameters["tile_dim"] = 1;
  point.parameters["threads_y"] = 16;
  EXPECT_FALSE(family.Validate(task, point).ok());
  // A small channel count: no tile space, the flat template alone.
  absl::StatusOr<std::vector<TemplateSpace>> spaces = family.ScheduleSpace(PermutedBackTask(8, 6, 7));
  ASSERT_TRUE(spaces.ok()) << spaces.status();
  ASSERT_EQ(spaces->size(), 1);
  EXPECT_EQ(spaces->front().template_name, PointwiseFamily::kTemplateName);
}

}  // namespace
}  // namespace forge::codegen
