#include "server/scheduler.h"

#include <algorithm>
#include <exception>
#include <optional>
#include <set>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "common/logging/logging.h"
#include "common/speedup/speedup.h"
#include "common/status/status_macros.h"
#include "compiler/search/candidate.h"
#include "google/protobuf/util/time_util.h"
#include "server/fair_share.h"
#include "server/ids.h"

namespace forge::server {
namespace {

using ::forge::v1::Candidate;
using ::forge::v1::JobEvent;
using ::forge::v1::JobProgress;
using ::forge::v1::KernelTask;
using ::forge::v1::Result;
using ::forge::v1::TaskStopReason;
using ::google::protobuf::util::TimeUtil;

// Workers whose heartbeats stopped stay listed this long.
constexpr absl::Duration kDeadWorkerMemory = absl::Hours(1);

int64_t ToMillis(absl::Time time) { return absl::ToUnixMillis(time); }

JobFilter InState(forge::v1::JobState state) {
  JobFilter filter;
  filter.states = {state};
  return filter;
}

JobEvent TaskEvent() {
  JobEvent event;
  *event.mutable_time() = TimeUtil::MillisecondsToTimestamp(ToMillis(absl::Now()));
  return event;
}

// Whether `result` of `candidate` may become its task's best as far as compute-sanitizer goes: a
// measured time only when the tool ran the candidate clean, or when the candidate runs through
// ATen (the SDPA backends' calls, PyTorch's own kernels), which the tool is not run on. Predicted
// times are never measured bests in the first place.
bool SanitizedForBest(const Result& result, const Candidate& candidate) {
  if (result.measurement().kind() != forge::v1::MEASUREMENT_KIND_MEASURED) return true;
  switch (result.measurement().sanitizer().state()) {
    case forge::v1::SANITIZER_STATE_PASSED:
      return true;
    case forge::v1::SANITIZER_STATE_NOT_APPLICABLE:
      return candidate.family() == forge::v1::KERNEL_FAMILY_SDPA_LIBRARY ||
             candidate.family() == forge::v1::KERNEL_FAMILY_ATEN;
    default:
      return false;
  }
}

// The time a result of `task` must beat to become its best: its best so far, or its eager time
// when that is lower; nothing while neither is known.
std::optional<double> TimeToBeat(const TaskSearch& task) {
  std::optional<double> bar;
  if (task.best.has_value()) bar = task.best->median_us();
  if (task.eager.has_value() && task.eager->median_us() > 0) {
    bar = std::min(bar.value_or(task.eager->median_us()), task.eager->median_us());
  }
  return bar;
}

}  // namespace

Scheduler::Scheduler(RedisClient* redis, JobStore* jobs, ResultCache* results,
                     metrics::Registry* registry, SchedulerOptions options)
    : jobs_(jobs),
      results_(results),
      options_(std::move(options)),
      budget_{.default_trials_per_task = options_.default_trials_per_task,
              .min_trials_per_task = options_.min_trials_per_task,
              .near_roofline_percent = options_.near_roofline_percent},
      store_(redis),
      workers_(options_.lease_duration),
      searches_(&store_, results, options_.search) {
  candidates_ = *registry->AddCounter(
      {"forge_coordinator_candidates_total",
       "Candidates by event: leased, measured, failed (with stage), cached (answered by the "
       "results cache), expired (lease ran out), returned (given back by a worker).",
       {}});
  cache_lookups_ = *registry->AddCounter(
      {"forge_coordinator_cache_lookups_total", "Results cache lookups by outcome (hit, miss).", {}});
  gauges_ = *registry->AddGauge(
      {"forge_coordinator_state",
       "Scheduler state: live_workers, leases, leased_candidates, frontier (proposed candidates "
       "waiting for a lease), running_jobs, searches.",
       {}});
  search_build_seconds_ = *registry->AddHistogram(
      {"forge_coordinator_search_build_seconds",
       "Seconds to load or build one task's search (every schedule point of its space generated "
       "and validated), taken under the scheduler's lock: long ones delay every worker's Lease "
       "and Heartbeat.",
       {}},
      {0.001, 0.01, 0.1, 0.3, 1, 3, 10, 30, 100});
}

absl::StatusOr<std::unique_ptr<Scheduler>> Scheduler::Create(RedisClient* redis, JobStore* jobs,
                                                             ResultCache* results,
                                                             metrics::Registry* registry,
                                                             SchedulerOptions options) {
  std::unique_ptr<Scheduler> scheduler(
      new Scheduler(redis, jobs, results, registry, std::move(options)));
  absl::MutexLock lock(&scheduler->mutex_);
  FORGE_RETURN_IF_ERROR(scheduler->LoadLocked());
  return scheduler;
}

// ----- loading after a restart -----

absl::Status Scheduler::LoadLocked() {
  FORGE_ASSIGN_OR_RETURN(auto workers, store_.LoadWorkers());
  for (auto& [id, record] : workers) workers_.Restore(id, std::move(record));
  return LoadWorkLocked();
}

absl::Status Scheduler::ReconcileLocked(absl::string_view evidence) {
  LogWithFields(*GetLogger("scheduler"), spdlog::level::warn,
                "redis lost writes: reconciling with it",
                {{"evidence", evidence},
                 {"leases_dropped", static_cast<int64_t>(leases_.leases().size())},
                 {"running_jobs", static_cast<int64_t>(running_.size())}});
  // Workers stay: they are only ahead of Redis by registrations and counts, which their next
  // report saves again.
  leases_ = LeaseTable();
  searches_.Clear();
  running_.clear();
  return LoadWorkLocked();
}

absl::Status Scheduler::LoadWorkLocked() {
  FORGE_ASSIGN_OR_RETURN(auto leases, store_.LoadLeases());
  for (auto& [id, lease] : leases) leases_.Add(id, std::move(lease));
  // Running jobs (queued ones start at the next tick).
  std::string token;
  do {
    FORGE_ASSIGN_OR_RETURN(JobPage page, jobs_->ListJobs(InState(forge::v1::JOB_STATE_RUNNING),
                                                         JobStore::kMaxPageSize, token));
    for (const forge::v1::Job& job : page.jobs) {
      FORGE_RETURN_IF_ERROR(ContainJobFailureLocked(job.id(), [&] { return StartJobLocked(job); }));
    }
    token = page.next_page_token;
  } while (!token.empty());
  UpdateGaugesLocked();
  return absl::OkStatus();
}

// ----- jobs -----

absl::Status Scheduler::StartJobLocked(const forge::v1::Job& job) {
  if (running_.contains(job.id())) return absl::OkStatus();
  JobRun run;
  run.id = job.id();
  run.number = IdNumber(job.id(), "job").value_or(0);
  run.options = job.options();
  FORGE_ASSIGN_OR_RETURN(run.tasks, jobs_->GetTasks(job.id()));
  std::sort(run.tasks.begin(), run.tasks.end(),
            [](const KernelTask& a, const KernelTask& b) { return a.digest() < b.digest(); });

  FORGE_ASSIGN_OR_RETURN(JobSearchRecord saved, store_.LoadJobSearch(job.id()));
  run.space = std::move(saved.space);
  run.arch = std::move(saved.arch);
  run.targets = std::move(saved.targets);
  run.stopped = std::move(saved.stopped);
  const int64_t started_ms = saved.started_ms.value_or(ToMillis(absl::Now()));
  run.started = absl::FromUnixMillis(started_ms);
  const bool first_start = job.state() == forge::v1::JOB_STATE_QUEUED;
  if (first_start) {
    FORGE_RETURN_IF_ERROR(store_.SetJobStarted(job.id(), started_ms));
    absl::StatusOr<forge::v1::Job> moved = jobs_->Transition(
        job.id(), forge::v1::JOB_STATE_QUEUED, forge::v1::JOB_STATE_RUNNING, "search started");
    if (absl::IsAborted(moved.status())) return absl::OkStatus();  // cancelled meanwhile
    FORGE_RETURN_IF_ERROR(moved.status());
    for (const KernelTask& task : run.tasks) {
      JobEvent event = TaskEvent();
      event.mutable_task_started()->set_task_digest(task.digest());
      event.mutable_task_started()->set_family(task.family());
      FORGE_RETURN_IF_ERROR(jobs_->RecordProgress(job.id(), JobProgress(), &event));
    }
  }
  const std::string id = run.id;
  JobRun& stored = running_[id] = std::move(run);
  if (stored.tasks.empty()) {
    // A graph of no operations (e.g. an identity module): nothing to search, done at once.
    return FinishJobLocked(stored, forge::v1::JOB_STATE_DONE,
                           "the graph has no operations to search");
  }
  if (!stored.space.empty()) {
    for (const KernelTask& task : stored.tasks) {
      FORGE_RETURN_IF_ERROR(TaskSearchLocked(stored.space, stored.arch, task).status());
    }
    FORGE_RETURN_IF_ERROR(AdvanceJobLocked(stored));
  }
  return absl::OkStatus();
}

absl::Status Scheduler::BindJobLocked(JobRun& job, const std::string& space,
                                     const std::string& arch) {
  FORGE_RETURN_IF_ERROR(store_.BindJob(job.id, space, arch));
  job.space = space;
  job.arch = arch;
  for (const KernelTask& task : job.tasks) {
    FORGE_RETURN_IF_ERROR(TaskSearchLocked(space, arch, task).status());
  }
  return absl::OkStatus();
}

absl::StatusOr<TaskSearch*> Scheduler::TaskSearchLocked(const std::string& space,
                                                        const std::string& arch,
                                                        const KernelTask& task) {
  const bool loaded = searches_.Find(space, task.digest()) != nullptr;
  const absl::Time start = absl::Now();
  absl::StatusOr<TaskSearch*> search =
      searches_.Get(space, arch, task, leases_,
                    [this](TaskSearch& search, const std::string& digest, const Result& result)
                        ABSL_NO_THREAD_SAFETY_ANALYSIS {
                          return ApplyResultLocked(search, digest, result);
                        });
  if (!loaded) {
    // Built under mutex_: every Lease and Heartbeat waits for it (a max-pool task once took
    // ~80 s, and workers' calls timed out). Seen on /metrics, and named in the log when slow.
    const double seconds = absl::ToDoubleSeconds(absl::Now() - start);
    search_build_seconds_->Add({}).Observe(seconds);
    if (seconds >= 1.0) {
      LogWithFields(*GetLogger("scheduler"), spdlog::level::warn,
                    "a task's search took long to build, under the scheduler's lock",
                    {{"task", task.digest()},
                     {"family", forge::v1::KernelFamily_Name(task.family())},
                     {"seconds", absl::StrFormat("%.1f", seconds)}});
    }
  }
  return search;
}

// ----- workers -----

absl::StatusOr<forge::v1::RegisterResponse> Scheduler::Register(
    const forge::v1::RegisterRequest& request) {
  FORGE_RETURN_IF_ERROR(WorkerRegistry::Validate(request, options_.generator_versions));
  absl::MutexLock lock(&mutex_);
  std::string id = request.worker_id();
  if (id.empty()) {
    FORGE_ASSIGN_OR_RETURN(id, store_.NewWorkerId());
  }
  const WorkerRecord& worker = workers_.Register(id, request, absl::Now());
  FORGE_RETURN_IF_ERROR(store_.SaveWorker(worker));
  LogWithFields(*GetLogger("scheduler"), spdlog::level::info, "worker registered",
                {{"worker", id}, {"host", request.hostname()}, {"gpus", request.gpus_size()}});
  UpdateGaugesLocked();

  forge::v1::RegisterResponse response;
  response.set_worker_id(id);
  response.mutable_lease_settings()->set_max_candidates_per_lease(
      options_.max_candidates_per_lease);
  response.mutable_lease_settings()->set_lease_duration_ms(
      absl::ToInt64Milliseconds(options_.lease_duration));
  response.mutable_lease_settings()->set_heartbeat_interval_ms(
      absl::ToInt64Milliseconds(options_.heartbeat_interval));
  return response;
}

absl::StatusOr<forge::v1::HeartbeatResponse> Scheduler::Heartbeat(
    const forge::v1::HeartbeatRequest& request) {
  absl::MutexLock lock(&mutex_);
  forge::v1::HeartbeatResponse response;
  WorkerRecord* worker = workers_.Touch(request.worker_id(), absl::Now());
  if (worker == nullptr) {
    response.set_register_again(true);
    return response;
  }
  const absl::Time deadline = absl::Now() + options_.lease_duration;
  std::vector<std::string> renewed;
  for (const std::string& lease_id : request.active_lease_ids()) {
    if (!leases_.Renew(lease_id, request.worker_id(), deadline)) {
      response.add_cancelled_lease_ids(lease_id);  // expired, or never this worker's
      continue;
    }
    renewed.push_back(lease_id);
  }
  for (const std::string& lease_id : leases_.TakeCancelled(request.worker_id())) {
    response.add_cancelled_lease_ids(lease_id);
  }
  FORGE_RETURN_IF_ERROR(
      store_.RecordHeartbeat(request.worker_id(), worker->last_seen, renewed, deadline));
  return response;
}

absl::StatusOr<std::vector<forge::v1::WorkerStatus>> Scheduler::Workers(bool include_dead) {
  absl::MutexLock lock(&mutex_);
  return workers_.Statuses(absl::Now(), include_dead, leases_.CandidatesPerWorker());
}

// ----- leasing -----

absl::Status Scheduler::RefillReadyLocked(TaskSearch& task, int64_t wanted,
                                          search::Proposals which) {
  const auto admitted = [which](const Candidate& candidate) {
    return which == search::Proposals::kAny || !search::IsExpensive(candidate);
  };
  for (;;) {
    const int64_t waiting = std::count_if(task.ready.begin(), task.ready.end(), admitted);
    if (waiting >= wanted) return absl::OkStatus();
    std::vector<Candidate> proposed = task.searcher->Propose(
        static_cast<int>(std::min<int64_t>(wanted - waiting, options_.ready_per_task)), which);
    if (proposed.empty()) return absl::OkStatus();
    task.dirty = true;
    std::vector<std::string> digests;
    for (const Candidate& candidate : proposed) digests.push_back(candidate.digest());
    absl::StatusOr<std::vector<std::optional<Result>>> cached =
        results_->GetMany(task.space, digests);
    if (!cached.ok()) {
      for (const std::string& digest : digests) (void)task.searcher->Release(digest);
      return cached.status();
    }
    for (size_t i = 0; i < proposed.size(); ++i) {
      if ((*cached)[i].has_value()) {
        cache_lookups_->Add({{"outcome", "hit"}}).Increment();
        candidates_->Add({{"event", "cached"}}).Increment();
        FORGE_RETURN_IF_ERROR(ApplyResultLocked(task, digests[i], *(*cached)[i]));
        --wanted;  // a recorded trial counts against what was wanted
      } else {
        cache_lookups_->Add({{"outcome", "miss"}}).Increment();
        task.ready.push_back(std::move(proposed[i]));
      }
    }
  }
}

absl::StatusOr<std::optional<Candidate>> Scheduler::NextCandidateLocked(TaskSearch& task,
                                                                        int64_t wanted,
                                                                        bool allow_expensive) {
  const auto take_ready = [&task](bool cheap_only) -> std::optional<Candidate> {
    for (auto it = task.ready.begin(); it != task.ready.end(); ++it) {
      if (cheap_only && search::IsExpensive(*it)) continue;
      Candidate candidate = std::move(*it);
      task.ready.erase(it);
      return candidate;
    }
    return std::nullopt;
  };
  if (std::optional<Candidate> cheap = take_ready(true)) return cheap;
  FORGE_RETURN_IF_ERROR(RefillReadyLocked(task, wanted, search::Proposals::kCheapOnly));
  if (std::optional<Candidate> cheap = take_ready(true)) return cheap;
  if (!allow_expensive) return std::nullopt;
  if (std::optional<Candidate> any = take_ready(false)) return any;
  FORGE_RETURN_IF_ERROR(RefillReadyLocked(task, wanted, search::Proposals::kAny));
  return take_ready(false);
}

absl::StatusOr<std::vector<std::pair<Candidate, const JobRun*>>> Scheduler::TakeWorkLocked(
    JobRun& job, int room, ExpensiveBudget& expensive) {
  std::vector<std::pair<Candidate, const JobRun*>> taken;
  // Baselines first: nothing can be rewarded before the task's eager time is known.
  for (const KernelTask& spec : job.tasks) {
    if (static_cast<int>(taken.size()) >= room) break;
    if (job.stopped.contains(spec.digest())) continue;
    FORGE_ASSIGN_OR_RETURN(TaskSearch * task, TaskSearchLocked(job.space, job.arch, spec));
    if (task->eager.has_value() || task->baseline_failure.has_value() || task->baseline_leased) {
      continue;
    }
    FORGE_ASSIGN_OR_RETURN(std::vector<std::optional<Result>> cached,
                           results_->GetMany(job.space, {task->baseline.digest()}));
    if (cached[0].has_value()) {
      cache_lookups_->Add({{"outcome", "hit"}}).Increment();
      FORGE_RETURN_IF_ERROR(ApplyResultLocked(*task, task->baseline.digest(), *cached[0]));
      continue;
    }
    cache_lookups_->Add({{"outcome", "miss"}}).Increment();
    task->baseline_leased = true;
    taken.emplace_back(task->baseline, &job);
  }
  if (job.targets.empty()) FORGE_RETURN_IF_ERROR(ComputeTargetsLocked(job));
  if (job.targets.empty()) return taken;

  // Then the searches, cheap first (scheduler.h): the tasks take turns, furthest from their
  // targets first.
  std::vector<std::pair<int64_t, TaskSearch*>> open;
  for (const KernelTask& spec : job.tasks) {
    if (job.stopped.contains(spec.digest())) continue;
    FORGE_ASSIGN_OR_RETURN(TaskSearch * task, TaskSearchLocked(job.space, job.arch, spec));
    if (!task->eager.has_value()) continue;
    const int64_t missing = TrialsWanted(job.targets[spec.digest()], task->Progress());
    if (missing > 0) open.emplace_back(missing, task);
  }
  std::stable_sort(open.begin(), open.end(),
                   [](const auto& a, const auto& b) { return a.first > b.first; });
  const auto wanted = [&job](const TaskSearch& task) {
    return TrialsWanted(job.targets[task.spec.digest()], task.Progress());
  };
  // A job with a cheap candidate to try for some task that wants trials keeps to the expensive
  // bound, and so does the rest of this lease for it.
  if (std::any_of(open.begin(), open.end(), [](const auto& entry) {
        const TaskSearch& task = *entry.second;
        return task.searcher->cheap_open() > 0 ||
               std::any_of(task.ready.begin(), task.ready.end(),
                           [](const Candidate& ready) { return !search::IsExpensive(ready); });
      })) {
    expensive.bounded_jobs.insert(job.id);
  }
  const bool bounded = expensive.bounded_jobs.contains(job.id);
  for (bool progress = true; progress && static_cast<int>(taken.size()) < room;) {
    progress = false;
    // Whether every task that wants trials has its first cheap results; read each round, as
    // cache hits met while proposing record results too.
    bool first_pass_done = true;
    for (const auto& [unused, task] : open) {
      const search::Searcher& searcher = *task->searcher;
      if (wanted(*task) > 0 &&
          searcher.cheap_recorded() <
              std::min<int64_t>(options_.cheap_first_per_task, searcher.cheap_points())) {
        first_pass_done = false;
      }
    }
    for (auto& [unused, task] : open) {
      const int64_t free = room - static_cast<int64_t>(taken.size());
      const int64_t missing = wanted(*task);
      if (free <= 0) break;
      if (missing <= 0) continue;
      const bool allow_expensive = first_pass_done && (!bounded || expensive.room > 0);
      FORGE_ASSIGN_OR_RETURN(
          std::optional<Candidate> next,
          NextCandidateLocked(*task, std::min(missing, free), allow_expensive));
      if (!next.has_value()) continue;
      if (search::IsExpensive(*next)) --expensive.room;
      taken.emplace_back(*std::move(next), &job);
      progress = true;
    }
  }
  return taken;
}

absl::StatusOr<forge::v1::LeaseResponse> Scheduler::Lease(const forge::v1::LeaseRequest& request) {
  if (request.max_candidates() <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("Lease: max_candidates must be positive, not ", request.max_candidates()));
  }
  absl::MutexLock lock(&mutex_);
  const WorkerRecord* worker = workers_.Touch(request.worker_id(), absl::Now());
  if (worker == nullptr) {
    return absl::NotFoundError(
        absl::StrCat("Lease: unknown worker \"", request.worker_id(), "\"; register again"));
  }
  const forge::v1::GpuInfo* gpu = WorkerRegistry::GpuOfArch(*worker, request.target_arch());
  if (gpu == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat("Lease: worker ", request.worker_id(),
                                                   " registered no GPU of arch \"",
                                                   request.target_arch(), "\""));
  }
  const std::string space = ResultSpace(*gpu);
  const int room = std::min(request.max_candidates(), options_.max_candidates_per_lease);
  // Expensive compiles this worker may still take while cheap work remains (scheduler.h).
  const int expensive_cap =
      std::max(1, std::max(1, worker->status.compile_threads()) *
                      options_.expensive_compile_percent / 100);
  ExpensiveBudget expensive;
  expensive.room = std::max(0, expensive_cap - leases_.ExpensiveHeldBy(request.worker_id()));

  // Jobs this GPU may serve, shared fairly (fair_share.h).
  std::vector<JobRun*> eligible;
  for (auto& [id, job] : running_) {
    if (job.finished) continue;
    const std::string& wanted = job.options.target_arch();
    if (!wanted.empty() && wanted != gpu->arch() && wanted != gpu->name()) continue;
    if (!job.space.empty() && job.space != space) continue;
    eligible.push_back(&job);
  }
  std::vector<std::pair<Candidate, const JobRun*>> picked;
  FORGE_RETURN_IF_ERROR(ShareFairly(
      std::move(eligible), rotation_++, room,
      [&](JobRun& job, int most) ABSL_NO_THREAD_SAFETY_ANALYSIS -> absl::StatusOr<int> {
        if (job.finished) return 0;
        int count = 0;
        FORGE_RETURN_IF_ERROR(ContainJobFailureLocked(job.id, [&]() -> absl::Status {
          if (job.space.empty()) FORGE_RETURN_IF_ERROR(BindJobLocked(job, space, gpu->arch()));
          FORGE_ASSIGN_OR_RETURN(auto taken, TakeWorkLocked(job, most, expensive));
          count = static_cast<int>(taken.size());
          for (auto& item : taken) picked.push_back(std::move(item));
          return AdvanceJobLocked(job);
        }));
        return count;
      }));

  EraseFinishedLocked();
  forge::v1::LeaseResponse response;
  if (picked.empty()) {
    response.set_retry_after_ms(absl::ToInt64Milliseconds(options_.retry_after));
    UpdateGaugesLocked();
    return response;
  }
  absl::StatusOr<std::string> new_lease_id = store_.NewLeaseId();
  const int64_t lease_number =
      new_lease_id.ok() ? IdNumber(*new_lease_id, "lease").value_or(0) : 0;
  if (!new_lease_id.ok() || lease_number <= lease_number_) {
    // Nothing is leased: the candidates go back to their searches.
    for (auto& [candidate, job] : picked) {
      ReleaseLocked(space, LeaseEntry{job->id, candidate.task_digest()}, candidate.digest());
    }
    FORGE_RETURN_IF_ERROR(new_lease_id.status());
    // Lease numbers went backwards: Redis lost the last ones handed out, and with them writes
    // this scheduler still counts on. The worker asks again after the reconciliation.
    FORGE_RETURN_IF_ERROR(ReconcileLocked(absl::StrCat(
        "lease number ", lease_number, " after ", lease_number_)));
    lease_number_ = lease_number;
    response.set_retry_after_ms(absl::ToInt64Milliseconds(options_.retry_after));
    UpdateGaugesLocked();
    return response;
  }
  lease_number_ = lease_number;
  const std::string& lease_id = *new_lease_id;
  LeaseRecord lease;
  lease.worker_id = request.worker_id();
  lease.space = space;
  lease.deadline = absl::Now() + options_.lease_duration;
  std::vector<Candidate> candidates;
  std::set<std::string> task_digests;
  for (auto& [candidate, job] : picked) {
    lease.candidates[candidate.digest()] =
        LeaseEntry{job->id, candidate.task_digest(), search::IsExpensive(candidate)};
    if (task_digests.insert(candidate.task_digest()).second) {
      const TaskSearch& search = *searches_.Find(space, candidate.task_digest());
      *response.add_tasks() = search.spec;
      if (std::optional<double> bar = TimeToBeat(search)) {
        (*response.mutable_sanitize_below_us())[candidate.task_digest()] = *bar;
      }
    }
    candidates.push_back(std::move(candidate));
  }
  absl::Status written = store_.WriteLease(lease_id, lease, candidates);
  if (!written.ok()) {
    // Nothing was leased: the candidates go back to their searches.
    for (const auto& [digest, entry] : lease.candidates) ReleaseLocked(space, entry, digest);
    return written;
  }
  for (Candidate& candidate : candidates) *response.add_candidates() = std::move(candidate);
  candidates_->Add({{"event", "leased"}}).Increment(static_cast<double>(picked.size()));
  response.set_lease_id(lease_id);
  response.set_duration_ms(absl::ToInt64Milliseconds(options_.lease_duration));
  *response.mutable_deadline() = TimeUtil::MillisecondsToTimestamp(ToMillis(lease.deadline));
  leases_.Add(lease_id, std::move(lease));
  UpdateGaugesLocked();
  return response;
}

