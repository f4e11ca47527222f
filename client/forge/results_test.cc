// The result bundle from a GetResultsResponse built here over the exported llama_block model's
// real partition: winners of every implementation (generated kernel, cuBLASLt call, ATen calls),
// MEASURED and PREDICTED times, and tasks without a winner.
#include "client/forge/results.h"

#include <sys/wait.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "client/forge/model.h"
#include "common/version/version.h"
#include "compiler/codegen/cudnn_conv/cudnn_conv.h"
#include "compiler/codegen/family.h"
#include "compiler/codegen/sdpa_library/sdpa_library.h"
#include "compiler/graph/partition.h"
#include "compiler/search/candidate.h"
#include "compiler/graph/task_digest.h"
#include "gmock/gmock.h"
#include "google/protobuf/struct.pb.h"
#include "google/protobuf/text_format.h"
#include "google/protobuf/util/json_util.h"
#include "gtest/gtest.h"
#include "tests/support/subprocess.h"
#include "worker/compile/nvcc.h"

namespace forge::client {
namespace {

namespace fs = std::filesystem;

using ::google::protobuf::Struct;
using ::google::protobuf::Value;
using ::testing::HasSubstr;
using ::testing::Not;

std::string ModelPath(const std::string& name) {
  const char* directory = std::getenv("FORGE_TEST_MODELS");
  EXPECT_NE(directory, nullptr) << "FORGE_TEST_MODELS is not set; run through ctest";
  return absl::StrCat(directory == nullptr ? "" : directory, "/", name);
}

std::string ReadFile(const fs::path& path) {
  std::ifstream file(path, std::ios::binary);
  std::ostringstream bytes;
  bytes << file.rdbuf();
  return bytes.str();
}

Struct ParseJson(const std::string& json) {
  Struct parsed;
  const auto status = google::protobuf::util::JsonStringToMessage(json, &parsed);
  EXPECT_TRUE(status.ok()) << status.ToString() << "\n" << json;
  return parsed;
}

const codegen::KernelFamily* FamilyNamed(const forge::v1::KernelTask& task,
                                         absl::string_view name) {
  for (const codegen::KernelFamily* family : codegen::ApplicableFamilies(task)) {
    if (family->name() == name) return family;
  }
  return nullptr;
}

// A winner at the default point of `family`'s template `template_name` (default: the first),
// timed at `median_us` against an eager time twice as long.
void SetWinner(forge::v1::TaskResults& results, const codegen::KernelFamily& family,
               double median_us, forge::v1::MeasurementKind kind,
               const std::string& template_name = "") {
  absl::StatusOr<std::vector<codegen::TemplateSpace>> spaces = family.ScheduleSpace(results.task());
  ASSERT_TRUE(spaces.ok()) << spaces.status();
  const codegen::TemplateSpace* space = &spaces->front();
  for (const codegen::TemplateSpace& each : *spaces) {
    if (each.template_name == template_name) space = &each;
  }
  absl::StatusOr<forge::v1::Candidate> candidate = search::MakeCandidate(
      results.task(), family, codegen::DefaultPoint(*space), "sm_90");
  ASSERT_TRUE(candidate.ok()) << candidate.status();
  *results.mutable_best_candidate() = *candidate;
  forge::v1::Measurement& best = *results.mutable_best();
  best.set_candidate_digest(candidate->digest());
  best.set_kind(kind);
  best.set_median_us(median_us);
  best.set_eager_median_us(2 * median_us);
  best.set_roofline_floor_us(median_us / 4);
  best.set_percent_of_floor(25);
  best.set_device_name(kind == forge::v1::MEASUREMENT_KIND_PREDICTED ? "H200" : "NVIDIA H200");
  best.mutable_judge()->set_passed(true);
  best.mutable_judge()->set_draws(3);
  best.mutable_judge()->set_max_abs_error(1e-6);
  results.set_candidates_measured(5);
  results.set_candidates_failed(1);
  forge::v1::FailureCount* failure = results.add_failures_by_stage();
  failure->set_stage(forge::v1::FAILURE_STAGE_COMPILE);
  failure->set_count(1);
}

class ResultsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<forge::v1::Graph> graph = ReadModelFile(ModelPath("llama_block"));
    ASSERT_TRUE(graph.ok()) << graph.status();
    model_ = *graph;
    absl::StatusOr<graph::PartitionResult> partition = graph::Partition(model_);
    ASSERT_TRUE(partition.ok()) << partition.status();
    partition_ = *partition;

