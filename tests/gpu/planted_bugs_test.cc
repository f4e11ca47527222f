// Kernels with planted bugs, each of which the judge must reject for the right reason, and the
// correct kernels it must accept. The references are computed here by hand in float64.
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/support/gpu_test.h"
#include "worker/compile/compile_pool.h"
#include "worker/gpu/device.h"
#include "worker/judge/judge.h"
#include "worker/timer/timer.h"

namespace forge {
namespace {

using judge::HostTensor;

constexpr int64_t kRows = 1000;
constexpr int64_t kColumns = 1003;
constexpr int64_t kCount = kRows * kColumns;
constexpr uint32_t kBlock = 256;

forge::v1::TensorSpec Float32(std::vector<int64_t> shape) {
  forge::v1::TensorSpec spec;
  spec.set_dtype(forge::v1::DTYPE_FLOAT32);
  for (int64_t size : shape) spec.add_shape(size);
  return spec;
}

forge::v1::KernelTask ElementwiseTask(int64_t rows, int64_t columns) {
  forge::v1::KernelTask task;
  task.set_digest(absl::StrCat("planted-", rows, "x", columns));
  *task.add_inputs() = Float32({rows, columns});
  *task.add_outputs() = Float32({rows, columns});
  task.mutable_group()->add_inputs()->set_value_name("x");
  return task;
}

// y = scale * x + shift, elementwise, in float64.
judge::ReferenceFn Affine(double scale, double shift) {
  return [scale, shift](const forge::v1::KernelTask&, absl::Span<const HostTensor> inputs)
             -> absl::StatusOr<std::vector<std::vector<double>>> {
    std::vector<double> y = inputs[0].ToDoubles();
    for (double& value : y) value = scale * value + shift;
    return std::vector<std::vector<double>>{y};
  };
}

// Softmax along the last dim, in float64.
absl::StatusOr<std::vector<std::vector<double>>> SoftmaxReference(
    const forge::v1::KernelTask& task, absl::Span<const HostTensor> inputs) {
  const int64_t rows = task.inputs(0).shape(0);
  const int64_t columns = task.inputs(0).shape(1);
  std::vector<double> y = inputs[0].ToDoubles();
  for (int64_t row = 0; row < rows; ++row) {
    double* values = y.data() + row * columns;
    double top = values[0];
    for (int64_t c = 0; c < columns; ++c) top = std::max(top, values[c]);
    double sum = 0;
    for (int64_t c = 0; c < columns; ++c) sum += values[c] = std::exp(values[c] - top);
    for (int64_t c = 0; c < columns; ++c) values[c] /= sum;
  }
  return std::vector<std::vector<double>>{y};
}

const char* const kElementwiseKernels = R"(
#define N )" "1003000" R"(
extern "C" __global__ void affine(const float* x, float* y) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < N) y[i] = x[i] * 2.0f + 1.0f;
}
extern "C" __global__ void affine_one_row(const float* x, float* y) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < 1003) y[i] = x[i] * 2.0f + 1.0f;
}
extern "C" __global__ void affine_tail_unwritten(const float* x, float* y) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < N - 5) y[i] = x[i] * 2.0f + 1.0f;
}
extern "C" __global__ void affine_in_place(float* x, float* y) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < N) { x[i] = x[i] * 2.0f + 1.0f; y[i] = x[i]; }
}
extern "C" __global__ void tiny_zeros(const float* x, float* y) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < N) y[i] = 0.0f;
}
extern "C" __global__ void tiny(const float* x, float* y) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < N) y[i] = x[i] * 1e-9f;
}
extern "C" __global__ void near_constant(const float* x, float* y) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < N) y[i] = fmaf(x[i], 1e-3f, 1000.0f);
}
extern "C" __global__ void near_constant_as_constant(const float* x, float* y) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < N) y[i] = 1000.0f;
}
// Keeps the GPU busy long enough that work behind it is still pending when the judge reads.
extern "C" __global__ void spin(long long cycles) {
  long long start = clock64();
  while (clock64() - start < cycles) {}
}
)";

