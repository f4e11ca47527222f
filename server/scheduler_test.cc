// The scheduler against a real redis-server, real partitioned test models and the real search.
// The test plays the workers by calling the scheduler directly, with results computed from the
// candidates (a deterministic "time" per schedule), so every outcome is checkable.
#include "server/scheduler.h"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/digest/sha256.h"
#include "common/speedup/speedup.h"
#include "compiler/codegen/family.h"
#include "compiler/codegen/testing/codegen_test_util.h"
#include "compiler/graph/partition.h"
#include "compiler/graph/task_digest.h"
#include "compiler/search/candidate.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/job_store.h"
#include "server/redis_keys.h"
#include "server/result_cache.h"
#include "tests/support/hostile_graphs.h"
#include "tests/support/redis_server.h"

namespace forge::server {
namespace {

using ::forge::v1::Candidate;
using ::forge::v1::JobState;
using ::forge::v1::LeaseResponse;
using ::forge::v1::Result;
using ::testing::IsEmpty;
using ::testing::Not;

forge::v1::Graph LoadModel(const std::string& name) {
  const char* directory = std::getenv("FORGE_TEST_MODELS");
  std::ifstream file(absl::StrCat(directory == nullptr ? "" : directory, "/", name, "/graph.pb"),
                     std::ios::binary);
  std::stringstream bytes;
  bytes << file.rdbuf();
  forge::v1::Graph graph;
  EXPECT_TRUE(graph.ParseFromString(bytes.str())) << name;
  return graph;
}

// A predicted "time" that depends on the candidate only: the baseline takes 100 us, every other
// candidate between 20 and 120 us.
Result ResultFor(const Candidate& candidate) {
  Result result;
  forge::v1::Measurement* m = result.mutable_measurement();
  m->set_candidate_digest(candidate.digest());
  m->set_kind(forge::v1::MEASUREMENT_KIND_PREDICTED);
  const bool baseline = candidate.family() == forge::v1::KERNEL_FAMILY_ATEN;
  const double us = baseline ? 100.0 : 20.0 + static_cast<double>(
                                                  static_cast<unsigned char>(candidate.digest()[0]) % 100);
  m->set_median_us(us);
  m->set_roofline_floor_us(10.0);
  m->set_percent_of_floor(10.0 / us * 100);
  return result;
}

class SchedulerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<std::unique_ptr<forge::testing::RedisServer>> server =
        forge::testing::RedisServer::Start({.append_only = true, .append_fsync = "always"});
    ASSERT_TRUE(server.ok()) << server.status();
    redis_server_ = *std::move(server);
    redis_ = std::make_unique<RedisClient>(
        RedisClientOptions{.host = redis_server_->host(), .port = redis_server_->port()});
    jobs_ = std::make_unique<JobStore>(redis_.get());
    results_ = std::make_unique<ResultCache>(redis_.get());
    Restart();
  }

  // A new scheduler over the same Redis, as after a coordinator restart.
  void Restart() {
    scheduler_.reset();
    registry_ = std::make_unique<metrics::Registry>();
    SchedulerOptions options;
    options.lease_duration = absl::Seconds(30);
    options.default_trials_per_task = 6;
    options.min_trials_per_task = 2;
    options.max_candidates_per_lease = 8;
    options.generator_versions = codegen::GeneratorVersions();
    absl::StatusOr<std::unique_ptr<Scheduler>> scheduler =
        Scheduler::Create(redis_.get(), jobs_.get(), results_.get(), registry_.get(), options);
    ASSERT_TRUE(scheduler.ok()) << scheduler.status();
    scheduler_ = *std::move(scheduler);
  }

  std::string Submit(const std::string& model, int priority = 0, int64_t trials = 0) {
    return SubmitGraph(LoadModel(model), priority, trials);
  }

  std::string SubmitGraph(const forge::v1::Graph& graph, int priority = 0, int64_t trials = 0) {
    absl::StatusOr<graph::PartitionResult> partition = graph::Partition(graph);
    EXPECT_TRUE(partition.ok()) << partition.status();
    forge::v1::JobOptions options;
    options.set_priority(priority);
    options.mutable_budget()->set_max_candidate_trials(trials);
    absl::StatusOr<forge::v1::Job> job = jobs_->CreateJob(graph, options, partition->tasks);
    EXPECT_TRUE(job.ok()) << job.status();
    scheduler_->JobSubmitted(job->id());
    return job->id();
  }

  std::string RegisterWorker(const std::string& id = "", int compile_threads = 0) {
    forge::v1::RegisterRequest request =
        forge::testing::EmulatedWorker(codegen::GeneratorVersions());
    request.set_worker_id(id);
    request.set_compile_threads(compile_threads);
    absl::StatusOr<forge::v1::RegisterResponse> response = scheduler_->Register(request);
    EXPECT_TRUE(response.ok()) << response.status();
    return response->worker_id();
  }

  LeaseResponse LeaseFor(const std::string& worker, int max = 8) {
    forge::v1::LeaseRequest request;
    request.set_worker_id(worker);
    request.set_max_candidates(max);
    request.set_target_arch("sm_90");
    absl::StatusOr<LeaseResponse> lease = scheduler_->Lease(request);
    EXPECT_TRUE(lease.ok()) << lease.status();
    return lease.ok() ? *lease : LeaseResponse();
  }

  // Reports ResultFor every candidate of `lease`, each first passed through `edit` when given.
  forge::v1::ReportResponse ReportAll(const std::string& worker, const LeaseResponse& lease,
                                      const std::function<void(const Candidate&, Result&)>& edit =
                                          nullptr) {
    forge::v1::ReportRequest report;
    report.set_worker_id(worker);
    report.set_lease_id(lease.lease_id());
    for (const Candidate& candidate : lease.candidates()) {
      Result result = ResultFor(candidate);
      if (edit) edit(candidate, result);
      *report.add_results() = std::move(result);
    }
    absl::StatusOr<forge::v1::ReportResponse> response = scheduler_->Report(report);
    EXPECT_TRUE(response.ok()) << response.status();
    return response.ok() ? *response : forge::v1::ReportResponse();
  }

