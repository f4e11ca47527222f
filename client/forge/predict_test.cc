#include "client/forge/predict.h"

#include <cstdlib>
#include <set>
#include <string>

#include "absl/strings/str_cat.h"
#include "client/forge/model.h"
#include "common/version/version.h"
#include "gmock/gmock.h"
#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/json_util.h"
#include "gtest/gtest.h"

namespace forge::client {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

absl::StatusOr<forge::v1::Graph> TestModel(const std::string& name) {
  const char* directory = std::getenv("FORGE_TEST_MODELS");
  EXPECT_NE(directory, nullptr) << "FORGE_TEST_MODELS is not set; run through ctest";
  return ReadModelFile(
      absl::StrCat(directory == nullptr ? "" : directory, "/", name, "/graph.pb"));
}

absl::StatusOr<forge::v1::Graph> LlamaBlock() { return TestModel("llama_block"); }

TEST(PredictTest, LlamaBlockPredictsGemmReductionAndPointwiseRows) {
  absl::StatusOr<forge::v1::Graph> graph = LlamaBlock();
  ASSERT_TRUE(graph.ok()) << graph.status();
  absl::StatusOr<std::string> json = PredictGraph(*graph, PredictOptions{"h200", true});
  ASSERT_TRUE(json.ok()) << json.status();
  google::protobuf::Struct parsed;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(*json, &parsed).ok()) << *json;
  EXPECT_EQ(parsed.fields().at("version").string_value(), FullVersion());
  EXPECT_EQ(parsed.fields().at("gpu").string_value(), "H200");
  EXPECT_EQ(parsed.fields().at("kind").string_value(), "predicted");
  std::set<std::string> predicted_families;
  for (const auto& task : parsed.fields().at("tasks").list_value().values()) {
    const auto& fields = task.struct_value().fields();
    for (const auto& candidate : fields.at("candidates").list_value().values()) {
      const auto& candidate_fields = candidate.struct_value().fields();
      if (candidate_fields.at("kind").string_value() != "predicted") continue;
      EXPECT_GT(candidate_fields.at("predicted_us").number_value(), 0) << *json;
      predicted_families.insert(fields.at("family").string_value());
    }
  }
  EXPECT_TRUE(predicted_families.count("GEMM")) << *json;
  EXPECT_TRUE(predicted_families.count("REDUCTION")) << *json;
  EXPECT_TRUE(predicted_families.count("POINTWISE")) << *json;
  EXPECT_GT(parsed.fields().at("totals").struct_value().fields().at("best_predicted_us")
                .number_value(),
            0);
}

TEST(PredictTest, TableSaysPredictedInTheTitleAndEveryRow) {
  absl::StatusOr<forge::v1::Graph> graph = LlamaBlock();
  ASSERT_TRUE(graph.ok()) << graph.status();
  absl::StatusOr<std::string> table = PredictGraph(*graph, PredictOptions{});
  ASSERT_TRUE(table.ok()) << table.status();
  EXPECT_THAT(*table, HasSubstr("PREDICTED kernel times on H200 (no GPU was used"));
  // Its attention is one task with the SDPA backends' library calls as candidates.
  EXPECT_THAT(*table, HasSubstr("ATTENTION  PREDICTED"));
  EXPECT_THAT(*table, HasSubstr("GEMM       PREDICTED"));
  EXPECT_THAT(*table, HasSubstr("REDUCTION  PREDICTED"));
  EXPECT_THAT(*table, HasSubstr("POINTWISE  PREDICTED"));
  EXPECT_THAT(*table, HasSubstr("PREDICTED total on H200"));
  // Its attention is float32: the flash and cuDNN backends refuse it, which is a template that
  // does not serve the task (declined, with PyTorch's reason), not a failure.
  EXPECT_THAT(*table, HasSubstr("declined   sdpa_library/sdpa_flash"));
  EXPECT_THAT(*table, Not(HasSubstr("FAILED: generate")));
}

// A task no family generates (batch norm in training mode: conv_bn_relu's batch norm as a
// training-mode export spells it, which updates its running statistics) is said to be ATen's,
// not given a predicted time.
TEST(PredictTest, AtenOnlyTasksAreNotPredicted) {
  absl::StatusOr<forge::v1::Graph> graph = TestModel("conv_bn_relu");
  ASSERT_TRUE(graph.ok()) << graph.status();
  int batch_norms = 0;
  for (forge::v1::Node& node : *graph->mutable_nodes()) {
    if (node.op() != "aten::_native_batch_norm_legit_no_training") continue;
    node.set_op("aten::_native_batch_norm_legit");
    node.clear_schema();
    forge::v1::Argument* training = node.add_arguments();
    training->set_name("training");
    training->set_bool_value(true);
    ++batch_norms;
  }
  ASSERT_EQ(batch_norms, 1);
  absl::StatusOr<std::string> table = PredictGraph(*graph, PredictOptions{});
  ASSERT_TRUE(table.ok()) << table.status();
  EXPECT_THAT(*table, HasSubstr("ATen (not predicted)"));
}

TEST(PredictTest, UnknownGpuIsNotFound) {
  absl::StatusOr<forge::v1::Graph> graph = LlamaBlock();
  ASSERT_TRUE(graph.ok()) << graph.status();
  absl::StatusOr<std::string> table = PredictGraph(*graph, PredictOptions{"no-such-gpu", false});
  EXPECT_EQ(table.status().code(), absl::StatusCode::kNotFound) << table.status();
}

}  // namespace
}  // namespace forge::client
