#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "aten/aten.h"
#include "google/protobuf/text_format.h"
#include "gtest/gtest.h"
#include "tests/support/gpu_test.h"
#include "worker/judge/compare.h"
#include "worker/judge/device_draws.h"
#include "worker/judge/device_inputs.h"
#include "worker/judge/inputs.h"
#include "worker/judge/judge.h"
#include "worker/sandbox/sandbox_child.h"

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

// The reference over device memory (CudaDeviceReferenceRunner) from the inputs uploaded to the
// GPU: float64 and eager's values equal the host reference's to float64 rounding, and its
// statistics are the host's facts.
class DeviceReferenceRunnerTest : public testing::GpuTest {
 protected:
  void SetUpDevice() override {
    ASSERT_TRUE(google::protobuf::TextFormat::ParseFromString(kTask, &task_));
    for (int draw : {0, 1}) {
      std::vector<HostTensor> inputs;
      for (int i = 0; i < 2; ++i) inputs.push_back(*DrawInput(task_.inputs(i), {}, draw, i, 7));
      draws_.push_back(std::move(inputs));
    }
  }

  // The runner's values of the task's output for `inputs` at `precision`, left on the device.
  gpu::DeviceBuffer RunOnDevice(const std::vector<HostTensor>& inputs, aten::Precision precision) {
    std::vector<gpu::DeviceBuffer> buffers;
    std::vector<CUdeviceptr> addresses;
    for (const HostTensor& input : inputs) {
      gpu::DeviceBuffer buffer = *device_->Allocate(input.storage.size());
      EXPECT_TRUE(buffer.CopyFromHost(input.storage.data(), input.storage.size()).ok());
      addresses.push_back(buffer.address());
      buffers.push_back(std::move(buffer));
    }
    gpu::DeviceBuffer output = *device_->Allocate(64 * 200 * sizeof(double));
    const absl::Status ran =
        aten::CudaDeviceReferenceRunner(0).run(task_, addresses, precision, {output.address()});
    EXPECT_TRUE(ran.ok()) << ran;
    return output;
  }

  static std::vector<double> Read(const gpu::DeviceBuffer& buffer) {
    std::vector<double> values(buffer.size_bytes() / sizeof(double));
    EXPECT_TRUE(buffer.CopyToHost(values.data(), buffer.size_bytes()).ok());
    return values;
  }

  forge::v1::KernelTask task_;
  std::vector<std::vector<HostTensor>> draws_;
};

TEST_F(DeviceReferenceRunnerTest, EqualsTheHostReferenceAndItsFacts) {
  const ReferenceFn host = aten::Float64Reference(aten::RunTaskGroup);
  const std::vector<double> want = (*host(task_, draws_[0]))[0];
  const std::vector<double> want_native = (*host.native()(task_, draws_[0]))[0];
  const gpu::DeviceBuffer float64 = RunOnDevice(draws_[0], aten::Precision::kFloat64);
  const gpu::DeviceBuffer native = RunOnDevice(draws_[0], aten::Precision::kNative);
  const gpu::DeviceBuffer other = RunOnDevice(draws_[1], aten::Precision::kFloat64);
  const std::vector<double> got = Read(float64);
  const std::vector<double> got_native = Read(native);
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    ASSERT_NEAR(got[i], want[i], 1e-13 * std::abs(want[i]) + 1e-300) << "element " << i;
    // float32 on another device may round differently; it stays within float32's own error.
    ASSERT_NEAR(got_native[i], want_native[i], 1e-5 * std::abs(want[i]) + 1e-7) << i;
  }
  const Tolerances tolerances = DefaultTolerances(forge::v1::DTYPE_FLOAT32);
  absl::StatusOr<aten::DeviceOutputStatistics> statistics =
      aten::CudaDeviceReferenceRunner(0).statistics(
          float64.address(), native.address(), other.address(), static_cast<int64_t>(got.size()),
          tolerances.atol, tolerances.rtol, OverflowThreshold(forge::v1::DTYPE_FLOAT32));
  ASSERT_TRUE(statistics.ok()) << statistics.status();
  EagerError eager;
  eager.Add(got_native, got);
  EXPECT_EQ(statistics->near_constant, IsNearConstant(got, tolerances));
  EXPECT_EQ(statistics->agrees_with_first, AgreeWithin(got, Read(other), tolerances));
  EXPECT_NEAR(statistics->rms, RootMeanSquare(got), 1e-12 * RootMeanSquare(got));
  EXPECT_NEAR(statistics->eager_max_abs, eager.max_abs, 1e-15);
  EXPECT_NEAR(statistics->eager_rel_norm, eager.rel_norm, 1e-9 * eager.rel_norm + 1e-18);
  // A constant output is near constant; an output agrees with itself.
  gpu::DeviceBuffer constant = *device_->Allocate(float64.size_bytes());
  const std::vector<double> ones(got.size(), 1.0);
  ASSERT_TRUE(constant.CopyFromHost(ones.data(), constant.size_bytes()).ok());
  statistics = aten::CudaDeviceReferenceRunner(0).statistics(
      constant.address(), 0, constant.address(), static_cast<int64_t>(got.size()),
      tolerances.atol, tolerances.rtol, OverflowThreshold(forge::v1::DTYPE_FLOAT32));
  ASSERT_TRUE(statistics.ok()) << statistics.status();
  EXPECT_TRUE(statistics->near_constant);
  EXPECT_TRUE(statistics->agrees_with_first);
  EXPECT_EQ(statistics->eager_max_abs, 0);
}

