// Kernels with planted bugs, each of which the judge must reject for the right reason, and the
// correct kernels it must accept, without a draw cache, with one (where each candidate is judged a
// second time, on the draws the first judge left in the cache) and with the draws resident on the
// device as well (the second judge runs on the GPU and must reach the host's verdict, down to the
// evidence). Then the draw cache itself: later
// candidates of a task judged on cached draws get the verdicts they get without it. The references
// are computed here by hand in float64.
#include <cmath>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/gpu/kernel_source.h"
#include "tests/support/gpu_test.h"
#include "worker/compile/compile_pool.h"
#include "worker/gpu/device.h"
#include "worker/judge/host_staging.h"
#include "worker/judge/judge.h"
#include "worker/judge/thread_pool.h"
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

// The task's one output: its one [rows, columns] input with `row(values, columns)` applied to each
// row in place, in float64.
template <typename Row>
std::vector<std::vector<double>> ByRows(const forge::v1::KernelTask& task,
                                        absl::Span<const HostTensor> inputs, const Row& row) {
  const int64_t rows = task.inputs(0).shape(0);
  const int64_t columns = task.inputs(0).shape(1);
  std::vector<double> y = inputs[0].ToDoubles();
  for (int64_t r = 0; r < rows; ++r) row(y.data() + r * columns, columns);
  return std::vector<std::vector<double>>{y};
}

// Softmax along the last dim, in float64.
absl::StatusOr<std::vector<std::vector<double>>> SoftmaxReference(
    const forge::v1::KernelTask& task, absl::Span<const HostTensor> inputs) {
  return ByRows(task, inputs, [](double* values, int64_t columns) {
    double top = values[0];
    for (int64_t c = 0; c < columns; ++c) top = std::max(top, values[c]);
    double sum = 0;
    for (int64_t c = 0; c < columns; ++c) sum += values[c] = std::exp(values[c] - top);
    for (int64_t c = 0; c < columns; ++c) values[c] /= sum;
  });
}

const char* const kElementwiseKernels = R"(
#define N )" "1003000" R"(
extern "C" __global__ void affine(const float* x, float* y) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < N) y[i] = x[i] * 2.0f + 1.0f;
}
extern "C" __global__ void affine_off(const float* x, float* y) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < N) y[i] = x[i] * 2.0f + 1.01f;
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
// Right only where it finds the NaN poison of old (any NaN): a kernel that recognizes the poison.
extern "C" __global__ void affine_unless_poisoned(const float* x, float* y) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < N) y[i] = x[i] * 2.0f + (isnan(y[i]) ? 1.0f : 1.5f);
}
// Remembers each element's result by the input's address and replays it when called on the same
// buffer again: right on fresh buffers, stale when new contents arrive in a buffer it has seen.
__device__ const float* memo_input[N];
__device__ float memo_output[N];
extern "C" __global__ void affine_memoized_by_address(const float* x, float* y) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= N) return;
  if (memo_input[i] == x) { y[i] = memo_output[i]; return; }
  y[i] = x[i] * 2.0f + 1.0f;
  memo_output[i] = y[i];
  memo_input[i] = x;
}
// Remembers its results by input address, and replays them only while it is timed: from the 8th to
// the 26th consecutive launch on the same input buffer (the judge's draws and the re-checks
// before and after the timed reps see it compute), so the timed reps time a replay.
__device__ const float* replay_input[N];
__device__ int replay_calls[N];
__device__ float replay_output[N];
extern "C" __global__ void affine_replayed_while_timed(const float* x, float* y) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= N) return;
  if (replay_input[i] != x) { replay_input[i] = x; replay_calls[i] = 0; }
  int call = ++replay_calls[i];
  if (call >= 8 && call <= 26) { y[i] = replay_output[i]; return; }
  y[i] = x[i] * 2.0f + 1.0f;
  replay_output[i] = y[i];
}
// Right, and one element written out of bounds: past the output's end, before its start, past the
// input's end (which it must not write at all).
extern "C" __global__ void affine_one_past_the_end(const float* x, float* y) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < N) y[i] = x[i] * 2.0f + 1.0f;
  if (i == N - 1) y[N] = y[i];
}
extern "C" __global__ void affine_one_before_the_start(const float* x, float* y) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < N) y[i] = x[i] * 2.0f + 1.0f;
  if (i == 0) y[-1] = y[0];
}
extern "C" __global__ void affine_past_the_input(float* x, float* y) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < N) y[i] = x[i] * 2.0f + 1.0f;
  if (i == N - 1) x[N] = y[i];
}
// Right for its first 12 launches (more than the judge's draws, twice over with the cache), then
// one element past the end on every launch: only the timed runs write out of bounds.
__device__ unsigned int late_launches;
extern "C" __global__ void affine_past_the_end_when_timed(const float* x, float* y) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < N) y[i] = x[i] * 2.0f + 1.0f;
  if (i == N - 1 && atomicAdd(&late_launches, 1u) >= 12) y[N] = y[i];
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

// Layer norm along the last dim without weight and bias, eps 1e-5, in float64.
absl::StatusOr<std::vector<std::vector<double>>> LayerNormReference(
    const forge::v1::KernelTask& task, absl::Span<const HostTensor> inputs) {
  return ByRows(task, inputs, [](double* values, int64_t columns) {
    double mean = 0;
    for (int64_t c = 0; c < columns; ++c) mean += values[c];
    mean /= columns;
    double var = 0;
    for (int64_t c = 0; c < columns; ++c) var += (values[c] - mean) * (values[c] - mean);
    var /= columns;
    for (int64_t c = 0; c < columns; ++c) values[c] = (values[c] - mean) / std::sqrt(var + 1e-5);
  });
}

// A rows x 1003 float32 task of one node `op` reading the input as `operand`: the node makes the
// judge add the op's adversarial draws (the reference stays the hand-written one).
forge::v1::KernelTask RowTask(int64_t rows, const std::string& op, const std::string& operand) {
  forge::v1::KernelTask task = ElementwiseTask(rows, kColumns);
  task.set_digest(absl::StrCat("planted-", op, "-", rows));
  forge::v1::Node* node = task.mutable_group()->add_nodes();
  node->set_op(op);
  forge::v1::Argument* argument = node->add_arguments();
  argument->set_name(operand);
  argument->set_tensor("x");
  node->add_outputs("y");
  return task;
}

