// Every Redis key the coordinator uses, in one place. Keys start with "forge:"; {x} is filled in.
//
//   forge:job_seq                  string  last job number handed out (INCR); ids are
//                                          "job-<n>-<random>" (ids.h: unique after a rollback)
//   forge:jobs                     zset    job id -> job number: every job, for newest-first listing
//                                          (the number, not a time, so pages are stable and exact)
//   forge:jobs:by_state            hash    state name -> number of jobs in it, kept in the same
//                                          transaction as every state change (the /metrics gauge)
//   forge:jobs:active              hash    job id -> owner of every QUEUED or RUNNING job: the jobs-per-
//                                          owner quota (entered at creation, removed by the change to a
//                                          final state)
//   forge:job:{id}                 hash    the job: state, options (JobOptions bytes), model digest,
//                                          created/updated (ms since the epoch), error, and one field
//                                          per JobProgress counter (so the scheduler can HINCRBY)
//   forge:job:{id}:tasks           hash    task digest -> occurrences of the task in this job's model
//                                          (a hash rather than DESIGN.md's set: occurrences belong
//                                          to the job, the task record is shared by every model)
//   forge:task:{digest}            hash    "spec": the KernelTask bytes without its per-model fields
//                                          (occurrences, baseline_share); written once (HSETNX)
//   forge:model:{digest}           string  the submitted Graph (deterministic bytes), by model digest
//   forge:events:{id}              stream  the job's events: "event" (JobEvent bytes without id,
//                                          job id and progress) plus the progress counters at the time
//   forge:blob:{sha256}            hash    index of a stored weight blob: size, stored (ms); the bytes
//                                          are a file under the coordinator's blob directory
//   forge:sweeper:lock             string  held by the coordinator whose sweeper runs (sweeper.h),
//                                          with an expiry
//   forge:revoked:tokens           hash    token id -> "EXPIRES_UNIX_SECONDS BY" (0: for good): tokens
//                                          refused before they expire (revocation/revocation.h)
//   forge:revoked:identities       hash    worker identity -> "REVOKED_UNIX_SECONDS BY": identities
//                                          refused (a purge of their results revokes them)
//
// The search. A "space" names where a result is valid: the GPU's product name for measured
// results ("NVIDIA H200"), "predicted:<arch table name>" for the emulated backend's, so that a
// prediction never answers for a measurement. DESIGN.md's frontier zset is the searcher's state
// plus the coordinator's in-memory ready queue (rebuilt by proposing again after a restart).
//
//   forge:result:{space}:{cand}    string  Result bytes: the results cache, first result wins (SETNX),
//                                          no TTL
//   forge:task_results:{space}:{task}  set candidate digests with a result, per task
//   forge:candidate:{cand}         string  Candidate bytes of every candidate ever leased (written
//                                          with the lease; reports and results read it)
//   forge:task_state:{space}:{task}    hash "search": the searcher's Serialize() (snapshotted about
//                                          once a second; counts and bests are recomputed from the
//                                          results on restart)
//   forge:job:{id}:search          hash    the job's search: "space" it is bound to, "started_ms",
//                                          "target:{task}" trials wanted, "stop:{task}" stop reason
//   forge:lease_seq                string  last lease number handed out; ids "lease-<n>-<random>"
//   forge:leases                   zset    lease id -> deadline (ms since the epoch)
//   forge:lease:{id}               hash    "worker", "space", "deadline_ms", and per candidate
//                                          "c:{cand}" -> "{job id} {task digest}"
//   forge:scheduler:clock          string  INCR on every scheduler tick: a value lower than the last one
//                                          seen means Redis lost acknowledged writes (scheduler.h)
//   forge:worker_seq               string  last worker number handed out; ids "worker-<n>-<random>"
//   forge:workers                  zset    worker id -> last heartbeat (ms since the epoch)
//   forge:worker:{id}              hash    "info": WorkerStatus bytes as registered
//
// The learned performance model (cost_model_store.h), per space:
//
//   forge:cost_model:{space}       hash    "version" (1, 2, ...: HINCRBY, never reused), "model"
//                                          (the LearnedModel's bytes), "target", "rows", "tasks",
//                                          "results_seen" (measured results when it was trained),
//                                          "trained_ms"
//
// The compiled-object catalog (compiled_catalog/compiled_catalog.h):
//
//   forge:catalog:{key}            hash    the object compiled under a compile-cache key: "sha256",
//                                          "size", "publisher", "published_ms", "kind", "arch",
//                                          "compile_seconds"; written once (first publisher wins)
//   forge:catalog:by:{identity}    set     the keys a worker identity published (for the purge)
//   forge:catalog:bytes            string  bytes of every indexed object together (INCRBY/DECRBY)
//   forge:catalog:object:{sha256}  hash    the objects' blob index (blob_store.h's layout); the bytes
//                                          are files under the catalog's own directory
#ifndef FORGE_SERVER_REDIS_KEYS_H_
#define FORGE_SERVER_REDIS_KEYS_H_

