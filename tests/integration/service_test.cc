// The whole service on loopback: a real redis-server (append-only, fsync always), the real
// forge-coordinator and forge-worker binaries (emulated H200s: real NVRTC, predicted times), the
// exported test models. Faults are real: kill -9 of workers, the coordinator and Redis.
#include <signal.h>
#include <sys/wait.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/redis/redis_client.h"
#include "forge/v1/service.grpc.pb.h"
#include "gmock/gmock.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "tests/support/exported_model.h"
#include "tests/support/redis_server.h"
#include "tests/support/subprocess.h"

namespace forge {
namespace {

using ::forge::v1::Job;
using ::forge::v1::JobState;
using ::testing::Not;

bool IsTerminal(JobState state) {
  return state == forge::v1::JOB_STATE_DONE || state == forge::v1::JOB_STATE_FAILED ||
         state == forge::v1::JOB_STATE_CANCELLED;
}

class ServiceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<std::unique_ptr<testing::RedisServer>> redis =
        testing::RedisServer::Start({.append_only = true, .append_fsync = "always"});
    ASSERT_TRUE(redis.ok()) << redis.status();
    redis_server_ = *std::move(redis);
    port_ = testing::PickFreePort();
    StartCoordinator();
    channel_ = grpc::CreateChannel(absl::StrCat("127.0.0.1:", port_),
                                   grpc::InsecureChannelCredentials());
    jobs_ = forge::v1::JobService::NewStub(channel_);
  }

  void TearDown() override {
    for (auto& [index, worker] : workers_) worker.Kill(SIGKILL);
    if (coordinator_.has_value()) coordinator_->Kill(SIGKILL);
  }

  std::string Log(const std::string& name) const {
    return absl::StrCat(directory_.path(), "/", name, ".log");
  }

  std::string Logs() const {
    std::string logs;
    for (const std::string& name : log_names_) {
      absl::StatusOr<std::string> text = testing::ReadWholeFile(Log(name));
      absl::StrAppend(&logs, "----- ", name, " -----\n", text.ok() ? *text : "(none)", "\n");
    }
    return logs;
  }

  // On a fixed port, so that workers find a restarted coordinator where the old one was.
  void StartCoordinator() {
    const std::string name = absl::StrCat("coordinator-", ++coordinator_starts_);
    log_names_.push_back(name);
    absl::StatusOr<testing::Subprocess> process = testing::Subprocess::Start(
        {FORGE_COORDINATOR_BINARY, absl::StrCat("--listen=127.0.0.1:", port_),
         absl::StrCat("--redis.port=", redis_server_->port()),
         absl::StrCat("--blobs.dir=", directory_.path(), "/blobs"), "--metrics.listen=",
         "--lease.duration=5s", "--lease.max-candidates=4", "--heartbeat.interval=300ms",
         "--scheduler.tick=100ms",
         "--search.trials-per-task=4", "--search.min-trials-per-task=2", "--log.level=debug"},
        Log(name));
    ASSERT_TRUE(process.ok()) << process.status();
    coordinator_ = *std::move(process);
    ASSERT_TRUE(testing::WaitForPort(port_, std::chrono::seconds(20)))
        << "coordinator did not listen\n" << Logs();
  }

  void StartWorker(int index) {
    const std::string name = absl::StrCat("worker-", index, "-", ++worker_starts_);
    log_names_.push_back(name);
    absl::StatusOr<testing::Subprocess> process = testing::Subprocess::Start(
        {FORGE_WORKER_BINARY, absl::StrCat("--coordinator=127.0.0.1:", port_), "--emulate=H200",
         absl::StrCat("--worker-id=test-worker-", index),
         "--compile-threads=1",
         // Shared by the tests: the later ones find most cubins compiled already.
         absl::StrCat("--compile-cache-dir=", ::testing::TempDir(), "forge-service-test-cubins")},
        Log(name));
    ASSERT_TRUE(process.ok()) << process.status();
    workers_.emplace(index, *std::move(process));
  }