// The GPU, the compiled kernels and how to load them, for both suites.
class JudgeGpuTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (!gpu::DriverStatus().ok() || device_ != nullptr) return;
    auto device = gpu::Device::Open(0);
    ASSERT_TRUE(device.ok()) << device.status();
    device_ = device->release();
    auto pool = compile::CompilePool::Create({.threads = 2});
    ASSERT_TRUE(pool.ok()) << pool.status();
    auto comparer = judge::DeviceComparer::Create(*device_);
    ASSERT_TRUE(comparer.ok()) << comparer.status();
    comparer_ = comparer->release();
    // Every task on the device, however small: the tests' tasks are.
    device_draws_ = new judge::DeviceDraws(*device_, *comparer_, int64_t{4} << 30,
                                           /*min_task_bytes=*/0);
    // The row kernels, and the correct variants that share their block reductions, come from
    // kernels/*.cuh.
    const std::string row_kernels = testing::GpuTestKernels("row_kernels.cuh") + "\n" +
                                    testing::GpuTestKernels("correct_variants.cuh");
    for (auto [source, cubin] : {std::pair{std::string(kElementwiseKernels), &elementwise_cubin_},
                                 std::pair{std::string(kSoftmaxKernels), &softmax_cubin_},
                                 std::pair{row_kernels, &row_cubin_}}) {
      compile::CompileRequest request;
      request.source = source;
      request.arch = device_->properties().arch();
      compile::CompileResult compiled = (*pool)->Compile(request);
      ASSERT_TRUE(compiled.ok()) << compiled.status << "\n" << compiled.log;
      *cubin = new std::string(compiled.cubin);
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

  static uint32_t FullGrid() { return (kCount + kBlock - 1) / kBlock; }

  static judge::JudgeOptions WithCache(judge::DrawCache* cache) {
    judge::JudgeOptions options;
    options.draw_cache = cache;
    return options;
  }

  // The verdicts are equal down to every figure and note of their evidence.
  static void ExpectSameVerdict(const judge::JudgeVerdict& expected,
                                const judge::JudgeVerdict& actual) {
    EXPECT_EQ(actual.passed(), expected.passed());
    EXPECT_EQ(actual.reason, expected.reason);
    EXPECT_EQ(actual.detail, expected.detail);
    EXPECT_EQ(actual.context_lost, expected.context_lost);
    EXPECT_EQ(actual.evidence.DebugString(), expected.evidence.DebugString());
  }

  // Times the candidate as the sandbox child does (outputs poisoned before each rep, one untimed
  // run on draw 0's inputs amid the reps) and re-checks the outputs of the timed runs.
  static judge::JudgeVerdict TimeAndRecheck(judge::JudgedCandidate& candidate) {
    auto timer = timer::Timer::Create(*device_);
    EXPECT_TRUE(timer.ok()) << timer.status();
    if (!timer.ok()) return judge::JudgeVerdict();
    timer::TimerOptions options;
    options.before_each_rep = [&](gpu::Stream& stream) { return candidate.PoisonOutputs(stream); };
    options.between_reps = [&] { return candidate.RunOnOtherContents(); };
    auto timing = (*timer)->Time([&](gpu::Stream& stream) { return candidate.Launch(stream); },
                                 options);
    EXPECT_TRUE(timing.ok()) << timing.status();
    if (!timing.ok()) return judge::JudgeVerdict();
    EXPECT_GT(timing->summary.median, 0);
    auto rechecked = candidate.RecheckTimedOutputs();
    EXPECT_TRUE(rechecked.ok()) << rechecked.status();
    return rechecked.ok() ? *std::move(rechecked) : judge::JudgeVerdict();
  }

  // Times the candidate and re-checks the outputs of the timed runs, which must pass.
  static void ExpectSurvivesTiming(judge::JudgedCandidate& candidate) {
    const judge::JudgeVerdict rechecked = TimeAndRecheck(candidate);
    EXPECT_TRUE(rechecked.passed()) << rechecked.detail;
    bool ran_amid = false;
    for (const std::string& note : rechecked.evidence.notes()) {
      ran_amid |= absl::StrContains(note, "amid the timed reps");
    }
    EXPECT_TRUE(ran_amid);
  }

  static inline gpu::Device* device_ = nullptr;
  static inline judge::DeviceComparer* comparer_ = nullptr;
  static inline judge::DeviceDraws* device_draws_ = nullptr;
  static inline std::string* elementwise_cubin_ = nullptr;
  static inline std::string* softmax_cubin_ = nullptr;
  static inline std::string* row_cubin_ = nullptr;
};

// Where the judge finds a task's draws: computed for each candidate, in the draw cache, or in the
// draw cache and resident on the device.
enum class Draws { kFresh, kCached, kOnDevice };

// The planted bugs, for each way the judge finds its draws.
class PlantedBugsTest : public JudgeGpuTest, public ::testing::WithParamInterface<Draws> {
 protected:
  // Judges the candidate; with the cache, twice: the second judge must find every draw it runs in
  // the cache and reach the first one's verdict, and is the one returned.
  std::unique_ptr<judge::JudgedCandidate> JudgeOrDie(const forge::v1::KernelTask& task,
                                                     const judge::CandidateLaunch& launch,
                                                     const judge::ReferenceFn& reference) {
    judge::DrawCache* cache = GetParam() != Draws::kFresh ? &cache_ : nullptr;
    judge::JudgeOptions options = WithCache(cache);
    if (GetParam() == Draws::kOnDevice) options.device_draws = device_draws_;
    auto judged = judge::Judge(*device_, task, launch, reference, options);
    EXPECT_TRUE(judged.ok()) << judged.status();
    if (!judged.ok() || cache == nullptr) return judged.ok() ? *std::move(judged) : nullptr;

    const judge::DrawCacheStats before = cache_.stats();
    auto again = judge::Judge(*device_, task, launch, reference, options);
    EXPECT_TRUE(again.ok()) << again.status();
    if (!again.ok()) return nullptr;
    const judge::DrawCacheStats after = cache_.stats();
    EXPECT_EQ(after.misses, before.misses);
    EXPECT_EQ(after.hits + after.input_hits - before.hits - before.input_hits,
              (*again)->verdict().evidence.draws());
    ExpectSameVerdict((*judged)->verdict(), (*again)->verdict());
    return *std::move(again);
  }

  judge::JudgeVerdict VerdictOrDie(const forge::v1::KernelTask& task,
                                   const judge::CandidateLaunch& launch,
                                   const judge::ReferenceFn& reference) {
    std::unique_ptr<judge::JudgedCandidate> judged = JudgeOrDie(task, launch, reference);
    return judged == nullptr ? judge::JudgeVerdict() : judged->verdict();
  }

  // The verdict on elementwise kernel `name` of kElementwiseKernels as y = 2x + 1 over the full
  // grid.
  judge::JudgeVerdict AffineVerdict(const std::string& name) {
    return VerdictOrDie(ElementwiseTask(kRows, kColumns),
                        Load(*elementwise_cubin_, name, FullGrid()), Affine(2, 1));
  }

  // With resident draws, every draw the verdict covers was judged on the device.
  static void ExpectJudgedOnDevice(const judge::JudgeVerdict& verdict) {
    if (GetParam() != Draws::kOnDevice) return;
    EXPECT_EQ(verdict.draws_on_device, verdict.evidence.draws());
  }

  judge::DrawCache cache_;
};

INSTANTIATE_TEST_SUITE_P(Draws, PlantedBugsTest,
                         ::testing::Values(Draws::kFresh, Draws::kCached, Draws::kOnDevice),
                         [](const ::testing::TestParamInfo<Draws>& info) {
                           switch (info.param) {
                             case Draws::kFresh: return "Fresh";
                             case Draws::kCached: return "FromTheDrawCache";
                             default: return "OnTheDevice";
                           }
                         });

