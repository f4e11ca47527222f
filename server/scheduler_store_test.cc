// SchedulerStore against a real redis-server: every record round-trips, and the raw keys and
// fields are the layout earlier builds wrote (redis_keys.h), so an existing Redis keeps working.
#include "server/scheduler_store.h"

#include <memory>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/support/redis_fixture.h"

namespace forge::server {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::MatchesRegex;
using ::testing::IsEmpty;
using ::testing::Pair;
using ::testing::UnorderedElementsAre;

const absl::Time kNow = absl::FromUnixMillis(1'700'000'000'123);

class SchedulerStoreTest : public testing::RedisFixture {
 protected:
  void SetUp() override {
    RedisFixture::SetUp();
    if (HasFatalFailure()) return;
    store_ = std::make_unique<SchedulerStore>(redis_.get());
  }

  RedisReply Raw(std::vector<std::string> command) {
    absl::StatusOr<RedisReply> reply = redis_->Command(command);
    EXPECT_TRUE(reply.ok()) << reply.status();
    return reply.ok() ? *reply : RedisReply::Nil();
  }
  // A zset or hash as a flat list of its elements.
  std::vector<std::string> Flat(std::vector<std::string> command) {
    std::vector<std::string> flat;
    const RedisReply reply = Raw(std::move(command));
    for (const RedisReply& element : reply.elements()) {
      flat.push_back(element.str());
    }
    return flat;
  }

