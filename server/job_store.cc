#include "server/job_store.h"

#include <algorithm>
#include <array>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/redis/transaction.h"
#include "common/status/status_macros.h"
#include "common/proto_io/deterministic.h"
#include "compiler/graph/task_digest.h"
#include "google/protobuf/util/time_util.h"
#include "server/ids.h"
#include "server/redis_keys.h"

namespace forge::server {
namespace {

using ::forge::v1::Graph;
using ::forge::v1::Job;
using ::forge::v1::JobEvent;
using ::forge::v1::JobOptions;
using ::forge::v1::JobProgress;
using ::forge::v1::JobState;
using ::forge::v1::KernelTask;
namespace field = keys::job_field;

using FieldMap = absl::flat_hash_map<std::string, std::string>;

// The JobProgress counters, as fields of the job hash and of every event.
constexpr std::array<absl::string_view, 6> kProgressFields = {
    field::kTasksTotal,          field::kTasksDone,         field::kCandidatesLeased,
    field::kCandidatesCompleted, field::kCandidatesFailed,  field::kBestSpeedup};

// Compares the state, writes the new one, moves the per-state counts, takes a job that ends out
// of the active jobs and appends the event with the progress counters copied from the job.
// KEYS: job hash, event stream, per-state counts, active jobs. ARGV: expected state, new state,
// now (ms), event bytes, error ("" leaves it), job id, "1" when the new state is final, counter
// names.
// Returns {0} for a missing job, {1, actual state} for a mismatch, {2, event id} on success.
constexpr char kTransitionScript[] = R"lua(
local current = redis.call('HGET', KEYS[1], 'state')
if not current then return {0} end
if current ~= ARGV[1] then return {1, current} end
redis.call('HSET', KEYS[1], 'state', ARGV[2], 'updated_ms', ARGV[3])
if ARGV[5] ~= '' then redis.call('HSET', KEYS[1], 'error', ARGV[5]) end
redis.call('HINCRBY', KEYS[3], ARGV[1], -1)
redis.call('HINCRBY', KEYS[3], ARGV[2], 1)
if ARGV[7] == '1' then redis.call('HDEL', KEYS[4], ARGV[6]) end
local entry = {'event', ARGV[4]}
for i = 8, #ARGV do
  entry[#entry + 1] = ARGV[i]
  entry[#entry + 1] = redis.call('HGET', KEYS[1], ARGV[i]) or '0'
end
return {2, redis.call('XADD', KEYS[2], '*', unpack(entry))}
)lua";

// Admits a job under its owner's quota. KEYS: active jobs. ARGV: owner, limit (0: none), job id.
// Returns -1 when admitted (the job is entered), else the owner's active jobs.
constexpr char kAdmitScript[] = R"lua(
local active = 0
local entries = redis.call('HGETALL', KEYS[1])
for i = 2, #entries, 2 do
  if entries[i] == ARGV[1] then active = active + 1 end
end
local limit = tonumber(ARGV[2])
if limit > 0 and active >= limit then return active end
redis.call('HSET', KEYS[1], ARGV[3], ARGV[1])
return -1
)lua";

// Deletes an ended job's keys. KEYS: job hash, tasks, events, search record, job listing,
// per-state counts, active jobs. ARGV: job id, then the final state names. Returns 1 when deleted.
constexpr char kDeleteFinishedScript[] = R"lua(
local state = redis.call('HGET', KEYS[1], 'state')
if not state then return 0 end
local final = false
for i = 2, #ARGV do
  if ARGV[i] == state then final = true end
end
if not final then return 0 end
redis.call('DEL', KEYS[1], KEYS[2], KEYS[3], KEYS[4])
redis.call('ZREM', KEYS[5], ARGV[1])
redis.call('HINCRBY', KEYS[6], state, -1)
redis.call('HDEL', KEYS[7], ARGV[1])
return 1
)lua";

// Adds counters, sets the best speedup when one is given (> 0) and appends the event (if any)
// with the progress after the change. KEYS: job hash, event stream. ARGV: now (ms), event bytes
// ("" for none), best speedup, then (counter name, increment) pairs. Returns 0 for a missing job,
// 1 otherwise.
constexpr char kProgressScript[] = R"lua(
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
for i = 4, #ARGV, 2 do
  if ARGV[i + 1] ~= '0' then redis.call('HINCRBY', KEYS[1], ARGV[i], ARGV[i + 1]) end
end
if tonumber(ARGV[3]) > 0 then redis.call('HSET', KEYS[1], 'best_speedup', ARGV[3]) end
redis.call('HSET', KEYS[1], 'updated_ms', ARGV[1])
if ARGV[2] ~= '' then
  local entry = {'event', ARGV[2]}
  for i = 4, #ARGV, 2 do
    entry[#entry + 1] = ARGV[i]
    entry[#entry + 1] = redis.call('HGET', KEYS[1], ARGV[i]) or '0'
  end
  entry[#entry + 1] = 'best_speedup'
  entry[#entry + 1] = redis.call('HGET', KEYS[1], 'best_speedup')
  redis.call('XADD', KEYS[2], '*', unpack(entry))
end
return 1
)lua";

std::string StateName(JobState state) { return forge::v1::JobState_Name(state); }

bool IsLegalTransition(JobState from, JobState to) {
  switch (from) {
    case forge::v1::JOB_STATE_QUEUED:
      return to == forge::v1::JOB_STATE_RUNNING || to == forge::v1::JOB_STATE_FAILED ||
             to == forge::v1::JOB_STATE_CANCELLED;
    case forge::v1::JOB_STATE_RUNNING:
      return IsTerminal(to);
    default:
      return false;
  }
}

int64_t NowMillis() { return absl::ToUnixMillis(absl::Now()); }

// A reply that is an error, or not what the command promises, as a Status naming the operation.
absl::Status UnexpectedReply(absl::string_view operation, const RedisReply& reply) {
  return absl::InternalError(
      absl::StrCat(operation, ": unexpected reply from redis: ", reply.DebugString()));
}

int64_t IntField(const FieldMap& fields, absl::string_view name) {
  int64_t value = 0;
  auto it = fields.find(name);
  if (it != fields.end() && !absl::SimpleAtoi(it->second, &value)) value = 0;
  return value;
}

JobProgress ProgressFromFields(const FieldMap& fields) {
  JobProgress progress;
  progress.set_tasks_total(static_cast<int32_t>(IntField(fields, field::kTasksTotal)));
  progress.set_tasks_done(static_cast<int32_t>(IntField(fields, field::kTasksDone)));
  progress.set_candidates_leased(IntField(fields, field::kCandidatesLeased));
  progress.set_candidates_completed(IntField(fields, field::kCandidatesCompleted));
  progress.set_candidates_failed(IntField(fields, field::kCandidatesFailed));
  double speedup = 1.0;
  auto it = fields.find(field::kBestSpeedup);
  if (it != fields.end() && !absl::SimpleAtod(it->second, &speedup)) speedup = 1.0;
  progress.set_best_speedup(speedup);
  return progress;
}

std::vector<std::string> ProgressFieldArgs(const JobProgress& progress) {
  return {std::string(field::kTasksTotal),          absl::StrCat(progress.tasks_total()),
          std::string(field::kTasksDone),           absl::StrCat(progress.tasks_done()),
          std::string(field::kCandidatesLeased),    absl::StrCat(progress.candidates_leased()),
          std::string(field::kCandidatesCompleted), absl::StrCat(progress.candidates_completed()),
          std::string(field::kCandidatesFailed),    absl::StrCat(progress.candidates_failed()),
          std::string(field::kBestSpeedup),         absl::StrCat(progress.best_speedup())};
}

absl::StatusOr<Job> JobFromFields(absl::string_view job_id, const FieldMap& fields) {
  Job job;
  job.set_id(std::string(job_id));
  JobState state;
  auto it = fields.find(field::kState);
  if (it == fields.end() || !forge::v1::JobState_Parse(it->second, &state)) {
    return absl::DataLossError(
        absl::StrCat(keys::Job(job_id), ": field \"state\" is missing or unknown"));
  }
  job.set_state(state);
  it = fields.find(field::kOptions);
  if (it != fields.end() && !job.mutable_options()->ParseFromString(it->second)) {
    return absl::DataLossError(absl::StrCat(keys::Job(job_id), ": field \"options\" is corrupt"));
  }
  *job.mutable_progress() = ProgressFromFields(fields);
  if (auto digest = fields.find(field::kModelDigest); digest != fields.end()) {
    job.set_model_digest(digest->second);
  }
  if (auto error = fields.find(field::kError); error != fields.end()) {
    job.set_error(error->second);
  }
  *job.mutable_created_at() =
      google::protobuf::util::TimeUtil::MillisecondsToTimestamp(IntField(fields, field::kCreatedMs));
  *job.mutable_updated_at() =
      google::protobuf::util::TimeUtil::MillisecondsToTimestamp(IntField(fields, field::kUpdatedMs));
  return job;
}

// A JobEvent with only what happened and when; ids and progress are added when it is read.
std::string EventBytes(JobState previous, JobState current, absl::string_view detail,
                       int64_t now_ms) {
  JobEvent event;
  *event.mutable_time() = google::protobuf::util::TimeUtil::MillisecondsToTimestamp(now_ms);
  auto* changed = event.mutable_state_changed();
  changed->set_previous(previous);
  changed->set_current(current);
  changed->set_detail(std::string(detail));
  return event.SerializeAsString();
}

bool Matches(const Job& job, const JobFilter& filter) {
  if (!filter.states.empty() &&
      std::find(filter.states.begin(), filter.states.end(), job.state()) == filter.states.end()) {
    return false;
  }
  if (!filter.owner.empty() && job.options().owner() != filter.owner) return false;
  for (const auto& [key, value] : filter.labels) {
    auto it = job.options().labels().find(key);
    if (it == job.options().labels().end() || it->second != value) return false;
  }
  return true;
}

}  // namespace

bool IsTerminal(JobState state) {
  return state == forge::v1::JOB_STATE_DONE || state == forge::v1::JOB_STATE_FAILED ||
         state == forge::v1::JOB_STATE_CANCELLED;
}

absl::StatusOr<Job> JobStore::CreateJob(const Graph& graph, const JobOptions& options,
                                        const std::vector<KernelTask>& tasks,
                                        int64_t max_active_jobs) {
  absl::StatusOr<RedisReply> sequence = redis_->Command({"INCR", std::string(keys::kJobSequence)});
  if (!sequence.ok()) return Annotate(sequence.status(), "allocating a job id");
  if (!sequence->is_integer()) return UnexpectedReply("allocating a job id", *sequence);
  const std::string job_id = NewId("job", sequence->integer());
  absl::StatusOr<RedisReply> admitted =
      redis_->Command({"EVAL", kAdmitScript, "1", std::string(keys::kActiveJobs), options.owner(),
                       absl::StrCat(max_active_jobs), job_id});
  FORGE_RETURN_IF_ERROR(CheckReply("admitting a job", admitted));
  if (!admitted->is_integer()) return UnexpectedReply("admitting a job", *admitted);
  if (admitted->integer() >= 0) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "owner \"", options.owner(), "\" has ", admitted->integer(),
        " jobs queued or running, the most allowed (intake.max-active-jobs-per-owner = ",
        max_active_jobs, "); wait for one to end or cancel one"));
  }
  const std::string model_digest = graph::ModelDigest(graph);
  const int64_t now_ms = NowMillis();
  const std::string queued = StateName(forge::v1::JOB_STATE_QUEUED);