TEST_P(PlantedBugsTest, CorrectKernelPassesAndSurvivesTiming) {
  forge::v1::KernelTask task = ElementwiseTask(kRows, kColumns);
  std::unique_ptr<judge::JudgedCandidate> judged =
      JudgeOrDie(task, Load(*elementwise_cubin_, "affine", FullGrid()), Affine(2, 1));
  ASSERT_NE(judged, nullptr);
  const judge::JudgeVerdict& verdict = judged->verdict();
  ASSERT_TRUE(verdict.passed()) << verdict.detail;
  EXPECT_EQ(verdict.evidence.draws(), 3);
  EXPECT_FALSE(verdict.evidence.has_failed_draw());
  EXPECT_DOUBLE_EQ(verdict.evidence.atol(), 1e-4);
  EXPECT_LT(verdict.evidence.rel_norm_error(), 1e-6);
  ExpectJudgedOnDevice(verdict);
  ExpectSurvivesTiming(*judged);
}

TEST_P(PlantedBugsTest, OneRowOnlyIsRejected) {
  judge::JudgeVerdict verdict = AffineVerdict("affine_one_row");
  EXPECT_FALSE(verdict.passed());
  EXPECT_EQ(verdict.reason, forge::v1::FAILURE_REASON_UNWRITTEN_OUTPUT);
  EXPECT_EQ(verdict.evidence.failed_draw(), 0);
  EXPECT_TRUE(absl::StrContains(verdict.detail, "element 1003 [1, 0] never written")) << verdict.detail;
  ExpectJudgedOnDevice(verdict);
}

TEST_P(PlantedBugsTest, UnwrittenTailIsRejected) {
  judge::JudgeVerdict verdict =
      VerdictOrDie(ElementwiseTask(kRows, kColumns),
                   Load(*elementwise_cubin_, "affine_tail_unwritten", FullGrid()), Affine(2, 1));
  EXPECT_EQ(verdict.reason, forge::v1::FAILURE_REASON_UNWRITTEN_OUTPUT);
  EXPECT_TRUE(absl::StrContains(verdict.detail, "element 1002995 [999, 998] never written"))
      << verdict.detail;
  EXPECT_TRUE(absl::StrContains(verdict.detail, "5 of 1003000 elements unwritten")) << verdict.detail;
  ExpectJudgedOnDevice(verdict);
}

TEST_P(PlantedBugsTest, OffByOneInTheLastBlockIsRejected) {
  // The grid rounds down: the last, partial block never runs.
  judge::JudgeVerdict verdict =
      VerdictOrDie(ElementwiseTask(kRows, kColumns),
                   Load(*elementwise_cubin_, "affine", kCount / kBlock), Affine(2, 1));
  EXPECT_EQ(verdict.reason, forge::v1::FAILURE_REASON_UNWRITTEN_OUTPUT);
  EXPECT_TRUE(absl::StrContains(verdict.detail, absl::StrCat(kCount % kBlock, " of 1003000")))
      << verdict.detail;
}

TEST_P(PlantedBugsTest, WritingTheInputInPlaceIsRejected) {
  // A correct candidate first: the buggy one fails before the reference runs, so the references
  // its second judge finds (on the device, too) are the correct one's.
  const judge::ReferenceFn affine = Affine(2, 1);  // one reference: the same draws
  VerdictOrDie(ElementwiseTask(kRows, kColumns), Load(*elementwise_cubin_, "affine", FullGrid()),
               affine);
  judge::JudgeVerdict verdict =
      VerdictOrDie(ElementwiseTask(kRows, kColumns),
                   Load(*elementwise_cubin_, "affine_in_place", FullGrid()), affine);
  EXPECT_EQ(verdict.reason, forge::v1::FAILURE_REASON_WRONG_RESULT);
  EXPECT_TRUE(absl::StrContains(verdict.detail, "modified input 0")) << verdict.detail;
  ExpectJudgedOnDevice(verdict);
}

TEST_P(PlantedBugsTest, ZerosForATinyOutputAreRejected) {
  forge::v1::KernelTask task = ElementwiseTask(kRows, kColumns);
  judge::JudgeVerdict zeros =
      VerdictOrDie(task, Load(*elementwise_cubin_, "tiny_zeros", FullGrid()), Affine(1e-9, 0));
  EXPECT_EQ(zeros.reason, forge::v1::FAILURE_REASON_WRONG_RESULT);
  EXPECT_TRUE(absl::StrContains(zeros.detail, "relative-norm error")) << zeros.detail;
  judge::JudgeVerdict correct =
      VerdictOrDie(task, Load(*elementwise_cubin_, "tiny", FullGrid()), Affine(1e-9, 0));
  EXPECT_TRUE(correct.passed()) << correct.detail;
}

TEST_P(PlantedBugsTest, ConstantForANearConstantOutputIsRejected) {
  forge::v1::KernelTask task = ElementwiseTask(kRows, kColumns);
  judge::JudgeVerdict constant = VerdictOrDie(
      task, Load(*elementwise_cubin_, "near_constant_as_constant", FullGrid()), Affine(1e-3, 1000));
  EXPECT_EQ(constant.reason, forge::v1::FAILURE_REASON_WRONG_RESULT);
  EXPECT_TRUE(absl::StrContains(constant.detail, "near constant")) << constant.detail;
  judge::JudgeVerdict correct = VerdictOrDie(
      task, Load(*elementwise_cubin_, "near_constant", FullGrid()), Affine(1e-3, 1000));
  EXPECT_TRUE(correct.passed()) << correct.detail;
  bool flagged = false;
  for (const std::string& note : correct.evidence.notes()) {
    flagged |= absl::StrContains(note, "reference near constant");
  }
  EXPECT_TRUE(flagged);
}

TEST_P(PlantedBugsTest, WorkOnASideStreamIsRejected) {
  // The candidate returns after enqueueing its work on a stream of its own, behind a spin: it
  // runs while the judge holds the launch in a captured graph, and changes the outputs.
  auto side_stream = std::make_shared<gpu::Stream>(*device_->CreateStream());
  auto module = std::make_shared<gpu::Module>(*device_->LoadModule(*elementwise_cubin_));
  auto spin = std::make_shared<gpu::Kernel>(*module->GetKernel("spin"));
  judge::CandidateLaunch correct = Load(*elementwise_cubin_, "affine", FullGrid());
  const judge::ReferenceFn affine = Affine(2, 1);  // one reference: the same draws
  VerdictOrDie(ElementwiseTask(kRows, kColumns), correct, affine);  // references cached
  judge::CandidateLaunch escaping = [=](gpu::Stream&, absl::Span<const CUdeviceptr> args) {
    long long cycles = 200'000'000;  // about 0.1 s
    void* spin_args[] = {&cycles};
    gpu::LaunchShape one;
    if (absl::Status status = spin->Launch(one, spin_args, *side_stream); !status.ok()) return status;
    return correct(*side_stream, args);
  };
  judge::JudgeVerdict verdict = VerdictOrDie(ElementwiseTask(kRows, kColumns), escaping, affine);
  EXPECT_FALSE(verdict.passed());
  EXPECT_TRUE(absl::StrContains(verdict.detail, "outside the stream")) << verdict.detail;
  ExpectJudgedOnDevice(verdict);
}