  JobState StateOf(const std::string& job_id) { return jobs_->GetJob(job_id)->state(); }

  // A worker of a real H200 (its results are MEASURED); its id, or "" after a failure.
  std::string RegisterGpuWorker() {
    forge::v1::RegisterRequest gpu = forge::testing::EmulatedWorker(codegen::GeneratorVersions());
    gpu.mutable_gpus(0)->set_emulated(false);
    gpu.mutable_gpus(0)->set_name("NVIDIA H200");
    absl::StatusOr<forge::v1::RegisterResponse> registered = scheduler_->Register(gpu);
    EXPECT_TRUE(registered.ok()) << registered.status();
    return registered.ok() ? registered->worker_id() : "";
  }

  // The results a worker reports, edited from ResultFor (ReportAll).
  using ResultEdit = std::function<void(const Candidate&, Result&)>;

  // Leases and reports until no job runs; returns the candidates measured, in order.
  std::vector<std::string> RunToCompletion(const std::string& worker, int max_rounds = 500,
                                           const ResultEdit& edit = nullptr) {
    std::vector<std::string> measured;
    for (int round = 0; round < max_rounds; ++round) {
      LeaseResponse lease = LeaseFor(worker);
      if (lease.candidates().empty()) {
        EXPECT_TRUE(scheduler_->Tick().ok());
        lease = LeaseFor(worker);
        if (lease.candidates().empty()) break;
      }
      for (const Candidate& candidate : lease.candidates()) measured.push_back(candidate.digest());
      ReportAll(worker, lease, edit);
    }
    return measured;
  }

  std::unique_ptr<forge::testing::RedisServer> redis_server_;
  std::unique_ptr<RedisClient> redis_;
  std::unique_ptr<JobStore> jobs_;
  std::unique_ptr<ResultCache> results_;
  std::unique_ptr<metrics::Registry> registry_;
  std::unique_ptr<Scheduler> scheduler_;
};

TEST_F(SchedulerTest, AJobRunsBaselinesThenSearchesAndFinishesWithBestResults) {
  const std::string worker = RegisterWorker();
  const std::string job = Submit("softmax");
  EXPECT_EQ(StateOf(job), forge::v1::JOB_STATE_RUNNING);

  // The first lease holds the baselines only: ATen fallback candidates.
  const LeaseResponse first = LeaseFor(worker);
  ASSERT_THAT(first.candidates(), Not(IsEmpty()));
  for (const Candidate& candidate : first.candidates()) {
    EXPECT_EQ(candidate.family(), forge::v1::KERNEL_FAMILY_ATEN);
  }
  ReportAll(worker, first);
  const std::vector<std::string> measured = RunToCompletion(worker);
  EXPECT_EQ(StateOf(job), forge::v1::JOB_STATE_DONE);
  EXPECT_EQ(std::set<std::string>(measured.begin(), measured.end()).size(), measured.size())
      << "a candidate was leased twice";

  absl::StatusOr<forge::v1::GetResultsResponse> results = scheduler_->Results(job, true);
  ASSERT_TRUE(results.ok()) << results.status();
  bool some_best = false;
  for (const forge::v1::TaskResults& task : results->tasks()) {
    EXPECT_NE(task.stop_reason(), forge::v1::TASK_STOP_REASON_UNSPECIFIED);
    ASSERT_TRUE(task.has_best()) << "at worst the baseline";
    EXPECT_EQ(task.best().eager_median_us(), 100.0);
    EXPECT_LE(task.best().median_us(), 100.0) << "never slower than eager";
    EXPECT_FALSE(task.best_candidate().template_name().empty()) << "the whole candidate is kept";
    if (task.best_candidate().family() == forge::v1::KERNEL_FAMILY_ATEN) continue;
    some_best = true;
    for (const Result& result : task.results()) {
      if (result.has_measurement() &&
          result.measurement().candidate_digest() != task.best_candidate().digest()) {
        EXPECT_GE(result.measurement().median_us(), task.best().median_us());
      }
    }
  }
  EXPECT_TRUE(some_best);
  EXPECT_GT(jobs_->GetJob(job)->progress().best_speedup(), 1.0);
}

// A GPT-2-block-like job: one bf16 GEMM task whose search space is mostly CUTLASS configurations
// (expensive: nvcc) next to a few cuBLASLt algorithms (cheap), and four pointwise tasks (cheap
// NVRTC kernels only). The hand-built tasks go in through the job store as the partitioner's would.
std::vector<forge::v1::KernelTask> GemmAndPointwiseTasks() {
  using codegen::testing::TaskBuilder;
  using codegen::testing::TensorArg;
  constexpr auto kBf16 = forge::v1::DTYPE_BFLOAT16;
  constexpr auto kF32 = forge::v1::DTYPE_FLOAT32;
  std::vector<forge::v1::KernelTask> tasks;
  tasks.push_back(TaskBuilder()
                      .Input("a", kBf16, {128, 256})
                      .Input("b", kBf16, {256, 512})
                      .Node("mm", "mm", "default",
                            {TensorArg("self", "a"), TensorArg("mat2", "b")}, kBf16, {128, 512})
                      .Output("mm")
                      .Build(forge::v1::KERNEL_FAMILY_GEMM));
  tasks.back().set_flops(2 * 128 * 256 * 512);
  tasks.back().set_min_bytes(2 * (128 * 256 + 256 * 512 + 128 * 512));
  for (const char* op : {"relu", "sigmoid", "tanh", "neg"}) {
    tasks.push_back(TaskBuilder()
                        .Input("x", kF32, {1024, 1024})
                        .Node("y", op, "default", {TensorArg("self", "x")}, kF32, {1024, 1024})
                        .Output("y")
                        .Build(forge::v1::KERNEL_FAMILY_POINTWISE));
    tasks.back().set_flops(1024 * 1024);
    tasks.back().set_min_bytes(2 * 4 * 1024 * 1024);
  }
  for (forge::v1::KernelTask& task : tasks) {
    task.set_digest(graph::TaskDigest(task.group()));
    task.set_occurrences(1);
  }
  return tasks;
}

