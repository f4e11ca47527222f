// The worker's GPU executor with the real forge-sandbox-child: llama_block's pointwise and
// reduction candidates, and a task's ATen fallback, judged and timed into MEASURED results that
// carry the card's roofline floor. Without a GPU the child still starts and the executor says
// the GPU is unavailable (the daemon's cue to give candidates back) instead of failing them.
// The child is $FORGE_SANDBOX_CHILD, else the one built here.
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "compiler/codegen/family.h"
#include "compiler/search/candidate.h"
#include "gmock/gmock.h"
#include "absl/strings/match.h"
#include "gtest/gtest.h"
#include "tests/support/exported_model.h"
#include "tests/support/gpu_test.h"
#include "worker/compile/compile_pool.h"
#include "worker/daemon/gpu_executor.h"

namespace forge::daemon {
namespace {

using ::forge::v1::Candidate;
using ::forge::v1::KernelTask;
using ::testing::HasSubstr;

std::string SandboxChild() {
  const char* path = std::getenv("FORGE_SANDBOX_CHILD");
  return path != nullptr ? path : FORGE_SANDBOX_CHILD;
}

// The first task of `family` in the exported llama_block test model.
KernelTask LlamaBlockTask(forge::v1::KernelFamily family) {
  absl::StatusOr<std::vector<KernelTask>> tasks = forge::testing::ExportedModelTasks("llama_block");
  if (!tasks.ok()) {
    ADD_FAILURE() << tasks.status();
    return {};
  }
  for (const KernelTask& task : *tasks) {
    if (task.family() == family) return task;
  }
  ADD_FAILURE() << "llama_block has no " << forge::v1::KernelFamily_Name(family) << " task";
  return {};
}

Candidate DefaultCandidate(const KernelTask& task, const std::string& arch) {
  const codegen::KernelFamily* family = codegen::FindFamily(task.family());
  EXPECT_NE(family, nullptr);
  absl::StatusOr<std::vector<codegen::TemplateSpace>> spaces = family->ScheduleSpace(task);
  EXPECT_TRUE(spaces.ok() && !spaces->empty()) << spaces.status();
  absl::StatusOr<Candidate> candidate =
      search::MakeCandidate(task, *family, codegen::DefaultPoint(spaces->front()), arch);
  EXPECT_TRUE(candidate.ok()) << candidate.status();
  return *candidate;
}

std::unique_ptr<compile::CompilePool> Pool() {
  absl::StatusOr<std::unique_ptr<compile::CompilePool>> pool =
      compile::CompilePool::Create({.threads = 2});
  EXPECT_TRUE(pool.ok()) << pool.status();
  return pool.ok() ? *std::move(pool) : nullptr;
}

TEST(TableEntryForDeviceTest, DriverNamesMapOntoTheArchTable) {
  for (const char* name : {"NVIDIA H200", "NVIDIA H100 80GB HBM3", "NVIDIA GeForce RTX 4090"}) {
    absl::StatusOr<GpuArch> entry = TableEntryForDevice(name);
    EXPECT_TRUE(entry.ok()) << name << ": " << entry.status();
  }
  EXPECT_EQ(TableEntryForDevice("NVIDIA H200")->name, "H200");
  EXPECT_TRUE(absl::IsNotFound(TableEntryForDevice("NVIDIA Tesla K80").status()));
}

TEST(GpuExecutorTest, MeasuresGeneratedReductionAndFallbackCandidates) {
  FORGE_SKIP_WITHOUT_GPU();
  absl::StatusOr<std::vector<gpu::DeviceProperties>> devices = DiscoverGpus();
  ASSERT_TRUE(devices.ok()) << devices.status();
  ASSERT_FALSE(devices->empty());
  const gpu::DeviceProperties& device = devices->front();
  std::unique_ptr<compile::CompilePool> pool = Pool();
  ASSERT_NE(pool, nullptr);
  GpuExecutorOptions options;
  options.sandbox_child = SandboxChild();
  absl::StatusOr<std::unique_ptr<GpuExecutor>> executor =
      GpuExecutor::Create(device, options, pool.get());
  ASSERT_TRUE(executor.ok()) << executor.status();
  EXPECT_EQ((*executor)->gpu().name(), device.name);
  EXPECT_EQ((*executor)->gpu().arch(), device.arch());
  EXPECT_FALSE((*executor)->gpu().emulated());
  const bool in_table = TableEntryForDevice(device.name).ok();

  const KernelTask pointwise = LlamaBlockTask(forge::v1::KERNEL_FAMILY_POINTWISE);
  const KernelTask reduction = LlamaBlockTask(forge::v1::KERNEL_FAMILY_REDUCTION);
  absl::StatusOr<Candidate> baseline = search::BaselineCandidate(reduction, device.arch());
  ASSERT_TRUE(baseline.ok()) << baseline.status();
  struct Case {
    const KernelTask* task;
    Candidate candidate;
    bool generated;
  };
  for (const Case& c : {Case{&pointwise, DefaultCandidate(pointwise, device.arch()), true},
                        Case{&reduction, DefaultCandidate(reduction, device.arch()), true},
                        Case{&reduction, *baseline, false}}) {
    SCOPED_TRACE(c.candidate.template_name());
    StageTimes times;
    absl::StatusOr<forge::v1::Result> result =
        (*executor)->Evaluate(*c.task, c.candidate, &times);
    ASSERT_TRUE(result.ok()) << result.status();
    ASSERT_TRUE(result->has_measurement()) << result->failure().DebugString();
    const forge::v1::Measurement& measurement = result->measurement();
    EXPECT_EQ(measurement.candidate_digest(), c.candidate.digest());
    EXPECT_EQ(measurement.kind(), forge::v1::MEASUREMENT_KIND_MEASURED);
    EXPECT_EQ(measurement.device_name(), device.name);
    EXPECT_GT(measurement.median_us(), 0);
    EXPECT_LE(measurement.min_us(), measurement.median_us());
    EXPECT_GE(measurement.reps(), 20);
    EXPECT_TRUE(measurement.judge().passed());
    EXPECT_EQ(measurement.metrics().resources_available(), c.generated);
    if (in_table) {
      EXPECT_GT(measurement.roofline_floor_us(), 0);
      EXPECT_NEAR(measurement.percent_of_floor(),
                  measurement.roofline_floor_us() / measurement.median_us() * 100, 1e-9);
    }
    EXPECT_TRUE(times.ran(Stage::kJudge));
    EXPECT_TRUE(absl::StrContains(times.judge_breakdown(), "reference=")) << times.judge_breakdown();
    EXPECT_TRUE(times.ran(Stage::kTime));
    EXPECT_EQ(times.ran(Stage::kCompile), c.generated);
  }
}

// No GPU: the child starts, finds no device, and every request is Unavailable, which the
// executor passes on rather than blaming the candidate.
TEST(GpuExecutorTest, WithoutAGpuTheExecutorIsUnavailable) {
  if (gpu::DriverStatus().ok()) GTEST_SKIP() << "a GPU is present";
  std::unique_ptr<compile::CompilePool> pool = Pool();
  ASSERT_NE(pool, nullptr);
  gpu::DeviceProperties device;
  device.name = "NVIDIA H200";
  device.compute_capability_major = 9;
  device.compute_capability_minor = 0;
  GpuExecutorOptions options;
  options.sandbox_child = SandboxChild();
  absl::StatusOr<std::unique_ptr<GpuExecutor>> executor =
      GpuExecutor::Create(device, options, pool.get());
  ASSERT_TRUE(executor.ok()) << executor.status();
  const KernelTask pointwise = LlamaBlockTask(forge::v1::KERNEL_FAMILY_POINTWISE);
  StageTimes times;
  absl::StatusOr<forge::v1::Result> result =
      (*executor)->Evaluate(pointwise, DefaultCandidate(pointwise, "sm_90"), &times);
  EXPECT_TRUE(absl::IsUnavailable(result.status())) << result.status();
  EXPECT_TRUE(times.ran(Stage::kCompile));
}

TEST(GpuExecutorTest, MissingSandboxChildIsAnError) {
  std::unique_ptr<compile::CompilePool> pool = Pool();
  ASSERT_NE(pool, nullptr);
  gpu::DeviceProperties device;
  device.name = "NVIDIA H200";
  GpuExecutorOptions options;
  options.sandbox_child = "/nonexistent/forge-sandbox-child";
  absl::StatusOr<std::unique_ptr<GpuExecutor>> executor =
      GpuExecutor::Create(device, options, pool.get());
  EXPECT_TRUE(absl::IsInvalidArgument(executor.status())) << executor.status();
  EXPECT_THAT(executor.status().message(), HasSubstr("/nonexistent/forge-sandbox-child"));
}

}  // namespace
}  // namespace forge::daemon
