// The sandbox on a real GPU with the real forge-sandbox-child: a kernel that reads far out of
// bounds, one that never returns and one that traps each fail for their reason and cost a child,
// and after each a correct kernel passes the judge and the timer through the same sandbox.
// Host-launched candidates (compiler/codegen/host_launch_abi.h) of the same task: the shared
// object the pool's nvcc builds from worker/compile/testdata/host_launch_scale.cu is judged and
// timed, its variant whose forge_launch refuses fails with the object's own message, and runtime
// arguments the object cannot run make it unsupported.
// Skips where there is no GPU. The child is $FORGE_SANDBOX_CHILD, else the one built here; the
// objects' source $FORGE_HOST_LAUNCH_TEST_SOURCE, else the tree's.
#include <cstdlib>
#include <fstream>
#include <future>
#include <iostream>
#include <iterator>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "google/protobuf/text_format.h"
#include "gtest/gtest.h"
#include "tests/support/gpu_test.h"
#include "worker/compile/compile_pool.h"
#include "worker/gpu/device.h"
#include "worker/sandbox/sandbox.h"

namespace forge::sandbox {
namespace {

using ::testing::AnyOf;
using ::testing::HasSubstr;

constexpr uint32_t kBlock = 256;
constexpr int64_t kCount = 1000 * 1003;
constexpr absl::Duration kJudgeDeadline = absl::Seconds(5);

// y = x * 2 as the ATen group the production reference (the child's) runs in float64.
constexpr char kTask[] = R"pb(
  digest: "sandbox-gpu-twice"
  inputs {
    dtype: DTYPE_FLOAT32
    shape: [ 1000, 1003 ]
  }
  outputs {
    dtype: DTYPE_FLOAT32
    shape: [ 1000, 1003 ]
  }
  group {
    values {
      name: "x"
      tensor {
        dtype: DTYPE_FLOAT32
        shape: [ 1000, 1003 ]
      }
    }
    values {
      name: "y"
      tensor {
        dtype: DTYPE_FLOAT32
        shape: [ 1000, 1003 ]
      }
    }
    inputs { kind: INPUT_KIND_USER_INPUT value_name: "x" }
    nodes {
      name: "y"
      op: "aten::mul"
      overload: "Scalar"
      schema: "aten::mul.Scalar(Tensor self, Scalar other) -> Tensor"
      arguments { name: "self" tensor: "x" }
      arguments { name: "other" float_value: 2.0 }
      outputs: "y"
    }
    outputs { kind: OUTPUT_KIND_USER_OUTPUT value_name: "y" }
  }
)pb";

const char* const kKernels = R"(
#define N 1003000
extern "C" __global__ void twice(const float* x, float* y) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < N) y[i] = x[i] * 2.0f;
}
// Element i reads 16 KiB * i past x: up to 16 GiB past the end, unmapped for most threads. On the
// H200 (CUDA 13 driver) this faults as CUDA_ERROR_INVALID_ADDRESS_SPACE, as a 4 MiB stride does;
// CUDA_ERROR_ILLEGAL_ADDRESS is the other name an address fault goes by.
extern "C" __global__ void twice_reading_far_out_of_bounds(const float* x, float* y) {
  long long i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < N) y[i] = x[i * 4096] * 2.0f;
}
// Spins on a flag nothing clears; volatile, so the loop cannot be compiled away.
__device__ volatile int keep_spinning = 1;
extern "C" __global__ void twice_never_returning(const float* x, float* y) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  while (keep_spinning) {}
  if (i < N) y[i] = x[i] * 2.0f;
}
extern "C" __global__ void twice_trapping(const float* x, float* y) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i == 12345) __trap();
  if (i < N) y[i] = x[i] * 2.0f;
}
)";

// $FORGE_HOST_LAUNCH_TEST_SOURCE where the build tree's path does not exist (the GPU machine:
// benchmarks/gpu/run_gpu_tests.sh sets it), else the tree's.
std::string HostLaunchSourcePath() {
  const char* path = std::getenv("FORGE_HOST_LAUNCH_TEST_SOURCE");
  return path != nullptr ? path : FORGE_HOST_LAUNCH_TEST_SOURCE;
}

