#include "server/job_store.h"

#include <filesystem>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "compiler/graph/task_digest.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/support/redis_server.h"

namespace forge::server {
namespace {

using ::forge::v1::Graph;
using ::forge::v1::Job;
using ::forge::v1::JobEvent;
using ::forge::v1::JobOptions;
using ::forge::v1::KernelTask;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::MatchesRegex;
using ::testing::SizeIs;

constexpr auto kQueued = forge::v1::JOB_STATE_QUEUED;
constexpr auto kRunning = forge::v1::JOB_STATE_RUNNING;
constexpr auto kDone = forge::v1::JOB_STATE_DONE;
constexpr auto kFailed = forge::v1::JOB_STATE_FAILED;
constexpr auto kCancelled = forge::v1::JOB_STATE_CANCELLED;

// A graph and tasks as the partitioner would give them; the store keeps them as given.
Graph SmallGraph(const std::string& name) {
  Graph graph;
  graph.mutable_metadata()->set_name(name);
  return graph;
}

std::vector<KernelTask> Tasks(int count) {
  std::vector<KernelTask> tasks;
  for (int i = 0; i < count; ++i) {
    KernelTask task;
    task.set_digest(std::string(63, 'a') + static_cast<char>('0' + i));
    task.set_family(forge::v1::KERNEL_FAMILY_POINTWISE);
    task.set_occurrences(i + 1);
    tasks.push_back(std::move(task));
  }
  return tasks;
}

class JobStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<std::unique_ptr<testing::RedisServer>> server = testing::RedisServer::Start();
    ASSERT_TRUE(server.ok()) << server.status();
    redis_server_ = *std::move(server);
    redis_ = std::make_unique<RedisClient>(redis_options());
    store_ = std::make_unique<JobStore>(redis_.get());
  }

  RedisClientOptions redis_options() const {
    return {.host = redis_server_->host(), .port = redis_server_->port()};
  }

  Job Create(const std::string& owner = "", std::map<std::string, std::string> labels = {}) {
    JobOptions options;
    options.set_owner(owner);
    options.mutable_labels()->insert(labels.begin(), labels.end());
    absl::StatusOr<Job> job = store_->CreateJob(SmallGraph("m"), options, Tasks(3));
    EXPECT_TRUE(job.ok()) << job.status();
    return job.ok() ? *job : Job();
  }

  std::vector<JobEvent> AllEvents(const std::string& job_id) {
    JobEventReader reader(redis_options(), job_id, "", absl::Milliseconds(10));
    absl::StatusOr<std::vector<JobEvent>> events = reader.Next(/*block=*/false);
    EXPECT_TRUE(events.ok()) << events.status();
    return events.ok() ? *events : std::vector<JobEvent>();
  }

  std::unique_ptr<testing::RedisServer> redis_server_;
  std::unique_ptr<RedisClient> redis_;
  std::unique_ptr<JobStore> store_;
};

// Redis lost its last second of writes (a host crash with appendfsync everysec): the job counter
// is back where it was while a job it numbered survives (or its id is held by a client). The next
// job gets the same number but another id, and the existing job is untouched.
TEST_F(JobStoreTest, AJobIdIsNotHandedOutAgainAfterTheCounterRollsBack) {
  const Job first = Create("alice");
  ASSERT_TRUE(redis_->Command({"SET", "forge:job_seq", "0"}).ok());
  JobOptions options;
  options.set_owner("bob");
  absl::StatusOr<Job> second = store_->CreateJob(SmallGraph("other"), options, Tasks(1));
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_NE(second->id(), first.id());
  absl::StatusOr<Job> kept = store_->GetJob(first.id());
  ASSERT_TRUE(kept.ok()) << kept.status();
  EXPECT_EQ(kept->options().owner(), "alice");
  EXPECT_EQ(kept->progress().tasks_total(), 3);
  EXPECT_THAT(*store_->GetTasks(first.id()), SizeIs(3));
  EXPECT_EQ(AllEvents(first.id()).size(), 1u) << "no second job's events in its stream";
  absl::StatusOr<JobPage> listed = store_->ListJobs({}, 10, "");
  ASSERT_TRUE(listed.ok()) << listed.status();
  EXPECT_THAT(listed->jobs, SizeIs(2));
}

