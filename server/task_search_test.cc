// Task searches over a real test model's task and the real MCTS searcher: how results are taken
// in (TaskSearch), and how searches load, replay the cache and snapshot (TaskSearches, against a
// real redis-server).
#include "server/task_search.h"

#include <cstdlib>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "compiler/graph/partition.h"
#include "compiler/search/candidate.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/support/redis_fixture.h"

namespace forge::server {
namespace {

using ::forge::v1::Candidate;
using ::forge::v1::Result;
using ::testing::ElementsAre;
using ::testing::IsEmpty;

constexpr char kSpace[] = "predicted:H200";
constexpr char kArch[] = "sm_90";

forge::v1::KernelTask SoftmaxTask() {
  const char* directory = std::getenv("FORGE_TEST_MODELS");
  std::ifstream file(absl::StrCat(directory == nullptr ? "" : directory, "/softmax/graph.pb"),
                     std::ios::binary);
  std::stringstream bytes;
  bytes << file.rdbuf();
  forge::v1::Graph graph;
  EXPECT_TRUE(graph.ParseFromString(bytes.str()));
  absl::StatusOr<graph::PartitionResult> partition = graph::Partition(graph);
  EXPECT_TRUE(partition.ok() && !partition->tasks.empty()) << partition.status();
  return partition.ok() ? partition->tasks[0] : forge::v1::KernelTask();
}

Result Measured(const std::string& digest, double us) {
  Result result;
  result.mutable_measurement()->set_candidate_digest(digest);
  result.mutable_measurement()->set_median_us(us);
  result.mutable_measurement()->set_percent_of_floor(10);
  return result;
}

Result Failed(const std::string& digest) {
  Result result;
  result.mutable_failure()->set_candidate_digest(digest);
  result.mutable_failure()->set_stage(forge::v1::FAILURE_STAGE_COMPILE);
  return result;
}

TaskSearch NewSearch(const forge::v1::KernelTask& task) {
  TaskSearch search;
  search.space = kSpace;
  search.spec = task;
  search.baseline = *search::BaselineCandidate(task, kArch);
  search.searcher = *search::CreateMctsSearcher(task, kArch, {});
  return search;
}

TEST(TaskSearchTest, TakesResultsIntoCountsBestAndTheSearcher) {
  TaskSearch search = NewSearch(SoftmaxTask());
  search.baseline_leased = true;
  EXPECT_FALSE(search.Apply(search.baseline.digest(), Measured(search.baseline.digest(), 100), true)
                   .improved);
  EXPECT_FALSE(search.baseline_leased);
  EXPECT_TRUE(search.Progress().baseline_in);
  EXPECT_EQ(search.Progress().eager_us, 100);
  EXPECT_EQ(search.measured, 0) << "the baseline is not a trial";

  const std::vector<Candidate> proposed = search.searcher->Propose(4);
  ASSERT_EQ(proposed.size(), 4u);
  TaskSearch::Applied fast =
      search.Apply(proposed[0].digest(), Measured(proposed[0].digest(), 50), true);
  EXPECT_TRUE(fast.improved);
  EXPECT_EQ(fast.speedup, 2.0);
  EXPECT_TRUE(search.dirty);
  // The same result again counts once.
  EXPECT_FALSE(
      search.Apply(proposed[0].digest(), Measured(proposed[0].digest(), 50), true).improved);
  TaskSearch::Applied slow =
      search.Apply(proposed[1].digest(), Measured(proposed[1].digest(), 200), true);
  EXPECT_FALSE(slow.improved);
  EXPECT_EQ(slow.speedup, 0.5);
  EXPECT_EQ(search.Apply(proposed[2].digest(), Failed(proposed[2].digest()), true).speedup,
            std::nullopt);
  EXPECT_EQ(search.measured, 2);
  EXPECT_EQ(search.failed, 1);
  EXPECT_EQ(search.failures[forge::v1::FAILURE_STAGE_COMPILE], 1);
  EXPECT_EQ(search.best->median_us(), 50);

  // One candidate is still out; another waits in the ready queue.
  search.ready.push_back(proposed[3]);
  TaskProgress progress = search.Progress();
  EXPECT_EQ(progress.recorded, 3);
  EXPECT_EQ(progress.in_flight, 0);
  EXPECT_EQ(progress.best_percent_of_floor, 10);
  search.ReleaseReady();
  EXPECT_THAT(search.ready, IsEmpty());
  EXPECT_EQ(search.searcher->pending(), 0);

  search.best_candidate = proposed[0];
  forge::v1::TaskResults out;
  search.Summarize(out);
  EXPECT_EQ(out.candidates_measured(), 2);
  EXPECT_EQ(out.candidates_failed(), 1);
  ASSERT_EQ(out.failures_by_stage_size(), 1);
  EXPECT_EQ(out.best_candidate().digest(), proposed[0].digest());
  EXPECT_EQ(out.best().median_us(), 50);
  EXPECT_EQ(out.best().eager_median_us(), 100);
}

// The results cache spans generator versions: a faster result whose candidate this build cannot
// regenerate is counted but never becomes the best.
TEST(TaskSearchTest, OnlyCandidatesThisBuildCanRegenerateBecomeTheBest) {
  TaskSearch search = NewSearch(SoftmaxTask());
  search.Apply(search.baseline.digest(), Measured(search.baseline.digest(), 100), true);
  const std::vector<Candidate> proposed = search.searcher->Propose(2);
  ASSERT_EQ(proposed.size(), 2u);
  EXPECT_TRUE(MadeByThisBuild(proposed[0]));
  Candidate old = proposed[1];
  old.set_generator_version("reduction-3");
  old.set_digest(search::CandidateDigest(old));
  EXPECT_FALSE(MadeByThisBuild(old));

  EXPECT_TRUE(search.WouldImprove(old.digest(), Measured(old.digest(), 10)));
  EXPECT_FALSE(search.Apply(old.digest(), Measured(old.digest(), 10), false).improved);
  EXPECT_FALSE(search.best.has_value());
  EXPECT_EQ(search.measured, 1);
  EXPECT_TRUE(
      search.Apply(proposed[0].digest(), Measured(proposed[0].digest(), 50), true).improved);
  EXPECT_EQ(search.best->median_us(), 50);
  EXPECT_FALSE(search.WouldImprove(proposed[0].digest(), Measured(proposed[0].digest(), 40)))
      << "counted already";
  EXPECT_FALSE(
      search.WouldImprove(search.baseline.digest(), Measured(search.baseline.digest(), 1)));
}

TEST(TaskSearchTest, TheBaselineIsBestUntilACandidateBeatsIt) {
  TaskSearch search = NewSearch(SoftmaxTask());
  search.Apply(search.baseline.digest(), Measured(search.baseline.digest(), 100), true);
  const std::vector<Candidate> proposed = search.searcher->Propose(1);
  ASSERT_EQ(proposed.size(), 1u);
  EXPECT_TRUE(
      search.Apply(proposed[0].digest(), Measured(proposed[0].digest(), 120), true).improved);
  forge::v1::TaskResults out;
  search.Summarize(out);
  EXPECT_EQ(out.best_candidate().digest(), search.baseline.digest());
  EXPECT_EQ(out.best().median_us(), 100);

  // A released candidate may be proposed again; a released baseline may be leased again.
  search.baseline_leased = true;
  search.Release(search.baseline.digest());
  EXPECT_FALSE(search.baseline_leased);
}

class TaskSearchesTest : public testing::RedisFixture {
 protected:
  void SetUp() override {
    RedisFixture::SetUp();
    if (HasFatalFailure()) return;
    store_ = std::make_unique<SchedulerStore>(redis_.get());
    results_ = std::make_unique<ResultCache>(redis_.get());
    task_ = SoftmaxTask();
  }

