#include "server/scheduler.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "common/logging/logging.h"
#include "common/status/status_macros.h"
#include "compiler/search/candidate.h"
#include "google/protobuf/util/time_util.h"
#include "server/redis_keys.h"

namespace forge::server {
namespace {

using ::forge::v1::Candidate;
using ::forge::v1::JobEvent;
using ::forge::v1::JobProgress;
using ::forge::v1::KernelTask;
using ::forge::v1::Measurement;
using ::forge::v1::Result;
using ::forge::v1::TaskStopReason;
using ::google::protobuf::util::TimeUtil;

constexpr absl::string_view kTargetPrefix = "target:";
constexpr absl::string_view kStopPrefix = "stop:";
constexpr absl::string_view kCandidatePrefix = "c:";
// Workers whose heartbeats stopped stay listed this long.
constexpr absl::Duration kDeadWorkerMemory = absl::Hours(1);

int64_t ToMillis(absl::Time time) { return absl::ToUnixMillis(time); }

// Where results of this GPU are valid (redis_keys.h).
std::string SpaceOf(const forge::v1::GpuInfo& gpu) {
  return gpu.emulated() ? absl::StrCat("predicted:", gpu.name()) : gpu.name();
}

absl::Status CheckReply(absl::string_view operation, const absl::StatusOr<RedisReply>& reply) {
  if (!reply.ok()) return Annotate(reply.status(), operation);
  if (reply->is_error()) {
    return absl::InternalError(absl::StrCat(operation, ": ", reply->str()));
  }
  return absl::OkStatus();
}

// Runs `commands` as one MULTI/EXEC transaction.
absl::Status Transaction(RedisClient* redis, absl::string_view operation,
                         std::vector<std::vector<std::string>> commands) {
  commands.insert(commands.begin(), {"MULTI"});
  commands.push_back({"EXEC"});
  absl::StatusOr<std::vector<RedisReply>> replies = redis->Pipeline(commands);
  if (!replies.ok()) return Annotate(replies.status(), operation);
  const RedisReply& exec = replies->back();
  if (!exec.is_array()) {
    return absl::InternalError(absl::StrCat(operation, ": transaction failed: ", exec.DebugString()));
  }
  for (const RedisReply& reply : exec.elements()) {
    if (reply.is_error()) return absl::InternalError(absl::StrCat(operation, ": ", reply.str()));
  }
  return absl::OkStatus();
}

absl::flat_hash_map<std::string, std::string> FieldsOf(const RedisReply& reply) {
  absl::flat_hash_map<std::string, std::string> fields;
  for (size_t i = 0; i + 1 < reply.elements().size(); i += 2) {
    fields[reply.elements()[i].str()] = reply.elements()[i + 1].str();
  }
  return fields;
}

JobEvent TaskEvent() {
  JobEvent event;
  *event.mutable_time() = TimeUtil::MillisecondsToTimestamp(ToMillis(absl::Now()));
  return event;
}

bool IsNearFloor(const Measurement& measurement, double near_percent) {
  return measurement.percent_of_floor() >= near_percent;
}

}  // namespace

Scheduler::Scheduler(RedisClient* redis, JobStore* jobs, ResultCache* results,
                     metrics::Registry* registry, SchedulerOptions options)
    : redis_(redis), jobs_(jobs), results_(results), options_(std::move(options)) {
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
}

std::string Scheduler::TaskKey(absl::string_view space, absl::string_view task_digest) {
  return absl::StrCat(space, "\n", task_digest);
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
  // Workers.
  absl::StatusOr<RedisReply> workers =
      redis_->Command({"ZRANGE", std::string(keys::kWorkers), "0", "-1", "WITHSCORES"});
  FORGE_RETURN_IF_ERROR(CheckReply("loading workers", workers));
  for (size_t i = 0; i + 1 < workers->elements().size(); i += 2) {
    const std::string& id = workers->elements()[i].str();
    int64_t seen_ms = 0;
    (void)absl::SimpleAtoi(workers->elements()[i + 1].str(), &seen_ms);
    absl::StatusOr<RedisReply> info = redis_->Command({"HGET", keys::Worker(id), "info"});
    FORGE_RETURN_IF_ERROR(CheckReply("loading a worker", info));
    WorkerRecord record;
    if (!info->is_bulk_string() || !record.status.ParseFromString(info->str())) continue;
    record.last_seen = absl::FromUnixMillis(seen_ms);
    workers_[id] = std::move(record);
  }
  // Leases.
  absl::StatusOr<RedisReply> leases =
      redis_->Command({"ZRANGE", std::string(keys::kLeases), "0", "-1", "WITHSCORES"});
  FORGE_RETURN_IF_ERROR(CheckReply("loading leases", leases));
  for (size_t i = 0; i + 1 < leases->elements().size(); i += 2) {
    const std::string& id = leases->elements()[i].str();
    absl::StatusOr<RedisReply> hash = redis_->Command({"HGETALL", keys::Lease(id)});
    FORGE_RETURN_IF_ERROR(CheckReply("loading a lease", hash));
    const auto fields = FieldsOf(*hash);
    LeaseRecord lease;
    int64_t deadline_ms = 0;
    (void)absl::SimpleAtoi(leases->elements()[i + 1].str(), &deadline_ms);
    lease.deadline = absl::FromUnixMillis(deadline_ms);
    for (const auto& [field, value] : fields) {
      if (field == "worker") lease.worker_id = value;
      if (field == "space") lease.space = value;
      if (absl::StartsWith(field, kCandidatePrefix)) {
        std::vector<std::string> parts = absl::StrSplit(value, ' ');
        if (parts.size() != 2) continue;
        const std::string digest(absl::StripPrefix(field, kCandidatePrefix));
        lease.candidates[digest] = LeaseEntry{parts[0], parts[1]};
      }
    }
    for (const auto& [digest, entry] : lease.candidates) {
      leased_[TaskKey(lease.space, digest)] = id;
    }
    leases_[id] = std::move(lease);
  }
  // Running jobs (queued ones start at the next tick).
  std::string token;
  do {
    FORGE_ASSIGN_OR_RETURN(JobPage page,
                           jobs_->ListJobs({.states = {forge::v1::JOB_STATE_RUNNING}},
                                           JobStore::kMaxPageSize, token));
    for (const forge::v1::Job& job : page.jobs) FORGE_RETURN_IF_ERROR(StartJobLocked(job));
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
  (void)absl::SimpleAtoi(absl::StripPrefix(job.id(), "job-"), &run.number);
  run.options = job.options();
  FORGE_ASSIGN_OR_RETURN(run.tasks, jobs_->GetTasks(job.id()));
  std::sort(run.tasks.begin(), run.tasks.end(),
            [](const KernelTask& a, const KernelTask& b) { return a.digest() < b.digest(); });

  const std::string search_key = keys::JobSearch(job.id());
  absl::StatusOr<RedisReply> saved = redis_->Command({"HGETALL", search_key});
  FORGE_RETURN_IF_ERROR(CheckReply(absl::StrCat("reading ", search_key), saved));
  const auto fields = FieldsOf(*saved);
  int64_t started_ms = ToMillis(absl::Now());
  for (const auto& [field, value] : fields) {
    if (field == "space") run.space = value;
    if (field == "arch") run.arch = value;
    if (field == "started_ms") (void)absl::SimpleAtoi(value, &started_ms);
    int64_t number = 0;
    if (absl::StartsWith(field, kTargetPrefix) && absl::SimpleAtoi(value, &number)) {
      run.targets[std::string(absl::StripPrefix(field, kTargetPrefix))] = number;
    }
    forge::v1::TaskStopReason reason;
    if (absl::StartsWith(field, kStopPrefix) && forge::v1::TaskStopReason_Parse(value, &reason)) {
      run.stopped[std::string(absl::StripPrefix(field, kStopPrefix))] = reason;
    }
  }
  run.started = absl::FromUnixMillis(started_ms);
  const bool first_start = job.state() == forge::v1::JOB_STATE_QUEUED;
  if (first_start) {
    FORGE_RETURN_IF_ERROR(CheckReply(
        absl::StrCat("writing ", search_key),
        redis_->Command({"HSET", search_key, "started_ms", absl::StrCat(started_ms)})));
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
  FORGE_RETURN_IF_ERROR(CheckReply(
      absl::StrCat("binding ", job.id, " to ", space),
      redis_->Command({"HSET", keys::JobSearch(job.id), "space", space, "arch", arch})));
  job.space = space;
  job.arch = arch;
  for (const KernelTask& task : job.tasks) {
    FORGE_RETURN_IF_ERROR(TaskSearchLocked(space, arch, task).status());
  }
  return absl::OkStatus();
}

absl::StatusOr<Scheduler::TaskSearch*> Scheduler::TaskSearchLocked(const std::string& space,
                                                                   const std::string& arch,
                                                                   const KernelTask& task) {
  const std::string key = TaskKey(space, task.digest());
  if (auto it = searches_.find(key); it != searches_.end()) return &it->second;

  TaskSearch search;
  search.space = space;
  search.spec = task;
  search.spec.clear_occurrences();
  search.spec.clear_baseline_share();
  const std::string state_key = keys::TaskState(space, task.digest());
  absl::StatusOr<RedisReply> saved = redis_->Command({"HGET", state_key, "search"});
  FORGE_RETURN_IF_ERROR(CheckReply(absl::StrCat("reading ", state_key), saved));
  const std::string snapshot = saved->is_bulk_string() ? saved->str() : std::string();
  FORGE_ASSIGN_OR_RETURN(search.baseline, search::BaselineCandidate(task, arch));
  absl::StatusOr<std::unique_ptr<search::Searcher>> searcher =
      search::CreateMctsSearcher(task, arch, options_.search, snapshot);
  if (absl::IsInvalidArgument(searcher.status()) && !snapshot.empty()) {
    // A snapshot of another search space (the generators changed since it was saved) or one that
    // does not parse: it only held the search's progress, and the results below restore its
    // counts and bests, so the search starts over rather than the job (or the coordinator) fail.
    LogWithFields(*GetLogger("scheduler"), spdlog::level::warn,
                  "saved search state dropped, the search starts over",
                  {{"task", task.digest()}, {"reason", std::string(searcher.status().message())}});
    FORGE_RETURN_IF_ERROR(CheckReply(absl::StrCat("dropping ", state_key),
                                     redis_->Command({"HDEL", state_key, "search"})));
    searcher = search::CreateMctsSearcher(task, arch, options_.search, "");
  }
  FORGE_ASSIGN_OR_RETURN(search.searcher, std::move(searcher));

  // Counts and bests come from the results themselves, so a snapshot older than the last results
  // loses nothing.
  FORGE_ASSIGN_OR_RETURN(std::vector<Result> known, results_->ForTask(space, task.digest()));
  TaskSearch& stored = searches_[key] = std::move(search);
  // The baseline first: every other result's speedup is relative to it.
  std::stable_partition(known.begin(), known.end(), [&](const Result& result) {
    return ResultCandidateDigest(result) == stored.baseline.digest();
  });
  for (const Result& result : known) {
    FORGE_RETURN_IF_ERROR(ApplyResultLocked(stored, ResultCandidateDigest(result), result));
  }
  // Pending in the snapshot but held by no lease: proposed or leased before the restart.
  for (const std::string& digest : stored.searcher->PendingDigests()) {
    if (leased_.contains(TaskKey(space, digest))) continue;
    (void)stored.searcher->Release(digest);
    stored.dirty = true;
  }
  return &stored;
}

// ----- workers -----

absl::Status Scheduler::SaveWorkerLocked(const WorkerRecord& worker) {
  return Transaction(redis_, absl::StrCat("saving worker ", worker.status.worker_id()),
                     {{"HSET", keys::Worker(worker.status.worker_id()), "info",
                       worker.status.SerializeAsString()},
                      {"ZADD", std::string(keys::kWorkers), absl::StrCat(ToMillis(worker.last_seen)),
                       worker.status.worker_id()}});
}

absl::StatusOr<forge::v1::RegisterResponse> Scheduler::Register(
    const forge::v1::RegisterRequest& request) {
  if (request.gpus().empty()) {
    return absl::InvalidArgumentError("Register: a worker must offer at least one GPU");
  }
  for (const forge::v1::GpuInfo& gpu : request.gpus()) {
    if (gpu.name().empty() || gpu.arch().empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("Register: GPU ", gpu.index(), " lacks a name or an arch"));
    }
  }
  if (request.generator_version() != options_.generator_versions) {
    return absl::FailedPreconditionError(absl::StrCat(
        "Register: the worker's generators (", request.generator_version(),
        ") differ from the coordinator's (", options_.generator_versions,
        "); run a worker built from the same Forge version"));
  }
  absl::MutexLock lock(&mutex_);
  std::string id = request.worker_id();
  if (id.empty()) {
    absl::StatusOr<RedisReply> number =
        redis_->Command({"INCR", std::string(keys::kWorkerSequence)});
    FORGE_RETURN_IF_ERROR(CheckReply("allocating a worker id", number));
    id = absl::StrCat("worker-", number->integer());
  }
  WorkerRecord& worker = workers_[id];
  const int64_t completed = worker.status.candidates_completed();
  const int64_t failed = worker.status.candidates_failed();
  worker.status = forge::v1::WorkerStatus();
  worker.status.set_worker_id(id);
  worker.status.set_hostname(request.hostname());
  *worker.status.mutable_gpus() = request.gpus();
  worker.status.set_compile_threads(request.compile_threads());
  worker.status.set_generator_version(request.generator_version());
  worker.status.set_candidates_completed(completed);
  worker.status.set_candidates_failed(failed);
  worker.last_seen = absl::Now();
  *worker.status.mutable_registered_at() =
      TimeUtil::MillisecondsToTimestamp(ToMillis(worker.last_seen));
  FORGE_RETURN_IF_ERROR(SaveWorkerLocked(worker));
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
  auto worker = workers_.find(request.worker_id());
  if (worker == workers_.end()) {
    response.set_register_again(true);
    return response;
  }
  worker->second.last_seen = absl::Now();
  const absl::Time deadline = absl::Now() + options_.lease_duration;
  std::vector<std::vector<std::string>> writes = {
      {"ZADD", std::string(keys::kWorkers), absl::StrCat(ToMillis(worker->second.last_seen)),
       request.worker_id()}};
  for (const std::string& lease_id : request.active_lease_ids()) {
    auto lease = leases_.find(lease_id);
    if (lease == leases_.end() || lease->second.worker_id != request.worker_id()) {
      response.add_cancelled_lease_ids(lease_id);  // expired, or never this worker's
      continue;
    }
    lease->second.deadline = deadline;
    writes.push_back({"ZADD", std::string(keys::kLeases), "XX", absl::StrCat(ToMillis(deadline)),
                      lease_id});
  }
  for (const std::string& lease_id : cancelled_leases_[request.worker_id()]) {
    response.add_cancelled_lease_ids(lease_id);
  }
  cancelled_leases_.erase(request.worker_id());
  FORGE_RETURN_IF_ERROR(Transaction(redis_, "recording a heartbeat", std::move(writes)));
  return response;
}

absl::StatusOr<std::vector<forge::v1::WorkerStatus>> Scheduler::Workers(bool include_dead) {
  absl::MutexLock lock(&mutex_);
  const absl::Time now = absl::Now();
  std::map<std::string, int> leased_per_worker;
  for (const auto& [id, lease] : leases_) {
    leased_per_worker[lease.worker_id] += static_cast<int>(lease.candidates.size());
  }
  std::vector<forge::v1::WorkerStatus> live;
  std::vector<forge::v1::WorkerStatus> dead;
  for (const auto& [id, worker] : workers_) {
    forge::v1::WorkerStatus status = worker.status;
    status.set_live(now - worker.last_seen <= options_.lease_duration);
    *status.mutable_last_heartbeat_at() =
        TimeUtil::MillisecondsToTimestamp(ToMillis(worker.last_seen));
    status.set_candidates_leased(leased_per_worker[id]);
    if (status.live()) {
      live.push_back(std::move(status));
    } else if (include_dead) {
      dead.push_back(std::move(status));
    }
  }
  live.insert(live.end(), dead.begin(), dead.end());
  return live;
}

// ----- leasing -----

absl::Status Scheduler::RefillReadyLocked(TaskSearch& task, int64_t wanted) {
  while (static_cast<int64_t>(task.ready.size()) < wanted) {
    std::vector<Candidate> proposed = task.searcher->Propose(
        static_cast<int>(std::min<int64_t>(wanted - task.ready.size(), options_.ready_per_task)));
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
  return absl::OkStatus();
}

absl::StatusOr<std::vector<std::pair<Candidate, const Scheduler::JobRun*>>>
Scheduler::TakeWorkLocked(JobRun& job, int room) {
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

  // Then the searches, the tasks furthest from their targets first.
  std::vector<std::pair<int64_t, TaskSearch*>> open;
  for (const KernelTask& spec : job.tasks) {
    if (job.stopped.contains(spec.digest())) continue;
    FORGE_ASSIGN_OR_RETURN(TaskSearch * task, TaskSearchLocked(job.space, job.arch, spec));
    if (!task->eager.has_value()) continue;
    const int64_t missing =
        job.targets[spec.digest()] - task->searcher->recorded() -
        (task->searcher->pending() - static_cast<int64_t>(task->ready.size()));
    if (missing > 0) open.emplace_back(missing, task);
  }
  std::sort(open.begin(), open.end(),
            [](const auto& a, const auto& b) { return a.first > b.first; });
  for (auto& [missing, task] : open) {
    while (missing > 0 && static_cast<int>(taken.size()) < room) {
      if (task->ready.empty()) {
        FORGE_RETURN_IF_ERROR(RefillReadyLocked(*task, std::min<int64_t>(missing, room)));
        // Cache hits may have met the target already.
        missing = std::min<int64_t>(
            missing, job.targets[task->spec.digest()] - task->searcher->recorded() -
                         (task->searcher->pending() - static_cast<int64_t>(task->ready.size())));
        if (task->ready.empty()) break;
      }
      taken.emplace_back(std::move(task->ready.front()), &job);
      task->ready.pop_front();
      --missing;
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
  auto worker = workers_.find(request.worker_id());
  if (worker == workers_.end()) {
    return absl::NotFoundError(
        absl::StrCat("Lease: unknown worker \"", request.worker_id(), "\"; register again"));
  }
  worker->second.last_seen = absl::Now();
  const forge::v1::GpuInfo* gpu = nullptr;
  for (const forge::v1::GpuInfo& candidate_gpu : worker->second.status.gpus()) {
    if (candidate_gpu.arch() == request.target_arch()) gpu = &candidate_gpu;
  }
  if (gpu == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat("Lease: worker ", request.worker_id(),
                                                   " registered no GPU of arch \"",
                                                   request.target_arch(), "\""));
  }
  const std::string space = SpaceOf(*gpu);
  const int room = std::min(request.max_candidates(), options_.max_candidates_per_lease);

  // Jobs this GPU may serve, by priority; equal priorities rotate.
  std::vector<JobRun*> eligible;
  for (auto& [id, job] : running_) {
    if (job.finished) continue;
    const std::string& wanted = job.options.target_arch();
    if (!wanted.empty() && wanted != gpu->arch() && wanted != gpu->name()) continue;
    if (!job.space.empty() && job.space != space) continue;
    eligible.push_back(&job);
  }
  std::sort(eligible.begin(), eligible.end(), [](const JobRun* a, const JobRun* b) {
    if (a->options.priority() != b->options.priority()) {
      return a->options.priority() > b->options.priority();
    }
    return a->number < b->number;
  });
  const uint64_t rotation = rotation_++;

  std::vector<std::pair<Candidate, const JobRun*>> picked;
  size_t level_start = 0;
  while (level_start < eligible.size() && static_cast<int>(picked.size()) < room) {
    size_t level_end = level_start;
    while (level_end < eligible.size() &&
           eligible[level_end]->options.priority() == eligible[level_start]->options.priority()) {
      ++level_end;
    }
    // Each call starts the level one job further on, so no job always comes first.
    std::rotate(eligible.begin() + level_start,
                eligible.begin() + level_start + rotation % (level_end - level_start),
                eligible.begin() + level_end);
    // Rounds of equal shares until the lease is full or the level has nothing more.
    for (bool progress = true; progress && static_cast<int>(picked.size()) < room;) {
      progress = false;
      const int remaining = room - static_cast<int>(picked.size());
      const int share = std::max<int>(
          1, remaining / static_cast<int>(level_end - level_start));
      for (size_t i = level_start; i < level_end && static_cast<int>(picked.size()) < room; ++i) {
        JobRun& job = *eligible[i];
        if (job.finished) continue;
        if (job.space.empty()) FORGE_RETURN_IF_ERROR(BindJobLocked(job, space, gpu->arch()));
        FORGE_ASSIGN_OR_RETURN(
            auto taken,
            TakeWorkLocked(job, std::min(share, room - static_cast<int>(picked.size()))));
        if (!taken.empty()) progress = true;
        for (auto& item : taken) picked.push_back(std::move(item));
        FORGE_RETURN_IF_ERROR(AdvanceJobLocked(job));
      }
    }
    level_start = level_end;
  }

  EraseFinishedLocked();
  forge::v1::LeaseResponse response;
  if (picked.empty()) {
    response.set_retry_after_ms(absl::ToInt64Milliseconds(options_.retry_after));
    UpdateGaugesLocked();
    return response;
  }
  absl::StatusOr<RedisReply> number = redis_->Command({"INCR", std::string(keys::kLeaseSequence)});
  FORGE_RETURN_IF_ERROR(CheckReply("allocating a lease id", number));
  const std::string lease_id = absl::StrCat("lease-", number->integer());
  LeaseRecord lease;
  lease.worker_id = request.worker_id();
  lease.space = space;
  lease.deadline = absl::Now() + options_.lease_duration;
  std::vector<std::string> hash = {"HSET",  keys::Lease(lease_id), "worker", lease.worker_id,
                                   "space", space};
  std::set<std::string> task_digests;
  std::map<std::string, int64_t> leased_per_job;
  std::vector<std::vector<std::string>> candidate_writes;
  for (auto& [candidate, job] : picked) {
    lease.candidates[candidate.digest()] = LeaseEntry{job->id, candidate.task_digest()};
    hash.push_back(absl::StrCat(kCandidatePrefix, candidate.digest()));
    hash.push_back(absl::StrCat(job->id, " ", candidate.task_digest()));
    ++leased_per_job[job->id];
    // Kept before the result exists, so that a report can store the whole candidate with it.
    candidate_writes.push_back({"SET", keys::Candidate(candidate.digest()),
                                candidate.SerializeAsString()});
    if (task_digests.insert(candidate.task_digest()).second) {
      *response.add_tasks() = searches_.at(TaskKey(space, candidate.task_digest())).spec;
    }
    *response.add_candidates() = std::move(candidate);
  }
  candidate_writes.push_back(hash);
  for (const auto& [job_id, count] : leased_per_job) {
    candidate_writes.push_back({"HINCRBY", keys::Job(job_id),
                                std::string(keys::job_field::kCandidatesLeased),
                                absl::StrCat(count)});
  }
  candidate_writes.push_back(
      {"ZADD", std::string(keys::kLeases), absl::StrCat(ToMillis(lease.deadline)), lease_id});
  absl::Status written = Transaction(redis_, absl::StrCat("writing ", keys::Lease(lease_id)),
                                     std::move(candidate_writes));
  if (!written.ok()) {
    // Nothing was leased: the candidates go back to their searches.
    for (const auto& [digest, entry] : lease.candidates) ReleaseLocked(space, entry, digest);
    return written;
  }
  for (const auto& [digest, entry] : lease.candidates) leased_[TaskKey(space, digest)] = lease_id;
  candidates_->Add({{"event", "leased"}}).Increment(static_cast<double>(picked.size()));
  response.set_lease_id(lease_id);
  response.set_duration_ms(absl::ToInt64Milliseconds(options_.lease_duration));
  *response.mutable_deadline() = TimeUtil::MillisecondsToTimestamp(ToMillis(lease.deadline));
  leases_[lease_id] = std::move(lease);
  UpdateGaugesLocked();
  return response;
}

void Scheduler::ReleaseLocked(const std::string& space, const LeaseEntry& entry,
                              const std::string& candidate_digest) {
  leased_.erase(TaskKey(space, candidate_digest));
  auto task = searches_.find(TaskKey(space, entry.task_digest));
  if (task == searches_.end()) return;
  if (candidate_digest == task->second.baseline.digest()) {
    task->second.baseline_leased = false;
    return;
  }
  if (task->second.searcher->Release(candidate_digest).ok()) task->second.dirty = true;
}

// ----- results -----

absl::Status Scheduler::ApplyResultLocked(TaskSearch& task, const std::string& candidate_digest,
                                          const Result& result) {
  if (candidate_digest == task.baseline.digest()) {
    task.baseline_leased = false;
    if (result.has_measurement()) {
      task.eager = result.measurement();
    } else {
      task.baseline_failure = result.failure();
    }
    return absl::OkStatus();
  }
  std::optional<double> speedup;
  if (result.has_measurement() && task.eager.has_value() && result.measurement().median_us() > 0) {
    speedup = task.eager->median_us() / result.measurement().median_us();
  }
  // A result that arrives for a candidate the search no longer holds pending (released after its
  // lease expired, or a search restored from an older snapshot) is still kept: the cache has it,
  // and the search records it when it proposes the candidate again.
  if (task.searcher->Record(candidate_digest, speedup).ok()) task.dirty = true;
  if (!task.counted.insert(candidate_digest).second) return absl::OkStatus();
  if (result.has_measurement()) {
    ++task.measured;
  } else {
    ++task.failed;
    ++task.failures[result.failure().stage()];
  }
  const bool improved =
      result.has_measurement() &&
      (!task.best.has_value() || result.measurement().median_us() < task.best->median_us());
  if (improved) {
    task.best = result.measurement();
    absl::StatusOr<Candidate> candidate = results_->GetCandidate(candidate_digest);
    if (candidate.ok()) task.best_candidate = *std::move(candidate);
  }
  // Only a candidate faster than eager improves the task: until one is, the baseline is best.
  if (!improved || !speedup.has_value() || *speedup <= 1.0) return absl::OkStatus();
  // Every running job with this task hears of the improvement.
  for (auto& [id, job] : running_) {
    if (job.finished || job.space != task.space || job.stopped.contains(task.spec.digest())) {
      continue;
    }
    const bool has_task =
        std::any_of(job.tasks.begin(), job.tasks.end(),
                    [&](const KernelTask& t) { return t.digest() == task.spec.digest(); });
    if (!has_task) continue;
    JobEvent event = TaskEvent();
    auto* improved_event = event.mutable_task_improved();
    improved_event->set_task_digest(task.spec.digest());
    improved_event->set_candidate_digest(candidate_digest);
    improved_event->set_median_us(result.measurement().median_us());
    improved_event->set_speedup_vs_eager(*speedup);
    improved_event->set_kind(result.measurement().kind());
    JobProgress best;
    best.set_best_speedup(*speedup);
    FORGE_RETURN_IF_ERROR(jobs_->RecordProgress(id, best, &event));
  }
  return absl::OkStatus();
}

absl::StatusOr<forge::v1::ReportResponse> Scheduler::Report(
    const forge::v1::ReportRequest& request) {
  absl::MutexLock lock(&mutex_);
  auto worker = workers_.find(request.worker_id());
  if (worker == workers_.end()) {
    return absl::NotFoundError(
        absl::StrCat("Report: unknown worker \"", request.worker_id(), "\"; register again"));
  }
  worker->second.last_seen = absl::Now();
  forge::v1::ReportResponse response;
  auto lease_it = leases_.find(request.lease_id());
  if (lease_it == leases_.end()) {
    // Expired (its candidates went back to the search) or never handed out.
    for (const Result& result : request.results()) {
      response.add_rejected_candidate_digests(ResultCandidateDigest(result));
    }
    return response;
  }
  LeaseRecord& lease = lease_it->second;
  if (lease.worker_id != request.worker_id()) {
    return absl::PermissionDeniedError(absl::StrCat("Report: ", request.lease_id(),
                                                    " is held by ", lease.worker_id, ", not ",
                                                    request.worker_id()));
  }
  const bool emulated_worker =
      std::any_of(worker->second.status.gpus().begin(), worker->second.status.gpus().end(),
                  [](const forge::v1::GpuInfo& gpu) { return gpu.emulated(); });
  std::vector<std::string> done;
  for (const Result& result : request.results()) {
    const std::string& digest = ResultCandidateDigest(result);
    auto entry = lease.candidates.find(digest);
    const bool well_formed =
        (result.has_measurement() || result.has_failure()) &&
        (!result.has_measurement() ||
         (result.measurement().median_us() > 0 &&
          (result.measurement().kind() == forge::v1::MEASUREMENT_KIND_PREDICTED) ==
              emulated_worker));
    if (entry == lease.candidates.end() || !well_formed) {
      response.add_rejected_candidate_digests(digest);
      continue;
    }
    TaskSearch& task = searches_.at(TaskKey(lease.space, entry->second.task_digest));
    FORGE_ASSIGN_OR_RETURN(const Candidate candidate, results_->GetCandidate(digest));
    FORGE_ASSIGN_OR_RETURN(const bool stored, results_->PutIfAbsent(lease.space, candidate, result,
                                                                    entry->second.job_id));
    if (stored) {
      const std::string stage =
          result.has_failure()
              ? absl::AsciiStrToLower(absl::StripPrefix(
                    forge::v1::FailureStage_Name(result.failure().stage()), "FAILURE_STAGE_"))
              : "";
      if (result.has_measurement()) {
        candidates_->Add({{"event", "measured"}}).Increment();
        worker->second.status.set_candidates_completed(
            worker->second.status.candidates_completed() + 1);
      } else {
        candidates_->Add({{"event", "failed"}, {"stage", stage}}).Increment();
        worker->second.status.set_candidates_failed(worker->second.status.candidates_failed() +
                                                    1);
      }
      FORGE_RETURN_IF_ERROR(ApplyResultLocked(task, digest, result));
    }
    leased_.erase(TaskKey(lease.space, digest));
    done.push_back(digest);
    lease.candidates.erase(entry);
    response.set_accepted(response.accepted() + 1);
  }
  for (const std::string& digest : request.returned_candidate_digests()) {
    auto entry = lease.candidates.find(digest);
    if (entry == lease.candidates.end()) continue;
    candidates_->Add({{"event", "returned"}}).Increment();
    ReleaseLocked(lease.space, entry->second, digest);
    done.push_back(digest);
    lease.candidates.erase(entry);
  }
  if (!done.empty()) {
    if (lease.candidates.empty()) {
      FORGE_RETURN_IF_ERROR(DropLeaseLocked(request.lease_id()));
    } else {
      std::vector<std::string> remove = {"HDEL", keys::Lease(request.lease_id())};
      for (const std::string& digest : done) remove.push_back(absl::StrCat(kCandidatePrefix, digest));
      FORGE_RETURN_IF_ERROR(
          CheckReply("updating a lease", redis_->Command(remove)));
    }
  }
  FORGE_RETURN_IF_ERROR(SaveWorkerLocked(worker->second));
  // A result can finish tasks of every job that shares them, not only of the lease's jobs.
  for (auto& [id, job] : running_) FORGE_RETURN_IF_ERROR(AdvanceJobLocked(job));
  EraseFinishedLocked();
  UpdateGaugesLocked();
  return response;
}

absl::Status Scheduler::DropLeaseLocked(const std::string& lease_id) {
  FORGE_RETURN_IF_ERROR(Transaction(redis_, absl::StrCat("removing ", keys::Lease(lease_id)),
                                    {{"DEL", keys::Lease(lease_id)},
                                     {"ZREM", std::string(keys::kLeases), lease_id}}));
  leases_.erase(lease_id);
  return absl::OkStatus();
}

// ----- task and job progress -----

absl::Status Scheduler::ComputeTargetsLocked(JobRun& job) {
  // The job's eager time per task: baseline x occurrences; a failed baseline counts nothing.
  double total_us = 0;
  std::map<std::string, double> eager_us;
  int searchable = 0;
  for (const KernelTask& spec : job.tasks) {
    const TaskSearch& task = searches_.at(TaskKey(job.space, spec.digest()));
    if (!task.eager.has_value() && !task.baseline_failure.has_value()) return absl::OkStatus();
    if (!task.eager.has_value()) continue;
    eager_us[spec.digest()] = task.eager->median_us() * std::max(1, spec.occurrences());
    total_us += eager_us[spec.digest()];
    ++searchable;
  }
  const int64_t budget = job.options.budget().max_candidate_trials() > 0
                             ? job.options.budget().max_candidate_trials()
                             : options_.default_trials_per_task * std::max(1, searchable);
  std::vector<std::string> hash = {"HSET", keys::JobSearch(job.id)};
  for (const KernelTask& spec : job.tasks) {
    const double share = total_us > 0 ? eager_us[spec.digest()] / total_us : 0;
    const int64_t target = std::max<int64_t>(
        options_.min_trials_per_task, static_cast<int64_t>(std::llround(share * budget)));
    job.targets[spec.digest()] = target;
    hash.push_back(absl::StrCat(kTargetPrefix, spec.digest()));
    hash.push_back(absl::StrCat(target));
  }
  return CheckReply(absl::StrCat("writing ", keys::JobSearch(job.id)), redis_->Command(hash));
}

absl::Status Scheduler::StopTaskLocked(JobRun& job, const std::string& task_digest,
                                       TaskStopReason reason) {
  FORGE_RETURN_IF_ERROR(CheckReply(
      absl::StrCat("writing ", keys::JobSearch(job.id)),
      redis_->Command({"HSET", keys::JobSearch(job.id), absl::StrCat(kStopPrefix, task_digest),
                       forge::v1::TaskStopReason_Name(reason)})));
  job.stopped[task_digest] = reason;
  JobEvent event = TaskEvent();
  auto* finished = event.mutable_task_finished();
  finished->set_task_digest(task_digest);
  finished->set_stop_reason(reason);
  finished->set_speedup_vs_eager(1.0);
  if (!job.space.empty()) {
    const TaskSearch& task = searches_.at(TaskKey(job.space, task_digest));
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
  const bool out_of_time = job.options.budget().max_wall_seconds() > 0 &&
                           absl::Now() - job.started >
                               absl::Seconds(job.options.budget().max_wall_seconds());
  if (job.targets.empty() && !out_of_time) FORGE_RETURN_IF_ERROR(ComputeTargetsLocked(job));
  for (const KernelTask& spec : job.tasks) {
    if (job.stopped.contains(spec.digest())) continue;
    TaskSearch& task = searches_.at(TaskKey(job.space, spec.digest()));
    std::optional<TaskStopReason> reason;
    const int64_t in_flight = task.searcher->pending() - static_cast<int64_t>(task.ready.size());
    if (out_of_time) {
      reason = forge::v1::TASK_STOP_REASON_BUDGET_EXHAUSTED;
    } else if (task.baseline_failure.has_value()) {
      reason = forge::v1::TASK_STOP_REASON_SPACE_EXHAUSTED;  // nothing to compare against
    } else if (!task.eager.has_value() || job.targets.empty()) {
      continue;
    } else if (task.best.has_value() && IsNearFloor(*task.best, options_.near_roofline_percent)) {
      reason = forge::v1::TASK_STOP_REASON_NEAR_ROOFLINE;
    } else if (task.searcher->Exhausted()) {
      reason = forge::v1::TASK_STOP_REASON_SPACE_EXHAUSTED;
    } else if (task.searcher->recorded() >= job.targets[spec.digest()] && in_flight == 0) {
      reason = forge::v1::TASK_STOP_REASON_BUDGET_EXHAUSTED;
    }
    if (!reason.has_value()) continue;
    FORGE_RETURN_IF_ERROR(StopTaskLocked(job, spec.digest(), *reason));
  }
  if (job.stopped.size() < job.tasks.size()) return absl::OkStatus();
  // Nothing of the job may still be out with a worker when it is declared done.
  for (const auto& [id, lease] : leases_) {
    for (const auto& [digest, entry] : lease.candidates) {
      if (entry.job_id == job.id) return absl::OkStatus();
    }
  }
  return FinishJobLocked(job, forge::v1::JOB_STATE_DONE, "every task finished");
}

absl::Status Scheduler::FinishJobLocked(JobRun& job, forge::v1::JobState state,
                                        absl::string_view detail) {
  absl::StatusOr<forge::v1::Job> moved =
      jobs_->Transition(job.id, forge::v1::JOB_STATE_RUNNING, state, detail);
  if (!moved.ok() && !absl::IsAborted(moved.status())) return moved.status();
  // Callers may be iterating over the running jobs: the record goes at EraseFinishedLocked.
  job.finished = true;
  const std::string job_id = job.id;
  // Ready candidates no running job wants any more go back to their searches.
  std::set<std::string> wanted;
  for (const auto& [id, other] : running_) {
    if (other.finished) continue;
    for (const KernelTask& task : other.tasks) wanted.insert(TaskKey(other.space, task.digest()));
  }
  for (auto& [key, task] : searches_) {
    if (wanted.contains(key)) continue;
    for (const Candidate& candidate : task.ready) {
      (void)task.searcher->Release(candidate.digest());
    }
    if (!task.ready.empty()) task.dirty = true;
    task.ready.clear();
  }
  LogWithFields(*GetLogger("scheduler"), spdlog::level::info, "job finished",
                {{"job", job_id}, {"state", forge::v1::JobState_Name(state)}});
  return SnapshotLocked(/*all=*/false);
}

void Scheduler::ReleaseStrandedLocked() {
  for (auto& [key, task] : searches_) {
    std::set<std::string> ready;
    for (const Candidate& candidate : task.ready) ready.insert(candidate.digest());
    for (const std::string& digest : task.searcher->PendingDigests()) {
      if (ready.contains(digest) || leased_.contains(TaskKey(task.space, digest))) continue;
      GetLogger("scheduler")->warn("releasing stranded candidate {} of task {}", digest,
                                   task.spec.digest());
      (void)task.searcher->Release(digest);
      task.dirty = true;
    }
    if (task.baseline_leased && !leased_.contains(TaskKey(task.space, task.baseline.digest()))) {
      task.baseline_leased = false;
    }
  }
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
    absl::Status started = StartJobLocked(*job);
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
  std::vector<std::string> drop;
  for (auto& [lease_id, lease] : leases_) {
    bool others = false;
    for (const auto& [digest, entry] : lease.candidates) others |= entry.job_id != id;
    if (!others) drop.push_back(lease_id);
  }
  for (const std::string& lease_id : drop) {
    LeaseRecord& lease = leases_.at(lease_id);
    for (const auto& [digest, entry] : lease.candidates) ReleaseLocked(lease.space, entry, digest);
    cancelled_leases_[lease.worker_id].push_back(lease_id);
    absl::Status dropped = DropLeaseLocked(lease_id);
    if (!dropped.ok()) GetLogger("scheduler")->warn("cancelling {}: {}", id, dropped.ToString());
  }
  UpdateGaugesLocked();
}

// ----- time-driven work -----

absl::Status Scheduler::Tick() {
  absl::MutexLock lock(&mutex_);
  const absl::Time now = absl::Now();
  // Expired leases: their candidates go back to the search.
  std::vector<std::string> expired;
  for (const auto& [id, lease] : leases_) {
    if (lease.deadline < now) expired.push_back(id);
  }
  for (const std::string& id : expired) {
    LeaseRecord& lease = leases_.at(id);
    candidates_->Add({{"event", "expired"}}).Increment(static_cast<double>(lease.candidates.size()));
    LogWithFields(*GetLogger("scheduler"), spdlog::level::warn, "lease expired",
                  {{"lease", id}, {"worker", lease.worker_id},
                   {"candidates", static_cast<int64_t>(lease.candidates.size())}});
    for (const auto& [digest, entry] : lease.candidates) ReleaseLocked(lease.space, entry, digest);
    FORGE_RETURN_IF_ERROR(DropLeaseLocked(id));
  }
  // Queued jobs this coordinator was not told of (submitted while it was down, or elsewhere);
  // the scan reads every job, so it runs on every 20th tick only.
  if (ticks_++ % 20 == 0) {
    FORGE_ASSIGN_OR_RETURN(JobPage queued,
                           jobs_->ListJobs({.states = {forge::v1::JOB_STATE_QUEUED}},
                                           JobStore::kMaxPageSize, ""));
    for (const forge::v1::Job& job : queued.jobs) FORGE_RETURN_IF_ERROR(StartJobLocked(job));
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
    if (run != running_.end()) FORGE_RETURN_IF_ERROR(AdvanceJobLocked(run->second));
  }
  // Forget workers long dead.
  for (auto it = workers_.begin(); it != workers_.end();) {
    if (now - it->second.last_seen > kDeadWorkerMemory) {
      FORGE_RETURN_IF_ERROR(Transaction(redis_, "forgetting a worker",
                                        {{"DEL", keys::Worker(it->first)},
                                         {"ZREM", std::string(keys::kWorkers), it->first}}));
      it = workers_.erase(it);
    } else {
      ++it;
    }
  }
  EraseFinishedLocked();
  ReleaseStrandedLocked();
  FORGE_RETURN_IF_ERROR(SnapshotLocked(/*all=*/false));
  UpdateGaugesLocked();
  return absl::OkStatus();
}

absl::Status Scheduler::SnapshotLocked(bool all) {
  std::vector<std::vector<std::string>> writes;
  std::vector<TaskSearch*> written;
  for (auto& [key, task] : searches_) {
    if (!all && !task.dirty) continue;
    writes.push_back({"HSET", keys::TaskState(task.space, task.spec.digest()), "search",
                      task.searcher->Serialize()});
    written.push_back(&task);
  }
  if (writes.empty()) return absl::OkStatus();
  absl::StatusOr<std::vector<RedisReply>> replies = redis_->Pipeline(writes);
  if (!replies.ok()) return Annotate(replies.status(), "snapshotting searches");
  for (TaskSearch* task : written) task->dirty = false;
  return absl::OkStatus();
}

void Scheduler::UpdateGaugesLocked() {
  const absl::Time now = absl::Now();
  int live = 0;
  for (const auto& [id, worker] : workers_) live += now - worker.last_seen <= options_.lease_duration;
  size_t frontier = 0;
  for (const auto& [key, task] : searches_) frontier += task.ready.size();
  gauges_->Add({{"what", "live_workers"}}).Set(live);
  gauges_->Add({{"what", "leases"}}).Set(static_cast<double>(leases_.size()));
  gauges_->Add({{"what", "leased_candidates"}}).Set(static_cast<double>(leased_.size()));
  gauges_->Add({{"what", "frontier"}}).Set(static_cast<double>(frontier));
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
  const std::string search_key = keys::JobSearch(job_id);
  absl::StatusOr<RedisReply> saved = redis_->Command({"HGETALL", search_key});
  FORGE_RETURN_IF_ERROR(CheckReply(absl::StrCat("reading ", search_key), saved));
  const auto fields = FieldsOf(*saved);
  std::string space;
  std::string arch;
  if (auto it = fields.find("space"); it != fields.end()) space = it->second;
  if (auto it = fields.find("arch"); it != fields.end()) arch = it->second;

  absl::MutexLock lock(&mutex_);
  double total_eager_us = 0;
  std::map<std::string, double> eager_us;
  for (const KernelTask& spec : tasks) {
    if (space.empty()) break;
    FORGE_ASSIGN_OR_RETURN(TaskSearch * task, TaskSearchLocked(space, arch, spec));
    if (task->eager.has_value()) {
      eager_us[spec.digest()] = task->eager->median_us() * std::max(1, spec.occurrences());
      total_eager_us += eager_us[spec.digest()];
    }
  }
  for (KernelTask& spec : tasks) {
    forge::v1::TaskResults* out = response.add_tasks();
    if (total_eager_us > 0 && eager_us.contains(spec.digest())) {
      spec.set_baseline_share(eager_us[spec.digest()] / total_eager_us);
    }
    if (auto stop = fields.find(absl::StrCat(kStopPrefix, spec.digest())); stop != fields.end()) {
      TaskStopReason reason;
      if (forge::v1::TaskStopReason_Parse(stop->second, &reason)) out->set_stop_reason(reason);
    }
    if (!space.empty()) {
      TaskSearch& task = searches_.at(TaskKey(space, spec.digest()));
      out->set_candidates_measured(static_cast<int32_t>(task.measured));
      out->set_candidates_failed(static_cast<int32_t>(task.failed));
      for (const auto& [stage, count] : task.failures) {
        forge::v1::FailureCount* failures = out->add_failures_by_stage();
        failures->set_stage(stage);
        failures->set_count(count);
      }
      // The ATen baseline is a candidate too: where nothing generated beats it, it is the best,
      // so a plan never runs a task slower than eager does.
      const bool baseline_wins = task.eager.has_value() &&
                                 (!task.best.has_value() ||
                                  task.best->median_us() >= task.eager->median_us());
      if (baseline_wins) {
        *out->mutable_best_candidate() = task.baseline;
        *out->mutable_best() = *task.eager;
      } else if (task.best.has_value()) {
        *out->mutable_best_candidate() = task.best_candidate;
        *out->mutable_best() = *task.best;
      }
      if (out->has_best() && task.eager.has_value()) {
        out->mutable_best()->set_eager_median_us(task.eager->median_us());
      }
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