TEST_P(PlantedBugsTest, FastWorkOnASideStreamIsRejected) {
  // Issue 20 item 6: the candidate's work on a stream of its own, with no spin, is complete by the
  // time the judge reads its outputs, so reading twice cannot see it. The judge captures the
  // launch from its stream: the side stream's work runs while nothing of the judge's stream has,
  // and the outputs change before the captured graph runs.
  auto side_stream = std::make_shared<gpu::Stream>(*device_->CreateStream());
  judge::CandidateLaunch correct = Load(*elementwise_cubin_, "affine", FullGrid());
  const judge::ReferenceFn affine = Affine(2, 1);  // one reference: the same draws
  VerdictOrDie(ElementwiseTask(kRows, kColumns), correct, affine);  // references cached
  judge::CandidateLaunch escaping = [=](gpu::Stream&, absl::Span<const CUdeviceptr> args) {
    return correct(*side_stream, args);
  };
  judge::JudgeVerdict verdict = VerdictOrDie(ElementwiseTask(kRows, kColumns), escaping, affine);
  EXPECT_FALSE(verdict.passed());
  EXPECT_EQ(verdict.evidence.failed_draw(), 0);
  EXPECT_TRUE(absl::StrContains(verdict.detail, "outside the stream it was given"))
      << verdict.detail;
  ExpectJudgedOnDevice(verdict);
}

TEST_P(PlantedBugsTest, ALaunchThatCannotBeCapturedRunsUncapturedAndPasses) {
  // Synchronizing the stream inside the launch invalidates the capture: the judge launches it
  // again uncaptured, says so, and a correct kernel passes.
  judge::CandidateLaunch correct = Load(*elementwise_cubin_, "affine", FullGrid());
  judge::CandidateLaunch synchronizing = [=](gpu::Stream& stream,
                                             absl::Span<const CUdeviceptr> args) {
    if (absl::Status launched = correct(stream, args); !launched.ok()) return launched;
    return stream.Synchronize();
  };
  judge::JudgeVerdict verdict =
      VerdictOrDie(ElementwiseTask(kRows, kColumns), synchronizing, Affine(2, 1));
  EXPECT_TRUE(verdict.passed()) << verdict.detail;
  bool noted = false;
  for (const std::string& note : verdict.evidence.notes()) {
    noted |= absl::StrContains(note, "could not be captured");
  }
  EXPECT_TRUE(noted);
}

TEST_P(PlantedBugsTest, AKernelThatRecognizesThePoisonIsRejected) {
  // Launch 0 fills with a NaN, launch 1 with finite garbage: the second draw fails.
  judge::JudgeVerdict verdict = AffineVerdict("affine_unless_poisoned");
  EXPECT_FALSE(verdict.passed());
  EXPECT_EQ(verdict.reason, forge::v1::FAILURE_REASON_WRONG_RESULT);
  EXPECT_EQ(verdict.evidence.failed_draw(), 1);
  ExpectJudgedOnDevice(verdict);
}

TEST_P(PlantedBugsTest, AKernelThatMemoizesByAddressIsRejected) {
  // The last draw writes new contents into the buffers of the draw before.
  judge::JudgeVerdict verdict = AffineVerdict("affine_memoized_by_address");
  EXPECT_FALSE(verdict.passed());
  EXPECT_EQ(verdict.reason, forge::v1::FAILURE_REASON_WRONG_RESULT) << verdict.detail;
}

TEST_P(PlantedBugsTest, AKernelThatReplaysByAddressOnlyWhileTimedFailsTheRunAmidTheReps) {
  // Issue 20 item 4: every judged launch and the re-check after timing compute; the timed reps
  // replay. The untimed run with draw 0's inputs amid the reps gets the timed draw's answer.
  std::unique_ptr<judge::JudgedCandidate> judged =
      JudgeOrDie(ElementwiseTask(kRows, kColumns),
                 Load(*elementwise_cubin_, "affine_replayed_while_timed", FullGrid()), Affine(2, 1));
  ASSERT_NE(judged, nullptr);
  ASSERT_TRUE(judged->verdict().passed()) << judged->verdict().detail;
  const judge::JudgeVerdict rechecked = TimeAndRecheck(*judged);
  EXPECT_FALSE(rechecked.passed());
  EXPECT_EQ(rechecked.reason, forge::v1::FAILURE_REASON_WRONG_RESULT) << rechecked.detail;
  EXPECT_TRUE(absl::StrContains(rechecked.detail, "amid the timed reps")) << rechecked.detail;
}

TEST_P(PlantedBugsTest, WritesOutOfBoundsAreRejectedAndNamed) {
  struct Case {
    const char* kernel;
    const char* buffer;  // the buffer whose guard zone changed
    const char* where;
  };
  const judge::ReferenceFn affine = Affine(2, 1);  // one reference: the same draws
  for (const Case& c : {Case{"affine_one_past_the_end", "output 0 (", "past its end"},
                        Case{"affine_one_before_the_start", "output 0 (", "before its start"},
                        Case{"affine_past_the_input", "input 0 (", "past its end"}}) {
    SCOPED_TRACE(c.kernel);
    // A correct candidate first: the buggy one fails before the reference runs, so the references
    // its second judge finds (on the device, too) are the correct one's.
    VerdictOrDie(ElementwiseTask(kRows, kColumns), Load(*elementwise_cubin_, "affine", FullGrid()),
                 affine);
    judge::JudgeVerdict verdict = VerdictOrDie(
        ElementwiseTask(kRows, kColumns), Load(*elementwise_cubin_, c.kernel, FullGrid()), affine);
    EXPECT_FALSE(verdict.passed());
    EXPECT_EQ(verdict.reason, forge::v1::FAILURE_REASON_OUT_OF_BOUNDS_WRITE) << verdict.detail;
    EXPECT_EQ(verdict.evidence.failed_draw(), 0);
    EXPECT_TRUE(absl::StrContains(verdict.detail, c.buffer)) << verdict.detail;
    EXPECT_TRUE(absl::StrContains(verdict.detail, c.where)) << verdict.detail;
    EXPECT_TRUE(absl::StrContains(verdict.detail, "written outside its bounds")) << verdict.detail;
    ExpectJudgedOnDevice(verdict);
  }
}