// Cheap first (scheduler.h): every task records its first cheap results before the first nvcc
// candidate is leased; while cheap candidates remain, the worker never holds more expensive ones
// than its share of compile threads; then the GEMM task still gets its expensive candidates (no
// starvation) and the job finishes. The worker reports compile seconds, which reach GetResults.
TEST_F(SchedulerTest, EveryTaskMeasuresCheapCandidatesBeforeAnyExpensiveCompile) {
  // 8 compile threads at the default 25%: at most 2 expensive compiles while cheap work remains.
  const std::string worker = RegisterWorker("", /*compile_threads=*/8);
  constexpr int kExpensiveCap = 2;
  const std::vector<forge::v1::KernelTask> tasks = GemmAndPointwiseTasks();
  forge::v1::JobOptions options;
  options.mutable_budget()->set_max_candidate_trials(5 * 20);
  absl::StatusOr<forge::v1::Job> created = jobs_->CreateJob(LoadModel("mlp"), options, tasks);
  ASSERT_TRUE(created.ok()) << created.status();
  const std::string job = created->id();
  scheduler_->JobSubmitted(job);

  const SchedulerOptions defaults;
  constexpr double kNvccSeconds = 42.5;
  // What an emulated worker's compile pool would report: nvcc's tens of seconds, NVRTC's fraction
  // of a second, nothing for a library call.
  const auto with_compile_seconds = [&](const Candidate& candidate, Result& result) {
    forge::v1::CompileReport* compile = result.mutable_compile();
    const bool compiled = candidate.compile_cost() != forge::v1::COMPILE_COST_NONE;
    compile->set_origin(compiled ? forge::v1::COMPILE_ORIGIN_COMPILED
                                 : forge::v1::COMPILE_ORIGIN_NOT_COMPILED);
    compile->set_seconds(search::IsExpensive(candidate) ? kNvccSeconds : compiled ? 0.25 : 0.0);
  };
  std::map<std::string, int> reported;  // search results reported, by task
  struct Held {
    std::string lease_id;
    Candidate candidate;
  };
  std::vector<Held> held;  // expensive candidates the worker is still "compiling"
  int expensive_leased = 0;
  bool saw_expensive = false;
  const auto report = [&](const std::string& lease_id, const std::vector<Candidate>& candidates) {
    forge::v1::ReportRequest request;
    request.set_worker_id(worker);
    request.set_lease_id(lease_id);
    for (const Candidate& candidate : candidates) {
      Result result = ResultFor(candidate);
      with_compile_seconds(candidate, result);
      *request.add_results() = std::move(result);
      if (candidate.family() != forge::v1::KERNEL_FAMILY_ATEN) ++reported[candidate.task_digest()];
    }
    absl::StatusOr<forge::v1::ReportResponse> response = scheduler_->Report(request);
    ASSERT_TRUE(response.ok()) << response.status();
    EXPECT_EQ(response->accepted(), static_cast<int>(candidates.size()));
  };
  for (int round = 0; round < 400 && StateOf(job) == forge::v1::JOB_STATE_RUNNING; ++round) {
    LeaseResponse lease = LeaseFor(worker);
    std::vector<Candidate> cheap;
    for (const Candidate& candidate : lease.candidates()) {
      EXPECT_NE(candidate.compile_cost(), forge::v1::COMPILE_COST_UNSPECIFIED);
      if (!search::IsExpensive(candidate)) {
        cheap.push_back(candidate);
        continue;
      }
      if (!saw_expensive) {
        saw_expensive = true;
        for (const forge::v1::KernelTask& task : tasks) {
          EXPECT_GE(reported[task.digest()], defaults.cheap_first_per_task)
              << "task " << task.group().nodes(0).op()
              << " has too few cheap results when the first expensive candidate is leased";
        }
      }
      ++expensive_leased;
      held.push_back({lease.lease_id(), candidate});
    }
    if (!cheap.empty()) {
      // Cheap work remained when this lease was made: the expensive bound holds.
      EXPECT_LE(static_cast<int>(held.size()), kExpensiveCap) << "round " << round;
      report(lease.lease_id(), cheap);
    }
    // The "nvcc" compiles finish every third round, or when there is nothing else to do.
    if (!held.empty() && (round % 3 == 2 || lease.candidates().empty())) {
      std::map<std::string, std::vector<Candidate>> by_lease;
      for (const Held& h : held) by_lease[h.lease_id].push_back(h.candidate);
      held.clear();
      for (const auto& [lease_id, candidates] : by_lease) report(lease_id, candidates);
    }
    if (lease.candidates().empty() && held.empty()) ASSERT_TRUE(scheduler_->Tick().ok());
  }
  EXPECT_EQ(StateOf(job), forge::v1::JOB_STATE_DONE);
  EXPECT_TRUE(saw_expensive) << "the GEMM task never got its expensive candidates";
  EXPECT_GT(expensive_leased, kExpensiveCap) << "past the bound once no cheap work was left";

  absl::StatusOr<forge::v1::GetResultsResponse> results = scheduler_->Results(job, true);
  ASSERT_TRUE(results.ok()) << results.status();
  int nvcc_results = 0;
  for (const forge::v1::TaskResults& task : results->tasks()) {
    EXPECT_GT(task.candidates_measured(), 0) << task.task().digest();
    for (const Result& result : task.results()) {
      ASSERT_TRUE(result.has_compile());
      if (result.compile().seconds() == kNvccSeconds) ++nvcc_results;
    }
  }
  EXPECT_EQ(nvcc_results, expensive_leased) << "compile seconds are stored with the results";
}