void Scheduler::ReleaseLocked(const std::string& space, const LeaseEntry& entry,
                              const std::string& candidate_digest) {
  if (TaskSearch* task = searches_.Find(space, entry.task_digest); task != nullptr) {
    task->Release(candidate_digest);
  }
}

absl::Status Scheduler::ReleaseAndDropLeaseLocked(const std::string& lease_id) {
  const LeaseRecord& lease = *leases_.Find(lease_id);
  for (const auto& [digest, entry] : lease.candidates) ReleaseLocked(lease.space, entry, digest);
  return DropLeaseLocked(lease_id);
}

absl::Status Scheduler::DropLeaseLocked(const std::string& lease_id) {
  FORGE_RETURN_IF_ERROR(store_.DropLease(lease_id));
  leases_.Drop(lease_id);
  return absl::OkStatus();
}

// ----- results -----

absl::Status Scheduler::ApplyResultLocked(TaskSearch& task, const std::string& candidate_digest,
                                          const Result& result) {
  // A result becomes the best only with its whole candidate at hand and made by this build's
  // generators: the cache holds other builds' results too, whose kernels cannot be rebuilt here.
  std::optional<Candidate> candidate;
  if (task.WouldImprove(candidate_digest, result)) {
    absl::StatusOr<Candidate> stored = results_->GetCandidate(candidate_digest);
    // A MEASURED new best also needs compute-sanitizer's clean run (the lease told the worker
    // which times call for one); without it the result is kept and counted, never the best.
    if (stored.ok() && MadeByThisBuild(*stored) && SanitizedForBest(result, *stored)) {
      candidate = *std::move(stored);
    }
  }
  const TaskSearch::Applied applied =
      task.Apply(candidate_digest, result, /*may_be_best=*/candidate.has_value());
  if (applied.improved) task.best_candidate = *std::move(candidate);
  // Only a candidate faster than eager improves the task: until one is, the baseline is best.
  const bool faster = applied.improved && applied.speedup.has_value() && *applied.speedup > 1.0;
  // Every running job with this task hears of the improvement, and of its new whole-model
  // estimate (a baseline coming in changes it too).
  for (auto& [id, job] : running_) {
    if (job.finished || job.space != task.space) continue;
    const bool has_task =
        std::any_of(job.tasks.begin(), job.tasks.end(),
                    [&](const KernelTask& t) { return t.digest() == task.spec.digest(); });
    if (!has_task) continue;
    const double speedup = WholeModelSpeedupLocked(job);
    const bool announce = faster && !job.stopped.contains(task.spec.digest());
    if (!announce && speedup == job.reported_speedup) continue;
    JobEvent event = TaskEvent();
    if (announce) {
      auto* improved_event = event.mutable_task_improved();
      improved_event->set_task_digest(task.spec.digest());
      improved_event->set_candidate_digest(candidate_digest);
      improved_event->set_median_us(result.measurement().median_us());
      improved_event->set_speedup_vs_eager(*applied.speedup);
      improved_event->set_kind(result.measurement().kind());
    }
    JobProgress progress;
    progress.set_best_speedup(speedup);
    FORGE_RETURN_IF_ERROR(jobs_->RecordProgress(id, progress, announce ? &event : nullptr));
    job.reported_speedup = speedup;
  }
  return absl::OkStatus();
}