TEST_P(PlantedBugsTest, WritesOutOfBoundsInTheTimedRunsFailTheRecheck) {
  std::unique_ptr<judge::JudgedCandidate> judged =
      JudgeOrDie(ElementwiseTask(kRows, kColumns),
                 Load(*elementwise_cubin_, "affine_past_the_end_when_timed", FullGrid()),
                 Affine(2, 1));
  ASSERT_NE(judged, nullptr);
  ASSERT_TRUE(judged->verdict().passed()) << judged->verdict().detail;
  auto timer = timer::Timer::Create(*device_);
  ASSERT_TRUE(timer.ok()) << timer.status();
  timer::TimerOptions options;
  options.before_each_rep = [&](gpu::Stream& stream) { return judged->PoisonOutputs(stream); };
  ASSERT_TRUE(
      (*timer)->Time([&](gpu::Stream& stream) { return judged->Launch(stream); }, options).ok());
  auto rechecked = judged->RecheckTimedOutputs();
  ASSERT_TRUE(rechecked.ok()) << rechecked.status();
  EXPECT_FALSE(rechecked->passed());
  EXPECT_EQ(rechecked->reason, forge::v1::FAILURE_REASON_OUT_OF_BOUNDS_WRITE) << rechecked->detail;
  EXPECT_TRUE(absl::StrContains(rechecked->detail, "timed runs: output 0 (")) << rechecked->detail;
  EXPECT_TRUE(absl::StrContains(rechecked->detail, "past its end")) << rechecked->detail;
}

TEST_P(PlantedBugsTest, SoftmaxCorrectPassesAndFirstRowOnlyFails) {
  constexpr int64_t kSoftmaxRows = 256;
  forge::v1::KernelTask task = ElementwiseTask(kSoftmaxRows, kColumns);
  judge::JudgeVerdict correct =
      VerdictOrDie(task, Load(*softmax_cubin_, "softmax", kSoftmaxRows), SoftmaxReference);
  EXPECT_TRUE(correct.passed()) << correct.detail;
  judge::JudgeVerdict first_row = VerdictOrDie(
      task, Load(*softmax_cubin_, "softmax_first_row_only", kSoftmaxRows), SoftmaxReference);
  EXPECT_EQ(first_row.reason, forge::v1::FAILURE_REASON_UNWRITTEN_OUTPUT);
  EXPECT_TRUE(absl::StrContains(first_row.detail, "element 1003 [1, 0] never written"))
      << first_row.detail;
}

TEST_P(PlantedBugsTest, SoftmaxWithoutTheMaxFailsOnLargeLogits) {
  constexpr int64_t kSoftmaxRows = 256;
  const forge::v1::KernelTask task = RowTask(kSoftmaxRows, "aten::_softmax", "self");
  for (const char* correct : {"softmax_shuffle_kahan"}) {
    judge::JudgeVerdict verdict =
        VerdictOrDie(task, Load(*row_cubin_, correct, kSoftmaxRows), SoftmaxReference);
    EXPECT_TRUE(verdict.passed()) << correct << ": " << verdict.detail;
    EXPECT_EQ(verdict.evidence.draws(), 4) << correct;  // 3 standard, 1 adversarial
  }
  std::unique_ptr<judge::JudgedCandidate> original =
      JudgeOrDie(task, Load(*softmax_cubin_, "softmax", kSoftmaxRows), SoftmaxReference);
  ASSERT_NE(original, nullptr);
  EXPECT_TRUE(original->verdict().passed()) << original->verdict().detail;
  ExpectSurvivesTiming(*original);
  judge::JudgeVerdict bug = VerdictOrDie(
      task, Load(*row_cubin_, "softmax_without_max", kSoftmaxRows), SoftmaxReference);
  EXPECT_FALSE(bug.passed());
  EXPECT_EQ(bug.evidence.failed_draw(), 3);
  EXPECT_TRUE(absl::StrContains(bug.detail, "adversarial: large logits")) << bug.detail;
}

TEST_P(PlantedBugsTest, LayerNormBugsFailOnLargeMeansAndTinyVariances) {
  constexpr int64_t kNormRows = 256;
  const forge::v1::KernelTask task = RowTask(kNormRows, "aten::native_layer_norm", "input");
  judge::JudgeVerdict correct =
      VerdictOrDie(task, Load(*row_cubin_, "layer_norm", kNormRows), LayerNormReference);
  EXPECT_TRUE(correct.passed()) << correct.detail;
  EXPECT_EQ(correct.evidence.draws(), 5);  // 3 standard, large mean, tiny variance
  judge::JudgeVerdict moments = VerdictOrDie(
      task, Load(*row_cubin_, "layer_norm_moments", kNormRows), LayerNormReference);
  EXPECT_FALSE(moments.passed());
  EXPECT_TRUE(absl::StrContains(moments.detail, "adversarial: large mean")) << moments.detail;
  judge::JudgeVerdict eps = VerdictOrDie(
      task, Load(*row_cubin_, "layer_norm_eps_outside", kNormRows), LayerNormReference);
  EXPECT_FALSE(eps.passed());
  EXPECT_TRUE(absl::StrContains(eps.detail, "adversarial: tiny variance")) << eps.detail;
}

// The false-rejection side: correct kernels that sum in other orders (sequential, warp-shuffle
// trees, atomics whose order changes from launch to launch, Kahan, Welford) or use fast exp
// (__expf) must pass every judge, and a correct kernel whose input goes through pageable host
// memory must never be judged on stale input. Each kernel is judged kJudgesInARow times in a row
// without a draw cache, each judge with a seed of its own: new inputs for every draw, adversarial
// ones included. Kernels: kernels/correct_variants.cuh, compiled with kernels/row_kernels.cuh.
constexpr int kJudgesInARow = 50;
constexpr int kPageableJudges = 150;

class NoFalseRejectionTest : public JudgeGpuTest {
 protected:
  // Judges `launch` `judges` times with seeds of their own (and `options` otherwise); every verdict
  // must pass. Prints the tally.
  static void ExpectEveryJudgePasses(const forge::v1::KernelTask& task,
                                     const judge::CandidateLaunch& launch,
                                     const judge::ReferenceFn& reference, const std::string& label,
                                     int judges, judge::JudgeOptions options = {}) {
    const uint64_t first_seed = options.seed;
    int passed = 0;
    int draws = 0;
    std::string first_failure;
    for (int run = 0; run < judges; ++run) {
      options.seed = first_seed + static_cast<uint64_t>(run);
      auto judged = judge::Judge(*device_, task, launch, reference, options);
      ASSERT_TRUE(judged.ok()) << label << ": " << judged.status();
      const judge::JudgeVerdict& verdict = (*judged)->verdict();
      draws += verdict.evidence.draws();
      if (verdict.passed()) {
        ++passed;
      } else if (first_failure.empty()) {
        first_failure = absl::StrCat("seed ", options.seed, ": ", verdict.detail);
      }
    }
    std::printf("%s: %d of %d judges passed (%d draws)\n", label.c_str(), passed, judges, draws);
    EXPECT_EQ(passed, judges) << label << ", first rejection: " << first_failure;
  }
};