  JobProgress progress;
  progress.set_tasks_total(static_cast<int32_t>(tasks.size()));
  progress.set_best_speedup(1.0);

  std::vector<std::vector<std::string>> commands;
  commands.push_back({"SET", keys::Model(model_digest), SerializeDeterministic(graph), "NX"});
  // A model the sweeper let expire (no job named it) is named again: it stays.
  commands.push_back({"PERSIST", keys::Model(model_digest)});
  std::vector<std::string> occurrences = {"HSET", keys::JobTasks(job_id)};
  for (const KernelTask& task : tasks) {
    KernelTask shared = task;  // the per-model fields stay with the job
    shared.clear_occurrences();
    shared.clear_baseline_share();
    commands.push_back({"HSETNX", keys::Task(task.digest()), std::string(keys::kTaskSpecField),
                        shared.SerializeAsString()});
    occurrences.push_back(task.digest());
    occurrences.push_back(absl::StrCat(task.occurrences()));
  }
  if (!tasks.empty()) commands.push_back(std::move(occurrences));
  std::vector<std::string> job_fields = {
      "HSET", keys::Job(job_id),
      std::string(field::kState), queued,
      std::string(field::kOptions), options.SerializeAsString(),
      std::string(field::kModelDigest), model_digest,
      std::string(field::kCreatedMs), absl::StrCat(now_ms),
      std::string(field::kUpdatedMs), absl::StrCat(now_ms)};
  std::vector<std::string> event = {
      "XADD", keys::JobEvents(job_id), "*", std::string(keys::kEventField),
      EventBytes(forge::v1::JOB_STATE_UNSPECIFIED, forge::v1::JOB_STATE_QUEUED,
                 absl::StrCat("submitted with ", tasks.size(), " tasks"), now_ms)};
  for (std::string& arg : ProgressFieldArgs(progress)) {
    job_fields.push_back(arg);
    event.push_back(std::move(arg));
  }
  commands.push_back(std::move(job_fields));
  commands.push_back({"ZADD", std::string(keys::kJobs), absl::StrCat(sequence->integer()), job_id});
  commands.push_back({"HINCRBY", std::string(keys::kJobsByState), queued, "1"});
  commands.push_back(std::move(event));
  absl::Status created =
      Transaction(*redis_, absl::StrCat("creating ", keys::Job(job_id)), std::move(commands));
  if (!created.ok()) {
    // The job does not exist: its place in the quota is given back (the sweeper drops it too).
    (void)redis_->Command({"HDEL", std::string(keys::kActiveJobs), job_id});
    return created;
  }
  return GetJob(job_id);
}

