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
// Cheap first. A candidate is expensive when its compile is (search::IsExpensive: nvcc builds a
// CUTLASS shared object, tens of seconds); every other candidate is cheap (an NVRTC cubin, a
// library call). Within a job's share of a lease, once the baselines are in:
//  - the job's searched tasks take turns, one candidate each per round (the task furthest from
//    its trial target first), and each task's turn takes a cheap candidate when it has one left
//    (the search proposes among its cheap points only: Proposals::kCheapOnly);
//  - no expensive candidate of the job is leased until each of its tasks that still wants trials
//    has recorded cheap_first_per_task cheap results (or every cheap point it has);
//  - then, while any of those tasks still has a cheap candidate to try (when the job first takes
//    from a lease; the whole lease keeps to it), the expensive candidates out on one worker's
//    leases (all jobs') stay within expensive_compile_percent of the worker's compile threads
//    (at least one);
//  - a job with no cheap candidate left to try takes expensive ones without that bound, so a task
//    whose remaining candidates are all expensive still gets them.
// So every task gets its first cheap candidates measured before any task's nvcc compile is
// leased, and nvcc never takes more than the bounded share of a worker's compile threads while
// cheap work waits.
//
// Faults. Every change is written to Redis before it is acknowledged; leases, workers, job search
// records and searcher snapshots live there (keys in redis_keys.h). A lease not reported or
// renewed (heartbeats renew the leases they name) by its deadline returns its candidates to the
// search. A restarted coordinator reloads workers, leases, jobs and searches, releases pending
// candidates no live lease holds and records those the cache already answers. One scheduler
// serves a Redis at a time. Redis losing acknowledged writes (a host crash under appendfsync
// everysec rolls its AOF back by up to a second) leaves the scheduler's memory ahead of Redis:
// leases, results and job states Redis no longer has. The scheduler notices it on a lease or report
// mismatch (a report for a lease it holds but Redis lost, a leased candidate Redis lost, lease
// numbers going backwards) and on every tick (forge:scheduler:clock going backwards), and then
// reconciles: it drops its leases, searches and running jobs and loads them from Redis as a restart
// does, so candidates held by no lease in Redis go back to their searches, counts and bests are
// those of the results Redis holds, and jobs Redis still has running run on (a "redis lost writes:
// reconciling" warning). Workers whose leases went are told so when they report. A failure that
// belongs to one job (its stored state does not load,
// its tasks cannot be searched, a generator fails or throws on them) fails that job with the
// reason and the scheduler carries on with the others, at a restart too; only Redis being
// unavailable fails the call. A job of no tasks is DONE as soon as it starts.
//
// Parts (each with its own header and contract):
//   WorkerRegistry  workers and when they were last seen            (worker_registry.h)
//   LeaseTable      leases out with workers and the candidates held  (lease_table.h)
//   TaskSearches    the search strategy per (space, task) and its snapshots (task_search.h)
//   job budgets     trial targets, wall budgets, stop rules (pure)   (job_budget.h)
//   fair shares     one lease split between jobs by priority (pure)  (fair_share.h)
//   SchedulerStore  the Redis layout of all the above                (scheduler_store.h)
// The Scheduler orchestrates them: it decides what is leased to whom, takes results in, and
// writes each change through the store before it answers.
//
// Locking rule: one mutex, mutex_, guards every part and the running jobs; the parts themselves
// are not thread-safe and are only touched with it held. The calls that touch several parts at
// once (a report finishes tasks of every job sharing them; a cancellation drops leases and puts
// candidates back into searches) need the parts to agree, so finer locks would have to be taken
// together anyway. The store holds no state and RedisClient is thread-safe, so Results reads the
// job's records from Redis before it takes the mutex. Tick runs the time-driven part (start
// queued jobs, expire leases, enforce wall budgets, forget dead workers, snapshot searches) and
// is called periodically.
#ifndef FORGE_SERVER_SCHEDULER_H_
#define FORGE_SERVER_SCHEDULER_H_

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/metrics/metrics.h"
#include "common/redis/redis_client.h"
#include "forge/v1/service.pb.h"
#include "forge/v1/task.pb.h"
#include "server/job_budget.h"
#include "server/job_store.h"
#include "server/lease_table.h"
#include "server/result_cache.h"
#include "server/scheduler_store.h"
#include "server/task_search.h"
#include "server/worker_registry.h"

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
  // Cheap first (above): cheap results each task records before the job's expensive candidates
  // are leased, and the share (percent) of a worker's compile threads expensive compiles may hold
  // while cheap work remains.
  int cheap_first_per_task = 3;
  int expensive_compile_percent = 25;
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
  // PermissionDenied for a report on another worker's lease. A report's results are rejected one
  // by one (rejected_candidate_digests) for candidates its lease does not hold, predicted times
  // from a GPU worker or measured ones from an emulated worker, and MEASURED times without the
  // judge's passing evidence. A MEASURED time becomes its task's best only with compute-sanitizer's
  // clean run (Measurement.sanitizer PASSED; NOT_APPLICABLE for ATen-run candidates); without it
  // the result is kept and counted, never the best. A lease names, per task, the time a result
  // must beat to be a best (LeaseResponse.sanitize_below_us), so the worker knows what to sanitize.
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

  // Removes the cached results matching `filter` (ResultCache::Purge) and restarts the searches
  // of the tasks that lost results, from the results that remain: their counts and bests, the
  // whole-model estimates of the running jobs that have them, and their searchers' snapshots
  // (which had learnt from the removed results). A task a running job had already stopped stays
  // stopped; a finished job's GetResults reads the restarted search. Results of candidates still
  // out on leases are taken when reported.
  absl::StatusOr<forge::v1::PurgeResultsResponse> PurgeResults(const ResultFilter& filter);

  // Starts queued jobs, expires leases, ends jobs past their wall budget, snapshots searches.
  absl::Status Tick();

 private:
  Scheduler(RedisClient* redis, JobStore* jobs, ResultCache* results, metrics::Registry* registry,
            SchedulerOptions options);

  absl::Status LoadLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  // Leases and running jobs from Redis (LoadLocked's part that reconciliation repeats).
  absl::Status LoadWorkLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  // After Redis lost writes (`evidence` says how it showed): forgets leases, searches and running
  // jobs and loads them again from Redis. Callers must not hold pointers into them.
  absl::Status ReconcileLocked(absl::string_view evidence) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  absl::Status StartJobLocked(const forge::v1::Job& job) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  absl::Status BindJobLocked(JobRun& job, const std::string& space, const std::string& arch)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  // The search of (space, task), loaded on first use with the results the cache holds.
  absl::StatusOr<TaskSearch*> TaskSearchLocked(const std::string& space, const std::string& arch,
                                               const forge::v1::KernelTask& task)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  // One Lease call's expensive budget (cheap first, above): the expensive candidates the leasing
  // worker may still take while cheap work remains, and the jobs that had cheap work left when
  // they first took from this lease (all their takes from it keep to the bound).
  struct ExpensiveBudget {
    int room = 0;
    std::set<std::string> bounded_jobs;
  };
  // Up to `room` candidates of `job` for a lease, cheap first (above); cache hits met on the way
  // are recorded. What the job takes is subtracted from `expensive.room`.
  absl::StatusOr<std::vector<std::pair<forge::v1::Candidate, const JobRun*>>> TakeWorkLocked(
      JobRun& job, int room, ExpensiveBudget& expensive) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  // The task's next candidate for a lease: a cheap one if it has one left, else an expensive one
  // when `allow_expensive`; nullopt when there is none. Proposes up to `wanted` ahead.
  absl::StatusOr<std::optional<forge::v1::Candidate>> NextCandidateLocked(
      TaskSearch& task, int64_t wanted, bool allow_expensive) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  // Proposes until `wanted` candidates that `which` admits wait in the task's ready queue (or the
  // search has none left); cache hits are recorded instead and count against `wanted`.
  absl::Status RefillReadyLocked(TaskSearch& task, int64_t wanted, search::Proposals which)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  // Takes a result (reported, or found in the cache) into the task's search, counts and best,
  // and tells every running job with the task of an improvement over eager.
  absl::Status ApplyResultLocked(TaskSearch& task, const std::string& candidate_digest,
                                 const forge::v1::Result& result)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  // JobProgress.best_speedup: the whole-model estimate over the job's tasks searched so far
  // (common/speedup, as the report computes it), not the best single task's.
  double WholeModelSpeedupLocked(const JobRun& job) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  // The job budgets' view of the job's tasks (its space must be bound, its searches loaded).
  std::map<std::string, TaskProgress> ProgressLocked(const JobRun& job)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  // Sets and stores the job's trial targets once every baseline is in.
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
  // Ready candidates that no running job wants any more go back to their searches.
  void ReleaseUnwantedLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  // Runs one job's `step`. A failure of that job's own state or work (any error but Unavailable,
  // which means Redis itself is out, or an exception) fails the job with the reason and returns
  // OK, so that one job never stops the scheduler, its ticks, leases or restarts.
  absl::Status ContainJobFailureLocked(const std::string& job_id,
                                       absl::FunctionRef<absl::Status()> step)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  // Puts a leased candidate back into its search: it may be proposed again.
  void ReleaseLocked(const std::string& space, const LeaseEntry& entry,
                     const std::string& candidate_digest) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  // Puts every candidate of the lease back and drops it (store first, then the table).
  absl::Status ReleaseAndDropLeaseLocked(const std::string& lease_id)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  absl::Status DropLeaseLocked(const std::string& lease_id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  void UpdateGaugesLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);

  JobStore* const jobs_;
  ResultCache* const results_;
  const SchedulerOptions options_;
  const BudgetOptions budget_;
  SchedulerStore store_;

  metrics::Family<metrics::Counter>* candidates_;  // {event: leased, measured, failed, cached, ...}
  metrics::Family<metrics::Counter>* cache_lookups_;  // {outcome: hit, miss}
  metrics::Family<metrics::Gauge>* gauges_;  // {what: live_workers, frontier, leases, ...}
  // Seconds to load or build one task's search (TaskSearchLocked, under mutex_).
  metrics::Family<metrics::Histogram>* search_build_seconds_;

  absl::Mutex mutex_;
  WorkerRegistry workers_ ABSL_GUARDED_BY(mutex_);
  LeaseTable leases_ ABSL_GUARDED_BY(mutex_);
  TaskSearches searches_ ABSL_GUARDED_BY(mutex_);
  std::map<std::string, JobRun> running_ ABSL_GUARDED_BY(mutex_);  // by job id
  uint64_t rotation_ ABSL_GUARDED_BY(mutex_) = 0;
  uint64_t ticks_ ABSL_GUARDED_BY(mutex_) = 0;
  // The last scheduler clock and lease number seen: values from Redis not above them mean Redis
  // lost writes. 0: none seen yet.
  int64_t clock_ ABSL_GUARDED_BY(mutex_) = 0;
  int64_t lease_number_ ABSL_GUARDED_BY(mutex_) = 0;
};

}  // namespace forge::server

#endif  // FORGE_SERVER_SCHEDULER_H_