  std::unique_ptr<SchedulerStore> store_;
};

TEST_F(SchedulerStoreTest, WorkersRoundTripInTheirLayout) {
  EXPECT_THAT(*store_->NewWorkerId(), MatchesRegex("worker-1-[0-9a-f]{16}"));
  EXPECT_THAT(*store_->NewWorkerId(), MatchesRegex("worker-2-[0-9a-f]{16}"));
  WorkerRecord worker;
  worker.status.set_worker_id("worker-1");
  worker.status.set_hostname("host");
  worker.status.set_candidates_completed(7);
  worker.last_seen = kNow;
  ASSERT_TRUE(store_->SaveWorker(worker).ok());
  EXPECT_THAT(Flat({"ZRANGE", "forge:workers", "0", "-1", "WITHSCORES"}),
              ElementsAre("worker-1", "1700000000123"));
  forge::v1::WorkerStatus info;
  ASSERT_TRUE(info.ParseFromString(Raw({"HGET", "forge:worker:worker-1", "info"}).str()));
  EXPECT_EQ(info.hostname(), "host");

  // A heartbeat moves the worker's time and renews only leases that exist.
  ASSERT_TRUE(Raw({"ZADD", "forge:leases", "5", "lease-1"}).is_integer());
  ASSERT_TRUE(store_->RecordHeartbeat("worker-1", kNow + absl::Seconds(1), {"lease-1", "lease-9"},
                                      kNow + absl::Seconds(30))
                  .ok());
  EXPECT_THAT(Flat({"ZRANGE", "forge:leases", "0", "-1", "WITHSCORES"}),
              ElementsAre("lease-1", "1700000030123"));

  absl::StatusOr<std::map<std::string, WorkerRecord>> loaded = store_->LoadWorkers();
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  ASSERT_EQ(loaded->size(), 1u);
  EXPECT_EQ(loaded->at("worker-1").status.candidates_completed(), 7);
  EXPECT_EQ(loaded->at("worker-1").last_seen, kNow + absl::Seconds(1));

  ASSERT_TRUE(store_->ForgetWorker("worker-1").ok());
  EXPECT_THAT(*store_->LoadWorkers(), IsEmpty());
  EXPECT_EQ(Raw({"EXISTS", "forge:worker:worker-1"}).integer(), 0);
}

TEST_F(SchedulerStoreTest, LeasesRoundTripInTheirLayout) {
  const std::string first = *store_->NewLeaseId();
  EXPECT_THAT(first, MatchesRegex("lease-1-[0-9a-f]{16}"));
  // Redis lost its last second (AOF everysec): the counter is back where it was, the id is not.
  ASSERT_TRUE(Raw({"SET", "forge:lease_seq", "0"}).is_simple_string());
  const std::string after_rollback = *store_->NewLeaseId();
  EXPECT_THAT(after_rollback, MatchesRegex("lease-1-[0-9a-f]{16}"));
  EXPECT_NE(after_rollback, first);
  LeaseRecord lease;
  lease.worker_id = "worker-1";
  lease.space = "predicted:H200";
  lease.deadline = kNow;
  lease.candidates = {{"c1", {"job-1", "t1"}},
                      {"c2", {"job-2", "t2"}},
                      {"c3", {"job-1", "t1", /*expensive=*/true}},
                      {"c4", {"job-1", "t1"}}};
  std::vector<forge::v1::Candidate> candidates(4);
  candidates[0].set_digest("c1");
  candidates[1].set_digest("c2");
  candidates[2].set_digest("c3");
  candidates[3].set_digest("c4");
  candidates[0].set_template_name("rows");
  ASSERT_TRUE(store_->WriteLease("lease-1", lease, candidates).ok());

  EXPECT_THAT(Flat({"ZRANGE", "forge:leases", "0", "-1", "WITHSCORES"}),
              ElementsAre("lease-1", "1700000000123"));
  EXPECT_THAT(Flat({"HGETALL", "forge:lease:lease-1"}),
              UnorderedElementsAre("worker", "worker-1", "space", "predicted:H200", "c:c1",
                                   "job-1 t1", "c:c2", "job-2 t2", "c:c3", "job-1 t1 nvcc",
                                   "c:c4", "job-1 t1"));
  forge::v1::Candidate stored;
  ASSERT_TRUE(stored.ParseFromString(Raw({"GET", "forge:candidate:c1"}).str()));
  EXPECT_EQ(stored.template_name(), "rows");
  EXPECT_EQ(Raw({"HGET", "forge:job:job-1", "candidates_leased"}).str(), "3");
  EXPECT_EQ(Raw({"HGET", "forge:job:job-2", "candidates_leased"}).str(), "1");

  ASSERT_TRUE(store_->RemoveFromLease("lease-1", {"c1", "c2"}).ok());
  // A damaged candidate field is skipped on loading.
  ASSERT_TRUE(Raw({"HSET", "forge:lease:lease-1", "c:bad", "no-space-here"}).is_integer());
  absl::StatusOr<std::map<std::string, LeaseRecord>> loaded = store_->LoadLeases();
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  ASSERT_EQ(loaded->size(), 1u);
  const LeaseRecord& back = loaded->at("lease-1");
  EXPECT_EQ(back.worker_id, "worker-1");
  EXPECT_EQ(back.space, "predicted:H200");
  EXPECT_EQ(back.deadline, kNow);
  ASSERT_EQ(back.candidates.size(), 2u);
  EXPECT_EQ(back.candidates.at("c3").job_id, "job-1");
  EXPECT_EQ(back.candidates.at("c3").task_digest, "t1");
  EXPECT_TRUE(back.candidates.at("c3").expensive) << "the cheap-first bound survives a restart";
  EXPECT_FALSE(back.candidates.at("c4").expensive);

  ASSERT_TRUE(store_->DropLease("lease-1").ok());
  EXPECT_THAT(*store_->LoadLeases(), IsEmpty());
  EXPECT_EQ(Raw({"EXISTS", "forge:lease:lease-1"}).integer(), 0);
}

TEST_F(SchedulerStoreTest, JobSearchRecordsRoundTripInTheirLayout) {
  absl::StatusOr<JobSearchRecord> empty = store_->LoadJobSearch("job-1");
  ASSERT_TRUE(empty.ok()) << empty.status();
  EXPECT_TRUE(empty->space.empty());
  EXPECT_EQ(empty->started_ms, std::nullopt);

  ASSERT_TRUE(store_->SetJobStarted("job-1", 1234).ok());
  ASSERT_TRUE(store_->BindJob("job-1", "H200", "sm_90").ok());
  ASSERT_TRUE(store_->SaveTargets("job-1", {{"t1", 6}, {"t2", 2}}).ok());
  ASSERT_TRUE(
      store_->SaveStop("job-1", "t2", forge::v1::TASK_STOP_REASON_NEAR_ROOFLINE).ok());
  EXPECT_THAT(Flat({"HGETALL", "forge:job:job-1:search"}),
              UnorderedElementsAre("started_ms", "1234", "space", "H200", "arch", "sm_90",
                                   "target:t1", "6", "target:t2", "2", "stop:t2",
                                   "TASK_STOP_REASON_NEAR_ROOFLINE"));
  absl::StatusOr<JobSearchRecord> record = store_->LoadJobSearch("job-1");
  ASSERT_TRUE(record.ok()) << record.status();
  EXPECT_EQ(record->space, "H200");
  EXPECT_EQ(record->arch, "sm_90");
  EXPECT_EQ(record->started_ms, 1234);
  EXPECT_THAT(record->targets, ElementsAre(Pair("t1", 6), Pair("t2", 2)));
  EXPECT_THAT(record->stopped,
              ElementsAre(Pair("t2", forge::v1::TASK_STOP_REASON_NEAR_ROOFLINE)));
}

TEST_F(SchedulerStoreTest, SearchStatesRoundTripInTheirLayout) {
  EXPECT_EQ(*store_->LoadSearchState("H200", "t1"), "");
  ASSERT_TRUE(store_->SaveSearchStates({{"H200", "t1", std::string("a\0b", 3)},
                                        {"predicted:H200", "t1", "other"}})
                  .ok());
  EXPECT_EQ(Raw({"HGET", "forge:task_state:H200:t1", "search"}).str(), std::string("a\0b", 3));
  EXPECT_EQ(*store_->LoadSearchState("predicted:H200", "t1"), "other");
  ASSERT_TRUE(store_->DropSearchState("H200", "t1").ok());
  EXPECT_EQ(*store_->LoadSearchState("H200", "t1"), "");
  EXPECT_TRUE(store_->SaveSearchStates({}).ok());
}

TEST_F(SchedulerStoreTest, ErrorsNameWhatFailed) {
  server_->Stop();
  const absl::Status lease = store_->DropLease("lease-4");
  EXPECT_EQ(lease.code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(lease.message(), HasSubstr("removing forge:lease:lease-4"));
  EXPECT_THAT(store_->LoadJobSearch("job-3").status().message(),
              HasSubstr("reading forge:job:job-3:search"));
  EXPECT_THAT(store_->NewWorkerId().status().message(), HasSubstr("allocating a worker id"));
}

}  // namespace
}  // namespace forge::server
