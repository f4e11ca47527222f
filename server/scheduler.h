// The coordinator's scheduler: it runs jobs' searches, hands candidates to workers under leases,
// takes their results into the results cache and the searches, and finishes tasks and jobs.
//
// Model. A job's tasks are searched per (space, task): a space is where results are valid (a GPU
// model, or "predicted:<GPU>" for emulated workers; redis_keys.h). A job is bound to the space of
// the first worker that leases work for it. The search of a (space, task) is shared by every job
// that contains the task, and its results live in the shared results cache, so identical layers of
// one model, of different models and of repeated submissions are measured once.
//
// Per task: first the baseline (the ATen fallback candidate, i.e. eager PyTorch), then the search
// (compiler/search) with rewards = eager time / candidate time. A job's trial budget is spread
// over its tasks in proportion to their share of the model's eager time (known once every
// baseline is in), with a minimum per task. A task stops for a job when it has that many recorded
// trials (cached ones included), when its best is within a few percent of the roofline floor, when
// the space is exhausted, or when the job's wall-clock budget ends. A candidate the cache already
// answers is recorded at once and never leased.
//
// Fairness: higher priority first; among jobs of equal priority, each Lease call gives every job
// an equal share of the batch, and the order rotates between calls.
//
// Faults. Every change is written to Redis before it is acknowledged; leases, workers, job search
// records and searcher snapshots live there (keys in redis_keys.h). A lease not reported or
// renewed (heartbeats renew the leases they name) by its deadline returns its candidates to the
// search. A restarted coordinator reloads workers, leases, jobs and searches, releases pending
// candidates no live lease holds and records those the cache already answers. One scheduler
// serves a Redis at a time.
//
// Thread-safe: one mutex serializes the calls; Tick runs the time-driven part (start queued
// jobs, expire leases, enforce wall budgets, snapshot searches) and is called periodically.
#ifndef FORGE_SERVER_SCHEDULER_H_
#define FORGE_SERVER_SCHEDULER_H_

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/metrics/metrics.h"
#include "common/redis/redis_client.h"
#include "compiler/search/searcher.h"
#include "forge/v1/service.pb.h"
#include "forge/v1/task.pb.h"
#include "server/job_store.h"
#include "server/result_cache.h"

namespace forge::server {

struct SchedulerOptions {
  // How long a lease lasts without a report or a heartbeat naming it.
  absl::Duration lease_duration = absl::Seconds(30);
  // How often workers should send heartbeats (cancellations reach them this fast).
  absl::Duration heartbeat_interval = absl::Seconds(1);
  int max_candidates_per_lease = 32;
  // What a worker waits before asking again when there is no work.
  absl::Duration retry_after = absl::Milliseconds(250);
  // Trials per searchable task when a job sets no budget, and the least any task gets.
  int64_t default_trials_per_task = 24;
  int64_t min_trials_per_task = 4;
  // A task stops once its best candidate reaches this percentage of its roofline floor's speed.
  double near_roofline_percent = 95;
  // Candidates proposed ahead per task, waiting for a lease.
  int ready_per_task = 32;
  // The generator versions workers must have (codegen::GeneratorVersions() of this build).
  std::string generator_versions;
  search::SearchOptions search;
};

class Scheduler {
 public:
  // Loads workers, leases and running jobs from Redis. The stores and the registry must outlive
  // the scheduler; the registry gets the forge_coordinator_* scheduling metrics.
  static absl::StatusOr<std::unique_ptr<Scheduler>> Create(RedisClient* redis, JobStore* jobs,
                                                           ResultCache* results,
                                                           metrics::Registry* registry,
                                                           SchedulerOptions options);

  // WorkerService. InvalidArgument for malformed requests, NotFound for an unknown worker (it
  // must register again), FailedPrecondition for a worker whose generators differ from ours,
  // PermissionDenied for a report on another worker's lease.
  absl::StatusOr<forge::v1::RegisterResponse> Register(const forge::v1::RegisterRequest& request);
  absl::StatusOr<forge::v1::HeartbeatResponse> Heartbeat(
      const forge::v1::HeartbeatRequest& request);
  absl::StatusOr<forge::v1::LeaseResponse> Lease(const forge::v1::LeaseRequest& request);
  absl::StatusOr<forge::v1::ReportResponse> Report(const forge::v1::ReportRequest& request);

  // JobService hooks: a job was submitted (start it now rather than at the next tick) or
  // cancelled (drop its work; the workers learn it at their next heartbeat).
  void JobSubmitted(absl::string_view job_id);
  void JobCancelled(absl::string_view job_id);

  // The job's tasks with their best candidates and counts (GetResults).
  absl::StatusOr<forge::v1::GetResultsResponse> Results(absl::string_view job_id,
                                                        bool include_all_results);

  absl::StatusOr<std::vector<forge::v1::WorkerStatus>> Workers(bool include_dead);

  // Starts queued jobs, expires leases, ends jobs past their wall budget, snapshots searches.
  absl::Status Tick();