    forge::v1::Job& job = *results_.mutable_job();
    job.set_id("job-7");
    job.set_state(forge::v1::JOB_STATE_DONE);
    job.set_model_digest(graph::ModelDigest(model_));
    job.mutable_options()->set_target_arch("sm_90");
    (*job.mutable_options()->mutable_labels())["model"] = "llama_block";
    for (const forge::v1::KernelTask& task : partition_.tasks) {
      forge::v1::TaskResults& entry = *results_.add_tasks();
      *entry.mutable_task() = task;
      entry.set_stop_reason(forge::v1::TASK_STOP_REASON_BUDGET_EXHAUSTED);
      const std::string& digest = task.digest();
      if (task.family() == forge::v1::KERNEL_FAMILY_REDUCTION && reduction_.empty()) {
        reduction_ = digest;
        SetWinner(entry, *FamilyNamed(task, "reduction"), 3.0,
                  forge::v1::MEASUREMENT_KIND_MEASURED);
        // The same candidate predicted too, as --all returns it.
        forge::v1::Measurement predicted = entry.best();
        predicted.set_kind(forge::v1::MEASUREMENT_KIND_PREDICTED);
        predicted.set_median_us(2.5);
        *entry.add_results()->mutable_measurement() = predicted;
        *entry.add_results()->mutable_measurement() = entry.best();
      } else if (task.family() == forge::v1::KERNEL_FAMILY_GEMM && library_.empty() &&
                 FamilyNamed(task, "gemm_library") != nullptr) {
        library_ = digest;
        SetWinner(entry, *FamilyNamed(task, "gemm_library"), 8.0,
                  forge::v1::MEASUREMENT_KIND_PREDICTED);
      } else if (task.family() == forge::v1::KERNEL_FAMILY_POINTWISE && pointwise_.empty()) {
        pointwise_ = digest;
        SetWinner(entry, *FamilyNamed(task, "pointwise"), 1.5,
                  forge::v1::MEASUREMENT_KIND_PREDICTED);
      } else if (task.family() == forge::v1::KERNEL_FAMILY_ATEN && aten_.empty()) {
        aten_ = digest;
        SetWinner(entry, *FamilyNamed(task, "aten"), 4.0, forge::v1::MEASUREMENT_KIND_MEASURED);
      } else if (no_winner_.empty()) {
        no_winner_ = digest;
      }
    }
    ASSERT_FALSE(reduction_.empty() || library_.empty() || pointwise_.empty() || aten_.empty() ||
                 no_winner_.empty());
  }

  const forge::v1::TaskResults& Task(const std::string& digest) const {
    for (const forge::v1::TaskResults& task : results_.tasks()) {
      if (task.task().digest() == digest) return task;
    }
    ADD_FAILURE() << "no task " << digest;
    return results_.tasks(0);
  }

  // The source the task's family generates for its winner, straight from the family.
  std::string GeneratedSource(const std::string& digest) const {
    const forge::v1::TaskResults& task = Task(digest);
    const codegen::KernelFamily* family = nullptr;
    for (const codegen::KernelFamily* candidate : codegen::ApplicableFamilies(task.task())) {
      if (candidate->generator_version() == task.best_candidate().generator_version()) {
        family = candidate;
      }
    }
    EXPECT_NE(family, nullptr);
    if (family == nullptr) return "";
    absl::StatusOr<codegen::GeneratedKernel> kernel =
        family->Generate(task.task(), search::PointOf(task.best_candidate()));
    EXPECT_TRUE(kernel.ok()) << kernel.status();
    return kernel.ok() ? kernel->source : "";
  }

  forge::v1::Graph model_;
  graph::PartitionResult partition_;
  forge::v1::GetResultsResponse results_;
  std::string reduction_, library_, pointwise_, aten_, no_winner_;
  testing::TempDir directory_;
};