  Job Submit(const std::string& model_name, int64_t trials = 0, int priority = 0) {
    absl::StatusOr<testing::ExportedModel> model = testing::LoadExportedModel(model_name);
    EXPECT_TRUE(model.ok()) << model.status();
    forge::v1::JobOptions options;
    options.mutable_budget()->set_max_candidate_trials(trials);
    options.set_priority(priority);
    absl::StatusOr<forge::v1::SubmitJobResponse> response =
        testing::SubmitExportedModel(*jobs_, *model, options);
    EXPECT_TRUE(response.ok()) << response.status();
    return response.ok() ? response->job() : Job();
  }

  std::optional<Job> GetJob(const std::string& id) {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
    forge::v1::GetJobRequest request;
    request.set_job_id(id);
    forge::v1::GetJobResponse response;
    if (!jobs_->GetJob(&context, request, &response).ok()) return std::nullopt;
    return response.job();
  }

  // Waits until `done` holds for the job (the coordinator may be down for a while meanwhile).
  template <typename Predicate>
  Job WaitFor(const std::string& id, absl::Duration timeout, Predicate done) {
    const absl::Time deadline = absl::Now() + timeout;
    std::optional<Job> job;
    while (absl::Now() < deadline) {
      job = GetJob(id);
      if (job.has_value() && done(*job)) return *job;
      absl::SleepFor(absl::Milliseconds(100));
    }
    ADD_FAILURE() << "job " << id << " did not get there in time; last seen: "
                  << (job.has_value() ? job->DebugString() : "(unreachable)") << "\n" << Logs();
    return job.value_or(Job());
  }

  // Waits until the job has at least `completed` measured candidates.
  Job WaitForCompleted(const std::string& id, int64_t completed) {
    return WaitFor(id, absl::Seconds(60), [completed](const Job& job) {
      return job.progress().candidates_completed() >= completed;
    });
  }

  Job WaitForEnd(const std::string& id, absl::Duration timeout = absl::Seconds(90)) {
    return WaitFor(id, timeout, [](const Job& job) { return IsTerminal(job.state()); });
  }

  forge::v1::GetResultsResponse Results(const std::string& id) {
    grpc::ClientContext context;
    forge::v1::GetResultsRequest request;
    request.set_job_id(id);
    request.set_include_all_results(true);
    forge::v1::GetResultsResponse response;
    grpc::Status status = jobs_->GetResults(&context, request, &response);
    EXPECT_TRUE(status.ok()) << status.error_message();
    return response;
  }

  std::vector<forge::v1::WorkerStatus> Workers() {
    grpc::ClientContext context;
    forge::v1::ListWorkersRequest request;
    forge::v1::ListWorkersResponse response;
    if (!jobs_->ListWorkers(&context, request, &response).ok()) return {};
    return {response.workers().begin(), response.workers().end()};
  }

  // Waits until `count` workers have registered and are live (a worker process that is still
  // starting when a short job is submitted may find its work gone).
  void WaitForLiveWorkers(size_t count) {
    const absl::Time deadline = absl::Now() + absl::Seconds(30);
    while (absl::Now() < deadline) {
      size_t live = 0;
      for (const forge::v1::WorkerStatus& worker : Workers()) live += worker.live() ? 1 : 0;
      if (live >= count) return;
      absl::SleepFor(absl::Milliseconds(20));
    }
    FAIL() << count << " workers did not register within 30 s\n" << Logs();
  }

  // Every result of a job's tasks: candidate digests, each once, and the number of results.
  // A candidate measured twice would show as more reported results than stored ones.
  void ExpectEveryCandidateOnce(const std::string& id) {
    const forge::v1::GetResultsResponse results = Results(id);
    std::set<std::string> digests;
    int64_t stored = 0;
    for (const forge::v1::TaskResults& task : results.tasks()) {
      for (const forge::v1::Result& result : task.results()) {
        ++stored;
        digests.insert(result.has_measurement() ? result.measurement().candidate_digest()
                                                : result.failure().candidate_digest());
      }
      EXPECT_NE(task.stop_reason(), forge::v1::TASK_STOP_REASON_UNSPECIFIED);
    }
    EXPECT_EQ(static_cast<int64_t>(digests.size()), stored);
    const forge::v1::JobProgress& progress = results.job().progress();
    EXPECT_EQ(progress.candidates_completed() + progress.candidates_failed(), stored)
        << "every stored result was reported once, and nothing else was counted";
  }