absl::StatusOr<Job> JobStore::GetJob(absl::string_view job_id) {
  const std::string key = keys::Job(job_id);
  absl::StatusOr<RedisReply> reply = redis_->Command({"HGETALL", key});
  if (!reply.ok()) return Annotate(reply.status(), absl::StrCat("reading ", key));
  if (!reply->is_array()) return UnexpectedReply(absl::StrCat("reading ", key), *reply);
  if (reply->elements().empty()) {
    return absl::NotFoundError(absl::StrCat("job \"", job_id, "\" not found"));
  }
  return JobFromFields(job_id, HashFields(*reply));
}

absl::StatusOr<Job> JobStore::Transition(absl::string_view job_id, JobState from, JobState to,
                                         absl::string_view detail) {
  if (!IsLegalTransition(from, to)) {
    return absl::FailedPreconditionError(absl::StrCat("job ", job_id, ": no transition from ",
                                                      StateName(from), " to ", StateName(to)));
  }
  const int64_t now_ms = NowMillis();
  std::vector<std::string> command = {
      "EVAL", kTransitionScript, "4", keys::Job(job_id), keys::JobEvents(job_id),
      std::string(keys::kJobsByState), std::string(keys::kActiveJobs), StateName(from),
      StateName(to), absl::StrCat(now_ms), EventBytes(from, to, detail, now_ms),
      to == forge::v1::JOB_STATE_FAILED ? std::string(detail) : std::string(),
      std::string(job_id), IsTerminal(to) ? "1" : "0"};
  for (absl::string_view name : kProgressFields) command.emplace_back(name);

  const std::string operation = absl::StrCat("moving ", keys::Job(job_id), " to ", StateName(to));
  absl::StatusOr<RedisReply> reply = redis_->Command(command);
  if (!reply.ok()) return Annotate(reply.status(), operation);
  if (!reply->is_array() || reply->elements().empty()) return UnexpectedReply(operation, *reply);
  switch (reply->elements()[0].integer()) {
    case 0:
      return absl::NotFoundError(absl::StrCat("job \"", job_id, "\" not found"));
    case 1:
      return absl::AbortedError(absl::StrCat("job ", job_id, " is ",
                                             reply->elements()[1].str(), ", not ",
                                             StateName(from)));
    default:
      return GetJob(job_id);
  }
}

