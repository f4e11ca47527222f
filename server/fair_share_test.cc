// Fair shares of a lease: priorities, equal shares in rounds, rotation.
#include "server/fair_share.h"

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace forge::server {
namespace {

using ::testing::ElementsAre;
using ::testing::Pair;

class FairShareTest : public ::testing::Test {
 protected:
  JobRun* AddJob(const std::string& id, int64_t number, int priority, int available) {
    JobRun& job = jobs_[id];
    job.id = id;
    job.number = number;
    job.options.set_priority(priority);
    available_[id] = available;
    return &job;
  }

  // Shares `room` and returns each call as (job id, candidates given).
  std::vector<std::pair<std::string, int>> Share(std::vector<JobRun*> jobs, uint64_t rotation,
                                                 int room) {
    std::vector<std::pair<std::string, int>> calls;
    const absl::Status status =
        ShareFairly(std::move(jobs), rotation, room, [&](JobRun& job, int most) {
          const int given = std::min(most, available_[job.id]);
          available_[job.id] -= given;
          calls.emplace_back(job.id, given);
          return absl::StatusOr<int>(given);
        });
    EXPECT_TRUE(status.ok()) << status;
    return calls;
  }

  std::map<std::string, JobRun> jobs_;
  std::map<std::string, int> available_;
};

TEST_F(FairShareTest, HigherPriorityGoesFirstAndLowerLevelsGetWhatIsLeft) {
  JobRun* low = AddJob("low", 1, 0, 10);
  JobRun* high = AddJob("high", 2, 5, 2);
  EXPECT_THAT(Share({low, high}, 0, 5),
              ElementsAre(Pair("high", 2), Pair("high", 0), Pair("low", 3)));
  AddJob("urgent", 3, 9, 10);
  EXPECT_THAT(Share({low, &jobs_["urgent"]}, 0, 4), ElementsAre(Pair("urgent", 4)));
}

TEST_F(FairShareTest, EqualPrioritiesGetEqualSharesInSubmissionOrderRotated) {
  std::vector<JobRun*> jobs = {AddJob("c", 3, 0, 10), AddJob("a", 1, 0, 10),
                               AddJob("b", 2, 0, 10)};
  EXPECT_THAT(Share(jobs, 0, 6), ElementsAre(Pair("a", 2), Pair("b", 2), Pair("c", 2)));
  EXPECT_THAT(Share(jobs, 1, 6), ElementsAre(Pair("b", 2), Pair("c", 2), Pair("a", 2)));
  EXPECT_THAT(Share(jobs, 5, 3), ElementsAre(Pair("c", 1), Pair("a", 1), Pair("b", 1)));
}

TEST_F(FairShareTest, RoundsGoOnUntilTheLeaseIsFullOrNobodyGivesMore) {
  std::vector<JobRun*> jobs = {AddJob("a", 1, 0, 1), AddJob("b", 2, 0, 10)};
  // Shares of 3, then 1, then 1: a runs dry after its one candidate.
  EXPECT_THAT(Share(jobs, 0, 6), ElementsAre(Pair("a", 1), Pair("b", 3), Pair("a", 0),
                                             Pair("b", 1), Pair("a", 0), Pair("b", 1)));
  // Not enough for the room: the rounds stop once a whole round gave nothing.
  EXPECT_THAT(Share(jobs, 0, 20), ElementsAre(Pair("a", 0), Pair("b", 5), Pair("a", 0),
                                              Pair("b", 0)));
}

TEST_F(FairShareTest, AnErrorEndsTheShareOut) {
  std::vector<JobRun*> jobs = {AddJob("a", 1, 0, 10), AddJob("b", 2, 0, 10)};
  int calls = 0;
  const absl::Status status = ShareFairly(jobs, 0, 4, [&](JobRun&, int) -> absl::StatusOr<int> {
    ++calls;
    return absl::UnavailableError("redis down");
  });
  EXPECT_EQ(status.code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(calls, 1);
}

}  // namespace
}  // namespace forge::server
