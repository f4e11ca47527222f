// compute-sanitizer on would-be bests, for real: kernels whose outputs are right (the judge, run
// here in-process with a float64 reference, passes each of them) but that read past their input
// (memcheck), race on shared memory (racecheck) or read an output before writing it (initcheck)
// are rejected by the sanitizer step (sandbox/sanitize.h: the real forge-sandbox-child started
// under the real tool), with the tool's message; the honest kernel passes every tool. Each case
// prints the step's wall seconds: its cost per would-be best.
//
// Needs a GPU, compute-sanitizer (judge::FindComputeSanitizer: $PATH, $CUDA_HOME/bin,
// /usr/local/cuda/bin) and the child (FORGE_SANDBOX_CHILD in the environment overrides the
// build's); skips without the first two.
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/gpu/affine_task.h"
#include "tests/gpu/kernel_source.h"
#include "tests/support/gpu_test.h"
#include "worker/compile/compile_pool.h"
#include "worker/judge/judge.h"
#include "worker/judge/sanitizer.h"
#include "worker/sandbox/sanitize.h"

namespace forge {
namespace {

using testing::AffineReference;
using testing::AffineTask;

constexpr uint32_t kBlock = 256;
constexpr uint32_t kGrid =
    (testing::kAffineRows * testing::kAffineColumns + kBlock - 1) / kBlock;

std::string ChildPath() {
  const char* path = std::getenv("FORGE_SANDBOX_CHILD");
  return path != nullptr ? path : FORGE_SANDBOX_CHILD;
}

class SanitizerGpuTest : public testing::GpuTest {
 protected:
  void SetUpDevice() override {
    absl::StatusOr<std::string> tool = judge::FindComputeSanitizer("");
    if (!tool.ok()) GTEST_SKIP() << tool.status();
    tool_ = *tool;
    auto pool = compile::CompilePool::Create({.threads = 1});
    ASSERT_TRUE(pool.ok()) << pool.status();
    compile::CompileRequest request;
    request.source = testing::GpuTestKernels("sanitizer_bugs.cuh");
    request.arch = device_->properties().arch();
    compile::CompileResult compiled = (*pool)->Compile(request);
    ASSERT_TRUE(compiled.ok()) << compiled.status << "\n" << compiled.log;
    cubin_ = compiled.cubin;
  }

  sandbox::SandboxCandidate Candidate(const std::string& name) const {
    sandbox::SandboxCandidate candidate;
    candidate.digest = name;
    candidate.task = AffineTask("sanitizer-affine");
    candidate.kernel.kernel_name = name;
    candidate.kernel.launch.grid = {kGrid, 1, 1};
    candidate.kernel.launch.block = {kBlock, 1, 1};
    candidate.kernel.hints.executor = codegen::Executor::kGeneratedKernel;
    candidate.cubin = cubin_;
    return candidate;
  }

  // The judge's verdict on kernel `name` (outputs compared with the float64 reference).
  void ExpectJudgePasses(const std::string& name) {
    codegen::GeneratedKernel kernel = Candidate(name).kernel;
    auto launch = judge::LoadGeneratedKernel(*device_, cubin_, kernel);
    ASSERT_TRUE(launch.ok()) << launch.status();
    auto judged = judge::Judge(*device_, AffineTask("sanitizer-affine"), *launch, AffineReference);
    ASSERT_TRUE(judged.ok()) << judged.status();
    EXPECT_TRUE((*judged)->verdict().passed()) << name << ": " << (*judged)->verdict().detail;
  }

  sandbox::SanitizeOutcome Sanitize(const std::string& name) {
    absl::StatusOr<sandbox::SanitizeOutcome> outcome =
        sandbox::Sanitize({.tool_path = tool_, .child_path = ChildPath(), .gpu_ordinal = 0},
                          Candidate(name), judge::JudgeOptions());
    EXPECT_TRUE(outcome.ok()) << outcome.status();
    if (!outcome.ok()) return {};
    std::printf("sanitizer step on %s: %.2f s, state %s%s%s\n", name.c_str(),
                outcome->evidence.seconds(),
                forge::v1::SanitizerState_Name(outcome->evidence.state()).c_str(),
                outcome->failure.has_value() ? ", rejected: " : "",
                outcome->failure.has_value() ? outcome->failure->detail().c_str() : "");
    return *std::move(outcome);
  }

  // Kernel `name` passes the judge and is rejected by `tool`, its report naming the kernel.
  void ExpectRejectedBy(const std::string& name, const std::string& tool) {
    ExpectJudgePasses(name);
    const sandbox::SanitizeOutcome outcome = Sanitize(name);
    ASSERT_TRUE(outcome.failure.has_value())
        << name << ": " << forge::v1::SanitizerState_Name(outcome.evidence.state()) << " "
        << outcome.evidence.detail();
    EXPECT_EQ(outcome.failure->reason(), forge::v1::FAILURE_REASON_SANITIZER_REPORT);
    EXPECT_EQ(outcome.failure->stage(), forge::v1::FAILURE_STAGE_JUDGE);
    EXPECT_TRUE(absl::StartsWith(outcome.failure->detail(), "compute-sanitizer " + tool + ":"))
        << outcome.failure->detail() << "\n" << outcome.failure->log();
    EXPECT_TRUE(absl::StrContains(outcome.failure->log(), name)) << outcome.failure->log();
  }

  std::string tool_;
  std::string cubin_;
};

TEST_F(SanitizerGpuTest, AnHonestKernelPassesEveryTool) {
  ExpectJudgePasses("affine");
  const sandbox::SanitizeOutcome outcome = Sanitize("affine");
  EXPECT_FALSE(outcome.failure.has_value()) << outcome.failure->detail() << "\n"
                                            << outcome.failure->log();
  EXPECT_EQ(outcome.evidence.state(), forge::v1::SANITIZER_STATE_PASSED)
      << outcome.evidence.detail();
  EXPECT_EQ(outcome.evidence.tools_size(), 4);
  EXPECT_GT(outcome.evidence.seconds(), 0);
}

TEST_F(SanitizerGpuTest, AnOutOfBoundsReadIsRejectedByMemcheck) {
  ExpectRejectedBy("affine_reads_past_the_end", "memcheck");
}

TEST_F(SanitizerGpuTest, ASharedMemoryRaceThatPassesTheComparisonIsRejectedByRacecheck) {
  ExpectRejectedBy("affine_shared_race", "racecheck");
}

TEST_F(SanitizerGpuTest, AnUninitializedReadIsRejectedByInitcheck) {
  ExpectRejectedBy("affine_reads_its_output_first", "initcheck");
}

// ATen's kernels are PyTorch's: not sanitized, and said so without starting a tool.
TEST_F(SanitizerGpuTest, AnAtenCandidateIsNotApplicable) {
  sandbox::SandboxCandidate candidate = Candidate("affine");
  candidate.kernel.hints.executor = codegen::Executor::kAten;
  absl::StatusOr<sandbox::SanitizeOutcome> outcome =
      sandbox::Sanitize({.tool_path = tool_, .child_path = ChildPath()}, candidate, {});
  ASSERT_TRUE(outcome.ok()) << outcome.status();
  EXPECT_EQ(outcome->evidence.state(), forge::v1::SANITIZER_STATE_NOT_APPLICABLE);
  EXPECT_FALSE(outcome->failure.has_value());
}

}  // namespace
}  // namespace forge
