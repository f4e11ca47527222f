// The sweeper against a real redis-server and a real blob directory, with short retention and
// grace times and sweeps run "later" by passing the time.
#include "server/sweeper.h"

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/digest/sha256.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/redis_keys.h"
#include "tests/support/redis_fixture.h"
#include "tests/support/subprocess.h"

namespace forge::server {
namespace {

using ::forge::v1::Job;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

constexpr auto kQueued = forge::v1::JOB_STATE_QUEUED;
constexpr auto kRunning = forge::v1::JOB_STATE_RUNNING;

class SweeperTest : public testing::RedisFixture {
 protected:
  void SetUp() override {
    RedisFixture::SetUp();
    if (HasFatalFailure()) return;
    jobs_ = std::make_unique<JobStore>(redis_.get());
    absl::StatusOr<std::unique_ptr<BlobStore>> blobs =
        BlobStore::Open(redis_.get(), blob_dir_.path() + "/blobs");
    ASSERT_TRUE(blobs.ok()) << blobs.status();
    blobs_ = *std::move(blobs);
    results_ = std::make_unique<ResultCache>(redis_.get());
    sweeper_ = std::make_unique<Sweeper>(redis_.get(), jobs_.get(), blobs_.get(), results_.get(),
                                         &registry_,
                                         SweeperOptions{.job_retention = absl::Hours(1),
                                                        .model_grace = absl::Minutes(30),
                                                        .blob_grace = absl::Hours(2),
                                                        .max_results = 0});
  }

  // Stores `bytes` as a blob; its digest.
  std::string StoreBlob(const std::string& bytes) {
    const std::string sha = Sha256Hex(bytes);
    absl::StatusOr<std::unique_ptr<BlobUpload>> upload =
        blobs_->StartUpload(sha, static_cast<int64_t>(bytes.size()));
    EXPECT_TRUE(upload.ok()) << upload.status();
    EXPECT_TRUE((*upload)->Append(0, bytes).ok());
    EXPECT_TRUE((*upload)->Commit().ok());
    return sha;
  }

  // A job over a graph named `name` whose one parameter is the blob `sha` (none when empty).
  Job CreateJob(const std::string& name, const std::string& sha) {
    forge::v1::Graph graph;
    graph.mutable_metadata()->set_name(name);
    if (!sha.empty()) {
      forge::v1::GraphInput* input = graph.add_inputs();
      input->set_value_name("weight");
      input->mutable_data()->set_sha256(sha);
    }
    forge::v1::KernelTask task;
    task.set_digest(std::string(64, 'a'));
    absl::StatusOr<Job> job = jobs_->CreateJob(graph, forge::v1::JobOptions(), {task});
    EXPECT_TRUE(job.ok()) << job.status();
    return *job;
  }

  bool Exists(const std::string& key) { return redis_->Command({"EXISTS", key})->integer() == 1; }
  int64_t ExpiryMs(const std::string& key) { return redis_->Command({"PTTL", key})->integer(); }
  std::vector<std::string> Missing(const std::vector<std::string>& shas) {
    return *blobs_->Missing(shas);
  }