  testing::TempDir directory_;
  std::unique_ptr<testing::RedisServer> redis_server_;
  int port_ = 0;
  std::optional<testing::Subprocess> coordinator_;
  std::map<int, testing::Subprocess> workers_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<forge::v1::JobService::Stub> jobs_;
  std::vector<std::string> log_names_;
  int coordinator_starts_ = 0;
  int worker_starts_ = 0;
};

TEST_F(ServiceTest, ThreeWorkersCompleteAJobOverARealModel) {
  for (int i = 0; i < 3; ++i) StartWorker(i);
  WaitForLiveWorkers(3);
  const Job submitted = Submit("llama_block");
  const Job done = WaitForEnd(submitted.id());
  ASSERT_EQ(done.state(), forge::v1::JOB_STATE_DONE) << Logs();
  ExpectEveryCandidateOnce(submitted.id());

  const forge::v1::GetResultsResponse results = Results(submitted.id());
  int with_best = 0;
  for (const forge::v1::TaskResults& task : results.tasks()) {
    if (!task.has_best()) continue;
    ++with_best;
    EXPECT_EQ(task.best().kind(), forge::v1::MEASUREMENT_KIND_PREDICTED);
    EXPECT_GT(task.best().eager_median_us(), 0);
  }
  EXPECT_GT(with_best, 0);
  std::set<std::string> reporting;
  for (const forge::v1::WorkerStatus& worker : Workers()) {
    EXPECT_TRUE(worker.live());
    EXPECT_TRUE(worker.gpus(0).emulated());
    if (worker.candidates_completed() + worker.candidates_failed() > 0) {
      reporting.insert(worker.worker_id());
    }
  }
  EXPECT_EQ(reporting.size(), 3u) << "the work was spread over the three workers";

  // The same model again: every answer is in the cache; nothing is leased.
  const Job again = Submit("llama_block");
  const Job again_done = WaitForEnd(again.id(), absl::Seconds(20));
  EXPECT_EQ(again_done.state(), forge::v1::JOB_STATE_DONE);
  EXPECT_EQ(again_done.progress().candidates_leased(), 0);
}

TEST_F(ServiceTest, AKilledWorkersLeaseGoesToAnotherWorkerAndNothingIsLost) {
  StartWorker(0);
  StartWorker(1);
  const Job submitted = Submit("llama_block", /*trials=*/300);
  // Wait until a worker holds candidates, then kill it without warning.
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  bool killed = false;
  while (absl::Now() < deadline && !killed) {
    for (const forge::v1::WorkerStatus& worker : Workers()) {
      int index = -1;
      if (worker.candidates_leased() > 0 &&
          absl::SimpleAtoi(absl::StripPrefix(worker.worker_id(), "test-worker-"), &index) &&
          workers_.contains(index)) {
        workers_.at(index).Kill(SIGKILL);
        workers_.erase(index);
        killed = true;
        break;
      }
    }
    absl::SleepFor(absl::Milliseconds(20));
  }
  ASSERT_TRUE(killed) << Logs();
  ASSERT_EQ(GetJob(submitted.id())->state(), forge::v1::JOB_STATE_RUNNING)
      << "the fault must come mid-job";
  const Job done = WaitForEnd(submitted.id());
  ASSERT_EQ(done.state(), forge::v1::JOB_STATE_DONE) << Logs();
  ExpectEveryCandidateOnce(submitted.id());
}

TEST_F(ServiceTest, ARestartedCoordinatorResumesTheJobAndKeepsFinishedResults) {
  StartWorker(0);
  const Job submitted = Submit("llama_block", /*trials=*/300);
  const Job midway = WaitForCompleted(submitted.id(), 3);
  ASSERT_EQ(midway.state(), forge::v1::JOB_STATE_RUNNING) << "the fault must come mid-job";
  coordinator_->Kill(SIGKILL);
  const int64_t completed_before = midway.progress().candidates_completed();
  StartCoordinator();
  const Job done = WaitForEnd(submitted.id());
  ASSERT_EQ(done.state(), forge::v1::JOB_STATE_DONE) << Logs();
  EXPECT_GE(done.progress().candidates_completed(), completed_before);
  ExpectEveryCandidateOnce(submitted.id());
}