// y = x OP x over 2^20 float32 elements as one ATen node (OP a product or a sum, SCHEMA its
// overload's): the judge's first candidate of a large task with the production reference, the
// candidate the ATen fallback (no CUDA of the test's own).
constexpr char kSquareOrSumTask[] = R"pb(
  digest: "device-draws-OVERLOAD"
  inputs { dtype: DTYPE_FLOAT32 shape: [ 1048576 ] }
  outputs { dtype: DTYPE_FLOAT32 shape: [ 1048576 ] }
  group {
    values { name: "x" tensor { dtype: DTYPE_FLOAT32 shape: [ 1048576 ] } }
    values { name: "y" tensor { dtype: DTYPE_FLOAT32 shape: [ 1048576 ] } }
    inputs { kind: INPUT_KIND_USER_INPUT value_name: "x" }
    nodes { name: "y" op: "OP" overload: "Tensor" schema: "SCHEMA"
            arguments { name: "self" tensor: "x" } arguments { name: "other" tensor: "x" }
            outputs: "y" }
    outputs { kind: OUTPUT_KIND_USER_OUTPUT value_name: "y" }
  }
)pb";

class JudgeOnDeviceTest : public testing::GpuTest {
 protected:
  void SetUpDevice() override {
    comparer_ = *DeviceComparer::Create(*device_);
    drawer_ = *DeviceInputs::Create(*device_);
    draws_ = std::make_unique<DeviceDraws>(*device_, *comparer_, int64_t{1} << 30,
                                           /*min_task_bytes=*/0, drawer_.get());
  }

  // x * x, or x + x for `sum`.
  static forge::v1::KernelTask SquareOrSum(bool sum) {
    forge::v1::KernelTask task;
    const std::string text = absl::StrReplaceAll(
        kSquareOrSumTask,
        {{"OVERLOAD", sum ? "sum" : "square"},
         {"SCHEMA", sum ? "aten::add.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor"
                        : "aten::mul.Tensor(Tensor self, Tensor other) -> Tensor"},
         {"OP", sum ? "aten::add" : "aten::mul"}});
    EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(text, &task));
    return task;
  }

  // Judges `candidate_task`'s ATen fallback as a candidate of `task`.
  std::unique_ptr<JudgedCandidate> JudgeFallback(const forge::v1::KernelTask& task,
                                                 const forge::v1::KernelTask& candidate_task,
                                                 const ReferenceFn& reference) {
    absl::StatusOr<sandbox::RunnableCandidate> candidate =
        aten::LoadFallback(*device_, candidate_task);
    EXPECT_TRUE(candidate.ok()) << candidate.status();
    if (!candidate.ok()) return nullptr;
    JudgeOptions options;
    options.draw_cache = &cache_;
    options.device_draws = draws_.get();
    options.capture_launches = false;  // the fallback synchronizes inside its launch
    absl::StatusOr<std::unique_ptr<JudgedCandidate>> judged =
        Judge(*device_, task, candidate->launch, reference, options);
    EXPECT_TRUE(judged.ok()) << judged.status();
    return judged.ok() ? *std::move(judged) : nullptr;
  }

  std::unique_ptr<DeviceComparer> comparer_;
  std::unique_ptr<DeviceInputs> drawer_;
  std::unique_ptr<DeviceDraws> draws_;
  DrawCache cache_;
};

