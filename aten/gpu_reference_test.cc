#include <cmath>
#include <vector>

#include "aten/aten.h"
#include "google/protobuf/text_format.h"
#include "gtest/gtest.h"
#include "worker/judge/inputs.h"
#include "worker/judge/judge.h"

namespace forge::judge {
namespace {

// y = softmax(a @ b, dim=1): a matrix product and a reduction, whose float64 sums the GPU orders
// differently from the CPU.
constexpr char kTask[] = R"pb(
  digest: "aten-gpu-reference-test"
  inputs { dtype: DTYPE_FLOAT32 shape: [ 64, 96 ] }
  inputs { dtype: DTYPE_FLOAT32 shape: [ 96, 200 ] }
  outputs { dtype: DTYPE_FLOAT32 shape: [ 64, 200 ] }
  group {
    values { name: "a" tensor { dtype: DTYPE_FLOAT32 shape: [ 64, 96 ] } }
    values { name: "b" tensor { dtype: DTYPE_FLOAT32 shape: [ 96, 200 ] } }
    values { name: "p" tensor { dtype: DTYPE_FLOAT32 shape: [ 64, 200 ] } }
    values { name: "y" tensor { dtype: DTYPE_FLOAT32 shape: [ 64, 200 ] } }
    inputs { kind: INPUT_KIND_USER_INPUT value_name: "a" }
    inputs { kind: INPUT_KIND_USER_INPUT value_name: "b" }
    nodes {
      name: "p"
      op: "aten::mm"
      schema: "aten::mm(Tensor self, Tensor mat2) -> Tensor"
      arguments { name: "self" tensor: "a" }
      arguments { name: "mat2" tensor: "b" }
      outputs: "p"
    }
    nodes {
      name: "y"
      op: "aten::_softmax"
      schema: "aten::_softmax(Tensor self, int dim, bool half_to_float) -> Tensor"
      arguments { name: "self" tensor: "p" }
      arguments { name: "dim" int_value: 1 }
      arguments { name: "half_to_float" bool_value: false }
      outputs: "y"
    }
    outputs { kind: OUTPUT_KIND_USER_OUTPUT value_name: "y" }
  }
)pb";

class CudaGroupRunnerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(google::protobuf::TextFormat::ParseFromString(kTask, &task_));
    for (int i = 0; i < 2; ++i) {
      absl::StatusOr<HostTensor> input = DrawInput(task_.inputs(i), {}, 0, i, 7);
      ASSERT_TRUE(input.ok()) << input.status();
      inputs_.push_back(*std::move(input));
    }
  }

  // The judge's float64 reference of the task through `run_group`.
  std::vector<double> Reference(aten::GroupRunner run_group) {
    absl::StatusOr<std::vector<std::vector<double>>> outputs =
        aten::Float64Reference(std::move(run_group))(task_, inputs_);
    EXPECT_TRUE(outputs.ok()) << outputs.status();
    if (!outputs.ok() || outputs->size() != 1) return {};
    return (*outputs)[0];
  }

  forge::v1::KernelTask task_;
  std::vector<HostTensor> inputs_;
};

// On a GPU the float64 sums run in another order: agreement to float64 rounding, far below any
// tolerance of the judge. Without one the runner falls back to the CPU and agrees exactly.
TEST_F(CudaGroupRunnerTest, AgreesWithTheCpuReference) {
  const std::vector<double> cpu = Reference(aten::RunTaskGroup);
  const std::vector<double> gpu = Reference(aten::CudaGroupRunner(0));
  ASSERT_EQ(cpu.size(), 64u * 200u);
  ASSERT_EQ(gpu.size(), cpu.size());
  for (size_t i = 0; i < cpu.size(); ++i) {
    ASSERT_NEAR(gpu[i], cpu[i], 1e-13 * std::abs(cpu[i]) + 1e-300) << "element " << i;
  }
}

TEST_F(CudaGroupRunnerTest, FallsBackToTheCpuWhenTheGpuRunFails) {
  // No machine has a GPU of this ordinal.
  const std::vector<double> fallback = Reference(aten::CudaGroupRunner(4096));
  EXPECT_EQ(fallback, Reference(aten::RunTaskGroup));
}

TEST_F(CudaGroupRunnerTest, ErrorsOfTheGroupItselfStillReachTheJudge) {
  task_.mutable_group()->mutable_nodes(1)->set_op("aten::no_such_op");
  EXPECT_FALSE(aten::Float64Reference(aten::CudaGroupRunner(0))(task_, inputs_).ok());
}

}  // namespace
}  // namespace forge::judge
