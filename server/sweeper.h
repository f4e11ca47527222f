// Garbage collection of what no live job needs: the sweeper the coordinator runs periodically.
//
// A sweep, in order:
//   1. Jobs that ended (DONE, FAILED, CANCELLED) more than `job_retention` ago are deleted with
//      every key of theirs (JobStore::DeleteFinishedJob): record, tasks, events, search record.
//      Queued and running jobs are never touched, however old. The jobs-per-owner quota forgets
//      jobs that are gone (JobStore::ForgetStaleActiveJobs).
//   2. Stored graphs (forge:model:*) that no remaining job names get an expiry of `model_grace`;
//      a job submitted with one of them meanwhile cancels it (JobStore::RetireModels).
//   3. Weight blobs that no remaining job's graph names and that were stored more than
//      `blob_grace` ago are removed, index and file (BlobStore::Remove). The grace keeps a blob a
//      client uploaded for a job it is still submitting.
//   4. The results cache, which is the product (shared by every job and owner) and outlives jobs,
//      is only bounded: past `max_results` results, the ones read least recently go
//      (ResultCache::EvictLeastRecentlyUsed). The admin's purge (Scheduler::PurgeResults) is how
//      results are removed for cause. Task specs, candidates and search snapshots stay.
//
// One sweeper at a time: every coordinator sharing a Redis runs one, and a sweep runs only while
// its coordinator holds forge:sweeper:lock (SET NX with an expiry, released by compare-and-delete,
// so a crashed holder blocks the others for `lock_ttl` at most). A sweep that fails midway leaves
// what it did done and what it did not for the next one.
//
// Metrics: forge_coordinator_swept_total{what: jobs, models, blobs, results} counts what sweeps
// removed
// (models: given their expiry), forge_coordinator_sweeps_total{outcome: done, skipped, failed}.
#ifndef FORGE_SERVER_SWEEPER_H_
#define FORGE_SERVER_SWEEPER_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/metrics/metrics.h"
#include "common/redis/redis_client.h"
#include "server/blob_store.h"
#include "server/job_store.h"
#include "server/result_cache.h"

namespace forge::server {

struct SweeperOptions {
  // How long an ended job's records stay readable (GetJob, WatchJob, GetResults).
  absl::Duration job_retention = absl::Hours(7 * 24);
  // How long a graph no job names stays before it expires.
  absl::Duration model_grace = absl::Hours(1);
  // How old an unreferenced blob must be before it is removed.
  absl::Duration blob_grace = absl::Hours(24);
  // Most results the cache keeps; 0: no bound.
  int64_t max_results = 1'000'000;
  // How long the lock lasts without being released (longer than a sweep takes).
  absl::Duration lock_ttl = absl::Minutes(10);
};

// What one sweep did.
struct SweepStats {
  bool ran = false;  // false: another coordinator holds the lock
  int64_t jobs = 0;
  int64_t models = 0;
  int64_t blobs = 0;
  int64_t results = 0;
};

class Sweeper {
 public:
  // The stores and `redis` (the lock's) must outlive the sweeper; `registry` gets its metrics
  // (aborts if it has them already: one sweeper per registry).
  Sweeper(RedisClient* redis, JobStore* jobs, BlobStore* blobs, ResultCache* results,
          metrics::Registry* registry, SweeperOptions options);

  // One sweep (above) as of `now`, if the lock is free.
  absl::StatusOr<SweepStats> Sweep(absl::Time now);

 private:
  absl::StatusOr<SweepStats> SweepLocked(absl::Time now);

  RedisClient* const redis_;
  JobStore* const jobs_;
  BlobStore* const blobs_;
  ResultCache* const results_;
  const SweeperOptions options_;
  const std::string lock_owner_;  // this sweeper's value of the lock key
  metrics::Family<metrics::Counter>* swept_;
  metrics::Family<metrics::Counter>* sweeps_;
};

}  // namespace forge::server

#endif  // FORGE_SERVER_SWEEPER_H_