// The first candidate draws on the device and judges every draw there, leaving nothing in the
// host's draw cache; the next candidate finds the draws resident; a wrong one fails there, worded
// from the device's tallies; the re-check runs there too.
TEST_F(JudgeOnDeviceTest, FirstCandidateDrawsReferencesAndComparesOnTheDevice) {
  const forge::v1::KernelTask task = SquareOrSum(false);
  const ReferenceFn reference =
      aten::Float64Reference(aten::CudaGroupRunner(0), aten::CudaDeviceReferenceRunner(0));
  std::unique_ptr<JudgedCandidate> first = JudgeFallback(task, task, reference);
  ASSERT_NE(first, nullptr);
  ASSERT_TRUE(first->verdict().passed()) << first->verdict().detail;
  const int draws = first->verdict().evidence.draws();
  EXPECT_GE(draws, 3);
  EXPECT_EQ(first->verdict().draws_on_device, draws);
  EXPECT_EQ(cache_.stats().entries, 0) << "no draw went through the host";
  EXPECT_EQ(draws_->stats().entries, draws);
  EXPECT_EQ(draws_->stats().made, draws);
  EXPECT_EQ(draws_->stats().uploads, 0);
  absl::StatusOr<JudgeVerdict> rechecked = first->RecheckTimedOutputs();
  ASSERT_TRUE(rechecked.ok()) << rechecked.status();
  EXPECT_TRUE(rechecked->passed()) << rechecked->detail;

  std::unique_ptr<JudgedCandidate> second = JudgeFallback(task, task, reference);
  ASSERT_NE(second, nullptr);
  EXPECT_TRUE(second->verdict().passed()) << second->verdict().detail;
  EXPECT_EQ(draws_->stats().entries, draws) << "found resident, not made again";
  EXPECT_GE(draws_->stats().hits, draws);

  std::unique_ptr<JudgedCandidate> wrong = JudgeFallback(task, SquareOrSum(true), reference);
  ASSERT_NE(wrong, nullptr);
  EXPECT_FALSE(wrong->verdict().passed());
  EXPECT_EQ(wrong->verdict().reason, forge::v1::FAILURE_REASON_WRONG_RESULT);
  EXPECT_TRUE(absl::StrContains(wrong->verdict().detail, "on the device"))
      << wrong->verdict().detail;

  // A candidate that writes nothing leaves the poison: named from the device's tallies.
  JudgeOptions options;
  options.draw_cache = &cache_;
  options.device_draws = draws_.get();
  options.capture_launches = false;  // nothing to capture
  absl::StatusOr<std::unique_ptr<JudgedCandidate>> idle = Judge(
      *device_, task, [](gpu::Stream&, absl::Span<const CUdeviceptr>) { return absl::OkStatus(); },
      reference, options);
  ASSERT_TRUE(idle.ok()) << idle.status();
  EXPECT_EQ((*idle)->verdict().reason, forge::v1::FAILURE_REASON_UNWRITTEN_OUTPUT);
  EXPECT_TRUE(absl::StrContains((*idle)->verdict().detail, "first unwritten element 0 [0]"))
      << (*idle)->verdict().detail;
}

// The same candidate judged through the host (a reference without its device part) and on the
// device: both pass, with the same figures to float64 rounding; a wrong candidate fails both ways.
TEST_F(JudgeOnDeviceTest, AgreesWithTheHostPath) {
  const forge::v1::KernelTask task = SquareOrSum(false);
  const ReferenceFn on_device =
      aten::Float64Reference(aten::CudaGroupRunner(0), aten::CudaDeviceReferenceRunner(0));
  const ReferenceFn through_host = aten::Float64Reference(aten::CudaGroupRunner(0));
  std::unique_ptr<JudgedCandidate> device = JudgeFallback(task, task, on_device);
  std::unique_ptr<JudgedCandidate> host = JudgeFallback(task, task, through_host);
  ASSERT_TRUE(device != nullptr && host != nullptr);
  ASSERT_TRUE(device->verdict().passed()) << device->verdict().detail;
  ASSERT_TRUE(host->verdict().passed()) << host->verdict().detail;
  EXPECT_EQ(host->verdict().draws_on_device, 0);
  EXPECT_EQ(device->verdict().evidence.draws(), host->verdict().evidence.draws());
  EXPECT_NEAR(device->verdict().evidence.max_abs_error(), host->verdict().evidence.max_abs_error(),
              1e-12);
  EXPECT_NEAR(device->verdict().evidence.rel_norm_error(),
              host->verdict().evidence.rel_norm_error(), 1e-12);
  for (const ReferenceFn* reference : {&on_device, &through_host}) {
    std::unique_ptr<JudgedCandidate> wrong = JudgeFallback(task, SquareOrSum(true), *reference);
    ASSERT_NE(wrong, nullptr);
    EXPECT_FALSE(wrong->verdict().passed());
  }
}

}  // namespace
}  // namespace forge::judge