// Every task's search is built once, under the scheduler's lock, and timed on /metrics
// (forge_coordinator_search_build_seconds): a slow family shows there before it wedges leases.
TEST_F(SchedulerTest, EachTasksSearchBuildIsTimedOnce) {
  auto builds = [&] {
    uint64_t count = 0;
    for (const metrics::FamilySnapshot& family : registry_->Collect()) {
      if (family.name != "forge_coordinator_search_build_seconds") continue;
      for (const metrics::SeriesSnapshot& series : family.series) {
        if (!series.cumulative_counts.empty()) count += series.cumulative_counts.back();
      }
    }
    return count;
  };
  EXPECT_EQ(builds(), 0u);
  const std::string worker = RegisterWorker();
  const forge::v1::Graph graph = LoadModel("llama_block");
  absl::StatusOr<graph::PartitionResult> partition = graph::Partition(graph);
  ASSERT_TRUE(partition.ok()) << partition.status();
  SubmitGraph(graph);
  LeaseFor(worker);  // binds the job to the worker's arch: every task's search is built
  const uint64_t built = builds();
  EXPECT_EQ(built, partition->tasks.size());
  LeaseFor(worker);  // loaded searches are not built again
  EXPECT_EQ(builds(), built);
}

TEST_F(SchedulerTest, ASecondJobOverTheSameModelIsAnsweredByTheCacheWithoutLeases) {
  const std::string worker = RegisterWorker();
  const std::string first = Submit("softmax");
  RunToCompletion(worker);
  ASSERT_EQ(StateOf(first), forge::v1::JOB_STATE_DONE);

  const std::string second = Submit("softmax");
  const LeaseResponse lease = LeaseFor(worker);
  EXPECT_THAT(lease.candidates(), IsEmpty());
  EXPECT_EQ(StateOf(second), forge::v1::JOB_STATE_DONE);
  EXPECT_EQ(jobs_->GetJob(second)->progress().candidates_leased(), 0);
  EXPECT_EQ(scheduler_->Results(second, false)->tasks(0).best().median_us(),
            scheduler_->Results(first, false)->tasks(0).best().median_us());
}

TEST_F(SchedulerTest, AnExpiredLeaseReturnsItsCandidatesAndALateReportIsRejected) {
  registry_ = std::make_unique<metrics::Registry>();
  SchedulerOptions options;
  options.lease_duration = absl::Milliseconds(200);
  options.generator_versions = codegen::GeneratorVersions();
  scheduler_.reset();
  scheduler_ = *Scheduler::Create(redis_.get(), jobs_.get(), results_.get(), registry_.get(),
                                  options);
  const std::string dead = RegisterWorker();
  const std::string alive = RegisterWorker();
  Submit("softmax");
  const LeaseResponse lost = LeaseFor(dead);
  ASSERT_THAT(lost.candidates(), Not(IsEmpty()));
  absl::SleepFor(absl::Milliseconds(300));
  ASSERT_TRUE(scheduler_->Tick().ok());

  const LeaseResponse again = LeaseFor(alive);
  ASSERT_EQ(again.candidates_size(), lost.candidates_size());
  EXPECT_EQ(again.candidates(0).digest(), lost.candidates(0).digest());
  const forge::v1::ReportResponse late = ReportAll(dead, lost);
  EXPECT_EQ(late.accepted(), 0);
  EXPECT_EQ(late.rejected_candidate_digests_size(), lost.candidates_size());
  EXPECT_EQ(ReportAll(alive, again).accepted(), again.candidates_size());
}

TEST_F(SchedulerTest, ARestartedSchedulerResumesTheJobAndKeepsLeasesAndResults) {
  const std::string worker = RegisterWorker();
  const std::string job = Submit("layer_norm_gelu");
  ReportAll(worker, LeaseFor(worker));  // baselines
  const LeaseResponse held = LeaseFor(worker);
  ASSERT_THAT(held.candidates(), Not(IsEmpty()));
  const int64_t completed_before = jobs_->GetJob(job)->progress().candidates_completed();

  Restart();
  // The lease survived: its report is accepted by the new scheduler.
  EXPECT_EQ(ReportAll(worker, held).accepted(), held.candidates_size());
  const std::vector<std::string> measured = RunToCompletion(worker);
  EXPECT_EQ(StateOf(job), forge::v1::JOB_STATE_DONE);
  for (const Candidate& candidate : held.candidates()) {
    EXPECT_THAT(measured, Not(::testing::Contains(candidate.digest())))
        << "a reported candidate was leased again";
  }
  EXPECT_GT(jobs_->GetJob(job)->progress().candidates_completed(), completed_before);
}

// A saved search that no longer fits (saved by a build whose generators differ, so its space
// digest does not match, or damaged) only loses the search's progress: a restarted scheduler
// starts that search over and the job finishes, where it used to fail to start at all.
TEST_F(SchedulerTest, AStaleSavedSearchIsDroppedAndTheJobStillFinishes) {
  const std::string worker = RegisterWorker();
  const std::string job = Submit("layer_norm_gelu");
  ReportAll(worker, LeaseFor(worker));  // baselines
  const LeaseResponse held = LeaseFor(worker);
  ASSERT_THAT(held.candidates(), Not(IsEmpty()));
  ASSERT_TRUE(scheduler_->Tick().ok());  // snapshots the searches, mid-job
  absl::StatusOr<RedisReply> saved = redis_->Command({"KEYS", "forge:task_state:*"});
  ASSERT_TRUE(saved.ok()) << saved.status();
  ASSERT_THAT(saved->elements(), Not(IsEmpty()));
  for (const RedisReply& key : saved->elements()) {
    ASSERT_TRUE(redis_->Command({"HSET", key.str(), "search", "not a search state"}).ok());
  }

  Restart();
  EXPECT_EQ(ReportAll(worker, held).accepted(), held.candidates_size());
  RunToCompletion(worker);
  EXPECT_EQ(StateOf(job), forge::v1::JOB_STATE_DONE);
  // No stale state is left to be dropped again (deleted, or replaced by a later snapshot).
  for (const RedisReply& key : saved->elements()) {
    absl::StatusOr<RedisReply> state = redis_->Command({"HGET", key.str(), "search"});
    ASSERT_TRUE(state.ok()) << state.status();
    EXPECT_NE(state->str(), "not a search state") << key.str();
  }
}