double Scheduler::WholeModelSpeedupLocked(const JobRun& job) {
  ModelTimes times;
  for (const KernelTask& spec : job.tasks) {
    const TaskSearch* search = searches_.Find(job.space, spec.digest());
    if (search == nullptr) continue;  // not loaded yet: not timed either
    forge::v1::TaskResults summary;
    search->Summarize(summary);
    summary.mutable_task()->set_occurrences(spec.occurrences());
    AddTask(summary, times);
  }
  return times.Speedup();
}

absl::StatusOr<forge::v1::ReportResponse> Scheduler::Report(
    const forge::v1::ReportRequest& request) {
  absl::MutexLock lock(&mutex_);
  WorkerRecord* worker = workers_.Touch(request.worker_id(), absl::Now());
  if (worker == nullptr) {
    return absl::NotFoundError(
        absl::StrCat("Report: unknown worker \"", request.worker_id(), "\"; register again"));
  }
  forge::v1::ReportResponse response;
  LeaseRecord* lease = leases_.Find(request.lease_id());
  if (lease == nullptr) {
    // Expired (its candidates went back to the search) or never handed out.
    for (const Result& result : request.results()) {
      response.add_rejected_candidate_digests(ResultCandidateDigest(result));
    }
    return response;
  }
  if (lease->worker_id != request.worker_id()) {
    return absl::PermissionDeniedError(absl::StrCat("Report: ", request.lease_id(),
                                                    " is held by ", lease->worker_id, ", not ",
                                                    request.worker_id()));
  }
  const std::string space = lease->space;
  const bool emulated_worker = WorkerRegistry::IsEmulated(*worker);
  // A lease this scheduler holds but Redis does not: Redis lost it (a rollback). Its results are
  // still taken where Redis kept their candidates; then the scheduler reconciles.
  FORGE_ASSIGN_OR_RETURN(const bool lease_stored, store_.LeaseStored(request.lease_id()));
  std::string mismatch =
      lease_stored ? "" : absl::StrCat("lease ", request.lease_id(), " is missing in redis");
  std::vector<std::string> done;
  for (const Result& result : request.results()) {
    const std::string& digest = ResultCandidateDigest(result);
    auto entry = lease->candidates.find(digest);
    // Provenance: a measured time comes with the judge's evidence that the candidate passed.
    const bool judged = !result.has_measurement() ||
                        result.measurement().kind() != forge::v1::MEASUREMENT_KIND_MEASURED ||
                        (result.measurement().has_judge() && result.measurement().judge().passed());
    const bool well_formed =
        (result.has_measurement() || result.has_failure()) && judged &&
        (!result.has_measurement() ||
         (result.measurement().median_us() > 0 &&
          (result.measurement().kind() == forge::v1::MEASUREMENT_KIND_PREDICTED) ==
              emulated_worker));
    if (entry == lease->candidates.end() || !well_formed) {
      response.add_rejected_candidate_digests(digest);
      continue;
    }
    const LeaseEntry leased = entry->second;
    TaskSearch* task = searches_.Find(space, leased.task_digest);
    if (task == nullptr) {
      return absl::InternalError(absl::StrCat("Report: no search of task ", leased.task_digest,
                                              " in ", space, " for ", request.lease_id()));
    }
    absl::StatusOr<Candidate> leased_candidate = results_->GetCandidate(digest);
    if (absl::IsNotFound(leased_candidate.status())) {
      // Written with the lease, lost with it: the worker's result cannot be stored whole.
      response.add_rejected_candidate_digests(digest);
      if (mismatch.empty()) mismatch = absl::StrCat("leased candidate ", digest, " is missing");
      continue;
    }
    FORGE_RETURN_IF_ERROR(leased_candidate.status());
    const Candidate& candidate = *leased_candidate;
    FORGE_ASSIGN_OR_RETURN(const bool stored,
                           results_->PutIfAbsent(space, candidate, result, leased.job_id));
    if (stored) {
      if (result.has_measurement()) {
        candidates_->Add({{"event", "measured"}}).Increment();
      } else {
        const std::string stage = absl::AsciiStrToLower(absl::StripPrefix(
            forge::v1::FailureStage_Name(result.failure().stage()), "FAILURE_STAGE_"));
        candidates_->Add({{"event", "failed"}, {"stage", stage}}).Increment();
      }
      WorkerRegistry::CountResult(*worker, result.has_measurement());
      FORGE_RETURN_IF_ERROR(ApplyResultLocked(*task, digest, result));
    }
    leases_.Remove(request.lease_id(), digest);
    done.push_back(digest);
    response.set_accepted(response.accepted() + 1);
  }
  for (const std::string& digest : request.returned_candidate_digests()) {
    auto entry = lease->candidates.find(digest);
    if (entry == lease->candidates.end()) continue;
    candidates_->Add({{"event", "returned"}}).Increment();
    ReleaseLocked(space, entry->second, digest);
    leases_.Remove(request.lease_id(), digest);
    done.push_back(digest);
  }
  if (!done.empty()) {
    if (lease->candidates.empty()) {
      FORGE_RETURN_IF_ERROR(DropLeaseLocked(request.lease_id()));
    } else {
      FORGE_RETURN_IF_ERROR(store_.RemoveFromLease(request.lease_id(), done));
    }
  }
  FORGE_RETURN_IF_ERROR(store_.SaveWorker(*worker));
  if (!mismatch.empty()) {
    // Before any job advances on counts that include what Redis lost.
    FORGE_RETURN_IF_ERROR(ReconcileLocked(mismatch));
    UpdateGaugesLocked();
    return response;
  }
  // A result can finish tasks of every job that shares them, not only of the lease's jobs.
  for (auto& [id, job] : running_) {
    FORGE_RETURN_IF_ERROR(ContainJobFailureLocked(id, [&] { return AdvanceJobLocked(job); }));
  }
  EraseFinishedLocked();
  UpdateGaugesLocked();
  return response;
}