// One block of 256 threads per row of 1003.
const char* const kSoftmaxKernels = R"(
#define COLUMNS 1003
__device__ void softmax_row(const float* x, float* y, int row) {
  __shared__ float scratch[256];
  const float* in = x + row * COLUMNS;
  float* out = y + row * COLUMNS;
  float top = __int_as_float(0xff800000);  // -infinity
  for (int c = threadIdx.x; c < COLUMNS; c += blockDim.x) top = fmaxf(top, in[c]);
  scratch[threadIdx.x] = top;
  __syncthreads();
  for (int s = blockDim.x / 2; s > 0; s /= 2) {
    if (threadIdx.x < s) scratch[threadIdx.x] = fmaxf(scratch[threadIdx.x], scratch[threadIdx.x + s]);
    __syncthreads();
  }
  top = scratch[0];
  __syncthreads();
  float sum = 0;
  for (int c = threadIdx.x; c < COLUMNS; c += blockDim.x) sum += expf(in[c] - top);
  scratch[threadIdx.x] = sum;
  __syncthreads();
  for (int s = blockDim.x / 2; s > 0; s /= 2) {
    if (threadIdx.x < s) scratch[threadIdx.x] += scratch[threadIdx.x + s];
    __syncthreads();
  }
  sum = scratch[0];
  for (int c = threadIdx.x; c < COLUMNS; c += blockDim.x) out[c] = expf(in[c] - top) / sum;
}
extern "C" __global__ void softmax(const float* x, float* y) { softmax_row(x, y, blockIdx.x); }
extern "C" __global__ void softmax_first_row_only(const float* x, float* y) {
  if (blockIdx.x == 0) softmax_row(x, y, 0);
}
)";

class PlantedBugsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (!gpu::DriverStatus().ok()) return;
    auto device = gpu::Device::Open(0);
    ASSERT_TRUE(device.ok()) << device.status();
    device_ = device->release();
    auto pool = compile::CompilePool::Create({.threads = 2});
    ASSERT_TRUE(pool.ok()) << pool.status();
    for (const char* source : {kElementwiseKernels, kSoftmaxKernels}) {
      compile::CompileRequest request;
      request.source = source;
      request.arch = device_->properties().arch();
      compile::CompileResult compiled = (*pool)->Compile(request);
      ASSERT_TRUE(compiled.ok()) << compiled.status << "\n" << compiled.log;
      (source == kElementwiseKernels ? elementwise_cubin_ : softmax_cubin_) =
          new std::string(compiled.cubin);
    }
  }

  void SetUp() override {
    FORGE_SKIP_WITHOUT_GPU();
    ASSERT_NE(device_, nullptr);
    ASSERT_TRUE(device_->MakeCurrent().ok());
  }

  // The launch of `name` from `cubin` over `grid` blocks of `block` threads.
  static judge::CandidateLaunch Load(const std::string& cubin, const std::string& name,
                                     uint32_t grid, uint32_t block = kBlock) {
    codegen::GeneratedKernel kernel;
    kernel.kernel_name = name;
    kernel.launch.grid = {grid, 1, 1};
    kernel.launch.block = {block, 1, 1};
    auto launch = judge::LoadGeneratedKernel(*device_, cubin, kernel);
    EXPECT_TRUE(launch.ok()) << launch.status();
    return launch.ok() ? *launch : judge::CandidateLaunch();
  }

  static judge::JudgeVerdict JudgeOrDie(const forge::v1::KernelTask& task,
                                        judge::CandidateLaunch launch,
                                        const judge::ReferenceFn& reference) {
    auto judged = judge::Judge(*device_, task, std::move(launch), reference);
    EXPECT_TRUE(judged.ok()) << judged.status();
    if (!judged.ok()) return {};
    return (*judged)->verdict();
  }

  static uint32_t FullGrid() { return (kCount + kBlock - 1) / kBlock; }

  static inline gpu::Device* device_ = nullptr;
  static inline std::string* elementwise_cubin_ = nullptr;
  static inline std::string* softmax_cubin_ = nullptr;
};

