#include "client/forge/predict.h"

#include <cstdlib>
#include <memory>
#include <set>
#include <string>

#include "absl/strings/str_cat.h"
#include "client/forge/model.h"
#include "common/arch/arch.h"
#include "common/version/version.h"
#include "compiler/cost/learned/held_out.h"
#include "compiler/cost/learned/testing/synthetic_dataset.h"
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

// Version 3 of a learned model of pointwise tasks (the synthetic dataset: enough rows of
// POINTWISE only), with its held-out evaluation or without. The default training options: with
// 40 rounds the held-out evaluation measures the model worse than the analytic one on POINTWISE,
// and the predictor rightly serves the analytic model.
std::unique_ptr<cost::CostPredictor> PointwiseModel(bool with_held_out) {
  const std::vector<cost::TrainingRow> rows =
      cost::testing::RowsOf(*cost::testing::SyntheticPointwise(*FindGpu("H200"), 10));
  auto learned = std::make_unique<cost::CostPredictor>();
  learned->SetModel(cost::VersionedModel{
      .version = 3,
      .model = *cost::LearnedModel::Train(rows, {}),
      .held_out = with_held_out ? **cost::EvaluateHeldOut(rows, {})
                                : forge::v1::CostModelEvaluation()});
  return learned;
}

// With a learned model of pointwise tasks (the synthetic dataset: enough rows of POINTWISE only),
// pointwise rows are the learned model's and say its version, the others stay analytic; the
// report ends with the model and its held-out error per family; --explain says what drove each.
TEST(PredictTest, LearnedModelRowsSayTheirVersionAndTheReportItsHeldOutError) {
  absl::StatusOr<forge::v1::Graph> graph = LlamaBlock();
  ASSERT_TRUE(graph.ok()) << graph.status();
  const std::unique_ptr<cost::CostPredictor> learned = PointwiseModel(/*with_held_out=*/true);
  PredictOptions options{.gpu = "h200",
                         .json = false,
                         .explain = true,
                         .learned = learned.get(),
                         .learned_origin = "coordinator test:1"};
  absl::StatusOr<std::string> table = PredictGraph(*graph, options);
  ASSERT_TRUE(table.ok()) << table.status();
  EXPECT_THAT(*table, ::testing::ContainsRegex("POINTWISE  PREDICTED [^\n]* learned v3\n"));
  EXPECT_THAT(*table, ::testing::ContainsRegex("GEMM       PREDICTED [^\n]* analytic\n"));
  EXPECT_THAT(*table, HasSubstr("why: learned v3: analytic "));
  EXPECT_THAT(*table, HasSubstr("why: analytic model: "));
  EXPECT_THAT(*table, HasSubstr("Performance model: learned v3 (coordinator test:1"));
  EXPECT_THAT(*table, HasSubstr("Measured error on results held back from training (held out by "
                                "task"));
  EXPECT_THAT(*table, ::testing::ContainsRegex("\n  POINTWISE +[0-9]+ +2  learned "));

  options.json = true;
  absl::StatusOr<std::string> json = PredictGraph(*graph, options);
  ASSERT_TRUE(json.ok()) << json.status();
  google::protobuf::Struct parsed;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(*json, &parsed).ok()) << *json;
  const auto& model = parsed.fields().at("model").struct_value().fields();
  EXPECT_EQ(model.at("source").string_value(), "learned");
  EXPECT_EQ(model.at("version").number_value(), 3);
  EXPECT_EQ(model.at("held_out").struct_value().fields().at("errors").list_value().values_size(),
            2);
  std::set<std::string> sources;
  for (const auto& task : parsed.fields().at("tasks").list_value().values()) {
    for (const auto& candidate :
         task.struct_value().fields().at("candidates").list_value().values()) {
      const auto& fields = candidate.struct_value().fields();
      if (fields.contains("predicted_by")) sources.insert(fields.at("predicted_by").string_value());
    }
  }
  EXPECT_EQ(sources, (std::set<std::string>{"analytic", "learned v3"}));
}

// The H200's learned model carried to an A100: its rows say from where and by which ceiling, the
// others are the A100's analytic predictions, and the report says there is no measured error.
TEST(PredictTest, TransferredRowsSayFromWhereAndHaveNoMeasuredError) {
  absl::StatusOr<forge::v1::Graph> graph = LlamaBlock();
  ASSERT_TRUE(graph.ok()) << graph.status();
  const std::unique_ptr<cost::CostPredictor> learned = PointwiseModel(/*with_held_out=*/false);
  PredictOptions options{.gpu = "a100",
                         .json = false,
                         .explain = true,
                         .learned = learned.get(),
                         .learned_origin = "coordinator test:1",
                         .transfer_from = "h200"};
  absl::StatusOr<std::string> table = PredictGraph(*graph, options);
  ASSERT_TRUE(table.ok()) << table.status();
  EXPECT_THAT(*table, HasSubstr("PREDICTED kernel times on A100"));
  EXPECT_THAT(*table, ::testing::ContainsRegex("POINTWISE  PREDICTED [^\n]* learned v3 on H200 "
                                               "x[0-9.]+ \\((DRAM|launch)\\)\n"));
  EXPECT_THAT(*table, ::testing::ContainsRegex("GEMM       PREDICTED [^\n]* analytic\n"));
  EXPECT_THAT(*table, HasSubstr("why: transferred from H200 by the ratio of the arch table's"));
  EXPECT_THAT(*table, HasSubstr("TRANSFERRED: the learned rows were predicted on H200"));
  EXPECT_THAT(*table, HasSubstr("Expected error on this GPU: no measured error"));
}

TEST(PredictTest, WithoutALearnedModelTheReportSaysAnalyticWithNoMeasuredError) {
  absl::StatusOr<forge::v1::Graph> graph = LlamaBlock();
  ASSERT_TRUE(graph.ok()) << graph.status();
  absl::StatusOr<std::string> table = PredictGraph(*graph, PredictOptions{});
  ASSERT_TRUE(table.ok()) << table.status();
  EXPECT_THAT(*table, HasSubstr("Performance model: analytic"));
  EXPECT_THAT(*table, HasSubstr("no measured error"));
  EXPECT_THAT(*table, Not(HasSubstr("learned v")));
}

TEST(PredictTest, UnknownGpuIsNotFound) {
  absl::StatusOr<forge::v1::Graph> graph = LlamaBlock();
  ASSERT_TRUE(graph.ok()) << graph.status();
  absl::StatusOr<std::string> table = PredictGraph(*graph, PredictOptions{"no-such-gpu", false});
  EXPECT_EQ(table.status().code(), absl::StatusCode::kNotFound) << table.status();
}

}  // namespace
}  // namespace forge::client