TEST_F(SchedulerTest, RefusesReportsOnAnotherWorkersLeaseAndMismatchedKinds) {
  const std::string owner = RegisterWorker();
  const std::string other = RegisterWorker();
  Submit("softmax");
  const LeaseResponse lease = LeaseFor(owner);
  ASSERT_THAT(lease.candidates(), Not(IsEmpty()));

  forge::v1::ReportRequest report;
  report.set_worker_id(other);
  report.set_lease_id(lease.lease_id());
  *report.add_results() = ResultFor(lease.candidates(0));
  EXPECT_EQ(scheduler_->Report(report).status().code(), absl::StatusCode::kPermissionDenied);

  // An emulated worker cannot report a measured time.
  report.set_worker_id(owner);
  report.mutable_results(0)->mutable_measurement()->set_kind(forge::v1::MEASUREMENT_KIND_MEASURED);
  absl::StatusOr<forge::v1::ReportResponse> refused = scheduler_->Report(report);
  ASSERT_TRUE(refused.ok());
  EXPECT_EQ(refused->accepted(), 0);
  EXPECT_EQ(refused->rejected_candidate_digests_size(), 1);

  forge::v1::LeaseRequest unknown;
  unknown.set_worker_id("worker-404");
  unknown.set_max_candidates(1);
  unknown.set_target_arch("sm_90");
  EXPECT_EQ(scheduler_->Lease(unknown).status().code(), absl::StatusCode::kNotFound);
  forge::v1::RegisterRequest stale;
  stale.set_generator_version("pointwise-0");
  stale.add_gpus()->set_name("H200");
  stale.mutable_gpus(0)->set_arch("sm_90");
  EXPECT_EQ(scheduler_->Register(stale).status().code(), absl::StatusCode::kFailedPrecondition);
}

// Provenance: a GPU worker's MEASURED time is taken only with the judge's evidence that the
// candidate passed.
TEST_F(SchedulerTest, AMeasuredTimeWithoutTheJudgesPassingEvidenceIsRefused) {
  const std::string worker = RegisterGpuWorker();
  ASSERT_FALSE(worker.empty());
  Submit("softmax");
  const LeaseResponse lease = LeaseFor(worker);
  ASSERT_GE(lease.candidates_size(), 1);
  auto measured = [](const Candidate&, Result& result) {
    result.mutable_measurement()->set_kind(forge::v1::MEASUREMENT_KIND_MEASURED);
  };
  auto judged = [&](bool passed) {
    return [measured, passed](const Candidate& candidate, Result& result) {
      measured(candidate, result);
      result.mutable_measurement()->mutable_judge()->set_passed(passed);
      result.mutable_measurement()->mutable_judge()->set_draws(3);
    };
  };
  for (const ResultEdit& edit : {ResultEdit(measured), ResultEdit(judged(false))}) {
    const forge::v1::ReportResponse refused = ReportAll(worker, lease, edit);
    EXPECT_EQ(refused.accepted(), 0);
    EXPECT_EQ(refused.rejected_candidate_digests_size(), lease.candidates_size());
  }
  const forge::v1::ReportResponse taken = ReportAll(worker, lease, judged(true));
  EXPECT_EQ(taken.accepted(), lease.candidates_size());
}

// A GPU worker's MEASURED time becomes its task's best only with compute-sanitizer's clean run
// (Measurement.sanitizer); the lease tells the worker the time a result must beat for that.
// Results without it are taken and counted, and never the best.
TEST_F(SchedulerTest, AMeasuredNewBestNeedsTheSanitizersCleanRun) {
  const std::string worker = RegisterGpuWorker();
  ASSERT_FALSE(worker.empty());
  // Trials enough for four leases of candidates.
  const std::string job = Submit("softmax", /*priority=*/0, /*trials=*/200);
  auto measured = [](forge::v1::SanitizerState state) {
    return [state](const Candidate&, Result& result) {
      forge::v1::Measurement* measurement = result.mutable_measurement();
      measurement->set_kind(forge::v1::MEASUREMENT_KIND_MEASURED);
      measurement->mutable_judge()->set_passed(true);
      measurement->mutable_judge()->set_draws(3);
      measurement->mutable_sanitizer()->set_state(state);
    };
  };
  // How many of the job's tasks have a best other than their ATen baseline.
  auto generated_bests = [&] {
    absl::StatusOr<forge::v1::GetResultsResponse> results = scheduler_->Results(job, false);
    EXPECT_TRUE(results.ok()) << results.status();
    int count = 0;
    for (const forge::v1::TaskResults& task : results->tasks()) {
      count += task.has_best_candidate() &&
               task.best_candidate().family() != forge::v1::KERNEL_FAMILY_ATEN;
    }
    return count;
  };
  // A lease with candidates, after a tick when none is ready.
  auto next_lease = [&] {
    LeaseResponse lease = LeaseFor(worker);
    if (lease.candidates().empty()) {
      EXPECT_TRUE(scheduler_->Tick().ok());
      lease = LeaseFor(worker);
    }
    return lease;
  };
  const LeaseResponse baselines = next_lease();
  ASSERT_GE(baselines.candidates_size(), 1);
  for (const forge::v1::KernelTask& task : baselines.tasks()) {
    EXPECT_FALSE(baselines.sanitize_below_us().contains(task.digest())) << "nothing to beat yet";
  }
  ReportAll(worker, baselines, measured(forge::v1::SANITIZER_STATE_NOT_APPLICABLE));

  // Generated candidates, most faster than eager (100 us), unsanitized or claiming the check does
  // not apply: taken, never the best.
  for (const forge::v1::SanitizerState state :
       {forge::v1::SANITIZER_STATE_NOT_RUN, forge::v1::SANITIZER_STATE_UNAVAILABLE,
        forge::v1::SANITIZER_STATE_NOT_APPLICABLE}) {
    const LeaseResponse lease = next_lease();
    ASSERT_GE(lease.candidates_size(), 1);
    for (const forge::v1::KernelTask& task : lease.tasks()) {
      ASSERT_TRUE(lease.sanitize_below_us().contains(task.digest()));
      EXPECT_EQ(lease.sanitize_below_us().at(task.digest()), 100.0) << "the eager time";
    }
    EXPECT_EQ(ReportAll(worker, lease, measured(state)).accepted(), lease.candidates_size());
    EXPECT_EQ(generated_bests(), 0) << forge::v1::SanitizerState_Name(state);
  }

  const LeaseResponse clean = next_lease();
  ASSERT_GE(clean.candidates_size(), 1);
  EXPECT_EQ(ReportAll(worker, clean, measured(forge::v1::SANITIZER_STATE_PASSED)).accepted(),
            clean.candidates_size());
  EXPECT_GE(generated_bests(), 1);
  // The next lease names the new best's time as the one to beat.
  const LeaseResponse next = next_lease();
  bool lowered = false;
  for (const auto& [task, bar] : next.sanitize_below_us()) lowered |= bar < 100.0;
  EXPECT_TRUE(lowered);
}