TEST_F(PlantedBugsTest, CorrectKernelPassesAndSurvivesTiming) {
  forge::v1::KernelTask task = ElementwiseTask(kRows, kColumns);
  auto judged = judge::Judge(*device_, task, Load(*elementwise_cubin_, "affine", FullGrid()),
                             Affine(2, 1));
  ASSERT_TRUE(judged.ok()) << judged.status();
  const judge::JudgeVerdict& verdict = (*judged)->verdict();
  ASSERT_TRUE(verdict.passed()) << verdict.detail;
  EXPECT_EQ(verdict.evidence.draws(), 3);
  EXPECT_FALSE(verdict.evidence.has_failed_draw());
  EXPECT_DOUBLE_EQ(verdict.evidence.atol(), 1e-4);
  EXPECT_LT(verdict.evidence.rel_norm_error(), 1e-6);

  auto timer = timer::Timer::Create(*device_);
  ASSERT_TRUE(timer.ok()) << timer.status();
  timer::TimerOptions options;
  judge::JudgedCandidate& candidate = **judged;
  options.before_each_rep = [&](gpu::Stream& stream) { return candidate.PoisonOutputs(stream); };
  auto timing = (*timer)->Time([&](gpu::Stream& stream) { return candidate.Launch(stream); },
                               options);
  ASSERT_TRUE(timing.ok()) << timing.status();
  EXPECT_GT(timing->summary.median, 0);
  auto rechecked = candidate.RecheckTimedOutputs();
  ASSERT_TRUE(rechecked.ok()) << rechecked.status();
  EXPECT_TRUE(rechecked->passed()) << rechecked->detail;
}

TEST_F(PlantedBugsTest, OneRowOnlyIsRejected) {
  judge::JudgeVerdict verdict =
      JudgeOrDie(ElementwiseTask(kRows, kColumns),
                 Load(*elementwise_cubin_, "affine_one_row", FullGrid()), Affine(2, 1));
  EXPECT_FALSE(verdict.passed());
  EXPECT_EQ(verdict.reason, forge::v1::FAILURE_REASON_UNWRITTEN_OUTPUT);
  EXPECT_EQ(verdict.evidence.failed_draw(), 0);
  EXPECT_TRUE(absl::StrContains(verdict.detail, "element 1003 [1, 0] never written")) << verdict.detail;
}

TEST_F(PlantedBugsTest, UnwrittenTailIsRejected) {
  judge::JudgeVerdict verdict =
      JudgeOrDie(ElementwiseTask(kRows, kColumns),
                 Load(*elementwise_cubin_, "affine_tail_unwritten", FullGrid()), Affine(2, 1));
  EXPECT_EQ(verdict.reason, forge::v1::FAILURE_REASON_UNWRITTEN_OUTPUT);
  EXPECT_TRUE(absl::StrContains(verdict.detail, "element 1002995 [999, 998] never written"))
      << verdict.detail;
  EXPECT_TRUE(absl::StrContains(verdict.detail, "5 of 1003000 elements unwritten")) << verdict.detail;
}

TEST_F(PlantedBugsTest, OffByOneInTheLastBlockIsRejected) {
  // The grid rounds down: the last, partial block never runs.
  judge::JudgeVerdict verdict =
      JudgeOrDie(ElementwiseTask(kRows, kColumns),
                 Load(*elementwise_cubin_, "affine", kCount / kBlock), Affine(2, 1));
  EXPECT_EQ(verdict.reason, forge::v1::FAILURE_REASON_UNWRITTEN_OUTPUT);
  EXPECT_TRUE(absl::StrContains(verdict.detail, absl::StrCat(kCount % kBlock, " of 1003000")))
      << verdict.detail;
}

TEST_F(PlantedBugsTest, WritingTheInputInPlaceIsRejected) {
  judge::JudgeVerdict verdict =
      JudgeOrDie(ElementwiseTask(kRows, kColumns),
                 Load(*elementwise_cubin_, "affine_in_place", FullGrid()), Affine(2, 1));
  EXPECT_EQ(verdict.reason, forge::v1::FAILURE_REASON_WRONG_RESULT);
  EXPECT_TRUE(absl::StrContains(verdict.detail, "modified input 0")) << verdict.detail;
}