// ----- task and job progress -----

std::map<std::string, TaskProgress> Scheduler::ProgressLocked(const JobRun& job) {
  std::map<std::string, TaskProgress> progress;
  for (const KernelTask& spec : job.tasks) {
    progress[spec.digest()] = searches_.Find(job.space, spec.digest())->Progress();
  }
  return progress;
}

absl::Status Scheduler::ComputeTargetsLocked(JobRun& job) {
  std::optional<std::map<std::string, int64_t>> targets = TrialTargets(
      job.tasks, ProgressLocked(job), job.options.budget().max_candidate_trials(), budget_);
  if (!targets.has_value()) return absl::OkStatus();  // a baseline is still out
  job.targets = *std::move(targets);
  return store_.SaveTargets(job.id, job.targets);
}

absl::Status Scheduler::StopTaskLocked(JobRun& job, const std::string& task_digest,
                                       TaskStopReason reason) {
  FORGE_RETURN_IF_ERROR(store_.SaveStop(job.id, task_digest, reason));
  job.stopped[task_digest] = reason;
  JobEvent event = TaskEvent();
  auto* finished = event.mutable_task_finished();
  finished->set_task_digest(task_digest);
  finished->set_stop_reason(reason);
  finished->set_speedup_vs_eager(1.0);
  if (!job.space.empty()) {
    const TaskSearch& task = *searches_.Find(job.space, task_digest);
    finished->set_candidates_tried(static_cast<int32_t>(task.searcher->recorded()));
    if (task.best.has_value() && task.eager.has_value() &&
        task.best->median_us() < task.eager->median_us()) {
      finished->set_best_candidate_digest(task.best->candidate_digest());
      finished->set_speedup_vs_eager(task.eager->median_us() / task.best->median_us());
    }
  }
  JobProgress delta;
  delta.set_tasks_done(1);
  return jobs_->RecordProgress(job.id, delta, &event);
}

