#include "worker/daemon/emulated_executor.h"

#include <memory>
#include <string>

#include "compiler/codegen/family.h"
#include "compiler/search/candidate.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/support/exported_model.h"

namespace forge::daemon {
namespace {

using ::forge::v1::Candidate;
using ::forge::v1::KernelTask;
using ::testing::HasSubstr;

// The tasks of the exported llama_block test model (tests/fixtures/make_models.py).
std::vector<KernelTask> LlamaBlockTasks() {
  absl::StatusOr<std::vector<KernelTask>> tasks = forge::testing::ExportedModelTasks("llama_block");
  EXPECT_TRUE(tasks.ok()) << tasks.status();
  return tasks.ok() ? *std::move(tasks) : std::vector<KernelTask>();
}

class EmulatedExecutorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const KernelTask& task : LlamaBlockTasks()) {
      if (task.family() == forge::v1::KERNEL_FAMILY_POINTWISE && pointwise_.digest().empty()) {
        pointwise_ = task;
      }
      if (task.family() == forge::v1::KERNEL_FAMILY_REDUCTION && reduction_.digest().empty()) {
        reduction_ = task;
      }
    }
    ASSERT_FALSE(pointwise_.digest().empty()) << "llama_block has no pointwise task";
    ASSERT_FALSE(reduction_.digest().empty()) << "llama_block has no reduction task";
    absl::StatusOr<std::unique_ptr<compile::CompilePool>> pool =
        compile::CompilePool::Create({.threads = 2});
    ASSERT_TRUE(pool.ok()) << pool.status();
    pool_ = *std::move(pool);
    absl::StatusOr<std::unique_ptr<EmulatedExecutor>> executor =
        EmulatedExecutor::Create("H200", 3, pool_.get());
    ASSERT_TRUE(executor.ok()) << executor.status();
    executor_ = *std::move(executor);
  }

  // The candidate at the default point of the first template of the task's own family.
  static Candidate DefaultCandidate(const KernelTask& task) {
    const codegen::KernelFamily* family = codegen::FindFamily(task.family());
    EXPECT_NE(family, nullptr);
    absl::StatusOr<std::vector<codegen::TemplateSpace>> spaces = family->ScheduleSpace(task);
    EXPECT_TRUE(spaces.ok() && !spaces->empty()) << spaces.status();
    absl::StatusOr<Candidate> candidate =
        search::MakeCandidate(task, *family, codegen::DefaultPoint(spaces->front()), "sm_90");
    EXPECT_TRUE(candidate.ok()) << candidate.status();
    return *candidate;
  }

  forge::v1::Result Evaluate(const KernelTask& task, const Candidate& candidate,
                             StageTimes* times) {
    absl::StatusOr<forge::v1::Result> result = executor_->Evaluate(task, candidate, times);
    EXPECT_TRUE(result.ok()) << result.status();
    return result.ok() ? *std::move(result) : forge::v1::Result();
  }

  KernelTask pointwise_;
  KernelTask reduction_;
  std::unique_ptr<compile::CompilePool> pool_;
  std::unique_ptr<EmulatedExecutor> executor_;
};

TEST_F(EmulatedExecutorTest, RegistersAsAnEmulatedGpu) {
  const forge::v1::GpuInfo& gpu = executor_->gpu();
  EXPECT_EQ(gpu.index(), 3);
  EXPECT_EQ(gpu.name(), "H200");
  EXPECT_EQ(gpu.arch(), "sm_90");
  EXPECT_EQ(gpu.sm_count(), 132);
  EXPECT_TRUE(gpu.emulated());
}