TEST_F(PlantedBugsTest, ZerosForATinyOutputAreRejected) {
  forge::v1::KernelTask task = ElementwiseTask(kRows, kColumns);
  judge::JudgeVerdict zeros =
      JudgeOrDie(task, Load(*elementwise_cubin_, "tiny_zeros", FullGrid()), Affine(1e-9, 0));
  EXPECT_EQ(zeros.reason, forge::v1::FAILURE_REASON_WRONG_RESULT);
  EXPECT_TRUE(absl::StrContains(zeros.detail, "relative-norm error")) << zeros.detail;
  judge::JudgeVerdict correct =
      JudgeOrDie(task, Load(*elementwise_cubin_, "tiny", FullGrid()), Affine(1e-9, 0));
  EXPECT_TRUE(correct.passed()) << correct.detail;
}

TEST_F(PlantedBugsTest, ConstantForANearConstantOutputIsRejected) {
  forge::v1::KernelTask task = ElementwiseTask(kRows, kColumns);
  judge::JudgeVerdict constant = JudgeOrDie(
      task, Load(*elementwise_cubin_, "near_constant_as_constant", FullGrid()), Affine(1e-3, 1000));
  EXPECT_EQ(constant.reason, forge::v1::FAILURE_REASON_WRONG_RESULT);
  EXPECT_TRUE(absl::StrContains(constant.detail, "near constant")) << constant.detail;
  judge::JudgeVerdict correct =
      JudgeOrDie(task, Load(*elementwise_cubin_, "near_constant", FullGrid()), Affine(1e-3, 1000));
  EXPECT_TRUE(correct.passed()) << correct.detail;
  bool flagged = false;
  for (const std::string& note : correct.evidence.notes()) {
    flagged |= absl::StrContains(note, "reference near constant");
  }
  EXPECT_TRUE(flagged);
}

TEST_F(PlantedBugsTest, WorkOnASideStreamIsRejected) {
  // The candidate returns after enqueueing its work on a stream of its own, behind a spin: the
  // judge's stream-ordered read finds the outputs unwritten, the read after a full sync does not.
  auto side_stream = std::make_shared<gpu::Stream>(*device_->CreateStream());
  auto module = std::make_shared<gpu::Module>(*device_->LoadModule(*elementwise_cubin_));
  auto spin = std::make_shared<gpu::Kernel>(*module->GetKernel("spin"));
  judge::CandidateLaunch correct = Load(*elementwise_cubin_, "affine", FullGrid());
  judge::CandidateLaunch escaping = [=](gpu::Stream&, absl::Span<const CUdeviceptr> args) {
    long long cycles = 200'000'000;  // about 0.1 s
    void* spin_args[] = {&cycles};
    gpu::LaunchShape one;
    if (absl::Status status = spin->Launch(one, spin_args, *side_stream); !status.ok()) return status;
    return correct(*side_stream, args);
  };
  judge::JudgeVerdict verdict =
      JudgeOrDie(ElementwiseTask(kRows, kColumns), escaping, Affine(2, 1));
  EXPECT_FALSE(verdict.passed());
  EXPECT_TRUE(absl::StrContains(verdict.detail, "outside the stream")) << verdict.detail;
}

TEST_F(PlantedBugsTest, SoftmaxCorrectPassesAndFirstRowOnlyFails) {
  constexpr int64_t kSoftmaxRows = 256;
  forge::v1::KernelTask task = ElementwiseTask(kSoftmaxRows, kColumns);
  judge::JudgeVerdict correct =
      JudgeOrDie(task, Load(*softmax_cubin_, "softmax", kSoftmaxRows), SoftmaxReference);
  EXPECT_TRUE(correct.passed()) << correct.detail;
  judge::JudgeVerdict first_row =
      JudgeOrDie(task, Load(*softmax_cubin_, "softmax_first_row_only", kSoftmaxRows),
                 SoftmaxReference);
  EXPECT_EQ(first_row.reason, forge::v1::FAILURE_REASON_UNWRITTEN_OUTPUT);
  EXPECT_TRUE(absl::StrContains(first_row.detail, "element 1003 [1, 0] never written"))
      << first_row.detail;
}

}  // namespace
}  // namespace forge