absl::Status Scheduler::AdvanceJobLocked(JobRun& job) {
  if (job.finished || job.space.empty()) return absl::OkStatus();
  const bool out_of_time = OutOfTime(job, absl::Now());
  if (job.targets.empty() && !out_of_time) FORGE_RETURN_IF_ERROR(ComputeTargetsLocked(job));
  for (const KernelTask& spec : job.tasks) {
    if (job.stopped.contains(spec.digest())) continue;
    const TaskSearch& task = *searches_.Find(job.space, spec.digest());
    std::optional<int64_t> target;
    if (!job.targets.empty()) target = job.targets[spec.digest()];
    const std::optional<TaskStopReason> reason =
        StopReason(task.Progress(), target, out_of_time, budget_);
    if (!reason.has_value()) continue;
    FORGE_RETURN_IF_ERROR(StopTaskLocked(job, spec.digest(), *reason));
  }
  if (job.stopped.size() < job.tasks.size()) return absl::OkStatus();
  // Nothing of the job may still be out with a worker when it is declared done.
  if (leases_.HoldsWorkOf(job.id)) return absl::OkStatus();
  return FinishJobLocked(job, forge::v1::JOB_STATE_DONE, "every task finished");
}

absl::Status Scheduler::FinishJobLocked(JobRun& job, forge::v1::JobState state,
                                        absl::string_view detail) {
  absl::StatusOr<forge::v1::Job> moved =
      jobs_->Transition(job.id, forge::v1::JOB_STATE_RUNNING, state, detail);
  if (!moved.ok() && !absl::IsAborted(moved.status())) return moved.status();
  // Callers may be iterating over the running jobs: the record goes at EraseFinishedLocked.
  job.finished = true;
  ReleaseUnwantedLocked();
  LogWithFields(*GetLogger("scheduler"), spdlog::level::info, "job finished",
                {{"job", job.id}, {"state", forge::v1::JobState_Name(state)}});
  return searches_.Snapshot(/*all=*/false);
}

