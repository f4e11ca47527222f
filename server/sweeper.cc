#include "server/sweeper.h"

#include <cstdlib>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "common/logging/logging.h"
#include "common/redis/transaction.h"
#include "common/status/status_macros.h"
#include "server/ids.h"
#include "server/redis_keys.h"

namespace forge::server {
namespace {

// Deletes the lock when it still holds this sweeper's value. KEYS: lock. ARGV: value.
constexpr char kReleaseScript[] = R"lua(
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
)lua";

metrics::Family<metrics::Counter>* AddCounter(metrics::Registry* registry,
                                              metrics::FamilyOptions options) {
  absl::StatusOr<metrics::Family<metrics::Counter>*> family =
      registry->AddCounter(std::move(options));
  if (!family.ok()) {
    GetLogger("coordinator")->critical("registering the sweeper's metrics: {}",
                                       family.status().ToString());
    std::abort();
  }
  return *family;
}

}  // namespace

Sweeper::Sweeper(RedisClient* redis, JobStore* jobs, BlobStore* blobs, ResultCache* results,
                 metrics::Registry* registry, SweeperOptions options)
    : redis_(redis),
      jobs_(jobs),
      blobs_(blobs),
      results_(results),
      options_(std::move(options)),
      lock_owner_(NewId("sweeper", 0)),
      swept_(AddCounter(registry, {"forge_coordinator_swept_total",
                                   "What the sweeper removed: ended jobs past their retention, "
                                   "graphs no job names (given an expiry), unreferenced blobs, "
                                   "results past the cache's bound.",
                                   {}})),
      sweeps_(AddCounter(registry, {"forge_coordinator_sweeps_total",
                                    "Sweeps by outcome: done, skipped (another coordinator "
                                    "holds the lock), failed.",
                                    {}})) {}

absl::StatusOr<SweepStats> Sweeper::Sweep(absl::Time now) {
  absl::StatusOr<RedisReply> locked = redis_->Command(
      {"SET", std::string(keys::kSweeperLock), lock_owner_, "NX", "PX",
       absl::StrCat(absl::ToInt64Milliseconds(options_.lock_ttl))});
  if (absl::Status status = CheckReply("taking the sweeper's lock", locked); !status.ok()) {
    sweeps_->Add({{"outcome", "failed"}}).Increment();
    return status;
  }
  if (locked->is_nil()) {
    sweeps_->Add({{"outcome", "skipped"}}).Increment();
    return SweepStats{};
  }
  absl::StatusOr<SweepStats> stats = SweepLocked(now);
  (void)redis_->Command({"EVAL", kReleaseScript, "1", std::string(keys::kSweeperLock), lock_owner_});
  sweeps_->Add({{"outcome", stats.ok() ? "done" : "failed"}}).Increment();
  if (stats.ok()) {
    LogWithFields(*GetLogger("coordinator"),
                  stats->jobs + stats->models + stats->blobs + stats->results > 0
                      ? spdlog::level::info
                                                                 : spdlog::level::debug,
                  "swept", {{"jobs", stats->jobs}, {"models", stats->models},
                            {"blobs", stats->blobs}, {"results", stats->results}});
  }
  return stats;
}

absl::StatusOr<SweepStats> Sweeper::SweepLocked(absl::Time now) {
  SweepStats stats;
  stats.ran = true;
  // 1. Ended jobs past their retention; the others name the models (and through them the blobs)
  //    that stay.
  FORGE_ASSIGN_OR_RETURN(const std::vector<JobSummary> summaries, jobs_->Summaries());
  absl::flat_hash_set<std::string> models;
  for (const JobSummary& job : summaries) {
    if (IsTerminal(job.state) && job.updated + options_.job_retention < now) {
      FORGE_ASSIGN_OR_RETURN(const bool deleted, jobs_->DeleteFinishedJob(job.id));
      if (deleted) {
        ++stats.jobs;
        swept_->Add({{"what", "jobs"}}).Increment();
        continue;
      }
    }
    if (!job.model_digest.empty()) models.insert(job.model_digest);
  }
  // The quota's list of active jobs, without jobs a crashed admission left behind.
  FORGE_RETURN_IF_ERROR(jobs_->ForgetStaleActiveJobs().status());
  // 2. Graphs no remaining job names.
  FORGE_ASSIGN_OR_RETURN(stats.models, jobs_->RetireModels(models, options_.model_grace));
  swept_->Add({{"what", "models"}}).Increment(static_cast<double>(stats.models));
  // 3. Blobs no remaining job's graph names, past their grace.
  absl::flat_hash_set<std::string> named;
  for (const std::string& digest : models) {
    absl::StatusOr<forge::v1::Graph> graph = jobs_->GetModel(digest);
    if (absl::IsNotFound(graph.status())) continue;
    FORGE_RETURN_IF_ERROR(graph.status());
    for (const forge::v1::GraphInput& input : graph->inputs()) {
      if (!input.data().sha256().empty()) named.insert(input.data().sha256());
    }
  }
  FORGE_ASSIGN_OR_RETURN(const std::vector<StoredBlob> blobs, blobs_->List());
  for (const StoredBlob& blob : blobs) {
    if (named.contains(blob.sha256) || blob.stored + options_.blob_grace >= now) continue;
    FORGE_RETURN_IF_ERROR(blobs_->Remove(blob.sha256));
    ++stats.blobs;
    swept_->Add({{"what", "blobs"}}).Increment();
  }
  // 4. The results cache's bound.
  FORGE_ASSIGN_OR_RETURN(stats.results, results_->EvictLeastRecentlyUsed(options_.max_results));
  swept_->Add({{"what", "results"}}).Increment(static_cast<double>(stats.results));
  return stats;
}

}  // namespace forge::server