  // Loads the task's search, recording the digests the replay applies, in order.
  TaskSearch* Load(TaskSearches& searches, const LeaseTable& leases,
                   std::vector<std::string>* applied = nullptr) {
    absl::StatusOr<TaskSearch*> search = searches.Get(
        kSpace, kArch, task_, leases,
        [&](TaskSearch& task, const std::string& digest, const Result& result) {
          if (applied != nullptr) applied->push_back(digest);
          task.Apply(digest, result, true);
          return absl::OkStatus();
        });
    EXPECT_TRUE(search.ok()) << search.status();
    return search.ok() ? *search : nullptr;
  }

  std::unique_ptr<SchedulerStore> store_;
  std::unique_ptr<ResultCache> results_;
  forge::v1::KernelTask task_;
};

TEST_F(TaskSearchesTest, LoadsOnceAndReplaysTheCachedResultsBaselineFirst) {
  TaskSearches searches(store_.get(), results_.get(), {});
  LeaseTable leases;
  const Candidate baseline = *search::BaselineCandidate(task_, kArch);
  std::vector<Candidate> proposed = search::CreateMctsSearcher(task_, kArch, {}).value()->Propose(3);
  ASSERT_EQ(proposed.size(), 3u);
  for (const Candidate& candidate : proposed) {
    ASSERT_TRUE(results_->PutIfAbsent(kSpace, candidate, Measured(candidate.digest(), 50), "job-1")
                    .ok());
  }
  ASSERT_TRUE(
      results_->PutIfAbsent(kSpace, baseline, Measured(baseline.digest(), 100), "job-1").ok());

  std::vector<std::string> applied;
  TaskSearch* search = Load(searches, leases, &applied);
  ASSERT_NE(search, nullptr);
  ASSERT_EQ(applied.size(), 4u);
  EXPECT_EQ(applied[0], baseline.digest());
  EXPECT_EQ(search->measured, 3);
  EXPECT_EQ(search->eager->median_us(), 100);
  EXPECT_TRUE(search->spec.occurrences() == 0 && search->spec.baseline_share() == 0);
  applied.clear();
  EXPECT_EQ(Load(searches, leases, &applied), search);
  EXPECT_THAT(applied, IsEmpty());
  EXPECT_EQ(searches.Find(kSpace, task_.digest()), search);
  EXPECT_EQ(searches.Find("H200", task_.digest()), nullptr);
  EXPECT_EQ(searches.size(), 1u);
}

TEST_F(TaskSearchesTest, ASnapshotRestoresTheSearchAndReleasesWhatNoLeaseHolds) {
  LeaseTable leases;
  std::vector<Candidate> pending;
  {
    TaskSearches searches(store_.get(), results_.get(), {});
    TaskSearch* search = Load(searches, leases);
    ASSERT_NE(search, nullptr);
    pending = search->searcher->Propose(3);
    ASSERT_EQ(pending.size(), 3u);
    search->ready.push_back(pending[2]);
    search->dirty = true;
    ASSERT_TRUE(searches.Snapshot(/*all=*/false).ok());
    EXPECT_FALSE(search->dirty);
    EXPECT_EQ(searches.frontier(), 1u);
    // Stranded: pending, not ready, held by no lease.
    leases.Add("lease-1", LeaseRecord{"worker-1", kSpace, absl::Now(),
                                      {{pending[0].digest(), {"job-1", task_.digest()}}}});
    searches.ReleaseStranded(leases);
    EXPECT_EQ(search->searcher->pending(), 2);  // the leased one and the ready one
  }
  // A restarted coordinator: the saved search keeps only what the lease holds pending.
  TaskSearches restarted(store_.get(), results_.get(), {});
  TaskSearch* search = Load(restarted, leases);
  ASSERT_NE(search, nullptr);
  EXPECT_THAT(search->searcher->PendingDigests(), ElementsAre(pending[0].digest()));
}

TEST_F(TaskSearchesTest, AStaleSnapshotIsDroppedAndTheSearchStartsOver) {
  ASSERT_TRUE(store_->SaveSearchStates({{kSpace, task_.digest(), "not a search state"}}).ok());
  TaskSearches searches(store_.get(), results_.get(), {});
  LeaseTable leases;
  TaskSearch* search = Load(searches, leases);
  ASSERT_NE(search, nullptr);
  EXPECT_EQ(search->searcher->recorded(), 0);
  EXPECT_EQ(*store_->LoadSearchState(kSpace, task_.digest()), "");
}

}  // namespace
}  // namespace forge::server