void Scheduler::ReleaseUnwantedLocked() {
  // Ready candidates no running job wants any more go back to their searches.
  std::set<std::pair<std::string, std::string>> wanted;  // (space, task digest)
  for (const auto& [id, other] : running_) {
    if (other.finished) continue;
    for (const KernelTask& task : other.tasks) wanted.emplace(other.space, task.digest());
  }
  for (auto& [key, task] : searches_.all()) {
    if (!wanted.contains({task.space, task.spec.digest()})) task.ReleaseReady();
  }
}

absl::Status Scheduler::ContainJobFailureLocked(const std::string& job_id,
                                                absl::FunctionRef<absl::Status()> step) {
  absl::Status status;
  try {
    status = step();
  } catch (const std::exception& e) {
    status = absl::InternalError(absl::StrCat("exception: ", e.what()));
  }
  if (status.ok() || absl::IsUnavailable(status)) return status;
  const std::string reason =
      absl::StrCat("the scheduler could not run this job: ", status.ToString());
  LogWithFields(*GetLogger("scheduler"), spdlog::level::warn, "job failed",
                {{"job", job_id}, {"error", status.ToString()}});
  // The job is QUEUED (failed on its first start) or RUNNING; Aborted means it ended meanwhile.
  for (const forge::v1::JobState from :
       {forge::v1::JOB_STATE_RUNNING, forge::v1::JOB_STATE_QUEUED}) {
    absl::StatusOr<forge::v1::Job> moved =
        jobs_->Transition(job_id, from, forge::v1::JOB_STATE_FAILED, reason);
    if (moved.ok()) break;
    if (!absl::IsAborted(moved.status())) return moved.status();
  }
  if (auto run = running_.find(job_id); run != running_.end()) run->second.finished = true;
  ReleaseUnwantedLocked();
  return absl::OkStatus();
}

