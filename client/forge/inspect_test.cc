#include "client/forge/inspect.h"

#include <cstdlib>
#include <fstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "client/forge/model.h"
#include "common/version/version.h"
#include "gmock/gmock.h"
#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/json_util.h"
#include "gtest/gtest.h"
#include "tests/support/subprocess.h"

namespace forge::client {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

std::string ModelPath(const std::string& name) {
  const char* directory = std::getenv("FORGE_TEST_MODELS");
  EXPECT_NE(directory, nullptr) << "FORGE_TEST_MODELS is not set; run through ctest";
  return absl::StrCat(directory == nullptr ? "" : directory, "/", name, "/graph.pb");
}

TEST(InspectTest, LlamaBlockListsItsFamiliesAndAFloor) {
  absl::StatusOr<forge::v1::Graph> graph = ReadModelFile(ModelPath("llama_block"));
  ASSERT_TRUE(graph.ok()) << graph.status();
  absl::StatusOr<std::string> report = InspectGraph(*graph, InspectOptions{});
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_THAT(*report, HasSubstr("ATTENTION"));
  EXPECT_THAT(*report, HasSubstr("REDUCTION  pow+mean+add+rsqrt+mul+mul"));
  EXPECT_THAT(*report, HasSubstr("GEMM"));
  EXPECT_THAT(*report, HasSubstr("memory-bound"));
  EXPECT_THAT(*report, HasSubstr("on H200"));
  // RoPE's cat and GQA's repeat_interleave are generated now; what stays ATen says why.
  EXPECT_THAT(*report, Not(HasSubstr("note: aten::cat")));
  EXPECT_THAT(*report, Not(HasSubstr("note: aten::repeat_interleave")));
  EXPECT_THAT(*report, HasSubstr("an ATen view call, no data moves"));
}

TEST(InspectTest, JsonParsesAndCarriesTheTasks) {
  absl::StatusOr<forge::v1::Graph> graph = ReadModelFile(ModelPath("llama_block"));
  ASSERT_TRUE(graph.ok()) << graph.status();
  absl::StatusOr<std::string> json = InspectGraph(*graph, InspectOptions{"rtx4090", true});
  ASSERT_TRUE(json.ok()) << json.status();
  google::protobuf::Struct parsed;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(*json, &parsed).ok()) << *json;
  EXPECT_EQ(parsed.fields().at("gpu").string_value(), "RTX 4090");
  EXPECT_EQ(parsed.fields().at("version").string_value(), FullVersion());
  const auto& tasks = parsed.fields().at("tasks").list_value().values();
  ASSERT_FALSE(tasks.empty());
  bool saw_attention = false;
  int aten_notes = 0;
  for (const auto& task : tasks) {
    const auto& fields = task.struct_value().fields();
    EXPECT_EQ(fields.at("digest").string_value().size(), 64u);
    EXPECT_GE(fields.at("floor_us").number_value(), 0);
    saw_attention |= fields.at("family").string_value() == "ATTENTION";
    // An ATen task's notes say why it is one; the others have none.
    const auto& notes = fields.at("notes").list_value().values();
    EXPECT_EQ(notes.empty(), fields.at("family").string_value() != "ATEN");
    aten_notes += notes.size();
  }
  EXPECT_TRUE(saw_attention);
  EXPECT_GT(aten_notes, 0);
  const auto& totals = parsed.fields().at("totals").struct_value().fields();
  EXPECT_GT(totals.at("floor_us").number_value(), 0);
  EXPECT_EQ(totals.at("unique_tasks").number_value(), static_cast<double>(tasks.size()));
}

TEST(InspectTest, ArchiveAndPythonExportGiveTheSameTasks) {
  const std::string graph_path = ModelPath("llama_block");
  const std::string archive_path = graph_path.substr(0, graph_path.rfind('/')) + "/model.pt2";
  absl::StatusOr<forge::v1::Graph> from_python = ReadModelFile(graph_path);
  absl::StatusOr<forge::v1::Graph> from_archive = ReadModelFile(archive_path);
  ASSERT_TRUE(from_python.ok()) << from_python.status();
  ASSERT_TRUE(from_archive.ok()) << from_archive.status();
  EXPECT_EQ(from_archive->metadata().name(), "model");
  // The report starts with the task table (digests included); only the title line may differ.
  absl::StatusOr<std::string> python_report = InspectGraph(*from_python, InspectOptions{});
  absl::StatusOr<std::string> archive_report = InspectGraph(*from_archive, InspectOptions{});
  ASSERT_TRUE(python_report.ok() && archive_report.ok());
  EXPECT_EQ(*python_report, *archive_report);
}

TEST(InspectTest, BadInputsAreErrors) {
  EXPECT_EQ(ReadModelFile("/nonexistent/graph.pb").status().code(), absl::StatusCode::kNotFound);
  forge::testing::TempDir dir;
  const std::string garbage = absl::StrCat(dir.path(), "/garbage.pb");
  std::ofstream(garbage) << "this is not a protobuf \xff\xff\xff";
  absl::StatusOr<forge::v1::Graph> graph = ReadModelFile(garbage);
  EXPECT_EQ(graph.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(graph.status().message(), HasSubstr(garbage));

  absl::StatusOr<forge::v1::Graph> model = ReadModelFile(ModelPath("mlp"));
  ASSERT_TRUE(model.ok()) << model.status();
  absl::StatusOr<std::string> report = InspectGraph(*model, InspectOptions{"v100", false});
  EXPECT_EQ(report.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(report.status().message(), HasSubstr("H200"));
}

TEST(InspectTest, BottleneckHintNamesTheBoundAndHowCloseTheTimeIs) {
  absl::StatusOr<GpuArch> h200 = FindGpu("h200");
  ASSERT_TRUE(h200.ok());
  forge::v1::KernelTask gemm;
  gemm.set_family(forge::v1::KERNEL_FAMILY_GEMM);
  gemm.add_inputs()->set_dtype(forge::v1::DTYPE_BFLOAT16);
  gemm.set_flops(790'000'000'000);  // 1000 us at 790 TFLOP/s
  gemm.set_min_bytes(1'000'000);
  EXPECT_EQ(BottleneckHint(*h200, gemm, 4000), "compute-bound at 25% of bf16 peak (bandwidth 0%)");
  EXPECT_THAT(BottleneckHint(*h200, gemm, 500), HasSubstr("faster than the roofline floor"));
  EXPECT_EQ(BottleneckHint(*h200, gemm, 0), "");

  forge::v1::KernelTask copy;
  copy.set_family(forge::v1::KERNEL_FAMILY_POINTWISE);
  copy.add_inputs()->set_dtype(forge::v1::DTYPE_FLOAT32);
  copy.set_min_bytes(4'300'000);  // 1 us at 4.3 TB/s
  EXPECT_EQ(BottleneckHint(*h200, copy, 4),
            "memory-bound at 25% of bandwidth (compute 0% of fp32 peak)");
  EXPECT_EQ(BottleneckHint(*h200, forge::v1::KernelTask(), 1),
            "launch-bound: no DRAM traffic or arithmetic");
}

}  // namespace
}  // namespace forge::client
