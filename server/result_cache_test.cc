// The results cache against a real redis-server: first result wins, attribution, purge.
#include "server/result_cache.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/redis_keys.h"
#include "tests/support/redis_fixture.h"

namespace forge::server {
namespace {

constexpr char kSpace[] = "predicted:H200";

forge::v1::Candidate CandidateOf(char c) {
  forge::v1::Candidate candidate;
  candidate.set_digest(std::string(64, c));
  candidate.set_task_digest(std::string(64, 't'));
  return candidate;
}

forge::v1::Result ResultOf(const forge::v1::Candidate& candidate, const std::string& identity,
                           double us) {
  forge::v1::Result result;
  result.mutable_measurement()->set_candidate_digest(candidate.digest());
  result.mutable_measurement()->set_median_us(us);
  result.set_worker_identity(identity);
  return result;
}

class ResultCacheTest : public testing::RedisFixture {
 protected:
  int64_t Completed() {
    return std::stoll(redis_->Command({"HGET", keys::Job("j"), "candidates_completed"})->str());
  }
};

TEST_F(ResultCacheTest, AnAuthenticatedCoordinatorServesOnlyAttributedResults) {
  ASSERT_TRUE(redis_->Command({"HSET", keys::Job("j"), "candidates_completed", "0"}).ok());
  ResultCache open(redis_.get());
  ResultCache attributed(redis_.get(), /*attributed_only=*/true);
  const forge::v1::Candidate a = CandidateOf('a');
  // Reported to a coordinator without authentication: anyone could have.
  ASSERT_TRUE(*open.PutIfAbsent(kSpace, a, ResultOf(a, "", 1.0), "j"));
  EXPECT_TRUE((*open.GetMany(kSpace, {a.digest()}))[0].has_value());
  EXPECT_FALSE((*attributed.GetMany(kSpace, {a.digest()}))[0].has_value());
  EXPECT_THAT(*attributed.ForTask(kSpace, a.task_digest()), ::testing::IsEmpty());

  // The candidate is measured again by an authenticated worker: its result replaces the other.
  EXPECT_FALSE(*attributed.PutIfAbsent(kSpace, a, ResultOf(a, "", 2.0), "j"))
      << "an unattributed result never replaces one";
  ASSERT_TRUE(*attributed.PutIfAbsent(kSpace, a, ResultOf(a, "gpu-a", 30.0), "j"));
  std::optional<forge::v1::Result> served = (*attributed.GetMany(kSpace, {a.digest()}))[0];
  ASSERT_TRUE(served.has_value());
  EXPECT_EQ(served->worker_identity(), "gpu-a");
  EXPECT_EQ(served->measurement().median_us(), 30.0);
  EXPECT_EQ(Completed(), 2) << "the first put and the replacement";
  // Between attributed results the first still wins.
  EXPECT_FALSE(*attributed.PutIfAbsent(kSpace, a, ResultOf(a, "gpu-b", 1.0), "j"));
  EXPECT_EQ((*attributed.GetMany(kSpace, {a.digest()}))[0]->worker_identity(), "gpu-a");
  EXPECT_EQ(Completed(), 2);
}

TEST_F(ResultCacheTest, PurgeFindsResultsByIdentityCandidateAndTaskWhateverTheMode) {
  ResultCache open(redis_.get());
  ResultCache attributed(redis_.get(), /*attributed_only=*/true);
  const forge::v1::Candidate a = CandidateOf('a'), b = CandidateOf('b'), c = CandidateOf('c');
  for (const auto& candidate : {a, b, c}) {
    ASSERT_TRUE(redis_->Command({"SET", keys::Candidate(candidate.digest()),
                                 candidate.SerializeAsString()})
                    .ok());
  }
  ASSERT_TRUE(*open.PutIfAbsent(kSpace, a, ResultOf(a, "", 1.0), "j"));
  ASSERT_TRUE(*open.PutIfAbsent(kSpace, b, ResultOf(b, "gpu-a", 1.0), "j"));
  ASSERT_TRUE(*open.PutIfAbsent(kSpace, c, ResultOf(c, "gpu-b", 1.0), "j"));

  absl::StatusOr<std::vector<PurgedTask>> unattributed =
      attributed.Purge({.unattributed = true});
  ASSERT_TRUE(unattributed.ok()) << unattributed.status();
  ASSERT_EQ(unattributed->size(), 1u);
  EXPECT_EQ((*unattributed)[0].space, kSpace);
  EXPECT_EQ((*unattributed)[0].task_digest, a.task_digest());
  EXPECT_EQ((*unattributed)[0].results, 1);
  EXPECT_EQ(attributed.Purge({.worker_identity = "gpu-a", .candidate_digest = c.digest()})
                ->size(),
            0u)
      << "filters combine with AND";
  EXPECT_EQ((*attributed.Purge({.candidate_digest = c.digest()}))[0].results, 1);
  EXPECT_EQ((*attributed.Purge({.task_digest = a.task_digest()}))[0].results, 1) << "b is left";
  EXPECT_THAT(*open.ForTask(kSpace, a.task_digest()), ::testing::IsEmpty());
  EXPECT_EQ(redis_->Command({"SCARD", keys::TaskResults(kSpace, a.task_digest())})->integer(), 0);
  EXPECT_TRUE(absl::IsInvalidArgument(open.Purge({}).status()));
}

}  // namespace
}  // namespace forge::server
