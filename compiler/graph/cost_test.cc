#include "compiler/graph/cost.h"

#include <string>

#include "gmock/gmock.h"
#include "google/protobuf/text_format.h"
#include "gtest/gtest.h"

namespace forge::graph {
namespace {

using ::testing::HasSubstr;

forge::v1::Graph Parse(const std::string& text) {
  forge::v1::Graph graph;
  EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(text, &graph));
  return graph;
}

forge::v1::TensorSpec Spec(forge::v1::DType dtype, std::initializer_list<std::int64_t> shape,
                           std::initializer_list<std::int64_t> strides) {
  forge::v1::TensorSpec spec;
  spec.set_dtype(dtype);
  spec.mutable_shape()->Add(shape.begin(), shape.end());
  spec.mutable_strides()->Add(strides.begin(), strides.end());
  return spec;
}

TEST(SpannedBytesTest, FollowsStrides) {
  EXPECT_EQ(SpannedBytes(Spec(forge::v1::DTYPE_FLOAT32, {8, 64}, {64, 1})), 8 * 64 * 4);
  EXPECT_EQ(SpannedBytes(Spec(forge::v1::DTYPE_BFLOAT16, {64, 8}, {1, 64})), 8 * 64 * 2);
  // A row broadcast along 8 rows spans one row.
  EXPECT_EQ(SpannedBytes(Spec(forge::v1::DTYPE_FLOAT32, {8, 64}, {0, 1})), 64 * 4);
  EXPECT_EQ(SpannedBytes(Spec(forge::v1::DTYPE_FLOAT32, {0, 64}, {64, 1})), 0);
  EXPECT_EQ(SpannedBytes(Spec(forge::v1::DTYPE_FLOAT64, {}, {})), 8);
}

// [2^32, 2^32] used to wrap around to 0 elements; counts saturate instead.
TEST(SpannedBytesTest, SaturatesInsteadOfOverflowing) {
  constexpr std::int64_t kHuge = std::int64_t{1} << 32;
  EXPECT_EQ(NumElements(Spec(forge::v1::DTYPE_FLOAT32, {kHuge, kHuge}, {kHuge, 1})), kSaturated);
  EXPECT_EQ(SpannedBytes(Spec(forge::v1::DTYPE_FLOAT32, {kHuge, kHuge}, {kHuge, 1})), kSaturated);
  EXPECT_EQ(SpannedBytes(Spec(forge::v1::DTYPE_FLOAT32, {kHuge / 2, kHuge / 2}, {kHuge / 2, 1})),
            kSaturated);
}

TEST(ComputeTaskCostTest, GemmWithEpilogue) {
  // [8,64] x [256,64]^T -> [8,256], then a bias-free relu.
  const forge::v1::Graph group = Parse(R"pb(
    values { name: "x" tensor { dtype: DTYPE_FLOAT32 shape: [8, 64] strides: [64, 1] } }
    values { name: "w" tensor { dtype: DTYPE_FLOAT32 shape: [256, 64] strides: [64, 1] } }
    values { name: "y" tensor { dtype: DTYPE_FLOAT32 shape: [8, 256] strides: [256, 1] } }
    values { name: "r" tensor { dtype: DTYPE_FLOAT32 shape: [8, 256] strides: [256, 1] } }
    inputs { value_name: "x" } inputs { value_name: "w" }
    nodes { op: "aten::linear" arguments { tensor: "x" } arguments { tensor: "w" } outputs: "y" }
    nodes { op: "aten::relu" arguments { tensor: "y" } outputs: "r" }
    outputs { value_name: "r" }
  )pb");
  absl::StatusOr<TaskCost> cost = ComputeTaskCost(group);
  ASSERT_TRUE(cost.ok()) << cost.status();
  EXPECT_EQ(cost->flops, 2 * 8 * 256 * 64 + 8 * 256);
  EXPECT_EQ(cost->min_bytes, (8 * 64 + 256 * 64 + 8 * 256) * 4);
}

TEST(ComputeTaskCostTest, ConvAttentionAndReduction) {
  const forge::v1::Graph conv = Parse(R"pb(
    values { name: "x" tensor { dtype: DTYPE_FLOAT32 shape: [2, 3, 16, 16] } }
    values { name: "w" tensor { dtype: DTYPE_FLOAT32 shape: [8, 3, 3, 3] } }
    values { name: "y" tensor { dtype: DTYPE_FLOAT32 shape: [2, 8, 16, 16] } }
    inputs { value_name: "x" } inputs { value_name: "w" }
    nodes { op: "aten::conv2d" arguments { tensor: "x" } arguments { tensor: "w" } outputs: "y" }
    outputs { value_name: "y" }
  )pb");
  absl::StatusOr<TaskCost> conv_cost = ComputeTaskCost(conv);
  ASSERT_TRUE(conv_cost.ok()) << conv_cost.status();
  EXPECT_EQ(conv_cost->flops, 2 * (2 * 8 * 16 * 16) * (3 * 3 * 3));

  const forge::v1::Graph attention = Parse(R"pb(
    values { name: "q" tensor { dtype: DTYPE_BFLOAT16 shape: [2, 4, 16, 32] } }
    values { name: "k" tensor { dtype: DTYPE_BFLOAT16 shape: [2, 4, 24, 32] } }
    values { name: "v" tensor { dtype: DTYPE_BFLOAT16 shape: [2, 4, 24, 32] } }
    values { name: "o" tensor { dtype: DTYPE_BFLOAT16 shape: [2, 4, 16, 32] } }
    inputs { value_name: "q" } inputs { value_name: "k" } inputs { value_name: "v" }
    nodes { op: "aten::scaled_dot_product_attention" arguments { tensor: "q" }
            arguments { tensor: "k" } arguments { tensor: "v" } outputs: "o" }
    outputs { value_name: "o" }
  )pb");
  absl::StatusOr<TaskCost> attention_cost = ComputeTaskCost(attention);
  ASSERT_TRUE(attention_cost.ok()) << attention_cost.status();
  EXPECT_EQ(attention_cost->flops, 4 * 2 * 4 * 16 * 24 * 32);
  EXPECT_EQ(attention_cost->min_bytes, (2 * 4 * 16 * 32 * 2 + 2 * 4 * 24 * 32 * 2) * 2);

  const forge::v1::Graph softmax = Parse(R"pb(
    values { name: "x" tensor { dtype: DTYPE_FLOAT32 shape: [8, 100] } }
    values { name: "y" tensor { dtype: DTYPE_FLOAT32 shape: [8, 100] } }
    inputs { value_name: "x" }
    nodes { op: "aten::softmax" overload: "int" arguments { tensor: "x" } outputs: "y" }
    outputs { value_name: "y" }
  )pb");
  absl::StatusOr<TaskCost> softmax_cost = ComputeTaskCost(softmax);
  ASSERT_TRUE(softmax_cost.ok()) << softmax_cost.status();
  EXPECT_EQ(softmax_cost->flops, 5 * 800);
  EXPECT_EQ(softmax_cost->min_bytes, 2 * 800 * 4);
}

TEST(ComputeTaskCostTest, ViewsMoveNothingAndAliasedOutputsCountOnce) {
  const forge::v1::Graph only_views = Parse(R"pb(
    values { name: "x" tensor { dtype: DTYPE_FLOAT32 shape: [64, 16] } }
    values { name: "s" tensor { dtype: DTYPE_FLOAT32 shape: [16, 16] } }
    inputs { value_name: "x" }
    nodes { op: "aten::slice" overload: "Tensor" arguments { tensor: "x" } outputs: "s" }
    outputs { value_name: "s" }
  )pb");
  absl::StatusOr<TaskCost> view_cost = ComputeTaskCost(only_views);
  ASSERT_TRUE(view_cost.ok()) << view_cost.status();
  EXPECT_EQ(view_cost->flops, 0);
  EXPECT_EQ(view_cost->min_bytes, 0);

  // neg writes [4,16]; its view [64] is the same storage.
  const forge::v1::Graph aliased = Parse(R"pb(
    values { name: "x" tensor { dtype: DTYPE_FLOAT32 shape: [4, 16] } }
    values { name: "n" tensor { dtype: DTYPE_FLOAT32 shape: [4, 16] } }
    values { name: "f" tensor { dtype: DTYPE_FLOAT32 shape: [64] } }
    inputs { value_name: "x" }
    nodes { op: "aten::neg" arguments { tensor: "x" } outputs: "n" }
    nodes { op: "aten::view" arguments { tensor: "n" } outputs: "f" }
    outputs { value_name: "n" } outputs { value_name: "f" }
  )pb");
  absl::StatusOr<TaskCost> aliased_cost = ComputeTaskCost(aliased);
  ASSERT_TRUE(aliased_cost.ok()) << aliased_cost.status();
  EXPECT_EQ(aliased_cost->flops, 64);
  EXPECT_EQ(aliased_cost->min_bytes, 2 * 64 * 4);
}

TEST(ComputeTaskCostTest, MissingSpecIsAnError) {
  const forge::v1::Graph group = Parse(R"pb(
    values { name: "x" tensor { dtype: DTYPE_FLOAT32 shape: [4] } }
    inputs { value_name: "x" }
    nodes { name: "neg_1" op: "aten::neg" arguments { tensor: "x" } outputs: "y" }
  )pb");
  absl::StatusOr<TaskCost> cost = ComputeTaskCost(group);
  EXPECT_EQ(cost.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(cost.status().message(), HasSubstr("neg_1"));
}

TEST(FloorMathModeTest, TensorCoresOnlyForContractionsOnNarrowData) {
  auto task = [](forge::v1::KernelFamily family, forge::v1::DType input, forge::v1::DType output) {
    forge::v1::KernelTask made;
    made.set_family(family);
    *made.add_inputs() = Spec(input, {64, 64}, {});
    *made.add_outputs() = Spec(output, {64, 64}, {});
    return made;
  };
  using forge::v1::DTYPE_BFLOAT16;
  using forge::v1::DTYPE_FLOAT16;
  using forge::v1::DTYPE_FLOAT32;
  using forge::v1::DTYPE_FLOAT64;
  using forge::v1::DTYPE_FLOAT8_E4M3FN;
  for (auto family : {forge::v1::KERNEL_FAMILY_GEMM, forge::v1::KERNEL_FAMILY_CONV,
                      forge::v1::KERNEL_FAMILY_ATTENTION}) {
    EXPECT_EQ(FloorMathMode(task(family, DTYPE_BFLOAT16, DTYPE_BFLOAT16)), MathMode::kBf16);
    EXPECT_EQ(FloorMathMode(task(family, DTYPE_FLOAT16, DTYPE_FLOAT32)), MathMode::kBf16);
    EXPECT_EQ(FloorMathMode(task(family, DTYPE_FLOAT8_E4M3FN, DTYPE_BFLOAT16)), MathMode::kFp8);
    EXPECT_EQ(FloorMathMode(task(family, DTYPE_FLOAT32, DTYPE_FLOAT32)), MathMode::kFp32);
    EXPECT_EQ(FloorMathMode(task(family, DTYPE_FLOAT64, DTYPE_FLOAT64)), MathMode::kFp64);
  }
  EXPECT_EQ(FloorMathMode(task(forge::v1::KERNEL_FAMILY_REDUCTION, DTYPE_BFLOAT16, DTYPE_BFLOAT16)),
            MathMode::kFp32);
  EXPECT_EQ(FloorMathMode(task(forge::v1::KERNEL_FAMILY_POINTWISE, DTYPE_FLOAT32, DTYPE_FLOAT64)),
            MathMode::kFp64);
  // Generated kernels compute 16-bit data in float32 whatever the family.
  EXPECT_EQ(GeneratedKernelMathMode(task(forge::v1::KERNEL_FAMILY_GEMM, DTYPE_BFLOAT16,
                                         DTYPE_BFLOAT16)),
            MathMode::kFp32);
  EXPECT_EQ(GeneratedKernelMathMode(task(forge::v1::KERNEL_FAMILY_REDUCTION, DTYPE_FLOAT64,
                                         DTYPE_FLOAT64)),
            MathMode::kFp64);
}

}  // namespace
}  // namespace forge::graph
