// Jobs in Redis (keys: server/redis_keys.h): their records, tasks, the state machine and the event
// stream WatchJob follows.
//
// State machine: QUEUED -> RUNNING -> DONE | FAILED | CANCELLED, and QUEUED -> FAILED | CANCELLED.
// Every change is one Lua script: it compares the current state, writes the new one, moves the
// per-state count and appends the event, so concurrent coordinators (or a scheduler racing a
// cancel) can never both win, and no state change exists without its event.
//
// Retention (for the sweeper, server/sweeper.h): Summaries lists every job's state, last change
// and model; DeleteFinishedJob removes an ended job's keys (record, tasks, events, search record,
// listing entry, per-state count); RetireModels lets the stored graphs no job names expire after a
// grace time (a new job naming one again keeps it: CreateJob and RetireModels cancel the expiry).
//
// Quota: every QUEUED or RUNNING job is listed with its owner (forge:jobs:active), entered by the
// script that admits a new job and removed by the change to a final state, so CreateJob can
// refuse an owner's job over a limit even when submits race.
//
// Errors: Redis failures keep their code (Unavailable while Redis is down), with the operation and
// key in front; NotFound for an unknown job.
#ifndef FORGE_SERVER_JOB_STORE_H_
#define FORGE_SERVER_JOB_STORE_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "common/redis/redis_client.h"
#include "forge/v1/graph.pb.h"
#include "forge/v1/service.pb.h"
#include "forge/v1/task.pb.h"

namespace forge::server {

// True for DONE, FAILED and CANCELLED: states a job never leaves.
bool IsTerminal(forge::v1::JobState state);

// Which jobs ListJobs returns; empty fields match every job.
struct JobFilter {
  std::vector<forge::v1::JobState> states;
  std::string owner;
  std::map<std::string, std::string> labels;
};

// What retention needs to know of a job.
struct JobSummary {
  std::string id;
  forge::v1::JobState state = forge::v1::JOB_STATE_UNSPECIFIED;
  absl::Time updated;  // its last change
  std::string model_digest;
};

struct JobPage {
  std::vector<forge::v1::Job> jobs;  // newest first
  std::string next_page_token;       // empty on the last page
};

class JobStore {
 public:
  static constexpr int kDefaultPageSize = 50;
  static constexpr int kMaxPageSize = 500;

  // `redis` must outlive the store; it serves every call (each is one round trip or script).
  explicit JobStore(RedisClient* redis) : redis_(redis) {}

  // Stores the model and its tasks (from the partitioner) and creates a QUEUED job with an
  // event announcing it. The caller has validated the graph and stored its blobs. With
  // `max_active_jobs` > 0, ResourceExhausted when the job's owner (options.owner) already has that
  // many jobs queued or running; nothing is stored then.
  absl::StatusOr<forge::v1::Job> CreateJob(const forge::v1::Graph& graph,
                                           const forge::v1::JobOptions& options,
                                           const std::vector<forge::v1::KernelTask>& tasks,
                                           int64_t max_active_jobs = 0);

  absl::StatusOr<forge::v1::Job> GetJob(absl::string_view job_id);

  // Moves the job from `from` to `to` atomically and appends a JobStateChanged event carrying
  // `detail` (for FAILED, also the job's error). FailedPrecondition for an edge the state machine
  // lacks; Aborted, naming the actual state, when the job is not in `from`.
  absl::StatusOr<forge::v1::Job> Transition(absl::string_view job_id, forge::v1::JobState from,
                                            forge::v1::JobState to, absl::string_view detail);

  // Moves a QUEUED or RUNNING job to CANCELLED; a job already CANCELLED is returned unchanged.
  // FailedPrecondition for a job that is DONE or FAILED.
  absl::StatusOr<forge::v1::Job> Cancel(absl::string_view job_id, absl::string_view reason);

  // Jobs matching `filter`, newest first. page_size 0 means kDefaultPageSize and is capped at
  // kMaxPageSize; page_token is the previous page's next_page_token. InvalidArgument for a
  // negative size or a token this store did not write.
  absl::StatusOr<JobPage> ListJobs(const JobFilter& filter, int page_size,
                                   absl::string_view page_token);

  // The job's tasks, by digest, with their occurrences in the job's model.
  absl::StatusOr<std::vector<forge::v1::KernelTask>> GetTasks(absl::string_view job_id);

  // The graph a job was submitted with, by Job.model_digest.
  absl::StatusOr<forge::v1::Graph> GetModel(absl::string_view model_digest);

  // Adds `delta`'s counters to the job's progress (best_speedup, the whole-model estimate, is
  // replaced when `delta` sets it above 0: it may go down as more tasks are timed) and,
  // when `event` is set, appends it to the job's stream with the progress after the change; one
  // script, so an event always carries the counters it caused. NotFound for an unknown job.
  absl::Status RecordProgress(absl::string_view job_id, const forge::v1::JobProgress& delta,
                              const forge::v1::JobEvent* event);

  // Jobs per state, every state listed (zero where there are none).
  absl::StatusOr<std::map<forge::v1::JobState, int64_t>> CountByState();

  // Every listed job, oldest first; a listed job whose record is gone is left out.
  absl::StatusOr<std::vector<JobSummary>> Summaries();
  // Removes a job that has ended (DONE, FAILED, CANCELLED) with all its keys, atomically. False,
  // and nothing removed, when the job is not in a final state or is gone already.
  absl::StatusOr<bool> DeleteFinishedJob(absl::string_view job_id);
  // Takes out of the quota's list the jobs that are gone or ended: a coordinator that died between
  // admitting a job and creating it leaves one behind. Returns how many.
  absl::StatusOr<int64_t> ForgetStaleActiveJobs();
  // Stored graphs (forge:model:*) whose digest is not in `referenced` get an expiry of `grace`
  // unless they have one; referenced ones lose theirs. Returns how many were given one now.
  absl::StatusOr<int64_t> RetireModels(const absl::flat_hash_set<std::string>& referenced,
                                       absl::Duration grace);

 private:
  RedisClient* const redis_;
};

// Follows one job's events on a Redis connection of its own, so that its blocking reads
// (XREAD BLOCK) hold up no other caller.
class JobEventReader {
 public:
  // Reads events after `resume_after` (a JobEvent.event_id), or from the first when it is empty;
  // Next() waits up to `max_wait` for new events.
  JobEventReader(const RedisClientOptions& redis, std::string job_id, std::string resume_after,
                 absl::Duration max_wait);

  // The events after the last one returned; empty when none came within max_wait (or at once, with
  // `block` false). InvalidArgument for a malformed resume_after.
  absl::StatusOr<std::vector<forge::v1::JobEvent>> Next(bool block = true);

 private:
  RedisClient connection_;
  const std::string job_id_;
  std::string last_id_;
  const absl::Duration max_wait_;
};

}  // namespace forge::server

#endif  // FORGE_SERVER_JOB_STORE_H_