TEST_F(NoFalseRejectionTest, SoftmaxInOtherOrdersWithFastExpAndAtomicSumsAlwaysPasses) {
  constexpr int64_t kSoftmaxRows = 256;
  const forge::v1::KernelTask task = RowTask(kSoftmaxRows, "aten::_softmax", "self");
  for (const char* name : {"softmax_sequential", "softmax_fast_exp", "softmax_atomic_sum"}) {
    ExpectEveryJudgePasses(task, Load(*row_cubin_, name, kSoftmaxRows), SoftmaxReference,
                           name, kJudgesInARow);
  }
  ExpectEveryJudgePasses(task, Load(*row_cubin_, "softmax_shuffle_kahan", kSoftmaxRows),
                         SoftmaxReference, "softmax_shuffle_kahan", kJudgesInARow);
}

TEST_F(NoFalseRejectionTest, LayerNormWithShuffleTreesAtomicSumsAndWelfordAlwaysPasses) {
  constexpr int64_t kNormRows = 256;
  const forge::v1::KernelTask task = RowTask(kNormRows, "aten::native_layer_norm", "input");
  for (const char* name : {"layer_norm_atomic_sums", "layer_norm_welford"}) {
    ExpectEveryJudgePasses(task, Load(*row_cubin_, name, kNormRows), LayerNormReference,
                           name, kJudgesInARow);
  }
  ExpectEveryJudgePasses(task, Load(*row_cubin_, "layer_norm", kNormRows), LayerNormReference,
                         "layer_norm (shuffle trees)", kJudgesInARow);
}

// Issue 20's false rejection: with pageable staging, an upload by a blocking cuMemcpyHtoD was not
// ordered before the launch on the judge's non-blocking stream, and a correct kernel reading a
// 1 MiB input was rejected 25 times in 150. Uploads are ordered on the judge's stream now.
TEST_F(NoFalseRejectionTest, ACorrectKernelReadingAPageableUploadIsNeverRejected) {
  const forge::v1::KernelTask task = ElementwiseTask(512, 512);
  judge::JudgeOptions pageable;  // no staging given: the judge's own, pageable
  ExpectEveryJudgePasses(task, Load(*row_cubin_, "affine_1mib", 512 * 512 / kBlock),
                         Affine(2, 1), "affine_1mib, pageable staging", kPageableJudges,
                         pageable);
}

// The draw cache across the candidates of a task.
class DrawCacheGpuTest : public JudgeGpuTest {
 protected:
  // Judges the candidate with `options`; the verdict, or a failure of the test.
  static std::unique_ptr<judge::JudgedCandidate> JudgeOrDie(const forge::v1::KernelTask& task,
                                                            const judge::CandidateLaunch& launch,
                                                            const judge::ReferenceFn& reference,
                                                            const judge::JudgeOptions& options) {
    auto judged = judge::Judge(*device_, task, launch, reference, options);
    EXPECT_TRUE(judged.ok()) << judged.status();
    return judged.ok() ? *std::move(judged) : nullptr;
  }

  // The cache holds draw `draw` of `task` for `reference` with the default seed, and its inputs
  // are those drawn afresh: no candidate changed them.
  static void ExpectPristineDraw(judge::DrawCache& cache, const forge::v1::KernelTask& task,
                                 const judge::ReferenceFn& reference, int draw) {
    const std::vector<judge::InputDomain> domains = judge::InferInputDomains(task);
    std::optional<judge::CachedDraw> cached =
        cache.Find(judge::MakeDrawKey(task, domains, reference.id(), /*native_reference=*/false,
                                      judge::JudgeOptions().seed, draw));
    ASSERT_TRUE(cached.has_value());
    for (int i = 0; i < task.inputs_size(); ++i) {
      auto fresh =
          judge::DrawInput(task.inputs(i), domains[i], draw, i, judge::JudgeOptions().seed);
      ASSERT_TRUE(fresh.ok()) << fresh.status();
      EXPECT_TRUE(fresh->storage == (*cached->inputs)[i].storage) << "input " << i;
    }
  }
};

TEST_F(DrawCacheGpuTest, TheNextCandidateIsJudgedOnCachedDrawsWithTheSameVerdict) {
  const forge::v1::KernelTask task = ElementwiseTask(kRows, kColumns);
  const judge::ReferenceFn reference = Affine(2, 1);
  const judge::CandidateLaunch first = Load(*elementwise_cubin_, "affine", FullGrid());
  // The same kernel in blocks of 128: another candidate of the task.
  const judge::CandidateLaunch second =
      Load(*elementwise_cubin_, "affine", (kCount + 127) / 128, 128);
  auto uncached = JudgeOrDie(task, second, reference, {});
  ASSERT_NE(uncached, nullptr);
  ASSERT_TRUE(uncached->verdict().passed()) << uncached->verdict().detail;

  judge::DrawCache cache;
  auto judged_first = JudgeOrDie(task, first, reference, WithCache(&cache));
  ASSERT_NE(judged_first, nullptr);
  EXPECT_TRUE(judged_first->verdict().passed()) << judged_first->verdict().detail;
  EXPECT_EQ(cache.stats().misses, 3);
  EXPECT_EQ(cache.stats().entries, 3);

  auto judged_second = JudgeOrDie(task, second, reference, WithCache(&cache));
  ASSERT_NE(judged_second, nullptr);
  EXPECT_EQ(cache.stats().hits, 3);
  EXPECT_EQ(cache.stats().misses, 3);
  ExpectSameVerdict(uncached->verdict(), judged_second->verdict());
  ExpectSurvivesTiming(*judged_second);
  ExpectPristineDraw(cache, task, reference, 0);
}

TEST_F(DrawCacheGpuTest, ACandidateThatWritesItsInputsIsCaughtOnCachedDraws) {
  const forge::v1::KernelTask task = ElementwiseTask(kRows, kColumns);
  const judge::ReferenceFn reference = Affine(2, 1);
  const judge::CandidateLaunch in_place = Load(*elementwise_cubin_, "affine_in_place", FullGrid());
  auto uncached = JudgeOrDie(task, in_place, reference, {});
  ASSERT_NE(uncached, nullptr);

  judge::DrawCache cache;
  auto correct = JudgeOrDie(task, Load(*elementwise_cubin_, "affine", FullGrid()), reference,
                            WithCache(&cache));
  ASSERT_NE(correct, nullptr);
  ASSERT_TRUE(correct->verdict().passed()) << correct->verdict().detail;
  auto cached = JudgeOrDie(task, in_place, reference, WithCache(&cache));
  ASSERT_NE(cached, nullptr);
  EXPECT_EQ(cache.stats().hits, 1);
  EXPECT_EQ(cached->verdict().reason, forge::v1::FAILURE_REASON_WRONG_RESULT);
  EXPECT_TRUE(absl::StrContains(cached->verdict().detail, "modified input 0"))
      << cached->verdict().detail;
  ExpectSameVerdict(uncached->verdict(), cached->verdict());

  // What it wrote stayed in its own device buffers: the next candidate gets the pristine draws.
  ExpectPristineDraw(cache, task, reference, 0);
  auto after = JudgeOrDie(task, Load(*elementwise_cubin_, "affine", FullGrid()), reference,
                          WithCache(&cache));
  ASSERT_NE(after, nullptr);
  ExpectSameVerdict(correct->verdict(), after->verdict());
}