std::string ChildPath() {
  const char* path = std::getenv("FORGE_SANDBOX_CHILD");
  return path != nullptr ? path : FORGE_SANDBOX_CHILD;
}

class SandboxGpuTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (!gpu::DriverStatus().ok()) return;
    SandboxOptions options;
    options.child_path = ChildPath();
    options.judge_timeout = kJudgeDeadline;
    auto sandbox = Sandbox::Create(options);
    ASSERT_TRUE(sandbox.ok()) << sandbox.status();
    sandbox_ = sandbox->release();
    const SandboxStats stats = sandbox_->stats();
    ASSERT_TRUE(stats.device_status.ok()) << stats.device_status;

    // The kernels' cubin and both host-launched objects at once (a few seconds of nvcc).
    auto pool = compile::CompilePool::Create({.threads = 3});
    ASSERT_TRUE(pool.ok()) << pool.status();
    std::ifstream in(HostLaunchSourcePath());
    const std::string object_source((std::istreambuf_iterator<char>(in)),
                                    std::istreambuf_iterator<char>());
    ASSERT_FALSE(object_source.empty()) << HostLaunchSourcePath();
    std::future<compile::CompileResult> objects[2];
    for (int fails = 0; fails < 2; ++fails) {
      compile::CompileRequest request;
      request.output = codegen::CompileOutput::kNvccSharedObject;
      request.source = object_source;
      request.arch = stats.device_arch;
      if (fails) request.options = {"-DFORGE_TEST_LAUNCH_FAILS"};
      objects[fails] = (*pool)->Submit(std::move(request));
    }
    compile::CompileRequest request;
    request.source = kKernels;
    request.arch = stats.device_arch;
    compile::CompileResult compiled = (*pool)->Compile(request);
    ASSERT_TRUE(compiled.ok()) << compiled.status << "\n" << compiled.log;
    cubin_ = new std::string(compiled.cubin);
    for (int fails = 0; fails < 2; ++fails) {
      compile::CompileResult built = objects[fails].get();
      ASSERT_TRUE(built.ok()) << built.status << "\n" << built.log;
      std::cout << (fails ? "refusing object: " : "object: ") << built.cubin.size()
                << " bytes, nvcc " << built.compile_seconds << " s\n";
      objects_[fails] = new std::string(std::move(built.cubin));
    }
  }

  static void TearDownTestSuite() {
    delete sandbox_;
    sandbox_ = nullptr;
  }

  void SetUp() override {
    FORGE_SKIP_WITHOUT_GPU();
    ASSERT_NE(sandbox_, nullptr);
    ASSERT_NE(cubin_, nullptr);
  }

  static SandboxCandidate Candidate(const std::string& kernel_name) {
    SandboxCandidate candidate;
    candidate.digest = absl::StrCat("candidate-", kernel_name);
    EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(kTask, &candidate.task));
    candidate.kernel.kernel_name = kernel_name;
    candidate.kernel.launch.grid = {static_cast<uint32_t>((kCount + kBlock - 1) / kBlock), 1, 1};
    candidate.kernel.launch.block = {kBlock, 1, 1};
    candidate.cubin = *cubin_;
    return candidate;
  }

  // The host-launched candidate of the same task: x * 2 through the object's workspace.
  static SandboxCandidate HostLaunched(bool launch_fails, int64_t n = kCount) {
    SandboxCandidate candidate;
    candidate.digest = launch_fails ? "host-launched-refusing" : "host-launched-scale";
    EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(kTask, &candidate.task));
    candidate.kernel.template_name = "host_launch_scale_test";
    candidate.kernel.hints.executor = codegen::Executor::kHostLaunched;
    candidate.kernel.compile_output = codegen::CompileOutput::kNvccSharedObject;
    candidate.kernel.runtime_args = {n, 2};
    candidate.cubin = *objects_[launch_fails ? 1 : 0];
    return candidate;
  }

  // The failing candidate cost the child: a new one replaced it.
  static void ExpectChildReplaced(const SandboxStats& before) {
    const SandboxStats after = sandbox_->stats();
    EXPECT_EQ(after.restarts, before.restarts + 1);
    EXPECT_GT(after.child_pid, 0);
    EXPECT_NE(after.child_pid, before.child_pid);
    EXPECT_TRUE(after.device_status.ok()) << after.device_status;
  }

  // The worker keeps serving: a correct kernel passes the judge and the timer.
  static void ExpectCorrectKernelPasses() {
    absl::StatusOr<SandboxOutcome> judged = sandbox_->Judge(Candidate("twice"));
    ASSERT_TRUE(judged.ok()) << judged.status();
    EXPECT_TRUE(judged->passed()) << judged->failure->detail();
    ASSERT_TRUE(judged->verdict.has_value());
    EXPECT_GE(judged->verdict->evidence.draws(), 3);

    absl::StatusOr<SandboxOutcome> timed = sandbox_->Time(Candidate("twice"));
    ASSERT_TRUE(timed.ok()) << timed.status();
    EXPECT_TRUE(timed->passed()) << timed->failure->detail();
    ASSERT_TRUE(timed->timing.has_value());
    EXPECT_EQ(timed->timing->rep_us.size(), 20u);
    EXPECT_GT(timed->timing->summary.median, 0);
    std::cout << "twice: median " << timed->timing->summary.median << " us on "
              << sandbox_->stats().device_name << "\n";
  }

  static inline Sandbox* sandbox_ = nullptr;
  static inline std::string* cubin_ = nullptr;
  static inline std::string* objects_[2] = {nullptr, nullptr};  // the object, the refusing one
};