absl::StatusOr<Job> JobStore::Cancel(absl::string_view job_id, absl::string_view reason) {
  // A scheduler may move the job between the read and the script; then read again. Each retry
  // means the job advanced, and it can advance only twice before it is terminal.
  for (;;) {
    FORGE_ASSIGN_OR_RETURN(Job job, GetJob(job_id));
    if (job.state() == forge::v1::JOB_STATE_CANCELLED) return job;
    if (IsTerminal(job.state())) {
      return absl::FailedPreconditionError(absl::StrCat(
          "job ", job_id, " is already ", StateName(job.state()), " and cannot be cancelled"));
    }
    absl::StatusOr<Job> cancelled =
        Transition(job_id, job.state(), forge::v1::JOB_STATE_CANCELLED,
                   reason.empty() ? "cancelled" : reason);
    if (!absl::IsAborted(cancelled.status())) return cancelled;
  }
}

absl::StatusOr<JobPage> JobStore::ListJobs(const JobFilter& filter, int page_size,
                                           absl::string_view page_token) {
  if (page_size < 0) {
    return absl::InvalidArgumentError(absl::StrCat("page_size is negative: ", page_size));
  }
  if (page_size == 0) page_size = kDefaultPageSize;
  page_size = std::min(page_size, kMaxPageSize);
  int64_t cursor = 0;
  if (!page_token.empty() && (!absl::SimpleAtoi(page_token, &cursor) || cursor <= 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("page_token \"", page_token, "\" is not a token ListJobs returned"));
  }
  // The token is the number of the last job returned; the next page starts below it. Filters are
  // applied here, so a scan reads jobs in batches until it has one match more than the page holds.
  std::string max_score = page_token.empty() ? "+inf" : absl::StrCat("(", cursor);
  const int batch = std::max(page_size + 1, 100);
  JobPage page;
  std::vector<std::pair<Job, std::string>> matches;  // with the job's number
  while (static_cast<int>(matches.size()) <= page_size) {
    absl::StatusOr<RedisReply> ids =
        redis_->Command({"ZREVRANGEBYSCORE", std::string(keys::kJobs), max_score, "-inf",
                         "WITHSCORES", "LIMIT", "0", absl::StrCat(batch)});
    if (!ids.ok()) return Annotate(ids.status(), absl::StrCat("listing ", keys::kJobs));
    if (!ids->is_array()) return UnexpectedReply(absl::StrCat("listing ", keys::kJobs), *ids);
    const std::vector<RedisReply>& entries = ids->elements();
    if (entries.empty()) break;
    std::vector<std::vector<std::string>> reads;
    for (size_t i = 0; i + 1 < entries.size(); i += 2) {
      reads.push_back({"HGETALL", keys::Job(entries[i].str())});
    }
    absl::StatusOr<std::vector<RedisReply>> hashes = redis_->Pipeline(reads);
    if (!hashes.ok()) return Annotate(hashes.status(), "reading listed jobs");
    for (size_t i = 0; i < hashes->size(); ++i) {
      const std::string& job_id = entries[2 * i].str();
      const RedisReply& hash = (*hashes)[i];
      if (hash.is_error()) return UnexpectedReply(absl::StrCat("reading job ", job_id), hash);
      if (hash.elements().empty()) continue;  // listed but its record is gone
      FORGE_ASSIGN_OR_RETURN(Job job, JobFromFields(job_id, HashFields(hash)));
      if (Matches(job, filter)) matches.emplace_back(std::move(job), entries[2 * i + 1].str());
    }
    max_score = absl::StrCat("(", entries.back().str());
    if (static_cast<int>(entries.size()) < 2 * batch) break;
  }
  if (static_cast<int>(matches.size()) > page_size) {
    matches.resize(page_size);
    page.next_page_token = matches.back().second;
  }
  for (auto& [job, number] : matches) page.jobs.push_back(std::move(job));
  return page;
}

