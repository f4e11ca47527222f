// Intake validation over a real exported model (llama_block): the model passes, and each bad
// input, made by changing one field of it, is refused with a message that names the field.
#include "server/intake.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace forge::server {
namespace {

using ::forge::v1::Graph;
using ::testing::HasSubstr;

Graph LoadModel(const std::string& name) {
  const char* directory = std::getenv("FORGE_TEST_MODELS");
  std::ifstream file(std::string(directory == nullptr ? "" : directory) + "/" + name + "/graph.pb",
                     std::ios::binary);
  std::stringstream bytes;
  bytes << file.rdbuf();
  Graph graph;
  EXPECT_TRUE(graph.ParseFromString(bytes.str())) << name;
  return graph;
}

// The first parameter input with data, and its value.
forge::v1::GraphInput& FirstWeight(Graph& graph) {
  for (forge::v1::GraphInput& input : *graph.mutable_inputs()) {
    if (input.has_data()) return input;
  }
  ADD_FAILURE() << "no weight";
  return *graph.mutable_inputs(0);
}

forge::v1::Value& ValueNamed(Graph& graph, const std::string& name) {
  for (forge::v1::Value& value : *graph.mutable_values()) {
    if (value.name() == name) return value;
  }
  ADD_FAILURE() << name;
  return *graph.mutable_values(0);
}

class IntakeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    model_ = LoadModel("llama_block");
    ASSERT_GT(model_.nodes_size(), 0);
  }

  // The model with `change` applied, as ValidateGraph sees it.
  absl::Status Changed(const std::function<void(Graph&)>& change, const IntakeLimits& limits = {}) {
    Graph graph = model_;
    change(graph);
    return ValidateGraph(graph, limits);
  }

  Graph model_;
};

TEST_F(IntakeTest, AcceptsEveryTestModel) {
  int models = 0;
  for (const auto& entry : std::filesystem::directory_iterator(std::getenv("FORGE_TEST_MODELS"))) {
    if (!std::filesystem::exists(entry.path() / "graph.pb")) continue;
    ++models;
    const absl::Status status = ValidateGraph(LoadModel(entry.path().filename().string()), {});
    EXPECT_TRUE(status.ok()) << entry.path() << ": " << status;
  }
  EXPECT_GE(models, 10);
}