TEST_F(ResultsTest, WritesKernelsCandidatesPlanReportsAndPlots) {
  absl::StatusOr<std::vector<std::string>> written =
      WriteResultsBundle(results_, &model_, ResultsOptions{}, directory_.path());
  ASSERT_TRUE(written.ok()) << written.status();
  const fs::path root(directory_.path());
  for (const char* file :
       {"report.md", "report.json", "plan.json", "speedup.png", "roofline.png"}) {
    EXPECT_TRUE(fs::is_regular_file(root / file)) << file;
    EXPECT_THAT(*written, ::testing::Contains(file));
  }

  // Generated kernels are written byte for byte as their family generates them; the ATen winner
  // and the task without one have no source.
  for (const std::string& digest : {reduction_, pointwise_, library_}) {
    const fs::path kernel = root / "tasks" / digest.substr(0, 12) / "kernel.cu";
    ASSERT_TRUE(fs::is_regular_file(kernel)) << kernel;
    EXPECT_EQ(ReadFile(kernel), GeneratedSource(digest)) << kernel;
  }
  EXPECT_FALSE(fs::exists(root / "tasks" / aten_.substr(0, 12) / "kernel.cu"));
  EXPECT_TRUE(fs::exists(root / "tasks" / aten_.substr(0, 12) / "candidate.json"));
  EXPECT_FALSE(fs::exists(root / "tasks" / no_winner_.substr(0, 12)));

  const Struct candidate =
      ParseJson(ReadFile(root / "tasks" / reduction_.substr(0, 12) / "candidate.json"));
  const auto& fields = candidate.fields();
  EXPECT_EQ(fields.at("kind").string_value(), "MEASURED");
  EXPECT_EQ(fields.at("implementation").string_value(), "kernel");
  EXPECT_EQ(fields.at("candidate").struct_value().fields().at("digest").string_value(),
            Task(reduction_).best_candidate().digest());
  EXPECT_GT(
      fields.at("launch").struct_value().fields().at("block").list_value().values(0).number_value(),
      0);
  EXPECT_EQ(fields.at("schedule").struct_value().fields().at("template").string_value(),
            Task(reduction_).best_candidate().template_name());
  EXPECT_EQ(fields.at("judge").struct_value().fields().at("draws").number_value(), 3);
  EXPECT_EQ(fields.at("measurement").struct_value().fields().at("median_us").number_value(), 3);
  const Struct library =
      ParseJson(ReadFile(root / "tasks" / library_.substr(0, 12) / "candidate.json"));
  EXPECT_EQ(library.fields().at("kind").string_value(), "PREDICTED");
  EXPECT_EQ(library.fields().at("implementation").string_value(), "library");
  EXPECT_THAT(library.fields().at("library_call").string_value(), Not(::testing::IsEmpty()));
  // A predicted time has no cuBLASLt algorithm behind it.
  EXPECT_FALSE(library.fields().contains("library_algorithm"));

  // The plan: one step per task instance in the partition's order, over named buffers.
  const Struct plan = ParseJson(ReadFile(root / "plan.json"));
  const auto& steps = plan.fields().at("steps").list_value().values();
  ASSERT_EQ(steps.size(), partition_.instances.size());
  std::map<std::string, std::string> implementation_of;
  for (int i = 0; i < steps.size(); ++i) {
    const auto& step = steps[i].struct_value().fields();
    EXPECT_EQ(step.at("task").string_value(), partition_.instances[i].task_digest);
    EXPECT_EQ(step.at("outputs").list_value().values(0).string_value(),
              partition_.instances[i].output_values[0]);
    implementation_of[step.at("task").string_value()] = step.at("implementation").string_value();
    if (step.at("task").string_value() == reduction_) {
      EXPECT_EQ(step.at("source").string_value(),
                absl::StrCat("tasks/", reduction_.substr(0, 12), "/kernel.cu"));
      EXPECT_TRUE(step.contains("launch"));
    }
    if (step.at("task").string_value() == no_winner_) {
      EXPECT_GT(step.at("calls").list_value().values_size(), 0);
    }
  }
  EXPECT_EQ(implementation_of[reduction_], "kernel");
  EXPECT_EQ(implementation_of[pointwise_], "kernel");
  EXPECT_EQ(implementation_of[library_], "library");
  EXPECT_EQ(implementation_of[aten_], "aten");
  EXPECT_EQ(implementation_of[no_winner_], "aten");
  bool saw_parameter = false;
  for (const Value& buffer : plan.fields().at("buffers").list_value().values()) {
    const auto& b = buffer.struct_value().fields();
    if (b.at("role").string_value() == "parameter") {
      saw_parameter = true;
      EXPECT_EQ(b.at("sha256").string_value().size(), 64u);
    }
  }
  EXPECT_TRUE(saw_parameter);

  // The reports label PREDICTED times and compare the winner predicted and measured.
  const std::string markdown = ReadFile(root / "report.md");
  EXPECT_THAT(markdown, HasSubstr("PREDICTED"));
  EXPECT_THAT(markdown, HasSubstr("MIXED (PREDICTED and MEASURED)"));
  EXPECT_THAT(markdown, HasSubstr("## Predicted vs measured"));
  EXPECT_THAT(markdown, HasSubstr(absl::StrCat("| `", reduction_.substr(0, 12),
                                               "` | 2.500 | 3.000 | 0.83 |")));
  EXPECT_THAT(markdown, HasSubstr("ATen calls (no candidate passed)"));
  // The partitioner's reason for each task it left to ATen (here views of the RoPE tables).
  EXPECT_THAT(markdown, HasSubstr("## What runs through ATen, and why"));
  EXPECT_THAT(markdown, HasSubstr(": a view read by several tasks"));
  const Struct report = ParseJson(ReadFile(root / "report.json"));
  EXPECT_EQ(report.fields().at("version").string_value(), FullVersion());
  const auto& end_to_end = report.fields().at("end_to_end").struct_value().fields();
  EXPECT_EQ(end_to_end.at("kind").string_value(), "MIXED (PREDICTED and MEASURED)");
  EXPECT_EQ(end_to_end.at("tasks_predicted").number_value(), 2);
  EXPECT_EQ(end_to_end.at("tasks_timed").number_value(), 4);
  EXPECT_DOUBLE_EQ(end_to_end.at("speedup_vs_eager").number_value(), 2.0);
  for (const Value& task : report.fields().at("tasks").list_value().values()) {
    const auto& t = task.struct_value().fields();
    if (t.at("digest").string_value() == library_) {
      EXPECT_EQ(t.at("winner").struct_value().fields().at("kind").string_value(), "PREDICTED");
    }
    if (t.at("digest").string_value() == no_winner_) {
      EXPECT_EQ(t.at("winner").kind_case(), Value::kNullValue);
    }
  }

  for (const char* plot : {"speedup.png", "roofline.png"}) {
    EXPECT_EQ(ReadFile(root / plot).substr(0, 8), std::string("\x89PNG\r\n\x1a\n", 8)) << plot;
  }
}