TEST_F(SandboxGpuTest, CorrectKernelPassesTheJudgeAndTheTimer) { ExpectCorrectKernelPasses(); }

TEST_F(SandboxGpuTest, FarOutOfBoundsReadIsAnAddressFaultCrash) {
  const SandboxStats before = sandbox_->stats();
  absl::StatusOr<SandboxOutcome> outcome =
      sandbox_->Judge(Candidate("twice_reading_far_out_of_bounds"));
  ASSERT_TRUE(outcome.ok()) << outcome.status();
  ASSERT_TRUE(outcome->failure.has_value());
  std::cout << "out of bounds: " << outcome->failure->ShortDebugString() << "\n";
  EXPECT_EQ(outcome->failure->reason(), forge::v1::FAILURE_REASON_CRASH);
  EXPECT_EQ(outcome->failure->stage(), forge::v1::FAILURE_STAGE_JUDGE);
  EXPECT_THAT(outcome->failure->detail(), AnyOf(HasSubstr("CUDA_ERROR_ILLEGAL_ADDRESS"),
                                                 HasSubstr("CUDA_ERROR_INVALID_ADDRESS_SPACE")));
  EXPECT_EQ(sandbox_->stats().crashes, before.crashes + 1);
  ExpectChildReplaced(before);
  ExpectCorrectKernelPasses();
}

TEST_F(SandboxGpuTest, KernelThatNeverReturnsTimesOut) {
  const SandboxStats before = sandbox_->stats();
  const absl::Time start = absl::Now();
  absl::StatusOr<SandboxOutcome> outcome = sandbox_->Judge(Candidate("twice_never_returning"));
  const absl::Duration took = absl::Now() - start;
  ASSERT_TRUE(outcome.ok()) << outcome.status();
  ASSERT_TRUE(outcome->failure.has_value());
  std::cout << "never returning (" << absl::FormatDuration(took)
            << "): " << outcome->failure->ShortDebugString() << "\n";
  EXPECT_EQ(outcome->failure->reason(), forge::v1::FAILURE_REASON_TIMEOUT);
  EXPECT_EQ(outcome->failure->stage(), forge::v1::FAILURE_STAGE_JUDGE);
  EXPECT_GE(took, kJudgeDeadline);
  EXPECT_EQ(sandbox_->stats().timeouts, before.timeouts + 1);
  ExpectChildReplaced(before);
  ExpectCorrectKernelPasses();
}

