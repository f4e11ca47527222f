// SchedulerStore: the scheduler's records in Redis (keys in redis_keys.h) and the one place that
// knows their layout: workers, leases, each job's search record (space, start, trial targets, stop
// reasons) and the searchers' snapshots. The layout is the one earlier builds wrote, so an
// existing Redis keeps working:
//
//   forge:workers            zset  worker id -> last seen (ms)    forge:worker:{id}  hash "info"
//   forge:leases             zset  lease id -> deadline (ms)      forge:lease:{id}   hash "worker",
//                                  "space", "c:{candidate}" -> "{job id} {task digest}" (then
//                                  " nvcc" for an expensive candidate)
//   forge:job:{id}:search    hash  "space", "arch", "started_ms", "target:{task}", "stop:{task}"
//   forge:task_state:{space}:{task}  hash "search": the searcher's Serialize()
//   forge:candidate:{cand}   string  Candidate bytes, written with the lease that hands it out
//
// Every write that changes more than one key runs as one MULTI/EXEC transaction (saving a worker,
// a heartbeat, writing, dropping a lease, forgetting a worker); snapshots are one pipeline. Errors
// name the key or the operation. Loading skips records that do not parse (a worker whose info is
// not a WorkerStatus, a lease candidate field that is not "{job} {task}").
//
// Thread-safe as far as RedisClient is (it serializes calls); holds no state of its own.
#ifndef FORGE_SERVER_SCHEDULER_STORE_H_
#define FORGE_SERVER_SCHEDULER_STORE_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "common/redis/redis_client.h"
#include "forge/v1/service.pb.h"
#include "forge/v1/task.pb.h"
#include "server/lease_table.h"
#include "server/worker_registry.h"

namespace forge::server {

// What forge:job:{id}:search holds.
struct JobSearchRecord {
  std::string space;  // empty until the job is bound to one
  std::string arch;
  std::optional<int64_t> started_ms;
  std::map<std::string, int64_t> targets;  // by task digest
  std::map<std::string, forge::v1::TaskStopReason> stopped;
};

class SchedulerStore {
 public:
  struct SearchState {
    std::string space;
    std::string task_digest;
    std::string bytes;  // the searcher's Serialize()
  };

  // The client must outlive the store.
  explicit SchedulerStore(RedisClient* redis) : redis_(redis) {}

  // ----- workers -----
  absl::StatusOr<std::map<std::string, WorkerRecord>> LoadWorkers();
  // A fresh id, "worker-<n>-<random>" (server/ids.h).
  absl::StatusOr<std::string> NewWorkerId();
  absl::Status SaveWorker(const WorkerRecord& worker);
  absl::Status ForgetWorker(const std::string& worker_id);
  // The worker was seen at `seen`; the leases it named (already checked to be its own) last
  // until `deadline`.
  absl::Status RecordHeartbeat(const std::string& worker_id, absl::Time seen,
                               const std::vector<std::string>& renewed_lease_ids,
                               absl::Time deadline);

  // ----- leases -----
  absl::StatusOr<std::map<std::string, LeaseRecord>> LoadLeases();
  // A fresh id, "lease-<n>-<random>" (server/ids.h): unique after a Redis rollback too.
  absl::StatusOr<std::string> NewLeaseId();
  // Writes the lease, the candidates it hands out (`candidates`, those of lease.candidates in
  // the order handed out) and adds them to their jobs' candidates_leased counters.
  absl::Status WriteLease(const std::string& lease_id, const LeaseRecord& lease,
                          const std::vector<forge::v1::Candidate>& candidates);
  // Removes candidates (reported or returned) from a lease that keeps others.
  absl::Status RemoveFromLease(const std::string& lease_id,
                               const std::vector<std::string>& candidate_digests);
  absl::Status DropLease(const std::string& lease_id);
  // Whether Redis still holds the lease (false after a rollback lost it).
  absl::StatusOr<bool> LeaseStored(const std::string& lease_id);
  // Advances the scheduler clock (forge:scheduler:clock) and returns it: each value is larger
  // than every one returned before, unless Redis lost acknowledged writes.
  absl::StatusOr<int64_t> AdvanceClock();

  // ----- job searches -----
  absl::StatusOr<JobSearchRecord> LoadJobSearch(absl::string_view job_id);
  absl::Status SetJobStarted(const std::string& job_id, int64_t started_ms);
  absl::Status BindJob(const std::string& job_id, const std::string& space,
                       const std::string& arch);
  // An empty map writes nothing (a job of no tasks has no targets).
  absl::Status SaveTargets(const std::string& job_id, const std::map<std::string, int64_t>& targets);
  absl::Status SaveStop(const std::string& job_id, const std::string& task_digest,
                        forge::v1::TaskStopReason reason);

  // ----- searcher snapshots -----
  // The saved state, or "" when there is none.
  absl::StatusOr<std::string> LoadSearchState(absl::string_view space,
                                              absl::string_view task_digest);
  absl::Status DropSearchState(absl::string_view space, absl::string_view task_digest);
  absl::Status SaveSearchStates(const std::vector<SearchState>& states);

 private:
  absl::StatusOr<int64_t> Increment(absl::string_view key, absl::string_view operation);

  RedisClient* const redis_;
};

}  // namespace forge::server

#endif  // FORGE_SERVER_SCHEDULER_STORE_H_