TEST_F(EmulatedExecutorTest, PointwiseAndReductionCandidatesArePredicted) {
  for (const KernelTask* task : {&pointwise_, &reduction_}) {
    SCOPED_TRACE(forge::v1::KernelFamily_Name(task->family()));
    const Candidate candidate = DefaultCandidate(*task);
    StageTimes times;
    const forge::v1::Result result = Evaluate(*task, candidate, &times);
    ASSERT_TRUE(result.has_measurement()) << result.failure().DebugString();
    const forge::v1::Measurement& measurement = result.measurement();
    EXPECT_EQ(measurement.candidate_digest(), candidate.digest());
    EXPECT_EQ(measurement.kind(), forge::v1::MEASUREMENT_KIND_PREDICTED);
    EXPECT_GT(measurement.median_us(), 0);
    EXPECT_GT(measurement.roofline_floor_us(), 0);
    EXPECT_GE(measurement.median_us(), measurement.roofline_floor_us());
    EXPECT_GT(measurement.percent_of_floor(), 0);
    EXPECT_THAT(measurement.device_name(), HasSubstr("predicted"));
    EXPECT_TRUE(measurement.metrics().resources_available());
    EXPECT_TRUE(times.ran(Stage::kGenerate));
    EXPECT_TRUE(times.ran(Stage::kCompile));
    EXPECT_TRUE(times.ran(Stage::kPredict));
    EXPECT_FALSE(times.ran(Stage::kJudge));
  }
  // Prepare compiled each kernel once; the backend's compile in Execute found it cached.
  EXPECT_EQ(pool_->stats().compiles, 2);
  EXPECT_EQ(pool_->stats().memory_hits + pool_->stats().in_flight_joins, 2);
}

// Result.compile carries the compile pool's seconds: measured for the first compile of a
// kernel, 0 and a cache hit for the same kernel again, nothing compiled for the baseline.
TEST_F(EmulatedExecutorTest, ResultsReportTheirCompileSeconds) {
  const Candidate candidate = DefaultCandidate(pointwise_);
  StageTimes first_times;
  const forge::v1::Result first = Evaluate(pointwise_, candidate, &first_times);
  ASSERT_TRUE(first.has_measurement()) << first.failure().DebugString();
  EXPECT_EQ(first.compile().origin(), forge::v1::COMPILE_ORIGIN_COMPILED);
  EXPECT_GT(first.compile().seconds(), 0);
  EXPECT_LE(first.compile().seconds(), first_times.seconds(Stage::kCompile));

  StageTimes again_times;
  const forge::v1::Result again = Evaluate(pointwise_, candidate, &again_times);
  ASSERT_TRUE(again.has_measurement()) << again.failure().DebugString();
  EXPECT_EQ(again.compile().origin(), forge::v1::COMPILE_ORIGIN_CACHE_HIT);
  EXPECT_EQ(again.compile().seconds(), 0);

  absl::StatusOr<Candidate> baseline = search::BaselineCandidate(pointwise_, "sm_90");
  ASSERT_TRUE(baseline.ok()) << baseline.status();
  StageTimes baseline_times;
  const forge::v1::Result eager = Evaluate(pointwise_, *baseline, &baseline_times);
  EXPECT_EQ(eager.compile().origin(), forge::v1::COMPILE_ORIGIN_NOT_COMPILED);
  EXPECT_EQ(eager.compile().seconds(), 0);

  // A generation failure compiled nothing either.
  Candidate foreign = candidate;
  foreign.set_generator_version("pointwise-0-from-another-build");
  foreign.set_digest(search::CandidateDigest(foreign));
  StageTimes foreign_times;
  const forge::v1::Result failed = Evaluate(pointwise_, foreign, &foreign_times);
  ASSERT_TRUE(failed.has_failure());
  EXPECT_EQ(failed.compile().origin(), forge::v1::COMPILE_ORIGIN_NOT_COMPILED);
}

TEST_F(EmulatedExecutorTest, BaselineIsPredictedWithoutCompiling) {
  absl::StatusOr<Candidate> baseline = search::BaselineCandidate(reduction_, "sm_90");
  ASSERT_TRUE(baseline.ok()) << baseline.status();
  StageTimes times;
  const forge::v1::Result result = Evaluate(reduction_, *baseline, &times);
  ASSERT_TRUE(result.has_measurement()) << result.failure().DebugString();
  EXPECT_EQ(result.measurement().kind(), forge::v1::MEASUREMENT_KIND_PREDICTED);
  EXPECT_GT(result.measurement().median_us(), 0);
  EXPECT_FALSE(result.measurement().metrics().resources_available());
  EXPECT_FALSE(times.ran(Stage::kCompile));
  EXPECT_EQ(pool_->stats().requests, 0);
}