TEST_F(SandboxGpuTest, TrapIsACrash) {
  const SandboxStats before = sandbox_->stats();
  absl::StatusOr<SandboxOutcome> outcome = sandbox_->Judge(Candidate("twice_trapping"));
  ASSERT_TRUE(outcome.ok()) << outcome.status();
  ASSERT_TRUE(outcome->failure.has_value());
  std::cout << "trap: " << outcome->failure->ShortDebugString() << "\n";
  EXPECT_EQ(outcome->failure->reason(), forge::v1::FAILURE_REASON_CRASH);
  EXPECT_THAT(outcome->failure->detail(), HasSubstr("CUDA_ERROR_"));
  ExpectChildReplaced(before);
  ExpectCorrectKernelPasses();
}

TEST_F(SandboxGpuTest, HostLaunchedObjectPassesTheJudgeAndIsTimed) {
  ASSERT_NE(objects_[0], nullptr);
  absl::StatusOr<SandboxOutcome> judged = sandbox_->Judge(HostLaunched(false));
  ASSERT_TRUE(judged.ok()) << judged.status();
  EXPECT_TRUE(judged->passed()) << judged->failure->ShortDebugString();
  ASSERT_TRUE(judged->verdict.has_value());
  EXPECT_GE(judged->verdict->evidence.draws(), 3);

  absl::StatusOr<SandboxOutcome> timed = sandbox_->Time(HostLaunched(false));
  ASSERT_TRUE(timed.ok()) << timed.status();
  EXPECT_TRUE(timed->passed()) << timed->failure->ShortDebugString();
  ASSERT_TRUE(timed->timing.has_value());
  EXPECT_EQ(timed->timing->rep_us.size(), 20u);
  // 8 bytes an element (and the workspace's 8 more) at no more than ~4.8 TB/s: a shorter median
  // was not this object's kernel.
  EXPECT_GT(timed->timing->summary.median, kCount * 8 / 4.8e6);
  std::cout << "host-launched x * 2: median " << timed->timing->summary.median << " us on "
            << sandbox_->stats().device_name << "\n";
}

TEST_F(SandboxGpuTest, HostLaunchedRefusingLaunchFailsWithTheObjectsMessage) {
  ASSERT_NE(objects_[1], nullptr);
  absl::StatusOr<SandboxOutcome> judged = sandbox_->Judge(HostLaunched(true));
  ASSERT_TRUE(judged.ok()) << judged.status();
  ASSERT_TRUE(judged->failure.has_value());
  std::cout << "refusing object: " << judged->failure->ShortDebugString() << "\n";
  EXPECT_EQ(judged->failure->stage(), forge::v1::FAILURE_STAGE_JUDGE);
  EXPECT_EQ(judged->failure->reason(), forge::v1::FAILURE_REASON_CRASH);
  EXPECT_THAT(judged->failure->detail(),
              HasSubstr("planted failure: this object refuses every launch"));
  ExpectCorrectKernelPasses();
}

TEST_F(SandboxGpuTest, HostLaunchedArgumentsTheObjectCannotRunAreUnsupported) {
  ASSERT_NE(objects_[0], nullptr);
  absl::StatusOr<SandboxOutcome> judged = sandbox_->Judge(HostLaunched(false, /*n=*/-1));
  ASSERT_TRUE(judged.ok()) << judged.status();
  ASSERT_TRUE(judged->failure.has_value());
  EXPECT_EQ(judged->failure->reason(), forge::v1::FAILURE_REASON_UNSUPPORTED)
      << judged->failure->ShortDebugString();
  EXPECT_THAT(judged->failure->detail(), HasSubstr("forge_workspace_bytes"));
}

}  // namespace
}  // namespace forge::sandbox
