// The rewrite against the task's own ops, through the reference interpreter on the CPU in float64:
// what the judge checks on the GPU, here for the math backend (the one the CPU has).
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "aten/aten.h"
#include "compiler/codegen/sdpa_library/sdpa_library.h"
#include "gtest/gtest.h"
#include "tests/support/exported_model.h"

namespace forge::codegen {
namespace {

// The ATTENTION task of an exported test model (tests/fixtures/make_models.py), floats as `dtype`.
forge::v1::KernelTask AttentionTask(const std::string& model,
                                    forge::v1::DType dtype = forge::v1::DTYPE_FLOAT32) {
  return testing::ExportedModelTask(model, forge::v1::KERNEL_FAMILY_ATTENTION, dtype).value();
}

// normal(0, 2) float32 inputs in the task's layouts.
std::vector<aten::HostTensor> RandomInputs(const forge::v1::KernelTask& task) {
  std::mt19937 random(7);
  std::normal_distribution<float> normal(0.0f, 2.0f);
  std::vector<aten::HostTensor> inputs;
  for (const forge::v1::TensorSpec& spec : task.inputs()) {
    EXPECT_EQ(spec.dtype(), forge::v1::DTYPE_FLOAT32);
    aten::HostTensor tensor;
    tensor.dtype = spec.dtype();
    tensor.shape.assign(spec.shape().begin(), spec.shape().end());
    tensor.strides.assign(spec.strides().begin(), spec.strides().end());
    int64_t elements = 1;
    for (int64_t size : tensor.shape) elements *= size;
    std::vector<float> values(elements);
    for (float& value : values) value = normal(random);
    tensor.bytes.assign(reinterpret_cast<const char*>(values.data()), elements * sizeof(float));
    inputs.push_back(std::move(tensor));
  }
  return inputs;
}

std::vector<double> Doubles(const aten::HostTensor& tensor) {
  EXPECT_EQ(tensor.dtype, forge::v1::DTYPE_FLOAT64);
  std::vector<double> values(tensor.bytes.size() / sizeof(double));
  std::memcpy(values.data(), tensor.bytes.data(), values.size() * sizeof(double));
  return values;
}

class SdpaLibraryReferenceTest : public ::testing::TestWithParam<const char*> {};

TEST_P(SdpaLibraryReferenceTest, TheMathBackendsCallComputesTheTasksOwnResult) {
  const forge::v1::KernelTask task = AttentionTask(GetParam());
  absl::StatusOr<forge::v1::KernelTask> rewritten =
      SdpaLibraryTask(task, SchedulePoint{"sdpa_math", {}});
  ASSERT_TRUE(rewritten.ok()) << rewritten.status();
  const std::vector<aten::HostTensor> inputs = RandomInputs(task);
  absl::StatusOr<std::vector<aten::HostTensor>> expected =
      aten::RunTaskGroup(task, inputs, aten::Precision::kFloat64);
  absl::StatusOr<std::vector<aten::HostTensor>> actual =
      aten::RunTaskGroup(*rewritten, inputs, aten::Precision::kFloat64);
  ASSERT_TRUE(expected.ok()) << expected.status();
  ASSERT_TRUE(actual.ok()) << actual.status();
  ASSERT_EQ(actual->size(), expected->size());
  for (size_t o = 0; o < expected->size(); ++o) {
    const std::vector<double> want = Doubles((*expected)[o]);
    const std::vector<double> got = Doubles((*actual)[o]);
    ASSERT_EQ(got.size(), want.size());
    double worst = 0, scale = 0;
    for (size_t i = 0; i < want.size(); ++i) {
      worst = std::max(worst, std::abs(got[i] - want[i]));
      scale = std::max(scale, std::abs(want[i]));
    }
    EXPECT_GT(scale, 0.1);  // not a zero output
    EXPECT_LE(worst, 1e-12 * scale) << "output " << o;
  }
}

// GPT-2's explicit causal attention (the dtype's lowest value as the fill), Mistral's with GQA by
// repeat_interleave and a -1e4 fill, Llama's repeat_kv by expand, and SDPA with enable_gqa.
INSTANTIATE_TEST_SUITE_P(Models, SdpaLibraryReferenceTest,
                         ::testing::Values("explicit_attention", "glue_attention",
                                           "expand_gqa_attention", "sdpa_gqa"));

}  // namespace
}  // namespace forge::codegen
