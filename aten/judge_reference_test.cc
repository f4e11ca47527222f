#include <vector>

#include "absl/strings/str_replace.h"
#include "aten/aten.h"
#include "google/protobuf/text_format.h"
#include "gtest/gtest.h"
#include "worker/judge/compare.h"
#include "worker/judge/inputs.h"
#include "worker/judge/judge.h"
#include "worker/judge/thread_pool.h"

namespace forge::judge {
namespace {

// y = a + 2 * b, with b broadcast along the rows and read through transposed strides.
constexpr char kTask[] = R"pb(
  digest: "aten-reference-test"
  inputs { dtype: DTYPE_FLOAT32 shape: [ 2, 3 ] }
  inputs { dtype: DTYPE_BFLOAT16 shape: [ 2, 3 ] strides: [ 1, 2 ] }
  outputs { dtype: DTYPE_FLOAT32 shape: [ 2, 3 ] }
  group {
    values { name: "a" tensor { dtype: DTYPE_FLOAT32 shape: [ 2, 3 ] } }
    values { name: "b" tensor { dtype: DTYPE_BFLOAT16 shape: [ 2, 3 ] strides: [ 1, 2 ] } }
    values { name: "y" tensor { dtype: DTYPE_FLOAT32 shape: [ 2, 3 ] } }
    inputs { kind: INPUT_KIND_USER_INPUT value_name: "a" }
    inputs { kind: INPUT_KIND_USER_INPUT value_name: "b" }
    nodes {
      name: "y"
      op: "aten::add"
      overload: "Tensor"
      schema: "aten::add.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor"
      arguments { name: "self" tensor: "a" }
      arguments { name: "other" tensor: "b" }
      arguments { name: "alpha" keyword: true int_value: 2 }
      outputs: "y"
    }
    outputs { kind: OUTPUT_KIND_USER_OUTPUT value_name: "y" }
  }
)pb";

TEST(AtenFloat64ReferenceTest, RunsTheGroupInFloat64OnTheJudgesInputs) {
  forge::v1::KernelTask task;
  ASSERT_TRUE(google::protobuf::TextFormat::ParseFromString(kTask, &task));
  std::vector<HostTensor> inputs;
  for (int i = 0; i < 2; ++i) {
    auto input = DrawInput(task.inputs(i), {}, 0, i, 11);
    ASSERT_TRUE(input.ok()) << input.status();
    inputs.push_back(*std::move(input));
  }
  auto outputs = aten::Float64Reference()(task, inputs);
  ASSERT_TRUE(outputs.ok()) << outputs.status();
  ASSERT_EQ(outputs->size(), 1u);
  ASSERT_EQ((*outputs)[0].size(), 6u);
  for (int i = 0; i < 6; ++i) {
    // Exact in float64: the inputs are float32 and bfloat16 values.
    EXPECT_EQ((*outputs)[0][i], inputs[0].Get(i) + 2 * inputs[1].Get(i)) << i;
  }
}

// 300 x 500 elements: the inputs are gathered and the output decoded in several of the pool's
// chunks, the strided input element by element, the row-major one a chunk at a time.
TEST(AtenFloat64ReferenceTest, LargeTensorsCrossChunksInTheirOwnOrder) {
  forge::v1::KernelTask task;
  ASSERT_TRUE(google::protobuf::TextFormat::ParseFromString(
      absl::StrReplaceAll(kTask, {{"[ 2, 3 ]", "[ 300, 500 ]"}, {"[ 1, 2 ]", "[ 1, 300 ]"}}),
      &task));
  std::vector<HostTensor> inputs;
  for (int i = 0; i < 2; ++i) inputs.push_back(*DrawInput(task.inputs(i), {}, 1, i, 7));
  ASSERT_GT(ThreadPool::ChunkCount(inputs[0].element_count()), 2);
  auto outputs = aten::Float64Reference()(task, inputs);
  ASSERT_TRUE(outputs.ok()) << outputs.status();
  ASSERT_EQ((*outputs)[0].size(), 150000u);
  for (int i = 0; i < 150000; ++i) {
    ASSERT_EQ((*outputs)[0][i], inputs[0].Get(i) + 2 * inputs[1].Get(i)) << i;
  }
}

TEST(AtenFloat64ReferenceTest, RunsTheGroupInTheTasksDtypesAsItsNativeReference) {
  forge::v1::KernelTask task;
  ASSERT_TRUE(google::protobuf::TextFormat::ParseFromString(kTask, &task));
  std::vector<HostTensor> inputs;
  for (int i = 0; i < 2; ++i) inputs.push_back(*DrawInput(task.inputs(i), {}, 0, i, 11));
  const ReferenceFn reference = aten::Float64Reference();
  ASSERT_NE(reference.native(), nullptr);
  auto outputs = reference.native()(task, inputs);
  ASSERT_TRUE(outputs.ok()) << outputs.status();
  ASSERT_EQ(outputs->size(), 1u);
  ASSERT_EQ((*outputs)[0].size(), 6u);
  for (int i = 0; i < 6; ++i) {
    // As eager computes it: in float32.
    const float expected = static_cast<float>(inputs[0].Get(i)) +
                           2.0f * static_cast<float>(inputs[1].Get(i));
    EXPECT_EQ((*outputs)[0][i], static_cast<double>(expected)) << i;
  }
}

TEST(AtenFloat64ReferenceTest, ReportsInterpreterErrors) {
  forge::v1::KernelTask task;
  ASSERT_TRUE(google::protobuf::TextFormat::ParseFromString(kTask, &task));
  task.mutable_group()->mutable_nodes(0)->set_op("aten::no_such_op");
  std::vector<HostTensor> inputs;
  for (int i = 0; i < 2; ++i) inputs.push_back(*DrawInput(task.inputs(i), {}, 0, i, 11));
  EXPECT_FALSE(aten::Float64Reference()(task, inputs).ok());
}

}  // namespace
}  // namespace forge::judge