 private:
  struct WorkerRecord {
    forge::v1::WorkerStatus status;
    absl::Time last_seen;
  };
  struct LeaseEntry {
    std::string job_id;
    std::string task_digest;
  };
  struct LeaseRecord {
    std::string worker_id;
    std::string space;
    absl::Time deadline;
    std::map<std::string, LeaseEntry> candidates;  // by candidate digest
  };
  struct TaskSearch {
    std::string space;
    forge::v1::KernelTask spec;
    std::unique_ptr<search::Searcher> searcher;
    forge::v1::Candidate baseline;
    bool baseline_leased = false;
    std::optional<forge::v1::Measurement> eager;
    std::optional<forge::v1::Failure> baseline_failure;
    std::optional<forge::v1::Measurement> best;
    forge::v1::Candidate best_candidate;
    std::set<std::string> counted;  // candidates whose results the counts below include
    int64_t measured = 0;
    int64_t failed = 0;
    std::map<forge::v1::FailureStage, int> failures;
    std::deque<forge::v1::Candidate> ready;  // proposed, not yet leased
    bool dirty = false;                      // searcher changed since the last snapshot
  };
  struct JobRun {
    std::string id;
    int64_t number = 0;
    forge::v1::JobOptions options;
    std::string space;  // empty until a worker leases for it
    std::string arch;   // the compile target of that worker's GPU
    absl::Time started;
    std::vector<forge::v1::KernelTask> tasks;  // with occurrences
    std::map<std::string, int64_t> targets;    // empty until every baseline is in
    std::map<std::string, forge::v1::TaskStopReason> stopped;
    bool finished = false;  // ended; erased at the end of the current call
  };

  Scheduler(RedisClient* redis, JobStore* jobs, ResultCache* results, metrics::Registry* registry,
            SchedulerOptions options);

  absl::Status LoadLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  absl::Status StartJobLocked(const forge::v1::Job& job) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  absl::Status BindJobLocked(JobRun& job, const std::string& space, const std::string& arch)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  absl::StatusOr<TaskSearch*> TaskSearchLocked(const std::string& space, const std::string& arch,
                                               const forge::v1::KernelTask& task)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  // Up to `room` candidates of `job` for a lease; cache hits met on the way are recorded.
  absl::StatusOr<std::vector<std::pair<forge::v1::Candidate, const JobRun*>>> TakeWorkLocked(
      JobRun& job, int room) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  absl::Status RefillReadyLocked(TaskSearch& task, int64_t wanted)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  // Takes a result (reported, or found in the cache) into the task's search, counts and best.
  absl::Status ApplyResultLocked(TaskSearch& task, const std::string& candidate_digest,
                                 const forge::v1::Result& result)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  absl::Status ComputeTargetsLocked(JobRun& job) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  // Stops tasks that are done and finishes the job when all are.
  absl::Status AdvanceJobLocked(JobRun& job) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  absl::Status StopTaskLocked(JobRun& job, const std::string& task_digest,
                              forge::v1::TaskStopReason reason)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  // Ends the job in Redis and marks its record finished; EraseFinishedLocked removes it later, so
  // that callers iterating over running_ keep valid iterators.
  absl::Status FinishJobLocked(JobRun& job, forge::v1::JobState state, absl::string_view detail)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  void EraseFinishedLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  // Releases pending candidates that are neither ready nor leased: what a call that failed
  // midway (Redis down) had proposed or picked. Such candidates would otherwise hold their task
  // open forever.
  void ReleaseStrandedLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  // Puts a leased candidate back: the search may propose it again.
  void ReleaseLocked(const std::string& space, const LeaseEntry& entry,
                     const std::string& candidate_digest) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  absl::Status DropLeaseLocked(const std::string& lease_id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  absl::Status SnapshotLocked(bool all) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  absl::Status SaveWorkerLocked(const WorkerRecord& worker) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  void UpdateGaugesLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  static std::string TaskKey(absl::string_view space, absl::string_view task_digest);

  RedisClient* const redis_;
  JobStore* const jobs_;
  ResultCache* const results_;
  const SchedulerOptions options_;

  metrics::Family<metrics::Counter>* candidates_;  // {event: leased, measured, failed, cached, ...}
  metrics::Family<metrics::Counter>* cache_lookups_;  // {outcome: hit, miss}
  metrics::Family<metrics::Gauge>* gauges_;  // {what: live_workers, frontier, leases, ...}

  absl::Mutex mutex_;
  std::map<std::string, WorkerRecord> workers_ ABSL_GUARDED_BY(mutex_);
  std::map<std::string, LeaseRecord> leases_ ABSL_GUARDED_BY(mutex_);
  // (space, candidate digest) -> lease id, for every leased candidate.
  std::map<std::string, std::string> leased_ ABSL_GUARDED_BY(mutex_);
  std::map<std::string, JobRun> running_ ABSL_GUARDED_BY(mutex_);  // by job id
  std::map<std::string, TaskSearch> searches_ ABSL_GUARDED_BY(mutex_);  // by TaskKey
  // Leases dropped because their jobs were cancelled, per worker, until its next heartbeat.
  std::map<std::string, std::vector<std::string>> cancelled_leases_ ABSL_GUARDED_BY(mutex_);
  uint64_t rotation_ ABSL_GUARDED_BY(mutex_) = 0;
  uint64_t ticks_ ABSL_GUARDED_BY(mutex_) = 0;
};

}  // namespace forge::server

#endif  // FORGE_SERVER_SCHEDULER_H_
