#include "compiler/graph/task_digest.h"

#include <string>

#include "google/protobuf/text_format.h"
#include "gtest/gtest.h"

namespace forge::graph {
namespace {

// A GEMM with a GELU epilogue: x[8,64] @ w[256,64]^T -> gelu.
constexpr char kLinearGelu[] = R"pb(
  values { name: "x" tensor { dtype: DTYPE_FLOAT32 shape: [8, 64] strides: [64, 1] } }
  values { name: "w" tensor { dtype: DTYPE_FLOAT32 shape: [256, 64] strides: [64, 1] } }
  values { name: "lin" tensor { dtype: DTYPE_FLOAT32 shape: [8, 256] strides: [256, 1] } }
  values { name: "act" tensor { dtype: DTYPE_FLOAT32 shape: [8, 256] strides: [256, 1]
                                device { type: "cpu" } } }
  inputs { kind: INPUT_KIND_USER_INPUT value_name: "x" }
  inputs { kind: INPUT_KIND_PARAMETER value_name: "w" target: "up.weight"
           data { sha256: "aa" size_bytes: 65536 } }
  nodes { name: "linear" op: "aten::linear" overload: "default"
          arguments { name: "input" tensor: "x" }
          arguments { name: "weight" tensor: "w" }
          outputs: "lin" attributes { key: "stack_trace" value: "model.py:3" } }
  nodes { name: "gelu" op: "aten::gelu" overload: "default"
          arguments { name: "self" tensor: "lin" }
          arguments { name: "approximate" string_value: "tanh" }
          outputs: "act" }
  outputs { kind: OUTPUT_KIND_USER_OUTPUT value_name: "act" }
)pb";

forge::v1::Graph Parse(const std::string& text) {
  forge::v1::Graph graph;
  EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(text, &graph));
  return graph;
}

// `group` with every occurrence of the value name `from` replaced by `to`.
std::string Rename(std::string text, const std::string& from, const std::string& to) {
  for (std::size_t at = 0; (at = text.find(from, at)) != std::string::npos; at += to.size()) {
    text.replace(at, from.size(), to);
  }
  return text;
}

TEST(CanonicalGroupTest, NamesBecomePositionsAndNotesGo) {
  const forge::v1::Graph canonical = CanonicalGroup(Parse(kLinearGelu));
  ASSERT_EQ(canonical.inputs_size(), 2);
  EXPECT_EQ(canonical.inputs(0).value_name(), "%0");
  EXPECT_EQ(canonical.inputs(1).value_name(), "%1");
  EXPECT_EQ(canonical.inputs(1).target(), "");
  EXPECT_FALSE(canonical.inputs(1).has_data());
  ASSERT_EQ(canonical.nodes_size(), 2);
  EXPECT_EQ(canonical.nodes(0).name(), "");
  EXPECT_TRUE(canonical.nodes(0).attributes().empty());
  EXPECT_EQ(canonical.nodes(0).outputs(0), "%2");
  EXPECT_EQ(canonical.nodes(1).arguments(0).tensor(), "%2");
  EXPECT_EQ(canonical.outputs(0).value_name(), "%3");
  ASSERT_EQ(canonical.values_size(), 4);
  EXPECT_FALSE(canonical.values(3).tensor().has_device());
  EXPECT_EQ(canonical.values(3).tensor().shape(1), 256);
}

TEST(TaskDigestTest, IsHexSha256AndStable) {
  const std::string digest = TaskDigest(Parse(kLinearGelu));
  EXPECT_EQ(digest.size(), 64u);
  EXPECT_EQ(digest.find_first_not_of("0123456789abcdef"), std::string::npos);
  EXPECT_EQ(digest, TaskDigest(Parse(kLinearGelu)));
}

TEST(TaskDigestTest, IgnoresNamesTargetsStackTracesAndDevices) {
  const std::string digest = TaskDigest(Parse(kLinearGelu));
  std::string renamed = Rename(kLinearGelu, "\"lin\"", "\"addmm_7\"");
  renamed = Rename(renamed, "\"x\"", "\"hidden\"");
  renamed = Rename(renamed, "name: \"gelu\"", "name: \"gelu_3\"");
  renamed = Rename(renamed, "model.py:3", "other.py:99");
  renamed = Rename(renamed, "up.weight", "layers.4.up.weight");
  renamed = Rename(renamed, "device { type: \"cpu\" }", "device { type: \"cuda\" index: 1 }");
  ASSERT_NE(renamed, kLinearGelu);
  EXPECT_EQ(TaskDigest(Parse(renamed)), digest);
}

TEST(TaskDigestTest, ChangesWithShapeDtypeStrideScalarOrOp) {
  const std::string digest = TaskDigest(Parse(kLinearGelu));
  const std::string variants[] = {
      Rename(kLinearGelu, "shape: [8, 64]", "shape: [16, 64]"),
      Rename(kLinearGelu, "dtype: DTYPE_FLOAT32 shape: [256, 64]",
             "dtype: DTYPE_BFLOAT16 shape: [256, 64]"),
      Rename(kLinearGelu, "shape: [8, 256] strides: [256, 1] }", "shape: [8, 256] strides: [1, 8] }"),
      Rename(kLinearGelu, "\"tanh\"", "\"none\""),
      Rename(kLinearGelu, "aten::gelu", "aten::silu"),
      Rename(kLinearGelu, "INPUT_KIND_PARAMETER", "INPUT_KIND_USER_INPUT"),
  };
  for (const std::string& variant : variants) {
    ASSERT_NE(variant, kLinearGelu);
    EXPECT_NE(TaskDigest(Parse(variant)), digest) << variant;
  }
}

TEST(TaskDigestTest, ScalarArgumentsCount) {
  forge::v1::Graph graph = Parse(kLinearGelu);
  auto* alpha = graph.mutable_nodes(1)->add_arguments();
  alpha->set_name("alpha");
  alpha->set_float_value(0.5);
  const std::string half = TaskDigest(graph);
  alpha->set_float_value(0.25);
  EXPECT_NE(TaskDigest(graph), half);
}

}  // namespace
}  // namespace forge::graph