TEST_F(SchedulerTest, EqualPrioritiesShareALeaseAndHigherPriorityGoesFirst) {
  const std::string worker = RegisterWorker();
  const std::string a = Submit("softmax");
  const std::string b = Submit("cross_entropy");
  const LeaseResponse shared = LeaseFor(worker, 2);
  std::set<std::string> tasks;
  for (const Candidate& candidate : shared.candidates()) tasks.insert(candidate.task_digest());
  EXPECT_EQ(tasks.size(), 2u) << "both jobs' baselines in one lease of two";
  ReportAll(worker, shared);

  const std::string urgent = Submit("layer_norm_gelu", /*priority=*/5);
  const LeaseResponse next = LeaseFor(worker, 1);
  ASSERT_EQ(next.candidates_size(), 1);
  absl::StatusOr<forge::v1::GetResultsResponse> urgent_tasks = scheduler_->Results(urgent, false);
  std::set<std::string> urgent_digests;
  for (const auto& task : urgent_tasks->tasks()) urgent_digests.insert(task.task().digest());
  EXPECT_TRUE(urgent_digests.contains(next.candidates(0).task_digest()));
}

TEST_F(SchedulerTest, CancellingAJobDropsItsLeasesAtTheNextHeartbeat) {
  const std::string worker = RegisterWorker();
  const std::string job = Submit("softmax");
  const LeaseResponse lease = LeaseFor(worker);
  ASSERT_THAT(lease.candidates(), Not(IsEmpty()));
  ASSERT_TRUE(jobs_->Cancel(job, "test").ok());
  scheduler_->JobCancelled(job);

  forge::v1::HeartbeatRequest heartbeat;
  heartbeat.set_worker_id(worker);
  heartbeat.add_active_lease_ids(lease.lease_id());
  absl::StatusOr<forge::v1::HeartbeatResponse> response = scheduler_->Heartbeat(heartbeat);
  ASSERT_TRUE(response.ok());
  EXPECT_THAT(response->cancelled_lease_ids(), ::testing::Contains(lease.lease_id()));
  EXPECT_THAT(LeaseFor(worker).candidates(), IsEmpty());
  EXPECT_EQ(StateOf(job), forge::v1::JOB_STATE_CANCELLED);

  heartbeat.set_worker_id("worker-unknown");
  EXPECT_TRUE(scheduler_->Heartbeat(heartbeat)->register_again());
}

// A worker that reported made-up times (100x too fast) poisoned the cache; purging its identity's
// results removes them and the bests made of them, running and later jobs measure again, and an
// honest worker's results stay.
TEST_F(SchedulerTest, PurgingAWorkersResultsRemovesItsBestsAndTheNextJobMeasuresAgain) {
  const std::string liar = RegisterWorker("liar");
  const std::string honest = RegisterWorker("honest");
  // Results carry the worker's identity (WorkerService sets it from the token); the liar's
  // generated kernels take a hundredth of their time.
  auto reported_by = [&](const std::string& worker) -> ResultEdit {
    return [&, worker](const Candidate& candidate, Result& result) {
      result.set_worker_identity(worker);
      if (worker == liar && candidate.family() != forge::v1::KERNEL_FAMILY_ATEN) {
        result.mutable_measurement()->set_median_us(result.measurement().median_us() / 100);
      }
    };
  };
  const std::string poisoned = Submit("softmax");
  RunToCompletion(liar, 500, reported_by(liar));
  ASSERT_EQ(StateOf(poisoned), forge::v1::JOB_STATE_DONE);
  EXPECT_GT(jobs_->GetJob(poisoned)->progress().best_speedup(), 20.0) << "the fake bests";

  absl::StatusOr<forge::v1::PurgeResultsResponse> purged =
      scheduler_->PurgeResults({.worker_identity = "liar"});
  ASSERT_TRUE(purged.ok()) << purged.status();
  EXPECT_GT(purged->results_removed(), 2);
  EXPECT_THAT(purged->task_digests(), Not(IsEmpty()));
  absl::StatusOr<forge::v1::GetResultsResponse> after = scheduler_->Results(poisoned, true);
  ASSERT_TRUE(after.ok()) << after.status();
  for (const forge::v1::TaskResults& task : after->tasks()) {
    EXPECT_FALSE(task.has_best()) << "a best derived from a purged result";
    EXPECT_THAT(task.results(), IsEmpty());
    EXPECT_EQ(task.candidates_measured(), 0);
  }
  // Nothing left to purge; an empty filter is refused.
  EXPECT_EQ(scheduler_->PurgeResults({.worker_identity = "liar"})->results_removed(), 0);
  EXPECT_EQ(scheduler_->PurgeResults({}).status().code(), absl::StatusCode::kInvalidArgument);

  // The next job over the same model is not answered by the purged results: it is measured.
  const std::string next = Submit("softmax");
  const LeaseResponse first = LeaseFor(honest);
  ASSERT_THAT(first.candidates(), Not(IsEmpty())) << "nothing left in the cache to answer it";
  ReportAll(honest, first, reported_by(honest));
  RunToCompletion(honest, 500, reported_by(honest));
  ASSERT_EQ(StateOf(next), forge::v1::JOB_STATE_DONE);
  const double honest_speedup = jobs_->GetJob(next)->progress().best_speedup();
  EXPECT_GT(honest_speedup, 1.0);
  EXPECT_LE(honest_speedup, 5.0) << "100 us eager over at least 20 us";
  absl::StatusOr<forge::v1::GetResultsResponse> results = scheduler_->Results(next, true);
  ASSERT_TRUE(results.ok()) << results.status();
  for (const forge::v1::TaskResults& task : results->tasks()) {
    ASSERT_THAT(task.results(), Not(IsEmpty()));
    for (const Result& result : task.results()) EXPECT_EQ(result.worker_identity(), "honest");
  }
  // Purging another identity, or one candidate of it, leaves the honest results alone but for it.
  EXPECT_EQ(scheduler_->PurgeResults({.worker_identity = "nobody"})->results_removed(), 0);
  const std::string one = results->tasks(0).results(0).measurement().candidate_digest();
  absl::StatusOr<forge::v1::PurgeResultsResponse> single =
      scheduler_->PurgeResults({.candidate_digest = one});
  ASSERT_TRUE(single.ok()) << single.status();
  EXPECT_EQ(single->results_removed(), 1);
  EXPECT_EQ(scheduler_->Results(next, true)->tasks(0).results_size(),
            results->tasks(0).results_size() - 1);
}

