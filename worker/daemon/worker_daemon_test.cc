// The lease loop against a WorkerService on 127.0.0.1 that plays the coordinator as each test
// scripts it, with real emulated executors (NVRTC compiles, the performance model).
#include "worker/daemon/worker_daemon.h"

#include <signal.h>
#include <sys/wait.h>

#include <chrono>
#include <fstream>
#include <iostream>
#include <iterator>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/synchronization/mutex.h"
#include "compiler/codegen/testing/codegen_test_util.h"
#include "compiler/codegen/family.h"
#include "common/logging/logging.h"
#include "compiler/search/candidate.h"
#include "forge/v1/service.grpc.pb.h"
#include "gmock/gmock.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "tests/support/subprocess.h"
#include "worker/daemon/emulated_executor.h"
#include "worker/daemon/gpu_executor.h"
#include "worker/gpu/device.h"

namespace forge::daemon {
namespace {

using ::forge::codegen::testing::TaskBuilder;
using ::forge::codegen::testing::TensorArg;
using ::forge::v1::Candidate;
using ::forge::v1::KernelTask;
using ::testing::Contains;
using ::testing::Each;
using ::testing::HasSubstr;
using ::testing::Not;

constexpr absl::Duration kWait = absl::Seconds(30);  // for things that take well under a second

// float32[64, columns] -> relu; each width is a task of its own.
KernelTask ReluTask(int columns) {
  KernelTask task =
      TaskBuilder()
          .Input("x", forge::v1::DTYPE_FLOAT32, {64, columns})
          .Node("relu", "relu", "default", {TensorArg("self", "x")}, forge::v1::DTYPE_FLOAT32,
                {64, columns})
          .Output("relu")
          .Build(forge::v1::KERNEL_FAMILY_POINTWISE);
  task.set_digest(absl::StrFormat("%064d", columns));
  return task;
}

// Candidates the emulated backend predicts at once: the ATen baselines of `count` tasks.
struct Work {
  std::vector<KernelTask> tasks;
  std::vector<Candidate> candidates;
};

Work Baselines(int count, int first_columns) {
  Work work;
  for (int i = 0; i < count; ++i) {
    work.tasks.push_back(ReluTask(first_columns + i));
    absl::StatusOr<Candidate> candidate = search::BaselineCandidate(work.tasks.back(), "sm_90");
    EXPECT_TRUE(candidate.ok()) << candidate.status();
    if (candidate.ok()) work.candidates.push_back(*std::move(candidate));
  }
  return work;
}

// Candidates that each need an NVRTC compile: distinct points of one pointwise task.
Work Compiled(int count, int columns) {
  Work work;
  work.tasks.push_back(ReluTask(columns));
  const codegen::KernelFamily& family = *codegen::FindFamily(forge::v1::KERNEL_FAMILY_POINTWISE);
  absl::StatusOr<std::vector<codegen::TemplateSpace>> spaces =
      family.ScheduleSpace(work.tasks.front());
  EXPECT_TRUE(spaces.ok()) << spaces.status();
  if (!spaces.ok()) return work;
  for (const codegen::TemplateSpace& space : *spaces) {
    for (const codegen::SchedulePoint& point : codegen::EnumeratePoints(space)) {
      if (static_cast<int>(work.candidates.size()) == count) return work;
      absl::StatusOr<Candidate> candidate =
          search::MakeCandidate(work.tasks.front(), family, point, "sm_90");
      if (candidate.ok()) work.candidates.push_back(*std::move(candidate));
    }
  }
  ADD_FAILURE() << "the pointwise space of the relu task has fewer than " << count << " points";
  return work;
}

std::vector<std::string> Digests(const Work& work) {
  std::vector<std::string> digests;
  for (const Candidate& candidate : work.candidates) digests.push_back(candidate.digest());
  return digests;
}

// What the scripted coordinator has seen.
struct Record {
  std::vector<forge::v1::RegisterRequest> registrations;
  std::vector<forge::v1::HeartbeatRequest> heartbeats;
  std::vector<forge::v1::LeaseRequest> lease_requests;
  std::map<std::string, std::vector<std::string>> leases;  // lease id -> candidate digests
  std::map<std::string, std::vector<forge::v1::Result>> results;  // by candidate digest
  std::map<std::string, int> returned;                             // by candidate digest
  int cancelled_at_heartbeat = -1;  // index into heartbeats of the cancelling one