TEST_F(ResultsTest, AMeasuredLibraryWinnerCarriesItsCublasLtAlgorithm) {
  const std::string algorithm =
      "id 21 tile 18 stages 9 splitk 1 reduction 0 swizzle 0 custom 0 inner 0 cluster 0";
  for (forge::v1::TaskResults& task : *results_.mutable_tasks()) {
    if (task.task().digest() != library_) continue;
    task.mutable_best()->set_kind(forge::v1::MEASUREMENT_KIND_MEASURED);
    task.mutable_best()->set_library_algorithm(algorithm);
  }
  absl::StatusOr<std::vector<std::string>> written =
      WriteResultsBundle(results_, &model_, ResultsOptions{}, directory_.path());
  ASSERT_TRUE(written.ok()) << written.status();
  const fs::path root(directory_.path());
  const Struct candidate =
      ParseJson(ReadFile(root / "tasks" / library_.substr(0, 12) / "candidate.json"));
  EXPECT_EQ(candidate.fields().at("library_algorithm").string_value(), algorithm);

  const Struct plan = ParseJson(ReadFile(root / "plan.json"));
  int library_steps = 0;
  for (const Value& entry : plan.fields().at("steps").list_value().values()) {
    const auto& step = entry.struct_value().fields();
    if (step.at("task").string_value() == library_) {
      ++library_steps;
      EXPECT_THAT(step.at("library_call").string_value(), Not(::testing::IsEmpty()));
      EXPECT_EQ(step.at("library_algorithm").string_value(), algorithm);
    } else {
      EXPECT_FALSE(step.contains("library_algorithm")) << step.at("task").string_value();
    }
  }
  EXPECT_GE(library_steps, 1);
}

TEST_F(ResultsTest, AnSdpaWinnerCarriesItsOneAttentionCallAndTheNodesToFallBackOn) {
  // The runtime runs the group the worker judged (one scaled_dot_product_attention call with the
  // winning backend, codegen::AtenExecutedTask) and, where that backend refuses at run time, the
  // task's own nodes ("calls").
  std::string attention;
  for (forge::v1::TaskResults& task : *results_.mutable_tasks()) {
    const codegen::KernelFamily* sdpa = FamilyNamed(task.task(), "sdpa_library");
    if (sdpa == nullptr || !attention.empty()) continue;
    attention = task.task().digest();
    SetWinner(task, *sdpa, 5.0, forge::v1::MEASUREMENT_KIND_MEASURED, "sdpa_math");
  }
  ASSERT_FALSE(attention.empty()) << "no llama_block task the sdpa_library family runs";
  absl::StatusOr<std::vector<std::string>> written =
      WriteResultsBundle(results_, &model_, ResultsOptions{}, directory_.path());
  ASSERT_TRUE(written.ok()) << written.status();
  const Struct plan = ParseJson(ReadFile(fs::path(directory_.path()) / "plan.json"));
  int found = 0;
  for (const Value& entry : plan.fields().at("steps").list_value().values()) {
    const auto& step = entry.struct_value().fields();
    if (step.at("task").string_value() != attention) {
      EXPECT_FALSE(step.contains("sdpa_group"));
      continue;
    }
    ++found;
    EXPECT_EQ(step.at("implementation").string_value(), "sdpa");
    EXPECT_EQ(step.at("sdpa_backend").string_value(), "math");
    EXPECT_EQ(step.at("calls").list_value().values_size(),
              step.at("nodes").list_value().values_size());
    EXPECT_FALSE(step.contains("source"));
    std::string group_json;
    ASSERT_TRUE(
        google::protobuf::util::MessageToJsonString(step.at("sdpa_group"), &group_json).ok());
    forge::v1::Graph group;
    ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(group_json, &group).ok())
        << group_json;
    EXPECT_EQ(group.inputs_size(), step.at("inputs").list_value().values_size());
    EXPECT_EQ(group.outputs_size(), step.at("outputs").list_value().values_size());
    int sdpa_nodes = 0;
    for (const forge::v1::Node& node : group.nodes()) {
      if (node.op() != "aten::scaled_dot_product_attention") continue;
      ++sdpa_nodes;
      EXPECT_EQ(node.attributes().at(codegen::kSdpaBackendAttribute), "math");
    }
    EXPECT_EQ(sdpa_nodes, 1);
  }
  EXPECT_GE(found, 1);
}

