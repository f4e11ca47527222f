#include "compiler/codegen/gemm_library/gemm_library.h"

#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

#include "compiler/codegen/testing/codegen_test_util.h"
#include "compiler/graph/partition.h"

namespace forge::codegen {
namespace {

using forge::v1::KernelTask;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using testing::ExpectCompiles;
using testing::OptionalTensorArg;
using testing::StringArg;
using testing::TaskBuilder;
using testing::TensorArg;

constexpr auto kF32 = forge::v1::DTYPE_FLOAT32;
constexpr auto kBF16 = forge::v1::DTYPE_BFLOAT16;
constexpr auto kGemm = forge::v1::KERNEL_FAMILY_GEMM;

SchedulePoint Point(const std::string& template_name, int64_t algo = 0) {
  return {template_name, {{"algo", algo}}};
}

std::vector<std::string> TemplateNames(const KernelTask& task) {
  auto spaces = GemmLibraryFamily().ScheduleSpace(task);
  EXPECT_TRUE(spaces.ok()) << spaces.status();
  std::vector<std::string> names;
  if (spaces.ok()) {
    for (const TemplateSpace& space : *spaces) names.push_back(space.template_name);
  }
  return names;
}

LibraryGemmCall CallOf(const KernelTask& task, const std::string& template_name, int64_t algo = 0) {
  auto candidate = DescribeGemmLibrary(task, Point(template_name, algo));
  EXPECT_TRUE(candidate.ok()) << candidate.status();
  return candidate.ok() ? candidate->gemm : LibraryGemmCall{};
}

// x[m, k] @ weight[n, k]^T + bias, then `activation` (relu, gelu) when given.
KernelTask LinearTask(forge::v1::DType dtype, int64_t m, int64_t n, int64_t k,
                      const std::string& activation = "", const std::string& approximate = "") {
  TaskBuilder builder;
  builder.Input("x", dtype, {m, k}).Input("w", dtype, {n, k}).Input("bias", dtype, {n});
  builder.Node("linear", "linear", "",
               {TensorArg("input", "x"), TensorArg("weight", "w"), OptionalTensorArg("bias", "bias")},
               dtype, {m, n});
  std::string result = "linear";
  if (!activation.empty()) {
    std::vector<forge::v1::Argument> arguments = {TensorArg("self", "linear")};
    if (!approximate.empty()) arguments.push_back(StringArg("approximate", approximate));
    builder.Node("act", activation, "", arguments, dtype, {m, n});
    result = "act";
  }
  return builder.Output(result).Build(kGemm);
}

// linear(x, w, bias) + residual, on [b, s, k] activations.
KernelTask LinearResidualTask(forge::v1::DType dtype) {
  return TaskBuilder()
      .Input("x", dtype, {2, 16, 64})
      .Input("w", dtype, {32, 64})
      .Input("bias", dtype, {32})
      .Input("residual", dtype, {2, 16, 32})
      .Node("linear", "linear", "",
            {TensorArg("input", "x"), TensorArg("weight", "w"), OptionalTensorArg("bias", "bias")},
            dtype, {2, 16, 32})
      .Node("sum", "add", "Tensor", {TensorArg("self", "linear"), TensorArg("other", "residual")},
            dtype, {2, 16, 32})
      .Output("sum")
      .Build(kGemm);
}

TEST(GemmLibraryTest, LinearGeluTanhIsOneCublasLtCallWithGeluBias) {
  const KernelTask task = LinearTask(kBF16, 128, 96, 64, "gelu", "tanh");
  EXPECT_THAT(TemplateNames(task), ElementsAre("cublaslt"));
  const LibraryGemmCall call = CallOf(task, "cublaslt", 3);
  EXPECT_EQ(call.epilogue, LibraryEpilogue::kGeluBias);
  EXPECT_EQ(call.dtype, kBF16);
  EXPECT_EQ(call.m, 128);
  EXPECT_EQ(call.n, 96);
  EXPECT_EQ(call.k, 64);
  EXPECT_EQ(call.batch, 1);
  EXPECT_EQ(call.a.input, 0);
  EXPECT_FALSE(call.a.transposed);
  EXPECT_EQ(call.a.leading_dim, 64);
  // weight[n, k] is B = weight^T stored transposed.
  EXPECT_EQ(call.b.input, 1);
  EXPECT_TRUE(call.b.transposed);
  EXPECT_EQ(call.b.leading_dim, 64);
  EXPECT_EQ(call.bias_input, 2);
  EXPECT_EQ(call.algo, 3);
}

TEST(GemmLibraryTest, NativeEpiloguesMapExactly) {
  EXPECT_EQ(CallOf(LinearTask(kF32, 8, 16, 32), "cublaslt").epilogue, LibraryEpilogue::kBias);
  EXPECT_EQ(CallOf(LinearTask(kF32, 8, 16, 32, "relu"), "cublaslt").epilogue,
            LibraryEpilogue::kReluBias);
  // A bias added by a separate node folds into the epilogue as well.
  const KernelTask separate_bias =
      TaskBuilder()
          .Input("a", kF32, {8, 32})
          .Input("b", kF32, {32, 16})
          .Input("bias", kF32, {16})
          .Node("mm", "mm", "", {TensorArg("self", "a"), TensorArg("mat2", "b")}, kF32, {8, 16})
          .Node("add", "add", "Tensor", {TensorArg("self", "bias"), TensorArg("other", "mm")}, kF32,
                {8, 16})
          .Node("relu", "relu", "", {TensorArg("self", "add")}, kF32, {8, 16})
          .Output("relu")
          .Build(kGemm);
  const LibraryGemmCall call = CallOf(separate_bias, "cublaslt");
  EXPECT_EQ(call.epilogue, LibraryEpilogue::kReluBias);
  EXPECT_EQ(call.bias_input, 2);
  EXPECT_FALSE(call.b.transposed);
  EXPECT_EQ(call.b.leading_dim, 16);
}

TEST(GemmLibraryTest, ErfGeluIsNotCublasLtsGelu) {
  const KernelTask task = LinearTask(kF32, 8, 16, 32, "gelu");  // approximate defaults to "none"
  EXPECT_THAT(TemplateNames(task), ElementsAre("cublaslt_then_pointwise"));
  auto candidate = DescribeGemmLibrary(task, Point("cublaslt_then_pointwise"));
  ASSERT_TRUE(candidate.ok()) << candidate.status();
  EXPECT_EQ(candidate->gemm.epilogue, LibraryEpilogue::kBias);
  ASSERT_TRUE(candidate->epilogue.has_value());
  EXPECT_TRUE(candidate->epilogue_task_inputs.empty());
  auto rejected = GemmLibraryFamily().Validate(task, Point("cublaslt"));
  EXPECT_EQ(rejected.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(rejected.message()), HasSubstr("aten::gelu (node act) has no native"));
}

TEST(GemmLibraryTest, ResidualAddRunsAsAPointwiseEpilogue) {
  const KernelTask task = LinearResidualTask(kF32);
  EXPECT_THAT(TemplateNames(task), ElementsAre("cublaslt_then_pointwise"));
  auto candidate = DescribeGemmLibrary(task, Point("cublaslt_then_pointwise", 1));
  ASSERT_TRUE(candidate.ok()) << candidate.status();
  // [2, 16, 64] activations fold into 32 rows.
  EXPECT_EQ(candidate->gemm.m, 32);
  EXPECT_EQ(candidate->gemm.n, 32);
  EXPECT_EQ(candidate->gemm.k, 64);
  EXPECT_EQ(candidate->gemm.epilogue, LibraryEpilogue::kBias);
  EXPECT_EQ(candidate->gemm.bias_input, 2);
  EXPECT_THAT(candidate->epilogue_task_inputs, ElementsAre(3));
  ASSERT_TRUE(candidate->epilogue.has_value());
  auto kernel = GemmLibraryFamily().Generate(task, Point("cublaslt_then_pointwise", 1));
  ASSERT_TRUE(kernel.ok()) << kernel.status();
  EXPECT_EQ(kernel->kernel_name, candidate->epilogue->kernel_name);
  EXPECT_TRUE(absl::StartsWith(kernel->source, "// forge library call: cublaslt float32"))
      << kernel->source.substr(0, 200);
  ExpectCompiles({*kernel}, {"linear+add epilogue"}, /*expect_no_spills=*/true);
}

TEST(GemmLibraryTest, BmmIsBatched) {
  const KernelTask task =
      TaskBuilder()
          .Input("a", kBF16, {4, 64, 32})
          .Input("b", kBF16, {4, 32, 48})
          .Node("bmm", "bmm", "", {TensorArg("self", "a"), TensorArg("mat2", "b")}, kBF16,
                {4, 64, 48})
          .Output("bmm")
          .Build(kGemm);
  const LibraryGemmCall call = CallOf(task, "cublaslt");
  EXPECT_EQ(call.batch, 4);
  EXPECT_EQ(call.m, 64);
  EXPECT_EQ(call.n, 48);
  EXPECT_EQ(call.k, 32);
  EXPECT_EQ(call.a.batch_stride, 64 * 32);
  EXPECT_EQ(call.b.batch_stride, 32 * 48);
  EXPECT_EQ(call.epilogue, LibraryEpilogue::kNone);
  EXPECT_EQ(call.bias_input, -1);
}

TEST(GemmLibraryTest, TransposedOperandsFollowTheStrides) {
  // mm(t(a), b) with a stored [k, m]: A is read transposed, without a copy.
  const KernelTask task =
      TaskBuilder()
          .Input("a", kF32, {32, 8})
          .Input("b", kF32, {32, 16})
          .Node("at", "t", "", {TensorArg("self", "a")}, kF32, {8, 32})
          .Node("mm", "mm", "", {TensorArg("self", "at"), TensorArg("mat2", "b")}, kF32, {8, 16})
          .Output("mm")
          .Build(kGemm);
  const LibraryGemmCall call = CallOf(task, "cublaslt");
  EXPECT_TRUE(call.a.transposed);
  EXPECT_EQ(call.a.leading_dim, 8);
  EXPECT_FALSE(call.b.transposed);
  EXPECT_EQ(call.m, 8);
  EXPECT_EQ(call.k, 32);
}

TEST(GemmLibraryTest, DTypeComesFromTheTask) {
  EXPECT_EQ(CallOf(LinearTask(kF32, 8, 16, 32), "cublaslt").dtype, kF32);
  EXPECT_EQ(CallOf(LinearTask(kBF16, 8, 16, 32), "cublaslt").dtype, kBF16);
  const KernelTask float64 = LinearTask(forge::v1::DTYPE_FLOAT64, 8, 16, 32);
  const absl::Status status = GemmLibraryFamily().Applies(float64);
  EXPECT_EQ(status.code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(std::string(status.message()), HasSubstr("float64"));
}

TEST(GemmLibraryTest, ValidateRejectsPointsOutsideTheSpace) {
  const GemmLibraryFamily family;
  const KernelTask task = LinearTask(kF32, 8, 16, 32, "relu");
  EXPECT_TRUE(family.Validate(task, Point("cublaslt", 7)).ok());
  const absl::Status past_end = family.Validate(task, Point("cublaslt", 8));
  EXPECT_EQ(past_end.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(past_end.message()), HasSubstr("'algo' = 8 is not one of"));
  const absl::Status unknown = family.Validate(task, Point("gemm_mma_sync"));
  EXPECT_EQ(unknown.code(), absl::StatusCode::kInvalidArgument);
  // Nothing is left for a pointwise kernel after cuBLASLt's RELU_BIAS.
  const absl::Status redundant = family.Validate(task, Point("cublaslt_then_pointwise"));
  EXPECT_EQ(redundant.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(redundant.message()), HasSubstr("no epilogue is left"));
  EXPECT_FALSE(family.Generate(task, Point("cublaslt", 8)).ok());
}

TEST(GemmLibraryTest, NonGemmGroupsDoNotApply) {
  const KernelTask task = TaskBuilder()
                              .Input("x", kF32, {8, 8})
                              .Node("relu", "relu", "", {TensorArg("self", "x")}, kF32, {8, 8})
                              .Output("relu")
                              .Build(forge::v1::KERNEL_FAMILY_POINTWISE);
  EXPECT_EQ(GemmLibraryFamily().Applies(task).code(), absl::StatusCode::kUnimplemented);
}

TEST(GemmLibraryTest, GenerationIsDeterministic) {
  const GemmLibraryFamily family;
  for (const KernelTask& task : {LinearTask(kBF16, 64, 64, 64, "gelu", "tanh"),
                                 LinearResidualTask(kBF16)}) {
    auto spaces = family.ScheduleSpace(task);
    ASSERT_TRUE(spaces.ok()) << spaces.status();
    for (const TemplateSpace& space : *spaces) {
      const SchedulePoint point = DefaultPoint(space);
      auto first = family.Generate(task, point);
      auto second = family.Generate(task, point);
      ASSERT_TRUE(first.ok()) << first.status();
      ASSERT_TRUE(second.ok()) << second.status();
      EXPECT_EQ(first->source, second->source);
      EXPECT_EQ(first->generator_version, second->generator_version);
      EXPECT_EQ(first->parameters, point.parameters);
      EXPECT_EQ(DescribeGemmLibrary(task, point)->gemm, DescribeGemmLibrary(task, point)->gemm);
    }
  }
  // A different algorithm is a different candidate.
  const KernelTask task = LinearTask(kF32, 8, 16, 32);
  EXPECT_NE(family.Generate(task, Point("cublaslt", 0))->source,
            family.Generate(task, Point("cublaslt", 1))->source);
  EXPECT_TRUE(absl::StartsWith(family.generator_version(), "gemm_library-1+pointwise-"));
}

// The GEMM tasks of the exported test models get candidates whose epilogue kernels compile, the
// Llama block's fused q/k/v projections included: their epilogue's aten::split is a view the
// pointwise family reads through (compiler/codegen/glue_forms.h's neighbour, kSplit).
TEST(GemmLibraryModelsTest, EveryGemmTaskOfTheTestModelsHasACandidate) {
  const char* directory = std::getenv("FORGE_TEST_MODELS");
  ASSERT_NE(directory, nullptr) << "FORGE_TEST_MODELS is not set; run through ctest";
  std::vector<GeneratedKernel> kernels;
  std::vector<std::string> labels;
  for (const std::string model : {"mlp", "linear_mul_leaky_relu", "llama_block"}) {
    forge::v1::Graph graph;
    std::ifstream file(std::string(directory) + "/" + model + "/graph.pb", std::ios::binary);
    SCOPED_TRACE(model);
    ASSERT_TRUE(file && graph.ParseFromIstream(&file)) << model;
    auto partition = forge::graph::Partition(graph);
    ASSERT_TRUE(partition.ok()) << partition.status();
    int gemm_tasks = 0;
    for (const KernelTask& task : partition->tasks) {
      if (task.family() != kGemm) continue;
      ++gemm_tasks;
      auto spaces = GemmLibraryFamily().ScheduleSpace(task);
      if (!spaces.ok()) {
        ADD_FAILURE() << model << ": " << spaces.status();
        continue;
      }
      ASSERT_FALSE(spaces->empty());
      for (const TemplateSpace& space : *spaces) {
        auto kernel = GemmLibraryFamily().Generate(task, DefaultPoint(space));
        ASSERT_TRUE(kernel.ok()) << model << ": " << kernel.status();
        if (kernel->kernel_name.empty()) continue;
        kernels.push_back(*kernel);
        labels.push_back(model + " " + space.template_name);
      }
    }
    EXPECT_GT(gemm_tasks, 0) << model;
  }
  ExpectCompiles(kernels, labels, /*expect_no_spills=*/true);
}

}  // namespace
}  // namespace forge::codegen