  // Digests reported with a result or returned, each as often as it was.
  int OutcomesOf(const std::string& digest) const {
    const auto result = results.find(digest);
    const auto back = returned.find(digest);
    return (result == results.end() ? 0 : static_cast<int>(result->second.size())) +
           (back == returned.end() ? 0 : back->second);
  }
};

// WorkerService as the coordinator's peer of the unit under test: leases offered candidates in
// order, up to what each Lease asks for, and records every call.
class TestCoordinator final : public forge::v1::WorkerService::Service {
 public:
  explicit TestCoordinator(forge::v1::LeaseSettings settings) : settings_(std::move(settings)) {}

  void Offer(const Work& work) {
    absl::MutexLock lock(&mu_);
    pending_.insert(pending_.end(), work.candidates.begin(), work.candidates.end());
    for (const KernelTask& task : work.tasks) tasks_[task.digest()] = task;
  }
  // Leases of `task_digest` name `us` as the time its results must beat to be a best.
  void SetTimeToBeat(const std::string& task_digest, double us) {
    absl::MutexLock lock(&mu_);
    time_to_beat_[task_digest] = us;
  }
  void FailNextReports(int count) {
    absl::MutexLock lock(&mu_);
    failing_reports_ = count;
  }
  // Heartbeats fail (the coordinator is unreachable for them), so no lease is renewed.
  void FailHeartbeats() {
    absl::MutexLock lock(&mu_);
    failing_heartbeats_ = true;
  }
  void AskToRegisterAgain() {
    absl::MutexLock lock(&mu_);
    register_again_ = true;
  }
  // Cancels the lease at the first heartbeat that names it.
  void CancelWhenActive(std::string lease_id) {
    absl::MutexLock lock(&mu_);
    cancel_ = std::move(lease_id);
  }

  Record Snapshot() const {
    absl::MutexLock lock(&mu_);
    return record_;
  }
  // Waits until `done(record)` holds; false after the timeout.
  template <typename Predicate>
  bool WaitUntil(Predicate done, absl::Duration timeout = kWait) const {
    absl::MutexLock lock(&mu_);
    auto holds = [&]() ABSL_SHARED_LOCKS_REQUIRED(mu_) { return done(record_); };
    return mu_.AwaitWithTimeout(absl::Condition(&holds), timeout);
  }

  grpc::Status Register(grpc::ServerContext*, const forge::v1::RegisterRequest* request,
                        forge::v1::RegisterResponse* response) override {
    absl::MutexLock lock(&mu_);
    record_.registrations.push_back(*request);
    response->set_worker_id(request->worker_id().empty() ? "worker-1" : request->worker_id());
    *response->mutable_lease_settings() = settings_;
    return grpc::Status::OK;
  }

  grpc::Status Heartbeat(grpc::ServerContext*, const forge::v1::HeartbeatRequest* request,
                         forge::v1::HeartbeatResponse* response) override {
    absl::MutexLock lock(&mu_);
    if (failing_heartbeats_) return grpc::Status(grpc::StatusCode::UNAVAILABLE, "scripted outage");
    record_.heartbeats.push_back(*request);
    response->set_register_again(register_again_);
    register_again_ = false;
    if (!cancel_.empty()) {
      for (const std::string& lease_id : request->active_lease_ids()) {
        if (lease_id != cancel_) continue;
        response->add_cancelled_lease_ids(lease_id);
        record_.cancelled_at_heartbeat = static_cast<int>(record_.heartbeats.size()) - 1;
        cancel_.clear();
        break;
      }
    }
    return grpc::Status::OK;
  }

  grpc::Status Lease(grpc::ServerContext*, const forge::v1::LeaseRequest* request,
                     forge::v1::LeaseResponse* response) override {
    absl::MutexLock lock(&mu_);
    record_.lease_requests.push_back(*request);
    if (pending_.empty()) {
      response->set_retry_after_ms(20);
      return grpc::Status::OK;
    }
    const std::string lease_id = absl::StrCat("lease-", record_.leases.size() + 1);
    response->set_lease_id(lease_id);
    response->set_duration_ms(settings_.lease_duration_ms());
    std::vector<std::string>& digests = record_.leases[lease_id];
    std::map<std::string, bool> task_added;
    while (!pending_.empty() && response->candidates_size() < request->max_candidates()) {
      const Candidate& candidate = pending_.front();
      digests.push_back(candidate.digest());
      if (!task_added[candidate.task_digest()]) {
        *response->add_tasks() = tasks_.at(candidate.task_digest());
        task_added[candidate.task_digest()] = true;
        if (const auto bar = time_to_beat_.find(candidate.task_digest());
            bar != time_to_beat_.end()) {
          (*response->mutable_sanitize_below_us())[bar->first] = bar->second;
        }
      }
      *response->add_candidates() = candidate;
      pending_.erase(pending_.begin());
    }
    return grpc::Status::OK;
  }