// conv2d(x, w, b) then relu, float32 [2, 8, 16, 16] -> [2, 16, 16, 16], as forge.export writes
// ConvRelu (python/tests/test_runtime_library_steps.py).
constexpr char kConvRelu[] = R"pb(
  values { name: "w" tensor { dtype: DTYPE_FLOAT32 shape: [ 16, 8, 3, 3 ] strides: [ 72, 9, 3, 1 ] } }
  values { name: "b" tensor { dtype: DTYPE_FLOAT32 shape: 16 strides: 1 } }
  values { name: "x" tensor { dtype: DTYPE_FLOAT32 shape: [ 2, 8, 16, 16 ] strides: [ 2048, 256, 16, 1 ] } }
  values { name: "conv2d" tensor { dtype: DTYPE_FLOAT32 shape: [ 2, 16, 16, 16 ] strides: [ 4096, 256, 16, 1 ] } }
  values { name: "relu" tensor { dtype: DTYPE_FLOAT32 shape: [ 2, 16, 16, 16 ] strides: [ 4096, 256, 16, 1 ] } }
  inputs { kind: INPUT_KIND_PARAMETER value_name: "w" target: "conv.weight" }
  inputs { kind: INPUT_KIND_PARAMETER value_name: "b" target: "conv.bias" }
  inputs { kind: INPUT_KIND_USER_INPUT value_name: "x" target: "x" }
  nodes {
    name: "conv2d" op: "aten::conv2d" overload: "default"
    schema: "aten::conv2d(Tensor input, Tensor weight, Tensor? bias=None, SymInt[2] stride=[1, 1], SymInt[2] padding=[0, 0], SymInt[2] dilation=[1, 1], SymInt groups=1) -> Tensor"
    arguments { name: "input" tensor: "x" }
    arguments { name: "weight" tensor: "w" }
    arguments { name: "bias" optional_tensor { value_name: "b" } }
    arguments { name: "stride" ints { values: [ 1, 1 ] } }
    arguments { name: "padding" ints { values: [ 1, 1 ] } }
    outputs: "conv2d"
  }
  nodes {
    name: "relu" op: "aten::relu" overload: "default" schema: "aten::relu(Tensor self) -> Tensor"
    arguments { name: "self" tensor: "conv2d" }
    outputs: "relu"
  }
  outputs { kind: OUTPUT_KIND_USER_OUTPUT value_name: "relu" }
)pb";

forge::v1::Graph ConvReluModel() {
  forge::v1::Graph model;
  EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(kConvRelu, &model));
  return model;
}

// The results of a job of ConvReluModel(): its one task, won by the cudnn_conv family's default
// point of `template_name` ("graph" or "graph_nhwc").
forge::v1::GetResultsResponse ConvReluResults(const forge::v1::Graph& model,
                                              const std::string& template_name) {
  forge::v1::GetResultsResponse results;
  absl::StatusOr<graph::PartitionResult> partition = graph::Partition(model);
  EXPECT_TRUE(partition.ok()) << partition.status();
  if (!partition.ok() || partition->tasks.size() != 1) {
    ADD_FAILURE() << "ConvRelu should make one task";
    return results;
  }
  results.mutable_job()->set_id("job-conv");
  results.mutable_job()->set_model_digest(graph::ModelDigest(model));
  results.mutable_job()->mutable_options()->set_target_arch("sm_90");
  forge::v1::TaskResults& task = *results.add_tasks();
  *task.mutable_task() = partition->tasks[0];
  const codegen::KernelFamily* cudnn = FamilyNamed(task.task(), "cudnn_conv");
  if (cudnn == nullptr) {
    ADD_FAILURE() << "the cudnn_conv family does not apply to ConvRelu's task";
    return results;
  }
  SetWinner(task, *cudnn, 20.0, forge::v1::MEASUREMENT_KIND_MEASURED, template_name);
  EXPECT_EQ(task.best_candidate().template_name(), template_name);
  return results;
}