TEST_F(DrawCacheGpuTest, AWrongCandidateFailsOnCachedDraws) {
  const forge::v1::KernelTask task = ElementwiseTask(kRows, kColumns);
  const judge::ReferenceFn reference = Affine(2, 1);
  const judge::CandidateLaunch off = Load(*elementwise_cubin_, "affine_off", FullGrid());
  auto uncached = JudgeOrDie(task, off, reference, {});
  ASSERT_NE(uncached, nullptr);
  EXPECT_EQ(uncached->verdict().reason, forge::v1::FAILURE_REASON_WRONG_RESULT);

  judge::DrawCache cache;
  ASSERT_NE(JudgeOrDie(task, Load(*elementwise_cubin_, "affine", FullGrid()), reference,
                       WithCache(&cache)),
            nullptr);
  auto cached = JudgeOrDie(task, off, reference, WithCache(&cache));
  ASSERT_NE(cached, nullptr);
  EXPECT_EQ(cache.stats().hits, 1);
  ExpectSameVerdict(uncached->verdict(), cached->verdict());
}

TEST_F(DrawCacheGpuTest, AnotherSeedOrReferenceDrawsAfresh) {
  const forge::v1::KernelTask task = ElementwiseTask(kRows, kColumns);
  const judge::ReferenceFn reference = Affine(2, 1);
  const judge::CandidateLaunch launch = Load(*elementwise_cubin_, "affine", FullGrid());
  judge::DrawCache cache;
  ASSERT_NE(JudgeOrDie(task, launch, reference, WithCache(&cache)), nullptr);

  // A re-verification with a fresh seed gets draws of its own.
  judge::JudgeOptions fresh_seed = WithCache(&cache);
  fresh_seed.seed += 1;
  auto reverified = JudgeOrDie(task, launch, reference, fresh_seed);
  ASSERT_NE(reverified, nullptr);
  EXPECT_TRUE(reverified->verdict().passed()) << reverified->verdict().detail;
  EXPECT_EQ(cache.stats().hits, 0);
  EXPECT_EQ(cache.stats().misses, 6);

  // Another reference of the same task (here: another function) is never served this one's.
  auto other = JudgeOrDie(task, launch, Affine(2, 1.5), WithCache(&cache));
  ASSERT_NE(other, nullptr);
  EXPECT_EQ(other->verdict().reason, forge::v1::FAILURE_REASON_WRONG_RESULT);
  EXPECT_EQ(cache.stats().hits, 0);
}

TEST_F(DrawCacheGpuTest, AJudgedCandidateKeepsItsDrawWhenTheCacheEvictsIt) {
  const forge::v1::KernelTask task = ElementwiseTask(kRows, kColumns);
  const judge::ReferenceFn reference = Affine(2, 1);
  const judge::CandidateLaunch launch = Load(*elementwise_cubin_, "affine", FullGrid());
  int64_t task_bytes = 0;
  {
    judge::DrawCache sizing;
    ASSERT_NE(JudgeOrDie(task, launch, reference, WithCache(&sizing)), nullptr);
    task_bytes = sizing.stats().bytes;
  }
  judge::DrawCache cache(task_bytes);  // one task's draws, no more
  auto judged = JudgeOrDie(task, launch, reference, WithCache(&cache));
  ASSERT_NE(judged, nullptr);
  ASSERT_TRUE(judged->verdict().passed()) << judged->verdict().detail;

  // Another task's draws push all of this one's out.
  const forge::v1::KernelTask other = ElementwiseTask(kColumns, kRows);
  ASSERT_NE(JudgeOrDie(other, launch, reference, WithCache(&cache)), nullptr);
  const std::vector<judge::InputDomain> domains = judge::InferInputDomains(task);
  for (int draw = 0; draw < 3; ++draw) {
    EXPECT_FALSE(cache
                     .Find(judge::MakeDrawKey(task, domains, reference.id(), false,
                                              judge::JudgeOptions().seed, draw))
                     .has_value())
        << "draw " << draw;
  }
  ExpectSurvivesTiming(*judged);
}

TEST_F(DrawCacheGpuTest, AFailedReferenceIsNotCached) {
  const forge::v1::KernelTask task = ElementwiseTask(kRows, kColumns);
  auto calls = std::make_shared<int>(0);
  const judge::ReferenceFn flaky = [calls](const forge::v1::KernelTask& kernel_task,
                                           absl::Span<const HostTensor> inputs)
      -> absl::StatusOr<std::vector<std::vector<double>>> {
    if (++*calls == 1) return absl::UnavailableError("the reference failed once");
    return Affine(2, 1)(kernel_task, inputs);
  };
  const judge::CandidateLaunch launch = Load(*elementwise_cubin_, "affine", FullGrid());
  judge::DrawCache cache;
  auto failed = judge::Judge(*device_, task, launch, flaky, WithCache(&cache));
  EXPECT_TRUE(absl::IsUnavailable(failed.status())) << failed.status();

  auto judged = JudgeOrDie(task, launch, flaky, WithCache(&cache));
  ASSERT_NE(judged, nullptr);
  EXPECT_TRUE(judged->verdict().passed()) << judged->verdict().detail;
  EXPECT_EQ(*calls, 4);  // draw 0 twice, then draws 1 and 2
  EXPECT_EQ(cache.stats().input_hits, 1);  // draw 0's inputs were kept, without a reference
  EXPECT_EQ(cache.stats().hits, 0);
}

// A large output (4M elements: 64 of the judge's host chunks) whose one planted bug sits in the
// last chunk: the chunked, parallel host passes must find it and name the same element as one
// thread does, and the verdict must not depend on the number of threads or on page-locked staging.
constexpr int64_t kLargeRows = 4096;
constexpr int64_t kLargeColumns = 1024;
constexpr int64_t kLargeCount = kLargeRows * kLargeColumns;

const char* const kLargeKernels = R"(
#define N )" "4194304" R"(
extern "C" __global__ void affine(const float* x, float* y) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < N) y[i] = x[i] * 2.0f + 1.0f;
}
extern "C" __global__ void affine_one_wrong_near_the_end(const float* x, float* y) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < N) y[i] = x[i] * 2.0f + (i == N - 3 ? 2.0f : 1.0f);
}
extern "C" __global__ void affine_one_unwritten_near_the_end(const float* x, float* y) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < N && i != N - 2) y[i] = x[i] * 2.0f + 1.0f;
}
extern "C" __global__ void affine_writes_last_input(float* x, float* y) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < N) {
    y[i] = x[i] * 2.0f + 1.0f;
    if (i == N - 1) x[i] = -x[i];
  }
}
)";

