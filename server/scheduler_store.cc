#include "server/scheduler_store.h"

#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/redis/transaction.h"
#include "common/status/status_macros.h"
#include "server/ids.h"
#include "server/redis_keys.h"

namespace forge::server {
namespace {

// Field prefixes of forge:job:{id}:search and forge:lease:{id}.
constexpr absl::string_view kTargetPrefix = "target:";
constexpr absl::string_view kStopPrefix = "stop:";
constexpr absl::string_view kCandidatePrefix = "c:";
// Marks an expensive candidate's entry in a lease hash (LeaseEntry::expensive).
constexpr absl::string_view kExpensiveMark = "nvcc";

int64_t ToMillis(absl::Time time) { return absl::ToUnixMillis(time); }

// ZRANGE key 0 -1 WITHSCORES as (member, score in ms) pairs.
absl::StatusOr<std::vector<std::pair<std::string, int64_t>>> ScoredMembers(RedisClient& redis,
                                                                           absl::string_view key,
                                                                           absl::string_view what) {
  absl::StatusOr<RedisReply> reply =
      redis.Command({"ZRANGE", std::string(key), "0", "-1", "WITHSCORES"});
  FORGE_RETURN_IF_ERROR(CheckReply(absl::StrCat("loading ", what), reply));
  std::vector<std::pair<std::string, int64_t>> members;
  for (size_t i = 0; i + 1 < reply->elements().size(); i += 2) {
    int64_t score = 0;
    (void)absl::SimpleAtoi(reply->elements()[i + 1].str(), &score);
    members.emplace_back(reply->elements()[i].str(), score);
  }
  return members;
}

}  // namespace

// ----- workers -----

absl::StatusOr<std::map<std::string, WorkerRecord>> SchedulerStore::LoadWorkers() {
  FORGE_ASSIGN_OR_RETURN(auto members, ScoredMembers(*redis_, keys::kWorkers, "workers"));
  std::map<std::string, WorkerRecord> workers;
  for (const auto& [id, seen_ms] : members) {
    absl::StatusOr<RedisReply> info = redis_->Command({"HGET", keys::Worker(id), "info"});
    FORGE_RETURN_IF_ERROR(CheckReply("loading a worker", info));
    WorkerRecord record;
    if (!info->is_bulk_string() || !record.status.ParseFromString(info->str())) continue;
    record.last_seen = absl::FromUnixMillis(seen_ms);
    workers[id] = std::move(record);
  }
  return workers;
}

absl::StatusOr<int64_t> SchedulerStore::Increment(absl::string_view key,
                                                  absl::string_view operation) {
  absl::StatusOr<RedisReply> number = redis_->Command({"INCR", std::string(key)});
  FORGE_RETURN_IF_ERROR(CheckReply(operation, number));
  return number->integer();
}

absl::StatusOr<std::string> SchedulerStore::NewWorkerId() {
  FORGE_ASSIGN_OR_RETURN(int64_t number, Increment(keys::kWorkerSequence, "allocating a worker id"));
  return NewId("worker", number);
}

absl::Status SchedulerStore::SaveWorker(const WorkerRecord& worker) {
  const std::string& id = worker.status.worker_id();
  return Transaction(*redis_, absl::StrCat("saving worker ", id),
                     {{"HSET", keys::Worker(id), "info", worker.status.SerializeAsString()},
                      {"ZADD", std::string(keys::kWorkers), absl::StrCat(ToMillis(worker.last_seen)),
                       id}});
}

absl::Status SchedulerStore::ForgetWorker(const std::string& worker_id) {
  return Transaction(*redis_, "forgetting a worker",
                     {{"DEL", keys::Worker(worker_id)},
                      {"ZREM", std::string(keys::kWorkers), worker_id}});
}

absl::Status SchedulerStore::RecordHeartbeat(const std::string& worker_id, absl::Time seen,
                                             const std::vector<std::string>& renewed_lease_ids,
                                             absl::Time deadline) {
  std::vector<std::vector<std::string>> writes = {
      {"ZADD", std::string(keys::kWorkers), absl::StrCat(ToMillis(seen)), worker_id}};
  for (const std::string& lease_id : renewed_lease_ids) {
    writes.push_back({"ZADD", std::string(keys::kLeases), "XX", absl::StrCat(ToMillis(deadline)),
                      lease_id});
  }
  return Transaction(*redis_, "recording a heartbeat", std::move(writes));
}

// ----- leases -----

absl::StatusOr<std::map<std::string, LeaseRecord>> SchedulerStore::LoadLeases() {
  FORGE_ASSIGN_OR_RETURN(auto members, ScoredMembers(*redis_, keys::kLeases, "leases"));
  std::map<std::string, LeaseRecord> leases;
  for (const auto& [id, deadline_ms] : members) {
    absl::StatusOr<RedisReply> hash = redis_->Command({"HGETALL", keys::Lease(id)});
    FORGE_RETURN_IF_ERROR(CheckReply("loading a lease", hash));
    LeaseRecord lease;
    lease.deadline = absl::FromUnixMillis(deadline_ms);
    for (const auto& [field, value] : HashFields(*hash)) {
      if (field == "worker") lease.worker_id = value;
      if (field == "space") lease.space = value;
      if (absl::StartsWith(field, kCandidatePrefix)) {
        // "<job> <task>", then " nvcc" for an expensive candidate.
        std::vector<std::string> parts = absl::StrSplit(value, ' ');
        if (parts.size() != 2 && parts.size() != 3) continue;
        lease.candidates[std::string(absl::StripPrefix(field, kCandidatePrefix))] =
            LeaseEntry{parts[0], parts[1], parts.size() == 3 && parts[2] == kExpensiveMark};
      }
    }
    leases[id] = std::move(lease);
  }
  return leases;
}

absl::StatusOr<std::string> SchedulerStore::NewLeaseId() {
  FORGE_ASSIGN_OR_RETURN(int64_t number, Increment(keys::kLeaseSequence, "allocating a lease id"));
  return NewId("lease", number);
}

absl::Status SchedulerStore::WriteLease(const std::string& lease_id, const LeaseRecord& lease,
                                        const std::vector<forge::v1::Candidate>& candidates) {
  std::vector<std::vector<std::string>> writes;
  // Kept before the result exists, so that a report can store the whole candidate with it.
  for (const forge::v1::Candidate& candidate : candidates) {
    writes.push_back({"SET", keys::Candidate(candidate.digest()), candidate.SerializeAsString()});
  }
  std::vector<std::string> hash = {"HSET",  keys::Lease(lease_id), "worker", lease.worker_id,
                                   "space", lease.space};
  std::map<std::string, int64_t> leased_per_job;
  for (const auto& [digest, entry] : lease.candidates) {
    hash.push_back(absl::StrCat(kCandidatePrefix, digest));
    hash.push_back(absl::StrCat(entry.job_id, " ", entry.task_digest,
                                entry.expensive ? absl::StrCat(" ", kExpensiveMark) : ""));
    ++leased_per_job[entry.job_id];
  }
  writes.push_back(std::move(hash));
  for (const auto& [job_id, count] : leased_per_job) {
    writes.push_back({"HINCRBY", keys::Job(job_id),
                      std::string(keys::job_field::kCandidatesLeased), absl::StrCat(count)});
  }
  writes.push_back(
      {"ZADD", std::string(keys::kLeases), absl::StrCat(ToMillis(lease.deadline)), lease_id});
  return Transaction(*redis_, absl::StrCat("writing ", keys::Lease(lease_id)), std::move(writes));
}

absl::Status SchedulerStore::RemoveFromLease(const std::string& lease_id,
                                             const std::vector<std::string>& candidate_digests) {
  std::vector<std::string> remove = {"HDEL", keys::Lease(lease_id)};
  for (const std::string& digest : candidate_digests) {
    remove.push_back(absl::StrCat(kCandidatePrefix, digest));
  }
  return CheckReply("updating a lease", redis_->Command(remove));
}

absl::Status SchedulerStore::DropLease(const std::string& lease_id) {
  return Transaction(*redis_, absl::StrCat("removing ", keys::Lease(lease_id)),
                     {{"DEL", keys::Lease(lease_id)},
                      {"ZREM", std::string(keys::kLeases), lease_id}});
}

absl::StatusOr<bool> SchedulerStore::LeaseStored(const std::string& lease_id) {
  const std::string key = keys::Lease(lease_id);
  absl::StatusOr<RedisReply> exists = redis_->Command({"EXISTS", key});
  FORGE_RETURN_IF_ERROR(CheckReply(absl::StrCat("reading ", key), exists));
  return exists->integer() > 0;
}

absl::StatusOr<int64_t> SchedulerStore::AdvanceClock() {
  return Increment(keys::kSchedulerClock, "advancing the scheduler clock");
}

// ----- job searches -----

absl::StatusOr<JobSearchRecord> SchedulerStore::LoadJobSearch(absl::string_view job_id) {
  const std::string key = keys::JobSearch(job_id);
  absl::StatusOr<RedisReply> saved = redis_->Command({"HGETALL", key});
  FORGE_RETURN_IF_ERROR(CheckReply(absl::StrCat("reading ", key), saved));
  JobSearchRecord record;
  for (const auto& [field, value] : HashFields(*saved)) {
    if (field == "space") record.space = value;
    if (field == "arch") record.arch = value;
    int64_t number = 0;
    if (field == "started_ms" && absl::SimpleAtoi(value, &number)) record.started_ms = number;
    if (absl::StartsWith(field, kTargetPrefix) && absl::SimpleAtoi(value, &number)) {
      record.targets[std::string(absl::StripPrefix(field, kTargetPrefix))] = number;
    }
    forge::v1::TaskStopReason reason;
    if (absl::StartsWith(field, kStopPrefix) && forge::v1::TaskStopReason_Parse(value, &reason)) {
      record.stopped[std::string(absl::StripPrefix(field, kStopPrefix))] = reason;
    }
  }
  return record;
}

absl::Status SchedulerStore::SetJobStarted(const std::string& job_id, int64_t started_ms) {
  const std::string key = keys::JobSearch(job_id);
  return CheckReply(absl::StrCat("writing ", key),
                    redis_->Command({"HSET", key, "started_ms", absl::StrCat(started_ms)}));
}

absl::Status SchedulerStore::BindJob(const std::string& job_id, const std::string& space,
                                     const std::string& arch) {
  return CheckReply(
      absl::StrCat("binding ", job_id, " to ", space),
      redis_->Command({"HSET", keys::JobSearch(job_id), "space", space, "arch", arch}));
}

absl::Status SchedulerStore::SaveTargets(const std::string& job_id,
                                         const std::map<std::string, int64_t>& targets) {
  if (targets.empty()) return absl::OkStatus();  // HSET needs a field: nothing to write
  const std::string key = keys::JobSearch(job_id);
  std::vector<std::string> hash = {"HSET", key};
  for (const auto& [task_digest, target] : targets) {
    hash.push_back(absl::StrCat(kTargetPrefix, task_digest));
    hash.push_back(absl::StrCat(target));
  }
  return CheckReply(absl::StrCat("writing ", key), redis_->Command(hash));
}

absl::Status SchedulerStore::SaveStop(const std::string& job_id, const std::string& task_digest,
                                      forge::v1::TaskStopReason reason) {
  const std::string key = keys::JobSearch(job_id);
  return CheckReply(absl::StrCat("writing ", key),
                    redis_->Command({"HSET", key, absl::StrCat(kStopPrefix, task_digest),
                                     forge::v1::TaskStopReason_Name(reason)}));
}

// ----- searcher snapshots -----

absl::StatusOr<std::string> SchedulerStore::LoadSearchState(absl::string_view space,
                                                            absl::string_view task_digest) {
  const std::string key = keys::TaskState(space, task_digest);
  absl::StatusOr<RedisReply> saved = redis_->Command({"HGET", key, "search"});
  FORGE_RETURN_IF_ERROR(CheckReply(absl::StrCat("reading ", key), saved));
  return saved->is_bulk_string() ? saved->str() : std::string();
}

absl::Status SchedulerStore::DropSearchState(absl::string_view space,
                                             absl::string_view task_digest) {
  const std::string key = keys::TaskState(space, task_digest);
  return CheckReply(absl::StrCat("dropping ", key), redis_->Command({"HDEL", key, "search"}));
}

absl::Status SchedulerStore::SaveSearchStates(const std::vector<SearchState>& states) {
  if (states.empty()) return absl::OkStatus();
  std::vector<std::vector<std::string>> writes;
  for (const SearchState& state : states) {
    writes.push_back({"HSET", keys::TaskState(state.space, state.task_digest), "search",
                      state.bytes});
  }
  absl::StatusOr<std::vector<RedisReply>> replies = redis_->Pipeline(writes);
  return Annotate(replies.status(), "snapshotting searches");
}

}  // namespace forge::server