TEST(ResultsCudnnConvTest, ACudnnConvWinnerCarriesItsCallForTheRuntimeToBuild) {
  // The runtime builds the winner's graph through the worker's header from the call: every
  // field, and the engine's name where the worker measured it; the nodes stay as the fallback.
  const forge::v1::Graph model = ConvReluModel();
  forge::v1::GetResultsResponse results = ConvReluResults(model, "graph");
  ASSERT_EQ(results.tasks_size(), 1);
  forge::v1::TaskResults& task = *results.mutable_tasks(0);
  task.mutable_best()->set_library_algorithm("eng0_k2=1");
  absl::StatusOr<std::string> plan_json = RenderPlan(results, model);
  ASSERT_TRUE(plan_json.ok()) << plan_json.status();
  const Struct plan = ParseJson(*plan_json);
  const auto& step = plan.fields().at("steps").list_value().values(0).struct_value().fields();
  EXPECT_EQ(step.at("implementation").string_value(), "cudnn_conv");
  EXPECT_EQ(step.at("calls").list_value().values_size(), 2);
  EXPECT_FALSE(step.contains("source"));
  EXPECT_FALSE(step.contains("launch"));
  const auto& call = step.at("cudnn_conv").struct_value().fields();
  EXPECT_EQ(call.at("dtype").string_value(), "float32");
  // The step's inputs are the task's: x, the weight, the bias.
  std::vector<std::string> inputs;
  for (const Value& input : step.at("inputs").list_value().values()) {
    inputs.push_back(input.string_value());
  }
  EXPECT_EQ(inputs.at(call.at("x_input").number_value()), "x");
  EXPECT_EQ(inputs.at(call.at("w_input").number_value()), "w");
  std::vector<double> dims;
  for (const Value& v : call.at("y").struct_value().fields().at("dims").list_value().values()) {
    dims.push_back(v.number_value());
  }
  EXPECT_EQ(dims, (std::vector<double>{2, 16, 16, 16}));
  std::vector<std::string> epilogue;  // each step with the input it reads
  for (const Value& v : call.at("epilogue").list_value().values()) {
    const auto& fields = v.struct_value().fields();
    const int input = static_cast<int>(fields.at("input").number_value());
    epilogue.push_back(absl::StrCat(fields.at("step").string_value(), " ",
                                    input < 0 ? "-" : inputs.at(input)));
  }
  EXPECT_THAT(epilogue, ::testing::ElementsAre("bias b", "relu -"));
  EXPECT_EQ(call.at("heuristic").number_value(), 0);
  EXPECT_EQ(call.at("engine").number_value(), 0);
  EXPECT_EQ(call.at("engine_name").string_value(), "eng0_k2=1");
}