class LargeTensorJudgeTest : public JudgeGpuTest {
 protected:
  static void SetUpTestSuite() {
    JudgeGpuTest::SetUpTestSuite();
    if (device_ == nullptr || large_cubin_ != nullptr) return;
    auto pool = compile::CompilePool::Create({.threads = 1});
    ASSERT_TRUE(pool.ok()) << pool.status();
    compile::CompileRequest request;
    request.source = kLargeKernels;
    request.arch = device_->properties().arch();
    compile::CompileResult compiled = (*pool)->Compile(request);
    ASSERT_TRUE(compiled.ok()) << compiled.status << "\n" << compiled.log;
    large_cubin_ = new std::string(compiled.cubin);
    reference_ = new judge::ReferenceFn(Affine(2, 1));
    cache_ = new judge::DrawCache();
    // The cache holds the task's references before any test: each test's device way runs on it.
    judge::JudgeOptions cached;
    cached.draw_cache = cache_;
    auto correct = judge::Judge(*device_, ElementwiseTask(kLargeRows, kLargeColumns),
                                LoadLarge("affine"), *reference_, cached);
    ASSERT_TRUE(correct.ok() && (*correct)->verdict().passed());
  }

  static judge::CandidateLaunch LoadLarge(const std::string& name) {
    return Load(*large_cubin_, name, kLargeCount / kBlock);
  }

  // Judges `launch` on the large task with one host thread and the call's own pageable staging,
  // then with three threads and page-locked staging kept across candidates, with the default pool
  // and the draw cache, and with the draws resident on the device: the verdicts are identical down
  // to the evidence. The last is returned.
  static std::unique_ptr<judge::JudgedCandidate> JudgeEveryWay(
      const judge::CandidateLaunch& launch) {
    const forge::v1::KernelTask task = ElementwiseTask(kLargeRows, kLargeColumns);
    judge::ThreadPool one_thread(1);
    judge::JudgeOptions serial;
    serial.threads = &one_thread;
    auto first = judge::Judge(*device_, task, launch, *reference_, serial);
    EXPECT_TRUE(first.ok()) << first.status();
    if (!first.ok()) return nullptr;

    judge::ThreadPool three_threads(3);
    judge::HostStaging page_locked(*device_);
    judge::JudgeOptions parallel;
    parallel.threads = &three_threads;
    parallel.staging = &page_locked;
    auto staged = judge::Judge(*device_, task, launch, *reference_, parallel);
    EXPECT_TRUE(staged.ok()) << staged.status();
    if (!staged.ok()) return nullptr;
    ExpectSameVerdict((*first)->verdict(), (*staged)->verdict());
    EXPECT_GT(page_locked.stats().acquired, 0);
    EXPECT_EQ(page_locked.stats().page_lock_failures, 0);

    auto cached = judge::Judge(*device_, task, launch, *reference_, WithCache(cache_));
    EXPECT_TRUE(cached.ok()) << cached.status();
    if (!cached.ok()) return nullptr;
    ExpectSameVerdict((*first)->verdict(), (*cached)->verdict());

    judge::JudgeOptions on_device = WithCache(cache_);
    on_device.device_draws = device_draws_;
    auto resident = judge::Judge(*device_, task, launch, *reference_, on_device);
    EXPECT_TRUE(resident.ok()) << resident.status();
    if (!resident.ok()) return nullptr;
    ExpectSameVerdict((*first)->verdict(), (*resident)->verdict());
    EXPECT_EQ((*resident)->verdict().draws_on_device, (*resident)->verdict().evidence.draws());
    return *std::move(resident);
  }

  static inline std::string* large_cubin_ = nullptr;
  static inline judge::ReferenceFn* reference_ = nullptr;
  static inline judge::DrawCache* cache_ = nullptr;
};

TEST_F(LargeTensorJudgeTest, CorrectKernelPassesAndSurvivesTimingWithPageLockedStaging) {
  std::unique_ptr<judge::JudgedCandidate> judged = JudgeEveryWay(LoadLarge("affine"));
  ASSERT_NE(judged, nullptr);
  EXPECT_TRUE(judged->verdict().passed()) << judged->verdict().detail;
  EXPECT_EQ(judged->verdict().evidence.draws(), 3);

  // The timed runs re-checked through page-locked staging kept across candidates.
  judge::HostStaging page_locked(*device_);
  judge::JudgeOptions options = WithCache(cache_);
  options.staging = &page_locked;
  auto staged = judge::Judge(*device_, ElementwiseTask(kLargeRows, kLargeColumns),
                             LoadLarge("affine"), *reference_, options);
  ASSERT_TRUE(staged.ok()) << staged.status();
  ASSERT_TRUE((*staged)->verdict().passed()) << (*staged)->verdict().detail;
  ExpectSurvivesTiming(**staged);
  // The next candidate reuses the blocks the first one was lent.
  const int64_t allocations = page_locked.stats().allocations;
  auto next = judge::Judge(*device_, ElementwiseTask(kLargeRows, kLargeColumns),
                           LoadLarge("affine"), *reference_, options);
  ASSERT_TRUE(next.ok()) << next.status();
  EXPECT_EQ(page_locked.stats().allocations, allocations);
}

TEST_F(LargeTensorJudgeTest, OneWrongElementNearTheEndIsNamed) {
  std::unique_ptr<judge::JudgedCandidate> judged =
      JudgeEveryWay(LoadLarge("affine_one_wrong_near_the_end"));
  ASSERT_NE(judged, nullptr);
  const judge::JudgeVerdict& verdict = judged->verdict();
  EXPECT_EQ(verdict.reason, forge::v1::FAILURE_REASON_WRONG_RESULT);
  EXPECT_EQ(verdict.evidence.failed_draw(), 0);
  EXPECT_TRUE(absl::StrContains(verdict.detail, "element 4194301 [4095, 1021]: candidate"))
      << verdict.detail;
  EXPECT_TRUE(absl::StrContains(verdict.detail, "1 of 4194304 elements outside the tolerance"))
      << verdict.detail;
}

TEST_F(LargeTensorJudgeTest, OneUnwrittenElementInTheLastChunkIsNamed) {
  std::unique_ptr<judge::JudgedCandidate> judged =
      JudgeEveryWay(LoadLarge("affine_one_unwritten_near_the_end"));
  ASSERT_NE(judged, nullptr);
  const judge::JudgeVerdict& verdict = judged->verdict();
  EXPECT_EQ(verdict.reason, forge::v1::FAILURE_REASON_UNWRITTEN_OUTPUT);
  EXPECT_TRUE(absl::StrContains(verdict.detail, "element 4194302 [4095, 1022] never written"))
      << verdict.detail;
  EXPECT_TRUE(absl::StrContains(verdict.detail, "; 1 of 4194304 elements unwritten"))
      << verdict.detail;
}

TEST_F(LargeTensorJudgeTest, WritingTheLastInputElementIsCaught) {
  std::unique_ptr<judge::JudgedCandidate> judged =
      JudgeEveryWay(LoadLarge("affine_writes_last_input"));
  ASSERT_NE(judged, nullptr);
  const judge::JudgeVerdict& verdict = judged->verdict();
  EXPECT_EQ(verdict.reason, forge::v1::FAILURE_REASON_WRONG_RESULT);
  EXPECT_TRUE(absl::StrContains(verdict.detail,
                                "modified input 0 (float32[4096, 1024]): element 4194303 "
                                "[4095, 1023]"))
      << verdict.detail;
}

}  // namespace
}  // namespace forge