// A purge while a job runs restarts the searches it uses: the fake best is gone from the job's
// estimate, and the job still finishes with results of the honest worker only.
TEST_F(SchedulerTest, APurgeWhileAJobRunsRestartsItsSearches) {
  const std::string liar = RegisterWorker("liar");
  const std::string honest = RegisterWorker("honest");
  const std::string job = Submit("softmax");
  LeaseResponse baselines = LeaseFor(liar);
  ASSERT_THAT(baselines.candidates(), Not(IsEmpty()));
  ReportAll(liar, baselines, [&](const Candidate&, Result& result) {
    result.set_worker_identity(liar);
    result.mutable_measurement()->set_median_us(1000);  // eager made slow: every kernel "wins"
  });
  const LeaseResponse held = LeaseFor(honest);  // out on a lease during the purge
  ASSERT_THAT(held.candidates(), Not(IsEmpty()));

  absl::StatusOr<forge::v1::PurgeResultsResponse> purged =
      scheduler_->PurgeResults({.worker_identity = "liar"});
  ASSERT_TRUE(purged.ok()) << purged.status();
  EXPECT_EQ(purged->results_removed(), baselines.candidates_size());
  EXPECT_EQ(ReportAll(honest, held).accepted(), held.candidates_size());
  RunToCompletion(honest);
  ASSERT_EQ(StateOf(job), forge::v1::JOB_STATE_DONE);
  absl::StatusOr<forge::v1::GetResultsResponse> results = scheduler_->Results(job, true);
  ASSERT_TRUE(results.ok()) << results.status();
  for (const forge::v1::TaskResults& task : results->tasks()) {
    ASSERT_TRUE(task.has_best());
    EXPECT_EQ(task.best().eager_median_us(), 100.0) << "eager timed again, not the liar's 1000";
  }
  EXPECT_LE(jobs_->GetJob(job)->progress().best_speedup(), 5.0);
}

}  // namespace
}  // namespace forge::server