TEST_F(ResultsTest, AHostLaunchedWinnerCarriesWhatTheRuntimeBuildsAndCallsItWith) {
  // The runtime builds the winner's translation unit with nvcc as the worker did and calls its
  // entry points: the step names its source and carries the flags, options, runtime arguments
  // and the include directory of the ABI header, which the bundle holds.
  std::string cutlass_task;
  const forge::v1::TaskResults* cutlass_results = nullptr;
  for (forge::v1::TaskResults& task : *results_.mutable_tasks()) {
    const codegen::KernelFamily* cutlass = FamilyNamed(task.task(), "cutlass_gemm");
    if (cutlass == nullptr || !cutlass_task.empty()) continue;
    cutlass_task = task.task().digest();
    SetWinner(task, *cutlass, 9.0, forge::v1::MEASUREMENT_KIND_MEASURED);
    cutlass_results = &task;
  }
  ASSERT_FALSE(cutlass_task.empty()) << "no llama_block GEMM task the CUTLASS family runs";
  absl::StatusOr<codegen::GeneratedKernel> kernel =
      search::GenerateCandidate(cutlass_results->task(), cutlass_results->best_candidate());
  ASSERT_TRUE(kernel.ok()) << kernel.status();
  ASSERT_FALSE(kernel->runtime_args.empty());
  absl::StatusOr<std::vector<std::string>> written =
      WriteResultsBundle(results_, &model_, ResultsOptions{}, directory_.path());
  ASSERT_TRUE(written.ok()) << written.status();
  const fs::path root(directory_.path());
  EXPECT_EQ(ReadFile(root / "include" / compile::kHostLaunchAbiHeaderPath),
            compile::kHostLaunchAbiHeader);
  const Struct plan = ParseJson(ReadFile(root / "plan.json"));
  const std::string arch = plan.fields().at("target_arch").string_value();
  int found = 0;
  for (const Value& entry : plan.fields().at("steps").list_value().values()) {
    const auto& step = entry.struct_value().fields();
    if (step.at("task").string_value() != cutlass_task) continue;
    ++found;
    EXPECT_EQ(step.at("implementation").string_value(), "host_launched");
    EXPECT_EQ(step.at("kernel_name").string_value(), kernel->kernel_name);
    EXPECT_EQ(ReadFile(root / step.at("source").string_value()), kernel->source);
    EXPECT_EQ(step.at("include").string_value(), "include");
    EXPECT_FALSE(step.contains("launch"));
    EXPECT_FALSE(step.contains("calls"));
    std::vector<std::string> flags, options;
    for (const Value& flag : step.at("nvcc_flags").list_value().values()) {
      flags.push_back(flag.string_value());
    }
    for (const Value& option : step.at("compile_options").list_value().values()) {
      options.push_back(option.string_value());
    }
    EXPECT_EQ(flags, compile::NvccFlags(arch));
    EXPECT_EQ(options, kernel->compile_options);
  }
  EXPECT_GE(found, 1);
  // Exact integers (scalars travel as their double's bits, beyond a JSON double's precision).
  EXPECT_THAT(ReadFile(root / "plan.json"),
              HasSubstr(absl::StrCat("\"runtime_args\": [",
                                     absl::StrJoin(kernel->runtime_args, ", "), "]")));
}

TEST_F(ResultsTest, AHostLaunchedWinnersBundleBuildsItsObjectWithTheRuntime) {
  // The bundle as the runtime reads it: forge.runtime.host_launched builds the CUTLASS winner's
  // object with nvcc from what plan.json carries. A CUTLASS sm90 configuration takes minutes
  // here: only with FORGE_SLOW_TESTS=1 (as cutlass_gemm_compile_test is labelled slow).
  if (std::getenv("FORGE_SLOW_TESTS") == nullptr) GTEST_SKIP() << "set FORGE_SLOW_TESTS=1";
  for (forge::v1::TaskResults& task : *results_.mutable_tasks()) {
    const codegen::KernelFamily* cutlass = FamilyNamed(task.task(), "cutlass_gemm");
    if (cutlass == nullptr) continue;
    SetWinner(task, *cutlass, 9.0, forge::v1::MEASUREMENT_KIND_MEASURED);
    break;
  }
  ASSERT_TRUE(WriteResultsBundle(results_, &model_, ResultsOptions{}, directory_.path()).ok());
  const std::string root = (fs::path(directory_.path()) / "objects").string();
  const std::string script =
      "import pathlib, sys\n"
      "from forge.runtime.plan import read_plan\n"
      "from forge.runtime.host_launched import build_host_objects\n"
      "objects, fallbacks = build_host_objects(read_plan(sys.argv[1]),\n"
      "                                        pathlib.Path(sys.argv[2]))\n"
      "print(objects, fallbacks)\n"
      "sys.exit(0 if objects and not fallbacks else 1)\n";
  const std::string log = (fs::path(directory_.path()) / "runtime.log").string();
  absl::StatusOr<testing::Subprocess> build = testing::Subprocess::Start(
      {"/usr/bin/env", absl::StrCat("PYTHONPATH=", FORGE_SOURCE_ROOT, "/python"),
       absl::StrCat("FORGE_CUTLASS_INCLUDE=", FORGE_TEST_CUTLASS_INCLUDE), FORGE_TEST_PYTHON,
       "-c", script, directory_.path(), root},
      log);
  ASSERT_TRUE(build.ok()) << build.status();
  const int status = build->Wait(std::chrono::minutes(30));
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << ReadFile(log);
}

TEST_F(ResultsTest, WithoutTheModelThereIsNoPlanAndTheReportSaysWhy) {
  absl::StatusOr<std::vector<std::string>> written =
      WriteResultsBundle(results_, nullptr, ResultsOptions{}, directory_.path());
  ASSERT_TRUE(written.ok()) << written.status();
  EXPECT_FALSE(fs::exists(fs::path(directory_.path()) / "plan.json"));
  EXPECT_THAT(ReadFile(fs::path(directory_.path()) / "report.md"),
              HasSubstr("plan.json: not written"));
}