void Scheduler::EraseFinishedLocked() {
  for (auto it = running_.begin(); it != running_.end();) {
    it = it->second.finished ? running_.erase(it) : std::next(it);
  }
}

void Scheduler::JobSubmitted(absl::string_view job_id) {
  absl::MutexLock lock(&mutex_);
  absl::StatusOr<forge::v1::Job> job = jobs_->GetJob(job_id);
  if (job.ok() && job->state() == forge::v1::JOB_STATE_QUEUED) {
    absl::Status started = ContainJobFailureLocked(job->id(), [&] { return StartJobLocked(*job); });
    if (!started.ok()) {
      GetLogger("scheduler")->warn("starting {}: {}", std::string(job_id), started.ToString());
    }
  }
  EraseFinishedLocked();
  UpdateGaugesLocked();
}

void Scheduler::JobCancelled(absl::string_view job_id) {
  absl::MutexLock lock(&mutex_);
  const std::string id(job_id);
  running_.erase(id);
  // Leases that hold only this job's candidates are dropped now; the worker hears at its next
  // heartbeat. Mixed leases keep the other jobs' candidates; this job's go back to the search.
  for (const std::string& lease_id : leases_.OnlyFor(id)) {
    leases_.NoteCancelled(leases_.Find(lease_id)->worker_id, lease_id);
    absl::Status dropped = ReleaseAndDropLeaseLocked(lease_id);
    if (!dropped.ok()) GetLogger("scheduler")->warn("cancelling {}: {}", id, dropped.ToString());
  }
  UpdateGaugesLocked();
}

absl::StatusOr<forge::v1::PurgeResultsResponse> Scheduler::PurgeResults(
    const ResultFilter& filter) {
  // The cache first, without the mutex (it scans every task index); the searches then start over
  // from what remains. A result reported meanwhile is in the cache, so the restart takes it in.
  FORGE_ASSIGN_OR_RETURN(const std::vector<PurgedTask> purged, results_->Purge(filter));
  forge::v1::PurgeResultsResponse response;
  std::set<std::string> task_digests;
  absl::MutexLock lock(&mutex_);
  std::set<std::string> jobs_touched;
  for (const PurgedTask& task : purged) {
    response.set_results_removed(response.results_removed() + task.results);
    task_digests.insert(task.task_digest);
    FORGE_RETURN_IF_ERROR(searches_.Forget(task.space, task.task_digest));
    for (auto& [id, job] : running_) {
      if (job.finished || job.space != task.space) continue;
      for (const KernelTask& spec : job.tasks) {
        if (spec.digest() != task.task_digest) continue;
        jobs_touched.insert(id);
        FORGE_RETURN_IF_ERROR(ContainJobFailureLocked(
            id, [&] { return TaskSearchLocked(job.space, job.arch, spec).status(); }));
      }
    }
  }
  // The whole-model estimate of a job whose tasks lost every result is not updated by a result
  // coming in: it is recomputed here.
  for (const std::string& id : jobs_touched) {
    JobRun& job = running_.at(id);
    if (job.finished) continue;
    const double speedup = WholeModelSpeedupLocked(job);
    if (speedup == job.reported_speedup) continue;
    JobProgress progress;
    progress.set_best_speedup(speedup);
    FORGE_RETURN_IF_ERROR(jobs_->RecordProgress(id, progress, nullptr));
    job.reported_speedup = speedup;
  }
  for (const std::string& digest : task_digests) response.add_task_digests(digest);
  EraseFinishedLocked();
  UpdateGaugesLocked();
  return response;
}

// ----- time-driven work -----

