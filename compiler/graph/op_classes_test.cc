#include "compiler/graph/op_classes.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace forge::graph {
namespace {

using ::testing::ElementsAre;

TEST(ClassifyOpTest, SortsOpsIntoTheirClasses) {
  EXPECT_EQ(ClassifyOp("aten::add", "Tensor"), OpClass::kPointwise);
  EXPECT_EQ(ClassifyOp("aten::rsqrt", "default"), OpClass::kPointwise);
  EXPECT_EQ(ClassifyOp("aten::gelu", "default"), OpClass::kPointwise);
  EXPECT_EQ(ClassifyOp("aten::_to_copy", "default"), OpClass::kPointwise);
  EXPECT_EQ(ClassifyOp("aten::clone", "default"), OpClass::kPointwise);
  EXPECT_EQ(ClassifyOp("aten::where", "self"), OpClass::kPointwise);
  EXPECT_EQ(ClassifyOp("aten::_native_batch_norm_legit_no_training", "default"),
            OpClass::kBatchNormEval);
  EXPECT_EQ(ClassifyOp("aten::view", "default"), OpClass::kView);
  EXPECT_EQ(ClassifyOp("aten::split", "Tensor"), OpClass::kView);
  EXPECT_EQ(ClassifyOp("aten::softmax", "int"), OpClass::kReduction);
  EXPECT_EQ(ClassifyOp("aten::native_layer_norm", "default"), OpClass::kReduction);
  EXPECT_EQ(ClassifyOp("aten::cross_entropy_loss", "default"), OpClass::kReduction);
  EXPECT_EQ(ClassifyOp("aten::linear", "default"), OpClass::kGemm);
  EXPECT_EQ(ClassifyOp("aten::baddbmm", "default"), OpClass::kGemm);
  EXPECT_EQ(ClassifyOp("aten::conv2d", "default"), OpClass::kConv);
  EXPECT_EQ(ClassifyOp("aten::_scaled_dot_product_flash_attention", "default"),
            OpClass::kAttention);
  EXPECT_EQ(ClassifyOp("aten::cat", "default"), OpClass::kPointwise);  // glue: index arithmetic
  EXPECT_EQ(ClassifyOp("aten::cumsum", "default"), OpClass::kScan);
  EXPECT_EQ(ClassifyOp("aten::sort", "default"), OpClass::kOpaque);
  EXPECT_EQ(ClassifyOp("aten::max_pool2d", "default"), OpClass::kStencil);
  EXPECT_EQ(ClassifyOp("aten::adaptive_avg_pool2d", "default"), OpClass::kStencil);
  EXPECT_EQ(ClassifyOp("aten::fractional_max_pool2d", "default"), OpClass::kOpaque);
}

TEST(ClassifyOpTest, OverloadsThatChangeTheClass) {
  EXPECT_EQ(ClassifyOp("aten::where", "default"), OpClass::kOpaque);  // nonzero
  EXPECT_EQ(ClassifyOp("aten::max", "other"), OpClass::kPointwise);
  EXPECT_EQ(ClassifyOp("aten::max", "dim"), OpClass::kReduction);
}

TEST(ClassifyOpTest, NonAtenNamespacesAreOpaque) {
  EXPECT_EQ(ClassifyOp("custom::add", "default"), OpClass::kOpaque);
  EXPECT_EQ(ClassifyOp("add", "Tensor"), OpClass::kOpaque);
}

TEST(ClassifyNodeTest, TrainingBatchNormIsOpaque) {
  forge::v1::Node node;
  node.set_op("aten::batch_norm");
  node.set_overload("default");
  auto* training = node.add_arguments();
  training->set_name("training");
  training->set_bool_value(false);
  EXPECT_EQ(ClassifyNode(node), OpClass::kBatchNormEval);
  training->set_bool_value(true);
  EXPECT_EQ(ClassifyNode(node), OpClass::kOpaque);
}

TEST(IsDepthwiseConv2dTest, GroupsEqualOutputChannelsOfOneInputChannelEach) {
  forge::v1::Node node;
  node.set_op("aten::conv2d");
  node.set_overload("default");
  auto* groups = node.add_arguments();
  groups->set_name("groups");
  groups->set_int_value(96);
  EXPECT_TRUE(IsDepthwiseConv2d(node, {96, 1, 7, 7}));
  EXPECT_FALSE(IsDepthwiseConv2d(node, {192, 1, 7, 7}));  // channel multiplier 2
  EXPECT_FALSE(IsDepthwiseConv2d(node, {96, 2, 3, 3}));   // grouped, not depthwise
  EXPECT_FALSE(IsDepthwiseConv2d(node, {96, 1, 3}));
  groups->set_int_value(1);
  EXPECT_FALSE(IsDepthwiseConv2d(node, {1, 1, 3, 3}));  // a single-channel dense conv
  node.mutable_arguments()->Clear();
  EXPECT_FALSE(IsDepthwiseConv2d(node, {96, 1, 7, 7}));  // groups at its default, 1
}

TEST(FlopsPerElementTest, FollowsTheTable) {
  forge::v1::Node node;
  node.set_op("aten::softmax");
  EXPECT_EQ(FlopsPerElement(node), 5);
  node.set_op("aten::mul");
  EXPECT_EQ(FlopsPerElement(node), 1);
  node.set_op("aten::linear");
  EXPECT_EQ(FlopsPerElement(node), 0);
}

TEST(TensorArgumentNamesTest, ListsEveryTensorArgumentInOrder) {
  forge::v1::Node node;
  node.add_arguments()->set_tensor("a");
  node.add_arguments()->mutable_optional_tensor();  // None
  node.add_arguments()->mutable_optional_tensor()->set_value_name("b");
  auto* list = node.add_arguments()->mutable_tensors();
  list->add_value_names("c");
  list->add_value_names("a");
  node.add_arguments()->set_int_value(3);
  EXPECT_THAT(TensorArgumentNames(node), ElementsAre("a", "b", "c", "a"));
}

}  // namespace
}  // namespace forge::graph