TEST_F(ResultsTest, AnotherModelIsRefusedForThePlan) {
  absl::StatusOr<forge::v1::Graph> other = ReadModelFile(ModelPath("mlp"));
  ASSERT_TRUE(other.ok()) << other.status();
  absl::StatusOr<std::string> plan = RenderPlan(results_, *other);
  EXPECT_EQ(plan.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(plan.status().message(), HasSubstr("job-7"));

  // The bundle stops before writing anything.
  absl::StatusOr<std::vector<std::string>> written =
      WriteResultsBundle(results_, &*other, ResultsOptions{}, directory_.path());
  EXPECT_EQ(written.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(fs::is_empty(directory_.path()));
}

TEST_F(ResultsTest, OnlyPredictedTimesMakeThePredictedTotal) {
  for (forge::v1::TaskResults& task : *results_.mutable_tasks()) {
    if (task.has_best()) task.mutable_best()->set_kind(forge::v1::MEASUREMENT_KIND_PREDICTED);
    task.clear_results();
  }
  absl::StatusOr<ResultsReport> report = RenderResultsReport(results_, ResultsOptions{});
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_THAT(report->markdown, HasSubstr("**4 of 4 task times are PREDICTED**"));
  EXPECT_THAT(report->markdown, HasSubstr("`forge results --all`"));
  EXPECT_THAT(report->markdown, Not(HasSubstr("| MEASURED |")));
  const Struct json = ParseJson(report->json);
  EXPECT_EQ(json.fields().at("end_to_end").struct_value().fields().at("kind").string_value(),
            "PREDICTED");
}

}  // namespace
}  // namespace forge::client

namespace forge::client {
namespace {

TEST(ResultsCudnnConvTest, AChannelsLastWinnerCarriesItsCallAndTheKernelsItRunsAround) {
  // graph_nhwc converts the NCHW tensors to channels-last inside the candidate: the runtime's op
  // replays it (no longer the task's nodes), from the call as codegen writes it, with the
  // kernels the worker ran around the graph, whose source the bundle carries.
  const forge::v1::Graph model = ConvReluModel();
  const forge::v1::GetResultsResponse results = ConvReluResults(model, "graph_nhwc");
  ASSERT_EQ(results.tasks_size(), 1);
  const forge::v1::TaskResults& task = results.tasks(0);
  absl::StatusOr<codegen::CudnnConvCall> call =
      codegen::DescribeCudnnConv(task.task(), search::PointOf(task.best_candidate()));
  ASSERT_TRUE(call.ok()) << call.status();
  ASSERT_TRUE(call->channels_last_inside);
  testing::TempDir directory;
  absl::StatusOr<std::vector<std::string>> written =
      WriteResultsBundle(results, &model, ResultsOptions{}, directory.path());
  ASSERT_TRUE(written.ok()) << written.status();
  const fs::path root(directory.path());
  const std::string plan_json = ReadFile(root / "plan.json");
  const Struct plan = ParseJson(plan_json);
  const auto& step = plan.fields().at("steps").list_value().values(0).struct_value().fields();
  EXPECT_EQ(step.at("implementation").string_value(), "cudnn_conv");
  EXPECT_FALSE(step.contains("note"));
  // The call as the shared description writes it, every field.
  EXPECT_THAT(plan_json, ::testing::HasSubstr(absl::StrCat("\"cudnn_conv\": ",
                                                           codegen::CudnnConvCallJson(*call, ""))));
  EXPECT_TRUE(step.at("cudnn_conv").struct_value().fields().at("channels_last_inside").bool_value());
  const std::string kernels = step.at("run_kernels").string_value();
  EXPECT_EQ(kernels, "cudnn_conv_kernels.cuh");
  EXPECT_EQ(ReadFile(root / kernels), codegen::RunKernelsSource());
}

TEST(ResultsCudnnConvTest, AGraphWinnerWithoutFoldsOrCopiesNamesNoKernels) {
  const forge::v1::Graph model = ConvReluModel();
  const forge::v1::GetResultsResponse results = ConvReluResults(model, "graph");
  testing::TempDir directory;
  ASSERT_TRUE(WriteResultsBundle(results, &model, ResultsOptions{}, directory.path()).ok());
  const fs::path root(directory.path());
  const Struct plan = ParseJson(ReadFile(root / "plan.json"));
  const auto& step = plan.fields().at("steps").list_value().values(0).struct_value().fields();
  EXPECT_EQ(step.at("implementation").string_value(), "cudnn_conv");
  EXPECT_FALSE(step.contains("run_kernels"));
  EXPECT_FALSE(fs::exists(root / "cudnn_conv_kernels.cuh"));
}

}  // namespace
}  // namespace forge::client