namespace forge::server {
namespace {

// 2,000 links used to overflow the coordinator's stack (recursive expression emission), at every
// restart too: long chains are split into several tasks and the job finishes.
TEST_F(SchedulerTest, ALongPointwiseChainIsSplitAndFinishes) {
  const forge::v1::Graph chain = forge::testing::PointwiseChain(2000);
  absl::StatusOr<graph::PartitionResult> partition = graph::Partition(chain);
  ASSERT_TRUE(partition.ok()) << partition.status();
  EXPECT_GT(partition->tasks.size(), 1);
  for (const forge::v1::KernelTask& task : partition->tasks) {
    EXPECT_LE(task.group().nodes_size(), graph::kMaxFusedNodes);
  }
  const std::string worker = RegisterWorker();
  const std::string job = SubmitGraph(chain);
  RunToCompletion(worker, 5000);
  EXPECT_EQ(StateOf(job), forge::v1::JOB_STATE_DONE);
  Restart();
  EXPECT_TRUE(scheduler_->Tick().ok());
}

// JobProgress.best_speedup is the whole-model estimate the report states (common/speedup), not
// the best single task's.
TEST_F(SchedulerTest, BestSpeedupIsTheWholeModelEstimate) {
  const std::string worker = RegisterWorker();
  const std::string job = Submit("llama_block");
  RunToCompletion(worker, 2000);
  ASSERT_EQ(StateOf(job), forge::v1::JOB_STATE_DONE);
  absl::StatusOr<forge::v1::GetResultsResponse> results = scheduler_->Results(job, false);
  ASSERT_TRUE(results.ok()) << results.status();
  ASSERT_GT(results->tasks_size(), 1);
  double best_task = 0;
  for (const forge::v1::TaskResults& task : results->tasks()) {
    best_task = std::max(best_task, task.best().eager_median_us() / task.best().median_us());
  }
  const double whole = SumModelTimes(results->tasks()).Speedup();
  EXPECT_LT(whole, best_task) << "the tasks' speedups differ in this model";
  EXPECT_NEAR(jobs_->GetJob(job)->progress().best_speedup(), whole, 1e-5 * whole);  // as stored
}

// The results cache spans generator versions. A faster result of a candidate another build made
// (an older Redis) is never a task's best: this build could not regenerate its kernel.
TEST_F(SchedulerTest, AResultThisBuildCannotRegenerateNeverBecomesTheBest) {
  const std::string worker = RegisterWorker();
  const std::string first = Submit("softmax");
  RunToCompletion(worker);
  ASSERT_EQ(StateOf(first), forge::v1::JOB_STATE_DONE);
  const forge::v1::TaskResults before = scheduler_->Results(first, false)->tasks(0);
  ASSERT_NE(before.best_candidate().family(), forge::v1::KERNEL_FAMILY_ATEN);

  Candidate old = before.best_candidate();
  old.set_generator_version("reduction-3");
  old.set_digest(search::CandidateDigest(old));
  ASSERT_TRUE(
      redis_->Command({"SET", keys::Candidate(old.digest()), old.SerializeAsString()}).ok());
  Result fast = ResultFor(old);
  fast.mutable_measurement()->set_median_us(1.0);
  ASSERT_TRUE(results_->PutIfAbsent("predicted:H200", old, fast, first).ok());

  Restart();
  const std::string second = Submit("softmax");
  RunToCompletion(worker);
  ASSERT_EQ(StateOf(second), forge::v1::JOB_STATE_DONE);
  const forge::v1::TaskResults after = scheduler_->Results(second, true)->tasks(0);
  bool cached = false;
  for (const Result& result : after.results()) {
    cached = cached || result.measurement().candidate_digest() == old.digest();
  }
  EXPECT_TRUE(cached) << "the old result is in the cache and counted";
  EXPECT_EQ(after.best_candidate().digest(), before.best_candidate().digest());
  EXPECT_EQ(after.best().median_us(), before.best().median_us());
}

// A job of no tasks used to write an HSET without fields, after which every tick, lease and
// restart failed; it is DONE at once and the scheduler keeps working.
TEST_F(SchedulerTest, AJobOfNoTasksIsDoneAtOnceAndTheSchedulerKeepsWorking) {
  const std::string worker = RegisterWorker();
  const std::string empty = SubmitGraph(forge::testing::IdentityGraph());
  EXPECT_EQ(StateOf(empty), forge::v1::JOB_STATE_DONE);
  EXPECT_EQ(jobs_->GetJob(empty)->progress().tasks_total(), 0);
  ASSERT_TRUE(scheduler_->Tick().ok());

  const std::string job = Submit("softmax");
  RunToCompletion(worker);
  EXPECT_EQ(StateOf(job), forge::v1::JOB_STATE_DONE);
  absl::StatusOr<forge::v1::GetResultsResponse> results = scheduler_->Results(empty, false);
  ASSERT_TRUE(results.ok()) << results.status();
  EXPECT_THAT(results->tasks(), IsEmpty());
  Restart();
  EXPECT_TRUE(scheduler_->Tick().ok());
}

// One job whose stored state does not load (here a task spec gone from Redis) fails with the
// reason; a restart, ticks and leases carry on with the other jobs.
TEST_F(SchedulerTest, AJobWhoseStateDoesNotLoadFailsAloneAndARestartCarriesOn) {
  const std::string worker = RegisterWorker();
  const std::string broken = Submit("layer_norm_gelu");
  const std::string healthy = Submit("softmax");
  ASSERT_TRUE(redis_->Command({"HSET", keys::JobTasks(broken), "no-such-task", "1"}).ok());

  Restart();
  EXPECT_EQ(StateOf(broken), forge::v1::JOB_STATE_FAILED);
  EXPECT_THAT(jobs_->GetJob(broken)->error(), ::testing::HasSubstr("no-such-task"));
  RunToCompletion(worker);
  EXPECT_EQ(StateOf(healthy), forge::v1::JOB_STATE_DONE);
  Restart();
  EXPECT_TRUE(scheduler_->Tick().ok());
}

// Redis loses its last acknowledged writes while the scheduler runs (its append-only file restored
// from a copy taken a lease earlier, as a host crash under appendfsync everysec does): a reported
// lease's results and a lease still out are gone from Redis but not from the scheduler's memory.
// The next tick notices and reconciles: the lost lease's late report is refused and its candidates
// are leased again, the lost results are measured again, and what the job counts is stored.
TEST_F(SchedulerTest, AfterRedisLostWritesTheSchedulerReconcilesAndCountsOnlyStoredResults) {
  const std::string worker = RegisterWorker();
  const std::string job = Submit("mlp");
  ASSERT_TRUE(scheduler_->Tick().ok());
  ReportAll(worker, LeaseFor(worker));
  ASSERT_TRUE(scheduler_->Tick().ok());
  const std::filesystem::path dir = redis_server_->dir();
  redis_server_->Stop();
  std::filesystem::copy(dir / "appendonlydir", dir / "before",
                        std::filesystem::copy_options::recursive);
  ASSERT_TRUE(redis_server_->Restart().ok());
  // Work the crash takes back: a lease reported in full, and one still out.
  const absl::Time reconnect_deadline = absl::Now() + absl::Seconds(5);
  while (!scheduler_->Tick().ok() && absl::Now() < reconnect_deadline) {
    absl::SleepFor(absl::Milliseconds(50));
  }
  const LeaseResponse reported = LeaseFor(worker);
  ASSERT_FALSE(reported.candidates().empty());
  ASSERT_EQ(ReportAll(worker, reported).accepted(), reported.candidates_size());
  const LeaseResponse out = LeaseFor(worker);
  ASSERT_FALSE(out.candidates().empty());

  redis_server_->Stop();
  std::filesystem::remove_all(dir / "appendonlydir");
  std::filesystem::rename(dir / "before", dir / "appendonlydir");
  ASSERT_TRUE(redis_server_->Restart().ok());
  absl::Status tick;
  const absl::Time deadline = absl::Now() + absl::Seconds(5);
  do {
    absl::SleepFor(absl::Milliseconds(50));
    tick = scheduler_->Tick();
  } while (!tick.ok() && absl::Now() < deadline);
  ASSERT_TRUE(tick.ok()) << tick;

  const forge::v1::ReportResponse late = ReportAll(worker, out);
  EXPECT_EQ(late.accepted(), 0) << "its lease went with Redis's last writes";
  EXPECT_EQ(late.rejected_candidate_digests_size(), out.candidates_size());
  RunToCompletion(worker);
  EXPECT_EQ(StateOf(job), forge::v1::JOB_STATE_DONE);
  absl::StatusOr<forge::v1::GetResultsResponse> results = scheduler_->Results(job, true);
  ASSERT_TRUE(results.ok()) << results.status();
  for (const forge::v1::TaskResults& task : results->tasks()) {
    // The baseline (eager) is stored with the results and counted apart from them.
    EXPECT_EQ(task.candidates_measured() + task.candidates_failed() + 1, task.results_size())
        << "counted but not stored: " << task.task().digest();
    EXPECT_GE(task.results_size(), 2) << "min_trials_per_task";
    EXPECT_TRUE(task.has_best());
  }
}

}  // namespace
}  // namespace forge::server