  grpc::Status Report(grpc::ServerContext*, const forge::v1::ReportRequest* request,
                      forge::v1::ReportResponse* response) override {
    absl::MutexLock lock(&mu_);
    if (failing_reports_ > 0) {
      --failing_reports_;
      return grpc::Status(grpc::StatusCode::UNAVAILABLE, "scripted outage");
    }
    for (const forge::v1::Result& result : request->results()) {
      const std::string& digest = result.has_measurement() ? result.measurement().candidate_digest()
                                                           : result.failure().candidate_digest();
      record_.results[digest].push_back(result);
    }
    for (const std::string& digest : request->returned_candidate_digests()) {
      ++record_.returned[digest];
    }
    response->set_accepted(request->results_size());
    return grpc::Status::OK;
  }

 private:
  const forge::v1::LeaseSettings settings_;
  mutable absl::Mutex mu_;
  std::vector<Candidate> pending_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, KernelTask> tasks_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, double> time_to_beat_ ABSL_GUARDED_BY(mu_);
  int failing_reports_ ABSL_GUARDED_BY(mu_) = 0;
  bool failing_heartbeats_ ABSL_GUARDED_BY(mu_) = false;
  bool register_again_ ABSL_GUARDED_BY(mu_) = false;
  std::string cancel_ ABSL_GUARDED_BY(mu_);
  Record record_ ABSL_GUARDED_BY(mu_);
};

forge::v1::LeaseSettings Settings() {
  forge::v1::LeaseSettings settings;
  settings.set_max_candidates_per_lease(16);
  settings.set_lease_duration_ms(60'000);
  settings.set_heartbeat_interval_ms(50);
  return settings;
}

// Serves `service` on 127.0.0.1:port (0: any free port; the chosen one lands in *port).
std::unique_ptr<grpc::Server> Serve(TestCoordinator* service, int* port) {
  grpc::ServerBuilder builder;
  builder.AddListeningPort(absl::StrCat("127.0.0.1:", *port), grpc::InsecureServerCredentials(),
                           port);
  builder.RegisterService(service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  EXPECT_NE(server, nullptr);
  EXPECT_NE(*port, 0);
  return server;
}

// A daemon whose Run goes on a thread of its own; stopped and joined when destroyed.
class RunningDaemon {
 public:
  explicit RunningDaemon(std::unique_ptr<WorkerDaemon> daemon)
      : daemon_(std::move(daemon)), thread_([this] { daemon_->Run(); }) {}
  ~RunningDaemon() { Stop(); }
  void Stop() {
    if (!thread_.joinable()) return;
    daemon_->Stop();
    thread_.join();
  }
  WorkerDaemon& operator*() { return *daemon_; }
  WorkerDaemon* operator->() { return daemon_.get(); }

 private:
  std::unique_ptr<WorkerDaemon> daemon_;
  std::thread thread_;
};

class WorkerDaemonTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<std::unique_ptr<compile::CompilePool>> pool =
        compile::CompilePool::Create({.threads = 2});
    ASSERT_TRUE(pool.ok()) << pool.status();
    pool_ = *std::move(pool);
  }

  // A daemon with `lanes` emulated H200s talking to 127.0.0.1:port; `wrap`, when given, wraps
  // each lane's executor.
  std::unique_ptr<RunningDaemon> Start(
      int port, int lanes, int compile_threads,
      absl::Duration report_delay = absl::Milliseconds(50), int max_candidates_per_lease = 0,
      const std::function<std::unique_ptr<Executor>(std::unique_ptr<Executor>)>& wrap = {}) {
    std::vector<std::unique_ptr<Executor>> executors;
    for (int index = 0; index < lanes; ++index) {
      absl::StatusOr<std::unique_ptr<EmulatedExecutor>> executor =
          EmulatedExecutor::Create("H200", index, pool_.get());
      EXPECT_TRUE(executor.ok()) << executor.status();
      if (!executor.ok()) return nullptr;
      executors.push_back(wrap ? wrap(*std::move(executor)) : *std::move(executor));
    }
    absl::StatusOr<std::unique_ptr<WorkerDaemon>> daemon = WorkerDaemon::Create(
        {.coordinator = absl::StrCat("127.0.0.1:", port),
         .hostname = "test-host",
         .compile_threads = compile_threads,
         .max_candidates_per_lease = max_candidates_per_lease,
         .report_delay = report_delay,
         .rpc_timeout = absl::Seconds(5),
         .min_backoff = absl::Milliseconds(20),
         .max_backoff = absl::Milliseconds(200)},
        std::move(executors), &registry_);
    EXPECT_TRUE(daemon.ok()) << daemon.status();
    if (!daemon.ok()) return nullptr;
    return std::make_unique<RunningDaemon>(*std::move(daemon));
  }

  double SeriesValue(const std::string& family, const metrics::Labels& labels) const {
    for (const metrics::FamilySnapshot& snapshot : registry_.Collect()) {
      if (snapshot.name != family) continue;
      for (const metrics::SeriesSnapshot& series : snapshot.series) {
        if (series.labels == labels) return series.value;
      }
    }
    return 0;
  }

  std::unique_ptr<compile::CompilePool> pool_;
  metrics::Registry registry_;
};

bool EveryOutcomeIn(const Record& record, const std::vector<std::string>& digests) {
  for (const std::string& digest : digests) {
    if (record.OutcomesOf(digest) == 0) return false;
  }
  return true;
}

TEST_F(WorkerDaemonTest, RegistersLeasesAndReportsEveryCandidateOnce) {
  TestCoordinator coordinator(Settings());
  int port = 0;
  std::unique_ptr<grpc::Server> server = Serve(&coordinator, &port);
  Work baselines = Baselines(24, 1000);
  Work compiled = Compiled(4, 4096);
  coordinator.Offer(baselines);
  coordinator.Offer(compiled);
  std::vector<std::string> digests = Digests(baselines);
  for (const std::string& digest : Digests(compiled)) digests.push_back(digest);

  std::unique_ptr<RunningDaemon> daemon = Start(port, /*lanes=*/2, /*compile_threads=*/2);
  ASSERT_NE(daemon, nullptr);
  ASSERT_TRUE(coordinator.WaitUntil([&](const Record& record) {
    return EveryOutcomeIn(record, digests) && record.heartbeats.size() >= 2;
  }));
  daemon->Stop();
  const Record record = coordinator.Snapshot();

  ASSERT_EQ(record.registrations.size(), 1u);
  const forge::v1::RegisterRequest& registration = record.registrations.front();
  EXPECT_EQ(registration.worker_id(), "");
  EXPECT_EQ(registration.hostname(), "test-host");
  EXPECT_EQ(registration.compile_threads(), 2);
  EXPECT_EQ(registration.generator_version(), codegen::GeneratorVersions());
  ASSERT_EQ(registration.gpus_size(), 2);
  for (int index = 0; index < 2; ++index) {
    EXPECT_EQ(registration.gpus(index).index(), index);
    EXPECT_EQ(registration.gpus(index).name(), "H200");
    EXPECT_EQ(registration.gpus(index).arch(), "sm_90");
    EXPECT_TRUE(registration.gpus(index).emulated());
  }
  EXPECT_EQ((*daemon)->worker_id(), "worker-1");

  for (const forge::v1::LeaseRequest& request : record.lease_requests) {
    EXPECT_EQ(request.worker_id(), "worker-1");
    EXPECT_EQ(request.target_arch(), "sm_90");
    EXPECT_GE(request.max_candidates(), 1);
    EXPECT_LE(request.max_candidates(), 16);
  }
  for (const std::string& digest : digests) {
    ASSERT_EQ(record.OutcomesOf(digest), 1) << digest;
    const forge::v1::Result& result = record.results.at(digest).front();
    ASSERT_TRUE(result.has_measurement()) << result.failure().DebugString();
    EXPECT_EQ(result.measurement().kind(), forge::v1::MEASUREMENT_KIND_PREDICTED);
    EXPECT_GT(result.measurement().median_us(), 0);
  }
  EXPECT_EQ(record.results.size(), digests.size());  // nothing else was reported
  EXPECT_TRUE(record.returned.empty());
  for (const forge::v1::HeartbeatRequest& heartbeat : record.heartbeats) {
    EXPECT_EQ(heartbeat.worker_id(), "worker-1");
  }

  const WorkerStats stats = (*daemon)->stats();
  EXPECT_EQ(stats.measured, static_cast<int64_t>(digests.size()));
  EXPECT_EQ(stats.candidates_leased, static_cast<int64_t>(digests.size()));
  EXPECT_GT(stats.stage_seconds[static_cast<int>(Stage::kCompile)], 0);
  EXPECT_EQ(SeriesValue("forge_worker_candidates_total",
                         {{"outcome", "measured"}, {"stage", "predict"}}),
            static_cast<double>(digests.size()));
  EXPECT_EQ(SeriesValue("forge_worker_leases_active", {}), 0);
}

// A failed candidate's line in the worker's log says why it failed.
TEST_F(WorkerDaemonTest, LogsWhyACandidateFailed) {
  TestCoordinator coordinator(Settings());
  int port = 0;
  std::unique_ptr<grpc::Server> server = Serve(&coordinator, &port);
  Work work = Compiled(1, 4096);
  ASSERT_EQ(work.candidates.size(), 1u);
  // Compiled for another GPU than this worker's (an sm_90 H200): the worker refuses it.
  work.candidates[0].set_target_arch("sm_80");
  work.candidates[0].set_digest(search::CandidateDigest(work.candidates[0]));
  coordinator.Offer(work);
  forge::testing::TempDir directory;
  const std::string log_path = directory.path() + "/worker.log";
  ASSERT_TRUE(InitLogging({.level = "info", .format = "text", .output = log_path}).ok());

  std::unique_ptr<RunningDaemon> daemon = Start(port, /*lanes=*/1, /*compile_threads=*/1);
  ASSERT_NE(daemon, nullptr);
  ASSERT_TRUE(coordinator.WaitUntil(
      [&](const Record& record) { return EveryOutcomeIn(record, Digests(work)); }));
  daemon->Stop();
  ASSERT_TRUE(InitLogging({}).ok());  // back to stderr
  const Record record = coordinator.Snapshot();
  const forge::v1::Result& result = record.results.at(work.candidates[0].digest()).front();
  ASSERT_TRUE(result.has_failure()) << result.DebugString();
  std::ifstream file(log_path);
  const std::string log((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
  EXPECT_THAT(log, HasSubstr(absl::StrCat("candidate=", work.candidates[0].digest().substr(0, 12))));
  EXPECT_THAT(log, HasSubstr("detail=\""));
  EXPECT_THAT(log, HasSubstr("sm_80"));
}

// An executor that notes which GPU ran each task's candidates, then runs them with the one it wraps.
class LaneRecorder final : public Executor {
 public:
  struct Log {
    absl::Mutex mu;
    std::map<std::string, std::set<int>> lanes_by_task ABSL_GUARDED_BY(mu);
    std::set<int> lanes ABSL_GUARDED_BY(mu);
    // PreparedCandidate::sanitize_below_us of each task's candidates, as Execute got it.
    std::map<std::string, std::set<double>> bars_by_task ABSL_GUARDED_BY(mu);
  };
  LaneRecorder(std::unique_ptr<Executor> inner, compile::CompilePool* pool, Log* log)
      : Executor(inner->gpu(), pool), inner_(std::move(inner)), log_(log) {}

  absl::StatusOr<forge::v1::Result> Execute(PreparedCandidate prepared,
                                            StageTimes* times) override {
    {
      absl::MutexLock lock(&log_->mu);
      log_->lanes_by_task[prepared.task->digest()].insert(gpu().index());
      log_->lanes.insert(gpu().index());
      log_->bars_by_task[prepared.task->digest()].insert(prepared.sanitize_below_us);
    }
    return inner_->Execute(std::move(prepared), times);
  }

 private:
  std::unique_ptr<Executor> inner_;
  Log* log_;
};

// The candidates of a large task, leased two at a time by both lanes, all run on the lane that
// queued the task first (its draws stay in that lane's sandbox); small tasks go to whichever lane
// leased them, and both lanes work.
TEST_F(WorkerDaemonTest, ALargeTasksCandidatesRunOnTheLaneThatOwnsIt) {
  TestCoordinator coordinator(Settings());
  int port = 0;
  std::unique_ptr<grpc::Server> server = Serve(&coordinator, &port);
  const Work large = Compiled(8, 70000);  // float32[64, 70000] in and out: 34 MiB
  const Work small = Baselines(16, 100);
  coordinator.Offer(large);
  coordinator.Offer(small);
  std::vector<std::string> digests = Digests(large);
  for (const std::string& digest : Digests(small)) digests.push_back(digest);

  LaneRecorder::Log log;
  std::unique_ptr<RunningDaemon> daemon =
      Start(port, /*lanes=*/2, /*compile_threads=*/2, absl::Milliseconds(50),
            /*max_candidates_per_lease=*/2, [&](std::unique_ptr<Executor> executor) {
              return std::make_unique<LaneRecorder>(std::move(executor), pool_.get(), &log);
            });
  ASSERT_NE(daemon, nullptr);
  ASSERT_TRUE(
      coordinator.WaitUntil([&](const Record& record) { return EveryOutcomeIn(record, digests); }));
  daemon->Stop();
  const Record record = coordinator.Snapshot();
  for (const std::string& digest : digests) {
    ASSERT_EQ(record.OutcomesOf(digest), 1) << digest;
    EXPECT_TRUE(record.results.at(digest).front().has_measurement()) << digest;
  }
  absl::MutexLock lock(&log.mu);
  EXPECT_EQ(log.lanes_by_task.at(large.tasks.front().digest()).size(), 1u);
  EXPECT_EQ(log.lanes.size(), 2u);
  EXPECT_GT((*daemon)->stats().moved_to_owner, 0);
}

// The lease's time to beat per task (LeaseResponse.sanitize_below_us) reaches the executor with
// each of the task's candidates, which sanitizes a result faster than it; a task the lease names
// no time for has none to beat (infinity: any measurement would be its best).
TEST_F(WorkerDaemonTest, TheLeasesTimeToBeatReachesTheExecutor) {
  TestCoordinator coordinator(Settings());
  int port = 0;
  std::unique_ptr<grpc::Server> server = Serve(&coordinator, &port);
  const Work work = Baselines(2, 300);
  coordinator.SetTimeToBeat(work.tasks[0].digest(), 42.5);
  coordinator.Offer(work);
  LaneRecorder::Log log;
  std::unique_ptr<RunningDaemon> daemon =
      Start(port, /*lanes=*/1, /*compile_threads=*/1, absl::Milliseconds(50),
            /*max_candidates_per_lease=*/2, [&](std::unique_ptr<Executor> executor) {
              return std::make_unique<LaneRecorder>(std::move(executor), pool_.get(), &log);
            });
  ASSERT_NE(daemon, nullptr);
  ASSERT_TRUE(coordinator.WaitUntil(
      [&](const Record& record) { return EveryOutcomeIn(record, Digests(work)); }));
  daemon->Stop();
  absl::MutexLock lock(&log.mu);
  EXPECT_THAT(log.bars_by_task.at(work.tasks[0].digest()), ::testing::ElementsAre(42.5));
  EXPECT_THAT(log.bars_by_task.at(work.tasks[1].digest()),
              ::testing::ElementsAre(std::numeric_limits<double>::infinity()));
}

TEST_F(WorkerDaemonTest, RegistersAgainWithItsIdWhenTheCoordinatorAsks) {
  TestCoordinator coordinator(Settings());
  int port = 0;
  std::unique_ptr<grpc::Server> server = Serve(&coordinator, &port);
  coordinator.AskToRegisterAgain();
  std::unique_ptr<RunningDaemon> daemon = Start(port, 1, 1);
  ASSERT_NE(daemon, nullptr);
  ASSERT_TRUE(coordinator.WaitUntil([](const Record& record) {
    return record.registrations.size() >= 2 && record.heartbeats.size() >= 2;
  }));
  const Record record = coordinator.Snapshot();
  EXPECT_EQ(record.registrations[0].worker_id(), "");
  EXPECT_EQ(record.registrations[1].worker_id(), "worker-1");
  EXPECT_EQ(record.registrations[1].gpus_size(), 1);
}

TEST_F(WorkerDaemonTest, DropsACancelledLeaseAndGoesOn) {
  TestCoordinator coordinator(Settings());
  int port = 0;
  std::unique_ptr<grpc::Server> server = Serve(&coordinator, &port);
  // One lane and one compile thread lease two candidates at a time: lease-1 holds two that
  // compile; a second of report_delay keeps their results unreported past the first heartbeat.
  const Work cancelled = Compiled(2, 2048);
  const Work later = Baselines(6, 3000);
  coordinator.Offer(cancelled);
  coordinator.Offer(later);
  coordinator.CancelWhenActive("lease-1");

  std::unique_ptr<RunningDaemon> daemon = Start(port, 1, 1, absl::Seconds(1));
  ASSERT_NE(daemon, nullptr);
  ASSERT_TRUE(coordinator.WaitUntil([&](const Record& record) {
    return EveryOutcomeIn(record, Digests(later)) &&
           record.heartbeats.size() > static_cast<size_t>(record.cancelled_at_heartbeat + 1);
  }));
  // The candidate that was compiling when the lease was cancelled finishes, unreported.
  for (int i = 0; i < 1000 && (*daemon)->stats().dropped < 2; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  daemon->Stop();
  const Record record = coordinator.Snapshot();

  ASSERT_GE(record.cancelled_at_heartbeat, 0);
  EXPECT_EQ(record.leases.at("lease-1"), Digests(cancelled));
  for (const std::string& digest : Digests(cancelled)) {
    EXPECT_EQ(record.OutcomesOf(digest), 0) << digest;
  }
  for (const std::string& digest : Digests(later)) EXPECT_EQ(record.OutcomesOf(digest), 1);
  for (size_t i = record.cancelled_at_heartbeat + 1; i < record.heartbeats.size(); ++i) {
    EXPECT_THAT(record.heartbeats[i].active_lease_ids(), Not(Contains("lease-1")));
  }
  EXPECT_EQ((*daemon)->stats().dropped, 2);
}

TEST_F(WorkerDaemonTest, WaitsForACoordinatorThatIsDownAndRetriesFailedReports) {
  TestCoordinator coordinator(Settings());
  int port = forge::testing::PickFreePort();
  const Work work = Baselines(10, 5000);
  coordinator.Offer(work);
  coordinator.FailNextReports(3);

  std::unique_ptr<RunningDaemon> daemon = Start(port, 1, 1);
  ASSERT_NE(daemon, nullptr);
  // Nothing listens yet: registration fails, again and again.
  for (int i = 0; i < 1000 && (*daemon)->stats().rpc_errors < 3; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_GE((*daemon)->stats().rpc_errors, 3);
  EXPECT_EQ((*daemon)->stats().registrations, 0);

  std::unique_ptr<grpc::Server> server = Serve(&coordinator, &port);
  ASSERT_TRUE(coordinator.WaitUntil(
      [&](const Record& record) { return EveryOutcomeIn(record, Digests(work)); }));
  daemon->Stop();
  const Record record = coordinator.Snapshot();
  EXPECT_EQ(record.registrations.size(), 1u);
  for (const std::string& digest : Digests(work)) EXPECT_EQ(record.OutcomesOf(digest), 1);
  EXPECT_GE((*daemon)->stats().rpc_errors, 3 + 3);  // registrations, then the failed reports
  EXPECT_GE(SeriesValue("forge_worker_rpc_errors_total",
                         {{"rpc", "report"}, {"code", "UNAVAILABLE"}}),
            3);
}

TEST_F(WorkerDaemonTest, HeartbeatsRenewALeaseWhoseReportsAreStillFailing) {
  forge::v1::LeaseSettings settings = Settings();
  settings.set_lease_duration_ms(300);
  TestCoordinator coordinator(settings);
  int port = 0;
  std::unique_ptr<grpc::Server> server = Serve(&coordinator, &port);
  const Work work = Baselines(2, 7100);
  coordinator.Offer(work);
  // Retried with backoff (100, 200, 400 ms ...): the last retry comes after the lease's first
  // 300 ms, which only the heartbeats' renewals keep alive.
  coordinator.FailNextReports(4);

  std::unique_ptr<RunningDaemon> daemon = Start(port, 1, 1);
  ASSERT_NE(daemon, nullptr);
  EXPECT_TRUE(coordinator.WaitUntil([&](const Record& record) {
    return record.results.size() == work.candidates.size();
  })) << "the results arrived after the original deadline";
  daemon->Stop();
  EXPECT_EQ((*daemon)->stats().dropped, 0);
}

TEST_F(WorkerDaemonTest, DropsResultsItCouldNotReportBeforeTheLeaseExpired) {
  forge::v1::LeaseSettings settings = Settings();
  settings.set_lease_duration_ms(300);
  TestCoordinator coordinator(settings);
  int port = 0;
  std::unique_ptr<grpc::Server> server = Serve(&coordinator, &port);
  const Work work = Baselines(2, 7000);
  coordinator.Offer(work);
  coordinator.FailNextReports(1'000'000);
  coordinator.FailHeartbeats();

  std::unique_ptr<RunningDaemon> daemon = Start(port, 1, 1);
  ASSERT_NE(daemon, nullptr);
  for (int i = 0; i < 1000 && (*daemon)->stats().dropped < 2; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  daemon->Stop();
  const WorkerStats stats = (*daemon)->stats();
  EXPECT_EQ(stats.measured, 2);
  EXPECT_EQ(stats.dropped, 2);
  EXPECT_GE(stats.rpc_errors, 2);  // the report was tried, and retried, before the deadline
  EXPECT_TRUE(coordinator.Snapshot().results.empty());
  EXPECT_EQ(SeriesValue("forge_worker_candidates_dropped_total", {{"reason", "expired"}}), 2);
}

#ifdef FORGE_SANDBOX_CHILD
// A GPU lane whose sandbox cannot run candidates (here: the real child on a machine without a
// GPU) gives them back for other workers instead of failing them.
TEST_F(WorkerDaemonTest, GpuLaneThatCannotRunGivesItsCandidatesBack) {
  if (gpu::DriverStatus().ok()) GTEST_SKIP() << "a GPU is present: its sandbox runs candidates";
  TestCoordinator coordinator(Settings());
  int port = 0;
  std::unique_ptr<grpc::Server> server = Serve(&coordinator, &port);
  const Work work = Baselines(3, 9000);
  coordinator.Offer(work);

  gpu::DeviceProperties device;
  device.name = "NVIDIA H200";
  device.compute_capability_major = 9;
  GpuExecutorOptions options;
  options.sandbox_child = FORGE_SANDBOX_CHILD;
  absl::StatusOr<std::unique_ptr<GpuExecutor>> executor =
      GpuExecutor::Create(device, options, pool_.get());
  ASSERT_TRUE(executor.ok()) << executor.status();
  std::vector<std::unique_ptr<Executor>> lanes;
  lanes.push_back(*std::move(executor));
  absl::StatusOr<std::unique_ptr<WorkerDaemon>> created = WorkerDaemon::Create(
      {.coordinator = absl::StrCat("127.0.0.1:", port),
       .hostname = "test-host",
       .compile_threads = 1,
       .min_backoff = absl::Milliseconds(20),
       .max_backoff = absl::Milliseconds(200)},
      std::move(lanes), &registry_);
  ASSERT_TRUE(created.ok()) << created.status();
  RunningDaemon daemon(*std::move(created));
  ASSERT_TRUE(coordinator.WaitUntil(
      [&](const Record& record) { return EveryOutcomeIn(record, Digests(work)); }));
  daemon.Stop();
  const Record record = coordinator.Snapshot();
  EXPECT_FALSE(record.registrations.front().gpus(0).emulated());
  for (const std::string& digest : Digests(work)) {
    EXPECT_EQ(record.returned.count(digest), 1u) << digest;
    EXPECT_EQ(record.results.count(digest), 0u) << digest;
  }
  EXPECT_EQ(daemon->stats().returned, 3);
  EXPECT_EQ(SeriesValue("forge_worker_candidates_returned_total", {}), 3);
}
#endif

// The real binary: SIGTERM gives back what has not started, reports what was in flight, and
// exits 0.
TEST_F(WorkerDaemonTest, SigtermReturnsUnstartedCandidatesAndReportsInFlightOnes) {
  forge::v1::LeaseSettings settings = Settings();
  settings.set_heartbeat_interval_ms(20);
  TestCoordinator coordinator(settings);
  int port = 0;
  std::unique_ptr<grpc::Server> server = Serve(&coordinator, &port);
  // Four compile threads and one lane lease eight candidates at once: four start compiling,
  // four wait. SIGTERM comes with the first heartbeat after the lease, a few ms later.
  const Work work = Compiled(8, 8192);
  coordinator.Offer(work);

  forge::testing::TempDir dir;
  const std::string log = absl::StrCat(dir.path(), "/worker.log");
  absl::StatusOr<forge::testing::Subprocess> worker = forge::testing::Subprocess::Start(
      {FORGE_WORKER_BINARY, absl::StrCat("--coordinator=127.0.0.1:", port), "--emulate=H200",
       "--gpus=1", "--compile-threads=4", "--worker-id=sigterm-worker"},
      log);
  ASSERT_TRUE(worker.ok()) << worker.status();
  ASSERT_TRUE(coordinator.WaitUntil([](const Record& record) {
    for (const forge::v1::HeartbeatRequest& heartbeat : record.heartbeats) {
      for (const std::string& lease : heartbeat.active_lease_ids()) {
        if (lease == "lease-1") return true;
      }
    }
    return false;
  }));
  ASSERT_EQ(::kill(worker->pid(), SIGTERM), 0);
  const int status = worker->Wait(std::chrono::seconds(30));
  ASSERT_TRUE(WIFEXITED(status)) << "wait status " << status;
  EXPECT_EQ(WEXITSTATUS(status), 0);

  const Record record = coordinator.Snapshot();
  EXPECT_EQ(record.registrations.front().worker_id(), "sigterm-worker");
  EXPECT_EQ(record.leases.at("lease-1").size(), 8u);
  int results = 0;
  int returned = 0;
  for (const std::string& digest : Digests(work)) {
    EXPECT_EQ(record.OutcomesOf(digest), 1) << digest;
    results += record.results.count(digest);
    returned += record.returned.count(digest);
  }
  EXPECT_GE(results, 1) << "nothing in flight was finished and reported";
  EXPECT_GE(returned, 1) << "nothing unstarted was given back";
  if (HasFailure()) {
    std::ifstream file(log);
    std::cerr << "worker log:\n" << std::string(std::istreambuf_iterator<char>(file), {});
  }
}

}  // namespace
}  // namespace forge::daemon