TEST_F(IntakeTest, RefusesBadShapesNamingTheValue) {
  absl::Status negative =
      Changed([](Graph& g) { g.mutable_values(0)->mutable_tensor()->set_shape(0, -3); });
  EXPECT_EQ(negative.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(negative.message(), HasSubstr(absl::StrCat("value '", model_.values(0).name(),
                                                         "': tensor.shape[0] is -3")));
  // [2^32, 2^32] overflows int64 elements (compiler/graph/cost.cc used to wrap around);
  // [2^31, 2^31] overflows its bytes.
  auto shaped = [&](std::vector<int64_t> shape, std::vector<int64_t> strides) {
    return Changed([&](Graph& g) {
      forge::v1::TensorSpec* t = g.mutable_values(0)->mutable_tensor();
      t->clear_shape();
      t->clear_strides();
      for (int64_t size : shape) t->add_shape(size);
      for (int64_t stride : strides) t->add_strides(stride);
    });
  };
  EXPECT_THAT(shaped({int64_t{1} << 32, int64_t{1} << 32}, {}).message(),
              HasSubstr("the element count of tensor.shape overflows int64"));
  EXPECT_THAT(shaped({int64_t{1} << 31, int64_t{1} << 31}, {}).message(),
              HasSubstr("exceed the limit"));
  EXPECT_THAT(shaped({8}, {int64_t{1} << 40}).message(), HasSubstr("bytes per tensor"));
  EXPECT_THAT(shaped({8, 8}, {int64_t{1} << 62, 1}).message(),
              HasSubstr("tensor.strides overflow int64"));
  EXPECT_THAT(shaped({1'000'000'000'000}, {}).message(),
              HasSubstr("exceed the limit of 68719476736 bytes per tensor"));
  EXPECT_THAT(
      Changed([](Graph& g) { g.mutable_values(0)->mutable_tensor()->add_strides(1); }).message(),
      HasSubstr("tensor.strides for"));
  EXPECT_THAT(Changed([](Graph& g) {
                g.mutable_values(0)->mutable_tensor()->set_strides(0, -1);
              }).message(),
              HasSubstr("tensor.strides[0] is -1"));
}

TEST_F(IntakeTest, RefusesUnknownDtypesAndLayouts) {
  EXPECT_THAT(
      Changed([](Graph& g) {
        g.mutable_values(1)->mutable_tensor()->set_dtype(static_cast<forge::v1::DType>(977));
      }).message(),
      HasSubstr(absl::StrCat("value '", model_.values(1).name(),
                             "': tensor.dtype 977 is not a dtype Forge knows")));
  EXPECT_THAT(Changed([](Graph& g) {
                g.mutable_values(1)->mutable_tensor()->set_dtype(forge::v1::DTYPE_UNSPECIFIED);
              }).message(),
              HasSubstr("tensor.dtype 0"));
  EXPECT_THAT(
      Changed([](Graph& g) {
        g.mutable_values(1)->mutable_tensor()->set_layout(static_cast<forge::v1::Layout>(99));
      }).message(),
      HasSubstr("tensor.layout 99"));
}

TEST_F(IntakeTest, UnknownOpsPassButGarbageSchemasAreRefused) {
  // An op Forge has no generator for runs as an ATen task.
  EXPECT_TRUE(Changed([](Graph& g) {
                forge::v1::Node* node = g.mutable_nodes(0);
                node->set_op("mylib::frobnicate");
                node->set_overload("default");
                node->set_schema("mylib::frobnicate(Tensor self, int[] dims=[]) -> Tensor");
              }).ok());
  const std::string name = model_.nodes(0).name();
  for (const std::string schema :
       {"garbage", "aten::mul.Tensor(Tensor self, Tensor other", "aten::mul.Tensor(Tensor self])",
        "aten::mul.Tensor(Tensor self, Tensor other)", "::(Tensor self) -> Tensor"}) {
    absl::Status status = Changed([&](Graph& g) { g.mutable_nodes(0)->set_schema(schema); });
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << schema;
    EXPECT_THAT(status.message(), HasSubstr(absl::StrCat("node '", name, "': schema \"", schema)));
  }
  EXPECT_THAT(Changed([](Graph& g) {
                g.mutable_nodes(0)->set_schema("aten::other(Tensor self) -> Tensor");
              }).message(),
              HasSubstr("names aten::other, not the node's op"));
  EXPECT_THAT(Changed([](Graph& g) { g.mutable_nodes(0)->set_op("relu"); }).message(),
              HasSubstr("op \"relu\" is not \"namespace::name\""));
}

TEST_F(IntakeTest, WeightsMustMatchTheirTensorsAndTheLimits) {
  Graph graph = model_;
  const std::string weight = FirstWeight(graph).value_name();
  absl::Status lied =
      Changed([](Graph& g) { FirstWeight(g).mutable_data()->set_size_bytes(50 << 20); });
  EXPECT_THAT(lied.message(), HasSubstr(absl::StrCat("input '", weight,
                                                     "': data.size_bytes is 52428800 but the "
                                                     "declared tensor holds")));
  // Declaring the tensor bigger to match does not help past the per-job limit.
  EXPECT_THAT(Changed([](Graph&) {}, IntakeLimits{.max_weight_bytes = 1024}).message(),
              HasSubstr("exceeds the limit of 1024 bytes per job"));
  EXPECT_THAT(Changed([](Graph&) {}, IntakeLimits{.max_nodes = 3}).message(),
              HasSubstr("nodes; the limit is 3"));
  EXPECT_THAT(Changed([](Graph&) {}, IntakeLimits{.max_graph_bytes = 1000}).message(),
              HasSubstr("bytes; the limit is 1000"));
  ASSERT_GT(ValueNamed(graph, weight).tensor().shape_size(), 0);
}

TEST(JobOptionsTest, BudgetsAndPriorityAreCapped) {
  forge::v1::JobOptions options;
  EXPECT_TRUE(ValidateJobOptions(options, {}).ok());
  options.set_priority(101);
  EXPECT_THAT(ValidateJobOptions(options, {}).message(), HasSubstr("options.priority is 101"));
  options.set_priority(-5);
  EXPECT_TRUE(ValidateJobOptions(options, {}).ok());
  options.mutable_budget()->set_max_candidate_trials(2'000'000);
  EXPECT_THAT(ValidateJobOptions(options, {}).message(),
              HasSubstr("options.budget.max_candidate_trials is 2000000; the limit is 1000000"));
  options.mutable_budget()->set_max_candidate_trials(-1);
  EXPECT_THAT(ValidateJobOptions(options, {}).message(),
              HasSubstr("options.budget must not be negative"));
  options.mutable_budget()->set_max_candidate_trials(10);
  options.mutable_budget()->set_max_wall_seconds(int64_t{1} << 40);
  EXPECT_THAT(ValidateJobOptions(options, {}).message(),
              HasSubstr("options.budget.max_wall_seconds"));
}

}  // namespace
}  // namespace forge::server