absl::StatusOr<std::vector<KernelTask>> JobStore::GetTasks(absl::string_view job_id) {
  const std::string key = keys::JobTasks(job_id);
  absl::StatusOr<RedisReply> reply = redis_->Command({"HGETALL", key});
  if (!reply.ok()) return Annotate(reply.status(), absl::StrCat("reading ", key));
  const FieldMap occurrences = HashFields(*reply);
  std::vector<std::vector<std::string>> reads;
  std::vector<std::string> digests;
  for (const auto& [digest, count] : occurrences) {
    digests.push_back(digest);
    reads.push_back({"HGET", keys::Task(digest), std::string(keys::kTaskSpecField)});
  }
  std::vector<KernelTask> tasks;
  if (reads.empty()) return tasks;
  absl::StatusOr<std::vector<RedisReply>> specs = redis_->Pipeline(reads);
  if (!specs.ok()) return Annotate(specs.status(), absl::StrCat("reading the tasks of ", job_id));
  for (size_t i = 0; i < digests.size(); ++i) {
    KernelTask task;
    if (!(*specs)[i].is_bulk_string() || !task.ParseFromString((*specs)[i].str())) {
      return absl::DataLossError(
          absl::StrCat(keys::Task(digests[i]), ": field \"spec\" is missing or corrupt"));
    }
    task.set_occurrences(static_cast<int32_t>(IntField(occurrences, digests[i])));
    tasks.push_back(std::move(task));
  }
  return tasks;
}