// The same with a real rollback: Redis's append-only file loses the last job's writes (restored
// from a copy taken before them, as a host crash under appendfsync everysec does). The job id the
// lost job's client holds is not handed to the next job, which gets the same number.
TEST(JobStoreRollbackTest, TheAofLosesTheLastJobAndItsIdIsNotHandedOutAgain) {
  absl::StatusOr<std::unique_ptr<testing::RedisServer>> server =
      testing::RedisServer::Start({.append_only = true, .append_fsync = "always"});
  ASSERT_TRUE(server.ok()) << server.status();
  RedisClient redis({.host = (*server)->host(), .port = (*server)->port()});
  JobStore store(&redis);
  JobOptions options;
  options.set_owner("alice");
  absl::StatusOr<Job> kept = store.CreateJob(SmallGraph("kept"), options, Tasks(1));
  ASSERT_TRUE(kept.ok()) << kept.status();
  const std::filesystem::path dir = (*server)->dir();
  (*server)->Stop();
  std::filesystem::copy(dir / "appendonlydir", dir / "before",
                        std::filesystem::copy_options::recursive);
  ASSERT_TRUE((*server)->Restart().ok());
  options.set_owner("bob");
  absl::StatusOr<Job> lost = store.CreateJob(SmallGraph("lost"), options, Tasks(1));
  ASSERT_TRUE(lost.ok()) << lost.status();

  (*server)->Stop();
  std::filesystem::remove_all(dir / "appendonlydir");
  std::filesystem::rename(dir / "before", dir / "appendonlydir");
  ASSERT_TRUE((*server)->Restart().ok());
  absl::StatusOr<Job> next;
  for (int attempt = 0; attempt < 20; ++attempt) {  // the client reconnects after the restart
    options.set_owner("carol");
    next = store.CreateJob(SmallGraph("next"), options, Tasks(1));
    if (next.ok()) break;
    absl::SleepFor(absl::Milliseconds(100));
  }
  ASSERT_TRUE(next.ok()) << next.status();
  EXPECT_THAT(next->id(), ::testing::StartsWith("job-2-")) << "the counter was rolled back";
  EXPECT_THAT(lost->id(), ::testing::StartsWith("job-2-"));
  EXPECT_NE(next->id(), lost->id());
  EXPECT_EQ(store.GetJob(lost->id()).status().code(), absl::StatusCode::kNotFound)
      << "bob's id names no one else's job";
  EXPECT_EQ(store.GetJob(kept->id())->options().owner(), "alice");
}