absl::Status Scheduler::Tick() {
  absl::MutexLock lock(&mutex_);
  // First, before anything acts on memory that Redis may no longer back: the clock going back
  // means Redis lost writes since the last tick or before.
  FORGE_ASSIGN_OR_RETURN(const int64_t clock, store_.AdvanceClock());
  if (clock <= clock_) {
    FORGE_RETURN_IF_ERROR(
        ReconcileLocked(absl::StrCat("scheduler clock ", clock, " after ", clock_)));
  }
  clock_ = clock;
  const absl::Time now = absl::Now();
  // Expired leases: their candidates go back to the search.
  for (const std::string& id : leases_.Expired(now)) {
    const LeaseRecord& lease = *leases_.Find(id);
    candidates_->Add({{"event", "expired"}}).Increment(static_cast<double>(lease.candidates.size()));
    LogWithFields(*GetLogger("scheduler"), spdlog::level::warn, "lease expired",
                  {{"lease", id}, {"worker", lease.worker_id},
                   {"candidates", static_cast<int64_t>(lease.candidates.size())}});
    FORGE_RETURN_IF_ERROR(ReleaseAndDropLeaseLocked(id));
  }
  // Queued jobs this coordinator was not told of (submitted while it was down, or elsewhere);
  // the scan reads every job, so it runs on every 20th tick only.
  if (ticks_++ % 20 == 0) {
    FORGE_ASSIGN_OR_RETURN(JobPage queued, jobs_->ListJobs(InState(forge::v1::JOB_STATE_QUEUED),
                                                           JobStore::kMaxPageSize, ""));
    for (const forge::v1::Job& job : queued.jobs) {
      FORGE_RETURN_IF_ERROR(ContainJobFailureLocked(job.id(), [&] { return StartJobLocked(job); }));
    }
  }
  // Jobs cancelled elsewhere, and progress that needs no worker (wall budgets, cache answers).
  std::vector<std::string> ids;
  for (const auto& [id, job] : running_) ids.push_back(id);
  for (const std::string& id : ids) {
    absl::StatusOr<forge::v1::Job> job = jobs_->GetJob(id);
    if (job.ok() && job->state() != forge::v1::JOB_STATE_RUNNING) {
      running_.erase(id);
      continue;
    }
    auto run = running_.find(id);
    if (run != running_.end()) {
      FORGE_RETURN_IF_ERROR(
          ContainJobFailureLocked(id, [&] { return AdvanceJobLocked(run->second); }));
    }
  }
  // Forget workers long dead: from Redis first, so that a failed write keeps them in both.
  for (const std::string& id : workers_.Dead(now, kDeadWorkerMemory)) {
    FORGE_RETURN_IF_ERROR(store_.ForgetWorker(id));
    workers_.Erase(id);
  }
  EraseFinishedLocked();
  searches_.ReleaseStranded(leases_);
  FORGE_RETURN_IF_ERROR(searches_.Snapshot(/*all=*/false));
  UpdateGaugesLocked();
  return absl::OkStatus();
}

void Scheduler::UpdateGaugesLocked() {
  gauges_->Add({{"what", "live_workers"}}).Set(workers_.LiveCount(absl::Now()));
  gauges_->Add({{"what", "leases"}}).Set(static_cast<double>(leases_.leases().size()));
  gauges_->Add({{"what", "leased_candidates"}})
      .Set(static_cast<double>(leases_.leased_candidates()));
  gauges_->Add({{"what", "frontier"}}).Set(static_cast<double>(searches_.frontier()));
  gauges_->Add({{"what", "running_jobs"}}).Set(static_cast<double>(running_.size()));
  gauges_->Add({{"what", "searches"}}).Set(static_cast<double>(searches_.size()));
}

// ----- results for clients -----

absl::StatusOr<forge::v1::GetResultsResponse> Scheduler::Results(absl::string_view job_id,
                                                                 bool include_all_results) {
  forge::v1::GetResultsResponse response;
  FORGE_ASSIGN_OR_RETURN(*response.mutable_job(), jobs_->GetJob(job_id));
  FORGE_ASSIGN_OR_RETURN(*response.mutable_graph(),
                         jobs_->GetModel(response.job().model_digest()));
  FORGE_ASSIGN_OR_RETURN(std::vector<KernelTask> tasks, jobs_->GetTasks(job_id));
  FORGE_ASSIGN_OR_RETURN(const JobSearchRecord saved, store_.LoadJobSearch(job_id));
  const std::string& space = saved.space;

  absl::MutexLock lock(&mutex_);
  std::map<std::string, TaskProgress> progress;
  for (const KernelTask& spec : tasks) {
    if (space.empty()) break;
    FORGE_ASSIGN_OR_RETURN(TaskSearch * task, TaskSearchLocked(space, saved.arch, spec));
    progress[spec.digest()] = task->Progress();
  }
  const std::map<std::string, double> eager_us = EagerTimes(tasks, progress);
  double total_eager_us = 0;
  for (const KernelTask& spec : tasks) {
    if (auto eager = eager_us.find(spec.digest()); eager != eager_us.end()) {
      total_eager_us += eager->second;
    }
  }
  for (KernelTask& spec : tasks) {
    forge::v1::TaskResults* out = response.add_tasks();
    if (auto eager = eager_us.find(spec.digest()); total_eager_us > 0 && eager != eager_us.end()) {
      spec.set_baseline_share(eager->second / total_eager_us);
    }
    if (auto stop = saved.stopped.find(spec.digest()); stop != saved.stopped.end()) {
      out->set_stop_reason(stop->second);
    }
    if (!space.empty()) {
      const TaskSearch& task = *searches_.Find(space, spec.digest());
      task.Summarize(*out);
      if (include_all_results) {
        FORGE_ASSIGN_OR_RETURN(std::vector<Result> all, results_->ForTask(space, spec.digest()));
        for (Result& result : all) {
          if (result.has_measurement() && task.eager.has_value()) {
            result.mutable_measurement()->set_eager_median_us(task.eager->median_us());
          }
          *out->add_results() = std::move(result);
        }
      }
    }
    *out->mutable_task() = std::move(spec);
  }
  std::sort(response.mutable_tasks()->begin(), response.mutable_tasks()->end(),
            [](const forge::v1::TaskResults& a, const forge::v1::TaskResults& b) {
              if (a.task().baseline_share() != b.task().baseline_share()) {
                return a.task().baseline_share() > b.task().baseline_share();
              }
              return a.task().digest() < b.task().digest();
            });
  return response;
}

}  // namespace forge::server
