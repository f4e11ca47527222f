#include "compiler/codegen/attention_analysis/attention_analysis.h"

#include <cmath>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/support/exported_model.h"

namespace forge::codegen {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

// The ATTENTION task of an exported test model (tests/fixtures/make_models.py), floats as `dtype`.
forge::v1::KernelTask AttentionTask(const std::string& model,
                                    forge::v1::DType dtype = forge::v1::DTYPE_FLOAT32) {
  return testing::ExportedModelTask(model, forge::v1::KERNEL_FAMILY_ATTENTION, dtype).value();
}

std::vector<std::string> Ops(const std::vector<const forge::v1::Node*>& nodes) {
  std::vector<std::string> ops;
  for (const auto* node : nodes) ops.push_back(node->op());
  return ops;
}

TEST(AttentionAnalysisTest, Gpt2StyleExplicitCausalAttention) {
  const forge::v1::KernelTask task = AttentionTask("explicit_attention");
  absl::StatusOr<AttentionAnalysis> analysis = AnalyzeAttention(task);
  ASSERT_TRUE(analysis.ok()) << analysis.status();
  EXPECT_EQ(analysis->spelling, AttentionSpelling::kExplicit);
  EXPECT_EQ(DescribeAttention(*analysis), "B2 H4/4 Sq7 Sk7 D8/8 float32 causal scale 0.3536");
  EXPECT_NEAR(analysis->scale, 1 / std::sqrt(8.0), 1e-15);
  // Q is the fused qkv projection's first third, seen as [B, H, S, D]: the views fold into its
  // strides (row 96 floats, head 8).
  EXPECT_THAT(analysis->query.shape, ElementsAre(2, 4, 7, 8));
  EXPECT_THAT(analysis->query.strides, ElementsAre(7 * 96, 8, 96, 1));
  EXPECT_THAT(analysis->key.strides, ElementsAre(7 * 96, 8, 96, 1));
  EXPECT_EQ(analysis->key_as_read, analysis->key.value);  // no GQA
  // The output goes back to [B, S, H * D] in the task: a transpose and a contiguous copy.
  EXPECT_THAT(Ops(analysis->epilogue), ElementsAre("aten::transpose", "aten::clone"));
}

TEST(AttentionAnalysisTest, SdpaWithGroupedQueryHeads) {
  const forge::v1::KernelTask task = AttentionTask("sdpa_gqa");
  absl::StatusOr<AttentionAnalysis> analysis = AnalyzeAttention(task);
  ASSERT_TRUE(analysis.ok()) << analysis.status();
  EXPECT_EQ(analysis->spelling, AttentionSpelling::kSdpa);
  EXPECT_EQ(DescribeAttention(*analysis), "B2 H4/2 Sq7 Sk7 D8/8 float32 causal scale 0.3536");
  EXPECT_EQ(analysis->kv_repeat(), 2);
  EXPECT_EQ(analysis->query.input, 0);
  EXPECT_EQ(analysis->key.input, 1);
  EXPECT_THAT(analysis->value.strides, ElementsAre(2 * 7 * 8, 7 * 8, 8, 1));
  EXPECT_TRUE(analysis->epilogue.empty());
}

TEST(AttentionAnalysisTest, ExpandedKeysAndValuesAreGroupedQueryAttention) {
  const forge::v1::KernelTask task = AttentionTask("expand_gqa_attention");
  absl::StatusOr<AttentionAnalysis> analysis = AnalyzeAttention(task);
  ASSERT_TRUE(analysis.ok()) << analysis.status();
  EXPECT_EQ(DescribeAttention(*analysis), "B2 H4/2 Sq7 Sk7 D8/8 float32 scale 0.3536");
  EXPECT_EQ(analysis->key.value, "k");  // the model's k, before the repeat
  EXPECT_GE(analysis->key.input, 0);
  EXPECT_NE(analysis->key_as_read, analysis->key.value);
}

TEST(AttentionAnalysisTest, MistralStyleGlueAttentionWithAFiniteCausalFill) {
  const forge::v1::KernelTask task = AttentionTask("glue_attention");
  absl::StatusOr<AttentionAnalysis> analysis = AnalyzeAttention(task);
  ASSERT_TRUE(analysis.ok()) << analysis.status();
  EXPECT_EQ(DescribeAttention(*analysis), "B2 H4/2 Sq11 Sk11 D6/6 float32 causal scale 0.4082");
  EXPECT_EQ(analysis->mask_fill, -1e4);
}

TEST(AttentionAnalysisTest, OtherTasksAreNotAttention) {
  forge::v1::KernelTask task;
  task.set_family(forge::v1::KERNEL_FAMILY_GEMM);
  EXPECT_THAT(AnalyzeAttention(task).status().message(), HasSubstr("not an ATTENTION task"));
  task.set_family(forge::v1::KERNEL_FAMILY_ATTENTION);
  EXPECT_THAT(AnalyzeAttention(task).status().message(),
              HasSubstr("no scaled_dot_product_attention and no explicit attention"));
}

}  // namespace
}  // namespace forge::codegen