#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace forge::server::keys {

inline constexpr absl::string_view kJobSequence = "forge:job_seq";
inline constexpr absl::string_view kJobs = "forge:jobs";
inline constexpr absl::string_view kJobsByState = "forge:jobs:by_state";
inline constexpr absl::string_view kActiveJobs = "forge:jobs:active";

inline std::string Job(absl::string_view job_id) { return absl::StrCat("forge:job:", job_id); }
inline std::string JobTasks(absl::string_view job_id) {
  return absl::StrCat("forge:job:", job_id, ":tasks");
}
inline std::string Task(absl::string_view digest) { return absl::StrCat("forge:task:", digest); }
inline std::string Model(absl::string_view digest) { return absl::StrCat("forge:model:", digest); }
inline std::string JobEvents(absl::string_view job_id) {
  return absl::StrCat("forge:events:", job_id);
}
inline std::string Blob(absl::string_view sha256) { return absl::StrCat("forge:blob:", sha256); }
inline constexpr absl::string_view kSweeperLock = "forge:sweeper:lock";
inline constexpr absl::string_view kRevokedTokens = "forge:revoked:tokens";
inline constexpr absl::string_view kRevokedIdentities = "forge:revoked:identities";
inline constexpr absl::string_view kResultPrefix = "forge:result:";
inline std::string Result(absl::string_view space, absl::string_view candidate) {
  return absl::StrCat(kResultPrefix, space, ":", candidate);
}
inline std::string Candidate(absl::string_view candidate) {
  return absl::StrCat("forge:candidate:", candidate);
}
inline constexpr absl::string_view kTaskResultsPrefix = "forge:task_results:";
inline std::string TaskResults(absl::string_view space, absl::string_view task) {
  return absl::StrCat(kTaskResultsPrefix, space, ":", task);
}
inline std::string TaskState(absl::string_view space, absl::string_view task) {
  return absl::StrCat("forge:task_state:", space, ":", task);
}
inline std::string JobSearch(absl::string_view job_id) {
  return absl::StrCat("forge:job:", job_id, ":search");
}
inline constexpr absl::string_view kLeaseSequence = "forge:lease_seq";
inline constexpr absl::string_view kLeases = "forge:leases";
inline std::string Lease(absl::string_view lease_id) {
  return absl::StrCat("forge:lease:", lease_id);
}
inline constexpr absl::string_view kSchedulerClock = "forge:scheduler:clock";
inline constexpr absl::string_view kWorkerSequence = "forge:worker_seq";
inline constexpr absl::string_view kWorkers = "forge:workers";
inline std::string Worker(absl::string_view worker_id) {
  return absl::StrCat("forge:worker:", worker_id);
}
inline std::string CostModel(absl::string_view space) {
  return absl::StrCat("forge:cost_model:", space);
}
inline std::string CatalogEntry(absl::string_view key) {
  return absl::StrCat("forge:catalog:", key);
}
inline std::string CatalogByPublisher(absl::string_view identity) {
  return absl::StrCat("forge:catalog:by:", identity);
}
inline constexpr absl::string_view kCatalogBytes = "forge:catalog:bytes";
inline constexpr absl::string_view kCatalogObjectPrefix = "forge:catalog:object:";

// Fields of forge:job:{id}. The progress counters share their names with the JobProgress fields
// and are copied into every event of forge:events:{id}.
namespace job_field {
inline constexpr absl::string_view kState = "state";
inline constexpr absl::string_view kOptions = "options";
inline constexpr absl::string_view kModelDigest = "model_digest";
inline constexpr absl::string_view kCreatedMs = "created_ms";
inline constexpr absl::string_view kUpdatedMs = "updated_ms";
inline constexpr absl::string_view kError = "error";
inline constexpr absl::string_view kTasksTotal = "tasks_total";
inline constexpr absl::string_view kTasksDone = "tasks_done";
inline constexpr absl::string_view kCandidatesLeased = "candidates_leased";
inline constexpr absl::string_view kCandidatesCompleted = "candidates_completed";
inline constexpr absl::string_view kCandidatesFailed = "candidates_failed";
inline constexpr absl::string_view kBestSpeedup = "best_speedup";
}  // namespace job_field

// The field of forge:events:{id} entries that holds the JobEvent bytes.
inline constexpr absl::string_view kEventField = "event";
// The field of forge:task:{digest} that holds the KernelTask bytes.
inline constexpr absl::string_view kTaskSpecField = "spec";
// Fields of forge:blob:{sha256}.
inline constexpr absl::string_view kBlobSizeField = "size";
inline constexpr absl::string_view kBlobStoredMsField = "stored_ms";

}  // namespace forge::server::keys

#endif  // FORGE_SERVER_REDIS_KEYS_H_
