#include "client/forge/task_label.h"

#include <cstdlib>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "client/forge/model.h"
#include "compiler/graph/partition.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace forge::client {
namespace {

using ::testing::ElementsAre;

// A task whose group runs `ops` (ATen names without "aten::") in order, named by `digest`.
forge::v1::KernelTask TaskOf(const std::vector<std::string>& ops, const std::string& digest) {
  forge::v1::KernelTask task;
  task.set_digest(digest);
  for (const std::string& op : ops) {
    forge::v1::Node& node = *task.mutable_group()->add_nodes();
    node.set_op(absl::StrCat("aten::", op));
    node.set_overload("default");
  }
  return task;
}

TEST(TaskLabelTest, NamesTheComputeOpsInOrderEachOnce) {
  EXPECT_EQ(OpLabel(TaskOf({"softmax"}, "aa")), "softmax");
  EXPECT_EQ(OpLabel(TaskOf({"layer_norm", "gelu"}, "aa")), "layer_norm+gelu");
  EXPECT_EQ(OpLabel(TaskOf({"mul", "mul", "add"}, "aa")), "mul+add");
  // Views are left out, unless they are all the task does.
  EXPECT_EQ(OpLabel(TaskOf({"view", "linear", "relu"}, "aa")), "linear+relu");
  EXPECT_EQ(OpLabel(TaskOf({"slice"}, "aa")), "slice");
}

TEST(TaskLabelTest, ALongListKeepsTheOpsThatFitAndCountsTheRest) {
  const forge::v1::KernelTask task =
      TaskOf({"pow", "mean", "add", "rsqrt", "mul", "sigmoid", "sub"}, "aa");
  EXPECT_EQ(OpLabel(task, 64), "pow+mean+add+rsqrt+mul+sigmoid+sub");
  EXPECT_EQ(OpLabel(task, 24), "pow+mean+add (+4 ops)");
  EXPECT_LE(OpLabel(task, 24).size(), 24u);
  // The first op stays, however short the limit.
  EXPECT_EQ(OpLabel(task, 4), "pow (+6 ops)");
}

TEST(TaskLabelTest, DuplicatesAreToldApartByTheirDigests) {
  const forge::v1::KernelTask a = TaskOf({"linear"}, "c19a2d126b6e0000");
  const forge::v1::KernelTask b = TaskOf({"linear", "add"}, "69be35a1564e0000");
  const forge::v1::KernelTask c = TaskOf({"linear"}, "d9ada4dc3d740000");
  const forge::v1::KernelTask d = TaskOf({"softmax"}, "1111110000000000");
  EXPECT_THAT(TaskLabels({&a, &b, &c, &d}),
              ElementsAre("linear (c19a2d)", "linear+add", "linear (d9ada4)", "softmax"));
  // Digests that share six digits get as many as it takes.
  const forge::v1::KernelTask e = TaskOf({"neg"}, "5c9b28c1f5100000");
  const forge::v1::KernelTask f = TaskOf({"neg"}, "5c9b28d2e6210000");
  EXPECT_THAT(TaskLabels({&e, &f}), ElementsAre("neg (5c9b28c)", "neg (5c9b28d)"));
}

// Over the llama_block test model's real partition: every task gets a label of its ops, and no
// two tasks share one.
TEST(TaskLabelTest, EveryTaskOfARealModelGetsADistinctLabel) {
  const char* directory = std::getenv("FORGE_TEST_MODELS");
  ASSERT_NE(directory, nullptr) << "FORGE_TEST_MODELS is not set; run through ctest";
  absl::StatusOr<forge::v1::Graph> graph = ReadModelFile(absl::StrCat(directory, "/llama_block"));
  ASSERT_TRUE(graph.ok()) << graph.status();
  absl::StatusOr<graph::PartitionResult> partition = graph::Partition(*graph);
  ASSERT_TRUE(partition.ok()) << partition.status();
  std::vector<const forge::v1::KernelTask*> tasks;
  for (const forge::v1::KernelTask& task : partition->tasks) tasks.push_back(&task);
  const std::vector<std::string> labels = TaskLabels(tasks);
  ASSERT_EQ(labels.size(), tasks.size());
  EXPECT_EQ(std::set<std::string>(labels.begin(), labels.end()).size(), labels.size());
  bool any_linear = false;
  for (size_t i = 0; i < labels.size(); ++i) {
    EXPECT_FALSE(absl::StartsWith(labels[i], tasks[i]->digest().substr(0, 6))) << labels[i];
    any_linear = any_linear || absl::StartsWith(labels[i], "linear");
  }
  EXPECT_TRUE(any_linear) << "the model's projections are linear tasks";
}

}  // namespace
}  // namespace forge::client