TEST_F(JobStoreTest, AnOwnerOverTheActiveJobsLimitIsRefusedUntilAJobEnds) {
  JobOptions alice;
  alice.set_owner("alice");
  auto create = [&](const JobOptions& options) {
    return store_->CreateJob(SmallGraph("m"), options, Tasks(1), /*max_active_jobs=*/2);
  };
  absl::StatusOr<Job> first = create(alice);
  ASSERT_TRUE(first.ok()) << first.status();
  absl::StatusOr<Job> second = create(alice);
  ASSERT_TRUE(second.ok()) << second.status();
  ASSERT_TRUE(store_->Transition(second->id(), kQueued, kRunning, "").ok());
  absl::StatusOr<Job> third = create(alice);
  EXPECT_EQ(third.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(third.status().message(),
              HasSubstr("owner \"alice\" has 2 jobs queued or running, the most allowed"));
  EXPECT_EQ(redis_->Command({"ZCARD", "forge:jobs"})->integer(), 2) << "nothing stored";

  JobOptions bob;
  bob.set_owner("bob");
  EXPECT_TRUE(create(bob).ok()) << "the quota is per owner";
  EXPECT_TRUE(store_->CreateJob(SmallGraph("m"), alice, Tasks(1)).ok()) << "no limit given";
  // Ending a job (done, failed or cancelled) frees its place; the limit counts the others.
  ASSERT_TRUE(store_->Transition(second->id(), kRunning, kDone, "").ok());
  ASSERT_TRUE(store_->Cancel(first->id(), "").ok());
  EXPECT_TRUE(create(alice).ok());
  EXPECT_EQ(create(alice).status().code(), absl::StatusCode::kResourceExhausted);
}

TEST_F(JobStoreTest, CreatesQueuedJobWithTasksModelAndFirstEvent) {
  JobOptions options;
  options.set_owner("alice");
  (*options.mutable_labels())["model"] = "m";
  absl::StatusOr<Job> job = store_->CreateJob(SmallGraph("m"), options, Tasks(3));
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_THAT(job->id(), MatchesRegex("job-1-[0-9a-f]{16}"));
  EXPECT_EQ(job->state(), kQueued);
  EXPECT_EQ(job->options().owner(), "alice");
  EXPECT_EQ(job->progress().tasks_total(), 3);
  EXPECT_EQ(job->model_digest(), graph::ModelDigest(SmallGraph("m")));
  EXPECT_GT(job->created_at().seconds(), 0);

  absl::StatusOr<std::vector<KernelTask>> tasks = store_->GetTasks(job->id());
  ASSERT_TRUE(tasks.ok()) << tasks.status();
  ASSERT_THAT(*tasks, SizeIs(3));
  int occurrences = 0;
  for (const KernelTask& task : *tasks) occurrences += task.occurrences();
  EXPECT_EQ(occurrences, 1 + 2 + 3);

  absl::StatusOr<Graph> model = store_->GetModel(job->model_digest());
  ASSERT_TRUE(model.ok()) << model.status();
  EXPECT_EQ(model->metadata().name(), "m");

  std::vector<JobEvent> events = AllEvents(job->id());
  ASSERT_THAT(events, SizeIs(1));
  EXPECT_EQ(events[0].state_changed().current(), kQueued);
  EXPECT_EQ(events[0].progress().tasks_total(), 3);
  EXPECT_EQ(events[0].job_id(), job->id());
}

TEST_F(JobStoreTest, UnknownJobIsNotFound) {
  EXPECT_EQ(store_->GetJob("job-99").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(store_->Transition("job-99", kQueued, kRunning, "").status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(store_->Cancel("job-99", "").status().code(), absl::StatusCode::kNotFound);
}

TEST_F(JobStoreTest, TransitionsFollowTheStateMachineAndRecordEvents) {
  const Job job = Create();
  // Not an edge of the state machine, whatever the job's state.
  absl::Status illegal = store_->Transition(job.id(), kQueued, kDone, "").status();
  EXPECT_EQ(illegal.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(illegal.message(), HasSubstr("no transition from JOB_STATE_QUEUED to JOB_STATE_DONE"));
  // An edge, but the job is not in its source state.
  absl::Status stale = store_->Transition(job.id(), kRunning, kDone, "").status();
  EXPECT_EQ(stale.code(), absl::StatusCode::kAborted);
  EXPECT_THAT(stale.message(), HasSubstr("is JOB_STATE_QUEUED, not JOB_STATE_RUNNING"));

  ASSERT_TRUE(store_->Transition(job.id(), kQueued, kRunning, "scheduled").ok());
  absl::StatusOr<Job> failed = store_->Transition(job.id(), kRunning, kFailed, "worker lost");
  ASSERT_TRUE(failed.ok()) << failed.status();
  EXPECT_EQ(failed->state(), kFailed);
  EXPECT_EQ(failed->error(), "worker lost");
  EXPECT_EQ(store_->Transition(job.id(), kFailed, kRunning, "").status().code(),
            absl::StatusCode::kFailedPrecondition);

  std::vector<JobEvent> events = AllEvents(job.id());
  ASSERT_THAT(events, SizeIs(3));
  EXPECT_EQ(events[1].state_changed().previous(), kQueued);
  EXPECT_EQ(events[1].state_changed().current(), kRunning);
  EXPECT_EQ(events[1].state_changed().detail(), "scheduled");
  EXPECT_EQ(events[2].state_changed().current(), kFailed);
  EXPECT_LT(events[1].event_id(), events[2].event_id());

  absl::StatusOr<std::map<forge::v1::JobState, int64_t>> counts = store_->CountByState();
  ASSERT_TRUE(counts.ok()) << counts.status();
  EXPECT_EQ((*counts)[kQueued], 0);
  EXPECT_EQ((*counts)[kRunning], 0);
  EXPECT_EQ((*counts)[kFailed], 1);
}

TEST_F(JobStoreTest, ConcurrentTransitionsHaveExactlyOneWinner) {
  const Job job = Create();
  constexpr int kThreads = 8;
  absl::Mutex mutex;
  int winners = 0;
  std::vector<absl::StatusCode> losers;
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i) {
    // Half start the job, half cancel it, each over its own connection so they truly race.
    threads.emplace_back([&, i] {
      RedisClient connection(redis_options());
      JobStore store(&connection);
      absl::StatusOr<Job> result =
          i % 2 == 0 ? store.Transition(job.id(), kQueued, kRunning, "start")
                     : store.Transition(job.id(), kQueued, kCancelled, "cancel");
      absl::MutexLock lock(&mutex);
      if (result.ok()) {
        ++winners;
      } else {
        losers.push_back(result.status().code());
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  EXPECT_EQ(winners, 1);
  EXPECT_THAT(losers, ::testing::Each(absl::StatusCode::kAborted));
  // One state change recorded after the QUEUED event, and the counts agree with it.
  std::vector<JobEvent> events = AllEvents(job.id());
  ASSERT_THAT(events, SizeIs(2));
  absl::StatusOr<Job> final_job = store_->GetJob(job.id());
  ASSERT_TRUE(final_job.ok());
  EXPECT_EQ(events[1].state_changed().current(), final_job->state());
  absl::StatusOr<std::map<forge::v1::JobState, int64_t>> counts = store_->CountByState();
  ASSERT_TRUE(counts.ok());
  EXPECT_EQ((*counts)[kQueued], 0);
  EXPECT_EQ((*counts)[final_job->state()], 1);
}

TEST_F(JobStoreTest, CancelIsIdempotentAndRefusesFinishedJobs) {
  const Job queued = Create();
  absl::StatusOr<Job> cancelled = store_->Cancel(queued.id(), "not needed");
  ASSERT_TRUE(cancelled.ok()) << cancelled.status();
  EXPECT_EQ(cancelled->state(), kCancelled);
  ASSERT_TRUE(store_->Cancel(queued.id(), "again").ok());
  EXPECT_THAT(AllEvents(queued.id()), SizeIs(2));  // the second cancel changed nothing

  const Job done = Create();
  ASSERT_TRUE(store_->Transition(done.id(), kQueued, kRunning, "").ok());
  ASSERT_TRUE(store_->Transition(done.id(), kRunning, kDone, "").ok());
  absl::Status refused = store_->Cancel(done.id(), "").status();
  EXPECT_EQ(refused.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(refused.message(), HasSubstr("already JOB_STATE_DONE"));
}

TEST_F(JobStoreTest, ListsNewestFirstWithFiltersAndPages) {
  std::vector<std::string> ids;
  for (int i = 0; i < 7; ++i) {
    ids.push_back(Create(i % 2 == 0 ? "alice" : "bob", {{"batch", i < 4 ? "one" : "two"}}).id());
  }
  ASSERT_TRUE(store_->Cancel(ids[6], "").ok());

  auto list_ids = [&](const JobFilter& filter, int page_size, const std::string& token,
                      std::string* next) {
    absl::StatusOr<JobPage> page = store_->ListJobs(filter, page_size, token);
    EXPECT_TRUE(page.ok()) << page.status();
    std::vector<std::string> listed;
    if (!page.ok()) return listed;
    for (const Job& job : page->jobs) listed.push_back(job.id());
    *next = page->next_page_token;
    return listed;
  };
  std::string next;
  EXPECT_THAT(list_ids({}, 3, "", &next), ElementsAre(ids[6], ids[5], ids[4]));
  EXPECT_THAT(list_ids({}, 3, next, &next), ElementsAre(ids[3], ids[2], ids[1]));
  EXPECT_THAT(list_ids({}, 3, next, &next), ElementsAre(ids[0]));
  EXPECT_THAT(next, IsEmpty());

  // alice has jobs 0, 2, 4, 6; of those in batch "two", 4 and 6; only 4 is still queued.
  const JobFilter alice{.owner = "alice"};
  EXPECT_THAT(list_ids(alice, 2, "", &next), ElementsAre(ids[6], ids[4]));
  EXPECT_THAT(list_ids(alice, 2, next, &next), ElementsAre(ids[2], ids[0]));
  EXPECT_THAT(next, IsEmpty());
  const JobFilter queued_batch_two{.states = {kQueued}, .owner = "alice", .labels = {{"batch", "two"}}};
  EXPECT_THAT(list_ids(queued_batch_two, 0, "", &next), ElementsAre(ids[4]));
  const JobFilter cancelled{.states = {kCancelled}};
  EXPECT_THAT(list_ids(cancelled, 0, "", &next), ElementsAre(ids[6]));

  EXPECT_EQ(store_->ListJobs({}, -1, "").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(store_->ListJobs({}, 1, "bogus").status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(JobStoreTest, EventReaderResumesAfterAnIdAndBlocksUntilANewEvent) {
  const Job job = Create();
  ASSERT_TRUE(store_->Transition(job.id(), kQueued, kRunning, "").ok());
  std::vector<JobEvent> events = AllEvents(job.id());
  ASSERT_THAT(events, SizeIs(2));

  JobEventReader reader(redis_options(), job.id(), events[0].event_id(), absl::Seconds(5));
  absl::StatusOr<std::vector<JobEvent>> after_first = reader.Next();
  ASSERT_TRUE(after_first.ok()) << after_first.status();
  ASSERT_THAT(*after_first, SizeIs(1));
  EXPECT_EQ((*after_first)[0].event_id(), events[1].event_id());

  // The reader waits on its own connection; the store's connection stays free to cancel.
  std::thread cancel([&] { ASSERT_TRUE(store_->Cancel(job.id(), "bye").ok()); });
  absl::StatusOr<std::vector<JobEvent>> later = reader.Next();
  cancel.join();
  ASSERT_TRUE(later.ok()) << later.status();
  ASSERT_THAT(*later, SizeIs(1));
  EXPECT_EQ((*later)[0].state_changed().current(), kCancelled);
  EXPECT_EQ((*later)[0].state_changed().detail(), "bye");

  JobEventReader bad(redis_options(), job.id(), "not-an-id", absl::Milliseconds(10));
  EXPECT_EQ(bad.Next().status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace forge::server