TEST_F(ServiceTest, RedisRestartedFromItsAppendOnlyFileLosesNoFinishedResult) {
  StartWorker(0);
  const Job submitted = Submit("llama_block", /*trials=*/300);
  const Job midway = WaitForCompleted(submitted.id(), 3);
  ASSERT_EQ(midway.state(), forge::v1::JOB_STATE_RUNNING) << "the fault must come mid-job";
  RedisClient redis({.host = redis_server_->host(), .port = redis_server_->port()});
  absl::StatusOr<RedisReply> before = redis.Command({"KEYS", "forge:result:*"});
  ASSERT_TRUE(before.ok()) << before.status();
  std::set<std::string> results_before;
  for (const RedisReply& key : before->elements()) results_before.insert(key.str());
  ASSERT_FALSE(results_before.empty());

  redis_server_->Stop(SIGKILL);
  absl::SleepFor(absl::Milliseconds(500));
  ASSERT_TRUE(redis_server_->Restart().ok());
  const Job done = WaitForEnd(submitted.id());
  ASSERT_EQ(done.state(), forge::v1::JOB_STATE_DONE) << Logs();
  absl::StatusOr<RedisReply> after = redis.Command({"KEYS", "forge:result:*"});
  ASSERT_TRUE(after.ok()) << after.status();
  std::set<std::string> results_after;
  for (const RedisReply& key : after->elements()) results_after.insert(key.str());
  for (const std::string& key : results_before) EXPECT_TRUE(results_after.contains(key)) << key;
}

// A host crash under appendfsync everysec: Redis comes back from an append-only file that lacks its
// last acknowledged writes (here: restored from a copy taken mid-job, a few results earlier) while
// the coordinator and the worker run on. The coordinator must notice that its memory is ahead of
// Redis and reconcile; the job still finishes, and everything it counts is a result Redis holds.
TEST_F(ServiceTest, ARedisRollbackMidJobIsReconciledAndTheJobFinishesWithEveryResult) {
  StartWorker(0);
  const Job submitted = Submit("llama_block", /*trials=*/300);
  const Job midway = WaitForCompleted(submitted.id(), 3);
  ASSERT_EQ(midway.state(), forge::v1::JOB_STATE_RUNNING) << "the fault must come mid-job";
  const std::filesystem::path dir = redis_server_->dir();
  redis_server_->Stop(SIGKILL);
  std::filesystem::copy(dir / "appendonlydir", dir / "before",
                        std::filesystem::copy_options::recursive);
  ASSERT_TRUE(redis_server_->Restart().ok());
  // Acknowledged work that the rollback will take back: leases, results, counts.
  const Job later = WaitForCompleted(submitted.id(), midway.progress().candidates_completed() + 3);
  ASSERT_EQ(later.state(), forge::v1::JOB_STATE_RUNNING) << "the rollback must come mid-job";
  redis_server_->Stop(SIGKILL);
  std::filesystem::remove_all(dir / "appendonlydir");
  std::filesystem::rename(dir / "before", dir / "appendonlydir");
  ASSERT_TRUE(redis_server_->Restart().ok());

  const Job done = WaitForEnd(submitted.id(), absl::Seconds(120));
  ASSERT_EQ(done.state(), forge::v1::JOB_STATE_DONE) << Logs();
  EXPECT_THAT(Logs(), ::testing::HasSubstr("redis lost writes: reconciling"));
  ExpectEveryCandidateOnce(submitted.id());
  // What the coordinator counts per task is what Redis holds: no result it lost is counted, and
  // the searches measured again what the rollback took.
  const forge::v1::GetResultsResponse results = Results(submitted.id());
  for (const forge::v1::TaskResults& task : results.tasks()) {
    // The baseline (eager) is stored with the results and counted apart from them.
    EXPECT_EQ(task.candidates_measured() + task.candidates_failed() + 1, task.results_size())
        << task.task().digest();
    EXPECT_GE(task.results_size(), 2) << "min-trials-per-task";
    EXPECT_TRUE(task.has_best()) << task.task().digest();
  }
}

