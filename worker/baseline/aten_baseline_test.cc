#include "worker/baseline/aten_baseline.h"

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/substitute.h"
#include "google/protobuf/text_format.h"
#include "gtest/gtest.h"
#include "tests/support/gpu_test.h"
#include "worker/gpu/device.h"

namespace forge::baseline {
namespace {

using reference::HostTensor;

// softmax over the last dim of a float32 [rows, 4] tensor, as torch.export records it; `op`
// replaces the operator to plant errors.
v1::KernelTask SoftmaxTask(int rows, const std::string& op = "aten::_softmax") {
  v1::KernelTask task;
  const std::string text = absl::Substitute(R"(
    digest: "softmax-test"
    inputs { dtype: DTYPE_FLOAT32 shape: [ $0, 4 ] }
    outputs { dtype: DTYPE_FLOAT32 shape: [ $0, 4 ] }
    group {
      values { name: "x" tensor { dtype: DTYPE_FLOAT32 shape: [ $0, 4 ] } }
      values { name: "y" tensor { dtype: DTYPE_FLOAT32 shape: [ $0, 4 ] } }
      inputs { value_name: "x" }
      nodes {
        name: "softmax" op: "$1" overload: "default"
        arguments { name: "self" tensor: "x" }
        arguments { name: "dim" int_value: -1 }
        arguments { name: "half_to_float" bool_value: false }
        outputs: "y"
      }
      outputs { value_name: "y" }
    })", rows, op);
  EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(text, &task)) << text;
  return task;
}

HostTensor Float32Tensor(std::vector<int64_t> shape, const std::vector<float>& values) {
  HostTensor tensor{v1::DTYPE_FLOAT32, std::move(shape), {}, std::string(values.size() * 4, '\0')};
  std::memcpy(tensor.bytes.data(), values.data(), tensor.bytes.size());
  return tensor;
}

HostTensor Ramp(int rows) {
  std::vector<float> values(rows * 4);
  for (size_t i = 0; i < values.size(); ++i) values[i] = 0.25f * static_cast<float>(i % 7) - 0.5f;
  return Float32Tensor({rows, 4}, values);
}

TEST(AtenBaselineTest, AnUnknownOperatorIsNamed) {
  auto baseline = AtenBaseline::Create(SoftmaxTask(2, "aten::no_such_op"), {Ramp(2)});
  EXPECT_EQ(baseline.status().code(), absl::StatusCode::kNotFound) << baseline.status();
  EXPECT_TRUE(absl::StrContains(baseline.status().message(), "node 'softmax'"))
      << baseline.status();
}

TEST(AtenBaselineTest, AnOperatorWithoutACudaKernelIsRefused) {
  // MKL-DNN's reshape has a CPU (MkldnnCPU) kernel only.
  v1::KernelTask task = SoftmaxTask(2, "aten::_mkldnn_reshape");
  task.mutable_group()->mutable_nodes(0)->clear_arguments();
  auto* self = task.mutable_group()->mutable_nodes(0)->add_arguments();
  self->set_name("self");
  self->set_tensor("x");
  auto* shape = task.mutable_group()->mutable_nodes(0)->add_arguments();
  shape->set_name("shape");
  shape->mutable_ints()->add_values(8);
  auto baseline = AtenBaseline::Create(task, {Ramp(2)});
  EXPECT_EQ(baseline.status().code(), absl::StatusCode::kFailedPrecondition) << baseline.status();
  EXPECT_TRUE(absl::StrContains(baseline.status().message(), "no CUDA kernel"))
      << baseline.status();
}

TEST(AtenBaselineTest, InputsMustMatchTheTask) {
  auto wrong_shape = AtenBaseline::Create(SoftmaxTask(2), {Ramp(3)});
  EXPECT_EQ(wrong_shape.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(wrong_shape.status().message(), "input 0 'x'"))
      << wrong_shape.status();
  HostTensor as_int = Ramp(2);
  as_int.dtype = v1::DTYPE_INT32;
  EXPECT_EQ(AtenBaseline::Create(SoftmaxTask(2), {as_int}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(AtenBaseline::Create(SoftmaxTask(2), {}).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(AtenBaselineTest, NeedsAGpuToRun) {
  if (gpu::DriverStatus().ok()) GTEST_SKIP() << "a GPU is present";
  auto baseline = AtenBaseline::Create(SoftmaxTask(2), {Ramp(2)});
  EXPECT_EQ(baseline.status().code(), absl::StatusCode::kUnavailable) << baseline.status();
}

TEST(AtenBaselineTest, MatchesTheCpuReferenceOnTheGpu) {
  FORGE_SKIP_WITHOUT_GPU();
  auto device = gpu::Device::Open(0);
  ASSERT_TRUE(device.ok()) << device.status();
  auto stream = (*device)->CreateStream();
  ASSERT_TRUE(stream.ok()) << stream.status();
  const v1::KernelTask task = SoftmaxTask(33);
  const std::vector<HostTensor> inputs = {Ramp(33)};
  auto baseline = AtenBaseline::Create(task, inputs);
  ASSERT_TRUE(baseline.ok()) << baseline.status();
  for (int launch = 0; launch < 2; ++launch) {
    ASSERT_TRUE((*baseline)->Launch(stream->handle()).ok());
  }
  auto outputs = (*baseline)->Outputs();
  ASSERT_TRUE(outputs.ok()) << outputs.status();
  auto expected = reference::RunTaskGroup(task, inputs, reference::Precision::kNative);
  ASSERT_TRUE(expected.ok()) << expected.status();
  ASSERT_EQ(outputs->size(), 1u);
  const auto* got = reinterpret_cast<const float*>((*outputs)[0].bytes.data());
  const auto* want = reinterpret_cast<const float*>((*expected)[0].bytes.data());
  for (int i = 0; i < 33 * 4; ++i) EXPECT_NEAR(got[i], want[i], 1e-6) << "element " << i;
}

}  // namespace
}  // namespace forge::baseline