TEST_F(EmulatedExecutorTest, CandidateOfAnotherGeneratorVersionFailsAtGenerate) {
  Candidate candidate = DefaultCandidate(pointwise_);
  candidate.set_generator_version("pointwise-0-from-another-build");
  candidate.set_digest(search::CandidateDigest(candidate));
  StageTimes times;
  const forge::v1::Result result = Evaluate(pointwise_, candidate, &times);
  ASSERT_TRUE(result.has_failure());
  EXPECT_EQ(result.failure().candidate_digest(), candidate.digest());
  EXPECT_EQ(result.failure().stage(), forge::v1::FAILURE_STAGE_GENERATE);
  EXPECT_EQ(result.failure().reason(), forge::v1::FAILURE_REASON_INTERNAL);
  EXPECT_THAT(result.failure().detail(), HasSubstr("pointwise-0-from-another-build"));
  EXPECT_FALSE(times.ran(Stage::kCompile));
}

TEST_F(EmulatedExecutorTest, PointOutsideTheSpaceFailsAtGenerate) {
  Candidate candidate = DefaultCandidate(reduction_);
  ASSERT_FALSE(candidate.parameters().empty());
  const std::string parameter = candidate.parameters().begin()->first;
  (*candidate.mutable_parameters())[parameter] = 12345;
  candidate.set_digest(search::CandidateDigest(candidate));
  StageTimes times;
  const forge::v1::Result result = Evaluate(reduction_, candidate, &times);
  ASSERT_TRUE(result.has_failure());
  EXPECT_EQ(result.failure().stage(), forge::v1::FAILURE_STAGE_GENERATE);
  EXPECT_EQ(result.failure().reason(), forge::v1::FAILURE_REASON_UNSUPPORTED);
  EXPECT_THAT(result.failure().detail(), HasSubstr(parameter));
  EXPECT_EQ(pool_->stats().requests, 0);
}

TEST_F(EmulatedExecutorTest, CandidateForAnotherArchIsRefused) {
  const codegen::KernelFamily* family = codegen::FindFamily(pointwise_.family());
  absl::StatusOr<std::vector<codegen::TemplateSpace>> spaces = family->ScheduleSpace(pointwise_);
  ASSERT_TRUE(spaces.ok()) << spaces.status();
  absl::StatusOr<Candidate> candidate =
      search::MakeCandidate(pointwise_, *family, codegen::DefaultPoint(spaces->front()), "sm_80");
  ASSERT_TRUE(candidate.ok()) << candidate.status();
  StageTimes times;
  const forge::v1::Result result = Evaluate(pointwise_, *candidate, &times);
  ASSERT_TRUE(result.has_failure());
  EXPECT_EQ(result.failure().stage(), forge::v1::FAILURE_STAGE_GENERATE);
  EXPECT_THAT(result.failure().detail(), HasSubstr("sm_80"));
  EXPECT_FALSE(times.ran(Stage::kGenerate));
}

TEST_F(EmulatedExecutorTest, HostLaunchedCandidateIsPredictedWithoutCompiling) {
  codegen::GeneratedKernel kernel;
  kernel.template_name = "some_cutlass_configuration";
  kernel.source = "not CUDA: nvcc would fail on it";
  kernel.hints.executor = codegen::Executor::kHostLaunched;
  kernel.compile_output = codegen::CompileOutput::kNvccSharedObject;
  kernel.compile_options = {"-DTILE=128"};
  PreparedCandidate prepared;
  prepared.digest = "host-launched-digest";
  prepared.task = &pointwise_;
  prepared.kernel = kernel;
  StageTimes times;
  absl::StatusOr<forge::v1::Result> result = executor_->Execute(std::move(prepared), &times);
  ASSERT_TRUE(result.ok()) << result.status();
  ASSERT_TRUE(result->has_measurement()) << result->DebugString();
  EXPECT_EQ(result->measurement().kind(), forge::v1::MEASUREMENT_KIND_PREDICTED);
  EXPECT_FALSE(result->measurement().metrics().resources_available());
  EXPECT_EQ(pool_->stats().requests, 0);
}

TEST(EmulatedExecutorCreateTest, UnknownGpuIsNotFound) {
  absl::StatusOr<std::unique_ptr<compile::CompilePool>> pool =
      compile::CompilePool::Create({.threads = 1});
  ASSERT_TRUE(pool.ok()) << pool.status();
  absl::StatusOr<std::unique_ptr<EmulatedExecutor>> executor =
      EmulatedExecutor::Create("Voodoo 2", 0, pool->get());
  EXPECT_TRUE(absl::IsNotFound(executor.status())) << executor.status();
  EXPECT_THAT(executor.status().message(), HasSubstr("H200"));
}

}  // namespace
}  // namespace forge::daemon