TEST_F(ServiceTest, CancellingAJobStopsItsWorkWithinSeconds) {
  StartWorker(0);
  StartWorker(1);
  const Job submitted = Submit("llama_block", /*trials=*/400);
  WaitFor(submitted.id(), absl::Seconds(60),
          [](const Job& job) { return job.progress().candidates_completed() >= 2; });
  {
    grpc::ClientContext context;
    forge::v1::CancelJobRequest request;
    request.set_job_id(submitted.id());
    forge::v1::CancelJobResponse response;
    ASSERT_TRUE(jobs_->CancelJob(&context, request, &response).ok());
  }
  const absl::Time cancelled = absl::Now();
  // Within 5 s no worker holds any of its candidates, and no result for it arrives afterwards.
  bool idle = false;
  while (absl::Now() - cancelled < absl::Seconds(5) && !idle) {
    idle = true;
    for (const forge::v1::WorkerStatus& worker : Workers()) idle &= worker.candidates_leased() == 0;
    absl::SleepFor(absl::Milliseconds(50));
  }
  EXPECT_TRUE(idle) << Logs();
  const int64_t counted = GetJob(submitted.id())->progress().candidates_completed();
  absl::SleepFor(absl::Seconds(1));
  const Job later = *GetJob(submitted.id());
  EXPECT_EQ(later.state(), forge::v1::JOB_STATE_CANCELLED);
  EXPECT_EQ(later.progress().candidates_completed(), counted);
}

TEST_F(ServiceTest, TwoHundredJobsFromTwentyClientsAllCompleteOnce) {
  StartWorker(0);
  StartWorker(1);
  const std::vector<std::string> models = {"softmax", "cross_entropy", "layer_norm_gelu", "mlp"};
  std::map<std::string, testing::ExportedModel> loaded;
  for (const std::string& name : models) loaded[name] = *testing::LoadExportedModel(name);
  absl::Mutex mutex;
  std::vector<std::string> ids;
  std::vector<std::thread> clients;
  for (int client = 0; client < 20; ++client) {
    clients.emplace_back([&, client] {
      auto stub = forge::v1::JobService::NewStub(grpc::CreateChannel(
          absl::StrCat("127.0.0.1:", port_), grpc::InsecureChannelCredentials()));
      for (int i = 0; i < 10; ++i) {
        forge::v1::JobOptions options;
        options.mutable_budget()->set_max_candidate_trials(4);
        options.set_owner(absl::StrCat("client-", client));
        absl::StatusOr<forge::v1::SubmitJobResponse> response = testing::SubmitExportedModel(
            *stub, loaded.at(models[(client + i) % models.size()]), options);
        ASSERT_TRUE(response.ok()) << response.status();
        absl::MutexLock lock(&mutex);
        ids.push_back(response->job().id());
      }
    });
  }
  for (std::thread& client : clients) client.join();
  ASSERT_EQ(ids.size(), 200u);
  EXPECT_EQ(std::set<std::string>(ids.begin(), ids.end()).size(), 200u) << "no job id twice";
  for (const std::string& id : ids) {
    EXPECT_EQ(WaitForEnd(id, absl::Seconds(120)).state(), forge::v1::JOB_STATE_DONE) << id;
  }
  // The four models' tasks were searched once; every other job was answered from the cache.
  int64_t leased = 0;
  for (const std::string& id : ids) leased += GetJob(id)->progress().candidates_leased();
  int64_t stored = 0;
  RedisClient redis({.host = redis_server_->host(), .port = redis_server_->port()});
  absl::StatusOr<RedisReply> keys = redis.Command({"KEYS", "forge:result:*"});
  ASSERT_TRUE(keys.ok());
  stored = static_cast<int64_t>(keys->elements().size());
  EXPECT_GE(leased, stored);
  EXPECT_LE(leased, stored + 64) << "only leases lost to nothing; no candidate leased over and over";
}

}  // namespace
}  // namespace forge