  testing::TempDir blob_dir_;
  metrics::Registry registry_;
  std::unique_ptr<JobStore> jobs_;
  std::unique_ptr<BlobStore> blobs_;
  std::unique_ptr<ResultCache> results_;
  std::unique_ptr<Sweeper> sweeper_;
};

TEST_F(SweeperTest, EndedJobsGoAfterTheirRetentionAndTheirGraphsAndBlobsAfterAGrace) {
  const std::string shared = StoreBlob("weights of the running job and of a done one");
  const std::string done_only = StoreBlob("weights of the done job only");
  const std::string orphan = StoreBlob("uploaded, never submitted");
  const Job done = CreateJob("done", done_only);
  const Job cancelled = CreateJob("cancelled", "");
  const Job running = CreateJob("running", shared);
  const Job done_shared = CreateJob("done-shared", shared);
  for (const Job* job : {&done, &running, &done_shared}) {
    ASSERT_TRUE(jobs_->Transition(job->id(), kQueued, kRunning, "").ok());
  }
  ASSERT_TRUE(jobs_->Transition(done.id(), kRunning, forge::v1::JOB_STATE_DONE, "").ok());
  ASSERT_TRUE(jobs_->Transition(done_shared.id(), kRunning, forge::v1::JOB_STATE_DONE, "").ok());
  ASSERT_TRUE(jobs_->Cancel(cancelled.id(), "").ok());
  const absl::Time now = absl::Now();

  // Within the retention: nothing goes.
  absl::StatusOr<SweepStats> first = sweeper_->Sweep(now);
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_TRUE(first->ran);
  EXPECT_EQ(first->jobs + first->models + first->blobs, 0);

  // 90 minutes on: the ended jobs go with every key; the running one stays, however old.
  absl::StatusOr<SweepStats> later = sweeper_->Sweep(now + absl::Minutes(90));
  ASSERT_TRUE(later.ok()) << later.status();
  EXPECT_EQ(later->jobs, 3);
  for (const Job* job : {&done, &cancelled, &done_shared}) {
    EXPECT_EQ(jobs_->GetJob(job->id()).status().code(), absl::StatusCode::kNotFound);
    for (const std::string& key : {keys::JobTasks(job->id()), keys::JobEvents(job->id()),
                                   keys::JobSearch(job->id())}) {
      EXPECT_FALSE(Exists(key)) << key;
    }
  }
  ASSERT_TRUE(jobs_->GetJob(running.id()).ok());
  absl::StatusOr<JobPage> listed = jobs_->ListJobs({}, 10, "");
  ASSERT_TRUE(listed.ok());
  ASSERT_EQ(listed->jobs.size(), 1u);
  EXPECT_EQ(listed->jobs[0].id(), running.id());
  absl::StatusOr<std::map<forge::v1::JobState, int64_t>> counts = jobs_->CountByState();
  EXPECT_EQ(counts->at(forge::v1::JOB_STATE_DONE), 0);
  EXPECT_EQ(counts->at(forge::v1::JOB_STATE_CANCELLED), 0);
  EXPECT_EQ(counts->at(kRunning), 1);
  // Their graphs expire after the grace (the running job's does not); blobs are younger than
  // theirs and stay.
  EXPECT_EQ(later->models, 3);
  EXPECT_GT(ExpiryMs(keys::Model(done.model_digest())), 0);
  EXPECT_EQ(ExpiryMs(keys::Model(running.model_digest())), -1);
  EXPECT_THAT(Missing({shared, done_only, orphan}), IsEmpty());

  // Three hours on: the blobs no remaining job names are gone, file and index.
  absl::StatusOr<SweepStats> last = sweeper_->Sweep(now + absl::Hours(3));
  ASSERT_TRUE(last.ok()) << last.status();
  EXPECT_EQ(last->blobs, 2);
  EXPECT_EQ(last->models, 0) << "already expiring";
  EXPECT_THAT(Missing({shared, done_only, orphan}), ElementsAre(done_only, orphan));
  EXPECT_FALSE(std::filesystem::exists(blobs_->PathOf(orphan)));
  EXPECT_TRUE(std::filesystem::exists(blobs_->PathOf(shared)));

  // A job admitted by a coordinator that died before creating it no longer counts in the quota.
  ASSERT_TRUE(redis_->Command({"HSET", std::string(keys::kActiveJobs), "job-9-dead", "alice"}).ok());
  ASSERT_TRUE(sweeper_->Sweep(now + absl::Hours(3)).ok());
  EXPECT_EQ(redis_->Command({"HLEN", std::string(keys::kActiveJobs)})->integer(), 1)
      << "only the running job";

  // A new job over an expiring graph keeps it.
  const Job again = CreateJob("done", done_only);
  EXPECT_EQ(again.model_digest(), done.model_digest());
  EXPECT_EQ(ExpiryMs(keys::Model(done.model_digest())), -1);

  absl::StatusOr<std::string> text = metrics::SerializeText(registry_.Collect());
  ASSERT_TRUE(text.ok());
  EXPECT_THAT(*text, HasSubstr("forge_coordinator_swept_total{what=\"jobs\"} 3"));
  EXPECT_THAT(*text, HasSubstr("forge_coordinator_swept_total{what=\"blobs\"} 2"));
  EXPECT_THAT(*text, HasSubstr("forge_coordinator_sweeps_total{outcome=\"done\"} 4"));
}

TEST_F(SweeperTest, OnlyTheCoordinatorHoldingTheLockSweeps) {
  const Job job = CreateJob("m", "");
  ASSERT_TRUE(jobs_->Cancel(job.id(), "").ok());
  metrics::Registry other_registry;
  Sweeper other(redis_.get(), jobs_.get(), blobs_.get(), results_.get(), &other_registry,
                SweeperOptions{});
  // Another coordinator's sweep is under way: it holds the lock.
  ASSERT_TRUE(redis_->Command({"SET", std::string(keys::kSweeperLock), "another", "PX", "60000"})
                  .ok());
  absl::StatusOr<SweepStats> skipped = sweeper_->Sweep(absl::Now() + absl::Hours(2));
  ASSERT_TRUE(skipped.ok()) << skipped.status();
  EXPECT_FALSE(skipped->ran);
  EXPECT_TRUE(jobs_->GetJob(job.id()).ok());
  EXPECT_EQ(redis_->Command({"GET", std::string(keys::kSweeperLock)})->str(), "another")
      << "a sweeper never releases another's lock";
  // Once it is released, the sweep runs and gives the lock back.
  ASSERT_TRUE(redis_->Command({"DEL", std::string(keys::kSweeperLock)}).ok());
  absl::StatusOr<SweepStats> swept = sweeper_->Sweep(absl::Now() + absl::Hours(2));
  ASSERT_TRUE(swept.ok()) << swept.status();
  EXPECT_TRUE(swept->ran);
  EXPECT_EQ(swept->jobs, 1);
  EXPECT_FALSE(Exists(std::string(keys::kSweeperLock)));
  EXPECT_TRUE(other.Sweep(absl::Now()).ok());
}

TEST_F(SweeperTest, TheResultsCacheKeepsItsBoundDroppingTheLeastRecentlyRead) {
  const std::string space = "predicted:H200";
  const std::string task(64, 't');
  std::vector<std::string> digests;
  for (char c : std::string("abcde")) {
    forge::v1::Candidate candidate;
    candidate.set_digest(std::string(64, c));
    candidate.set_task_digest(task);
    // Written with the lease in the scheduler; the eviction reads the task from it.
    ASSERT_TRUE(redis_->Command({"SET", keys::Candidate(candidate.digest()),
                                 candidate.SerializeAsString()})
                    .ok());
    forge::v1::Result result;
    result.mutable_measurement()->set_candidate_digest(candidate.digest());
    result.mutable_measurement()->set_median_us(1);
    ASSERT_TRUE(*results_->PutIfAbsent(space, candidate, result, "job-none"));
    digests.push_back(candidate.digest());
  }
  // Redis keeps idle times in seconds: wait two, then a job reads d and e.
  absl::SleepFor(absl::Milliseconds(2100));
  ASSERT_TRUE(results_->GetMany(space, {digests[3], digests[4]}).ok());

  metrics::Registry registry;
  Sweeper bounded(redis_.get(), jobs_.get(), blobs_.get(), results_.get(), &registry,
                  {.max_results = 2});
  absl::StatusOr<SweepStats> swept = bounded.Sweep(absl::Now());
  ASSERT_TRUE(swept.ok()) << swept.status();
  EXPECT_EQ(swept->results, 3);
  absl::StatusOr<std::vector<forge::v1::Result>> left = results_->ForTask(space, task);
  ASSERT_TRUE(left.ok()) << left.status();
  ASSERT_EQ(left->size(), 2u);
  EXPECT_EQ((*left)[0].measurement().candidate_digest(), digests[3]);
  EXPECT_EQ((*left)[1].measurement().candidate_digest(), digests[4]);
  EXPECT_EQ(redis_->Command({"SCARD", keys::TaskResults(space, task)})->integer(), 2)
      << "the task index follows";
  EXPECT_EQ(bounded.Sweep(absl::Now())->results, 0) << "within the bound now";
}

}  // namespace
}  // namespace forge::server