absl::StatusOr<Graph> JobStore::GetModel(absl::string_view model_digest) {
  const std::string key = keys::Model(model_digest);
  absl::StatusOr<RedisReply> reply = redis_->Command({"GET", key});
  if (!reply.ok()) return Annotate(reply.status(), absl::StrCat("reading ", key));
  if (reply->is_nil()) return absl::NotFoundError(absl::StrCat("model ", model_digest, " not found"));
  Graph graph;
  if (!graph.ParseFromString(reply->str())) {
    return absl::DataLossError(absl::StrCat(key, ": not a forge.v1.Graph"));
  }
  return graph;
}

absl::Status JobStore::RecordProgress(absl::string_view job_id, const JobProgress& delta,
                                      const JobEvent* event) {
  const int64_t now_ms = NowMillis();
  std::string event_bytes;
  if (event != nullptr) {
    JobEvent stored = *event;  // ids and progress are added when it is read
    stored.clear_event_id();
    stored.clear_job_id();
    stored.clear_progress();
    if (!stored.has_time()) {
      *stored.mutable_time() = google::protobuf::util::TimeUtil::MillisecondsToTimestamp(now_ms);
    }
    event_bytes = stored.SerializeAsString();
  }
  std::vector<std::string> command = {"EVAL",
                                      kProgressScript,
                                      "2",
                                      keys::Job(job_id),
                                      keys::JobEvents(job_id),
                                      absl::StrCat(now_ms),
                                      event_bytes,
                                      absl::StrCat(delta.best_speedup()),
                                      std::string(field::kTasksTotal),
                                      absl::StrCat(delta.tasks_total()),
                                      std::string(field::kTasksDone),
                                      absl::StrCat(delta.tasks_done()),
                                      std::string(field::kCandidatesLeased),
                                      absl::StrCat(delta.candidates_leased()),
                                      std::string(field::kCandidatesCompleted),
                                      absl::StrCat(delta.candidates_completed()),
                                      std::string(field::kCandidatesFailed),
                                      absl::StrCat(delta.candidates_failed())};
  const std::string operation = absl::StrCat("recording progress of ", keys::Job(job_id));
  absl::StatusOr<RedisReply> reply = redis_->Command(command);
  if (!reply.ok()) return Annotate(reply.status(), operation);
  if (!reply->is_integer()) return UnexpectedReply(operation, *reply);
  if (reply->integer() == 0) {
    return absl::NotFoundError(absl::StrCat("job \"", job_id, "\" not found"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::map<JobState, int64_t>> JobStore::CountByState() {
  absl::StatusOr<RedisReply> reply = redis_->Command({"HGETALL", std::string(keys::kJobsByState)});
  if (!reply.ok()) return Annotate(reply.status(), absl::StrCat("reading ", keys::kJobsByState));
  const FieldMap counts = HashFields(*reply);
  std::map<JobState, int64_t> by_state;
  for (int value = forge::v1::JobState_MIN + 1; value <= forge::v1::JobState_MAX; ++value) {
    const JobState state = static_cast<JobState>(value);
    by_state[state] = IntField(counts, StateName(state));
  }
  return by_state;
}

absl::StatusOr<std::vector<JobSummary>> JobStore::Summaries() {
  const std::string operation = absl::StrCat("listing ", keys::kJobs);
  absl::StatusOr<RedisReply> ids = redis_->Command({"ZRANGE", std::string(keys::kJobs), "0", "-1"});
  FORGE_RETURN_IF_ERROR(CheckReply(operation, ids));
  std::vector<std::vector<std::string>> reads;
  for (const RedisReply& id : ids->elements()) {
    reads.push_back({"HMGET", keys::Job(id.str()), std::string(field::kState),
                     std::string(field::kUpdatedMs), std::string(field::kModelDigest)});
  }
  std::vector<JobSummary> summaries;
  if (reads.empty()) return summaries;
  absl::StatusOr<std::vector<RedisReply>> records = redis_->Pipeline(reads);
  if (!records.ok()) return Annotate(records.status(), operation);
  for (size_t i = 0; i < records->size(); ++i) {
    const RedisReply& record = (*records)[i];
    if (record.is_error()) return UnexpectedReply(operation, record);
    if (record.elements().size() != 3 || record.elements()[0].is_nil()) continue;  // gone
    JobSummary summary;
    summary.id = ids->elements()[i].str();
    if (!forge::v1::JobState_Parse(record.elements()[0].str(), &summary.state)) {
      return absl::DataLossError(
          absl::StrCat(keys::Job(summary.id), ": field \"state\" is unknown"));
    }
    int64_t updated_ms = 0;
    (void)absl::SimpleAtoi(record.elements()[1].str(), &updated_ms);
    summary.updated = absl::FromUnixMillis(updated_ms);
    summary.model_digest = record.elements()[2].str();
    summaries.push_back(std::move(summary));
  }
  return summaries;
}

absl::StatusOr<bool> JobStore::DeleteFinishedJob(absl::string_view job_id) {
  const std::string operation = absl::StrCat("deleting ", keys::Job(job_id));
  absl::StatusOr<RedisReply> reply = redis_->Command(
      {"EVAL", kDeleteFinishedScript, "7", keys::Job(job_id), keys::JobTasks(job_id),
       keys::JobEvents(job_id), keys::JobSearch(job_id), std::string(keys::kJobs),
       std::string(keys::kJobsByState), std::string(keys::kActiveJobs), std::string(job_id),
       StateName(forge::v1::JOB_STATE_DONE), StateName(forge::v1::JOB_STATE_FAILED),
       StateName(forge::v1::JOB_STATE_CANCELLED)});
  FORGE_RETURN_IF_ERROR(CheckReply(operation, reply));
  return reply->integer() == 1;
}

absl::StatusOr<int64_t> JobStore::ForgetStaleActiveJobs() {
  const std::string operation = absl::StrCat("reading ", keys::kActiveJobs);
  absl::StatusOr<RedisReply> active = redis_->Command({"HKEYS", std::string(keys::kActiveJobs)});
  FORGE_RETURN_IF_ERROR(CheckReply(operation, active));
  std::vector<std::vector<std::string>> reads;
  for (const RedisReply& id : active->elements()) {
    reads.push_back({"HGET", keys::Job(id.str()), std::string(field::kState)});
  }
  if (reads.empty()) return 0;
  absl::StatusOr<std::vector<RedisReply>> states = redis_->Pipeline(reads);
  if (!states.ok()) return Annotate(states.status(), operation);
  std::vector<std::string> stale = {"HDEL", std::string(keys::kActiveJobs)};
  for (size_t i = 0; i < states->size(); ++i) {
    JobState state = forge::v1::JOB_STATE_UNSPECIFIED;
    const RedisReply& reply = (*states)[i];
    if (reply.is_error()) return UnexpectedReply(operation, reply);
    if (reply.is_nil() || (forge::v1::JobState_Parse(reply.str(), &state) && IsTerminal(state))) {
      stale.push_back(active->elements()[i].str());
    }
  }
  if (stale.size() == 2) return 0;
  FORGE_RETURN_IF_ERROR(CheckReply(absl::StrCat("updating ", keys::kActiveJobs),
                                   redis_->Command(stale)));
  return static_cast<int64_t>(stale.size()) - 2;
}

absl::StatusOr<int64_t> JobStore::RetireModels(const absl::flat_hash_set<std::string>& referenced,
                                               absl::Duration grace) {
  const std::string prefix = keys::Model("");
  FORGE_ASSIGN_OR_RETURN(const std::vector<std::string> models,
                         ScanKeys(*redis_, absl::StrCat(prefix, "*")));
  std::vector<std::vector<std::string>> commands;
  std::vector<bool> expiring;
  for (const std::string& key : models) {
    const bool named = referenced.contains(absl::string_view(key).substr(prefix.size()));
    // EXPIRE NX: a model already expiring keeps its first deadline.
    commands.push_back(named ? std::vector<std::string>{"PERSIST", key}
                             : std::vector<std::string>{"PEXPIRE", key,
                                                        absl::StrCat(absl::ToInt64Milliseconds(
                                                            std::max(grace, absl::Milliseconds(1)))),
                                                        "NX"});
    expiring.push_back(!named);
  }
  if (commands.empty()) return 0;
  absl::StatusOr<std::vector<RedisReply>> replies = redis_->Pipeline(commands);
  if (!replies.ok()) return Annotate(replies.status(), "retiring models");
  int64_t retired = 0;
  for (size_t i = 0; i < replies->size(); ++i) {
    const RedisReply& reply = (*replies)[i];
    if (reply.is_error()) return UnexpectedReply("retiring models", reply);
    if (expiring[i] && reply.integer() == 1) ++retired;
  }
  return retired;
}

namespace {

RedisClientOptions WithCommandTimeout(RedisClientOptions options, absl::Duration max_wait) {
  // The reply to XREAD BLOCK comes only after the wait.
  options.command_timeout += max_wait;
  return options;
}

}  // namespace

JobEventReader::JobEventReader(const RedisClientOptions& redis, std::string job_id,
                               std::string resume_after, absl::Duration max_wait)
    : connection_(WithCommandTimeout(redis, max_wait)),
      job_id_(std::move(job_id)),
      last_id_(resume_after.empty() ? "0-0" : std::move(resume_after)),
      max_wait_(max_wait) {}

absl::StatusOr<std::vector<JobEvent>> JobEventReader::Next(bool block) {
  const std::string key = keys::JobEvents(job_id_);
  std::vector<std::string> command = {"XREAD", "COUNT", "100"};
  if (block) {
    command.push_back("BLOCK");
    command.push_back(absl::StrCat(std::max<int64_t>(1, absl::ToInt64Milliseconds(max_wait_))));
  }
  command.insert(command.end(), {"STREAMS", key, last_id_});
  absl::StatusOr<RedisReply> reply = connection_.Command(command);
  if (!reply.ok()) {
    if (absl::IsFailedPrecondition(reply.status())) {  // Redis rejected the id
      return absl::InvalidArgumentError(
          absl::StrCat("resume_after \"", last_id_, "\" is not an event id of job ", job_id_));
    }
    return Annotate(reply.status(), absl::StrCat("reading ", key));
  }
  std::vector<JobEvent> events;
  if (reply->is_nil()) return events;  // nothing within the wait
  // [[key, [[id, [field, value, ...]], ...]]]
  if (!reply->is_array() || reply->elements().size() != 1 ||
      reply->elements()[0].elements().size() != 2) {
    return UnexpectedReply(absl::StrCat("reading ", key), *reply);
  }
  for (const RedisReply& entry : reply->elements()[0].elements()[1].elements()) {
    if (entry.elements().size() != 2) return UnexpectedReply(absl::StrCat("reading ", key), entry);
    const std::string& id = entry.elements()[0].str();
    const FieldMap fields = HashFields(entry.elements()[1]);
    JobEvent event;
    auto bytes = fields.find(keys::kEventField);
    if (bytes == fields.end() || !event.ParseFromString(bytes->second)) {
      return absl::DataLossError(absl::StrCat(key, " entry ", id, ": no readable event"));
    }
    event.set_event_id(id);
    event.set_job_id(job_id_);
    *event.mutable_progress() = ProgressFromFields(fields);
    events.push_back(std::move(event));
    last_id_ = id;
  }
  return events;
}

}  // namespace forge::server
