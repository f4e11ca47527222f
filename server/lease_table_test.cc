// The lease table: the index of leased candidates, renewals, expiry and cancellations.
#include "server/lease_table.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace forge::server {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;
using ::testing::Pair;
using ::testing::UnorderedElementsAre;

const absl::Time kNow = absl::FromUnixSeconds(1'000'000);

LeaseRecord Lease(const std::string& worker, const std::string& space, absl::Time deadline,
                  std::map<std::string, LeaseEntry> candidates) {
  return LeaseRecord{worker, space, deadline, std::move(candidates)};
}

TEST(LeaseTableTest, IndexesCandidatesPerSpaceUntilRemovedOrDropped) {
  LeaseTable table;
  table.Add("lease-1", Lease("worker-1", "H200", kNow, {{"c1", {"job-1", "t1"}},
                                                        {"c2", {"job-1", "t1"}}}));
  EXPECT_TRUE(table.IsLeased("H200", "c1"));
  EXPECT_FALSE(table.IsLeased("predicted:H200", "c1"));
  EXPECT_EQ(table.leased_candidates(), 2u);

  EXPECT_TRUE(table.Remove("lease-1", "c1"));
  EXPECT_FALSE(table.Remove("lease-1", "c1"));
  EXPECT_FALSE(table.Remove("lease-9", "c2"));
  EXPECT_FALSE(table.IsLeased("H200", "c1"));
  EXPECT_THAT(table.Find("lease-1")->candidates, ElementsAre(Pair("c2", ::testing::_)));

  table.Drop("lease-1");
  EXPECT_EQ(table.Find("lease-1"), nullptr);
  EXPECT_FALSE(table.IsLeased("H200", "c2"));
  EXPECT_EQ(table.leased_candidates(), 0u);
  table.Drop("lease-1");  // dropping twice is harmless
}

TEST(LeaseTableTest, CountsTheExpensiveCandidatesAWorkerHolds) {
  LeaseTable table;
  table.Add("lease-1", Lease("worker-1", "H200", kNow,
                             {{"c1", {"job-1", "t1", /*expensive=*/true}},
                              {"c2", {"job-1", "t1"}},
                              {"c3", {"job-2", "t2", /*expensive=*/true}}}));
  table.Add("lease-2", Lease("worker-1", "H200", kNow, {{"c4", {"job-1", "t1", true}}}));
  table.Add("lease-3", Lease("worker-2", "H200", kNow, {{"c5", {"job-1", "t1", true}}}));
  EXPECT_EQ(table.ExpensiveHeldBy("worker-1"), 3);
  EXPECT_EQ(table.ExpensiveHeldBy("worker-2"), 1);
  EXPECT_EQ(table.ExpensiveHeldBy("worker-3"), 0);
  EXPECT_TRUE(table.Remove("lease-1", "c1"));
  table.Drop("lease-2");
  EXPECT_EQ(table.ExpensiveHeldBy("worker-1"), 1);
}

TEST(LeaseTableTest, DroppingALeaseKeepsACandidateLeasedAgainElsewhere) {
  LeaseTable table;
  table.Add("lease-1", Lease("worker-1", "H200", kNow, {{"c1", {"job-1", "t1"}}}));
  table.Add("lease-2", Lease("worker-2", "H200", kNow, {{"c1", {"job-1", "t1"}}}));
  table.Drop("lease-1");
  EXPECT_TRUE(table.IsLeased("H200", "c1"));
  table.Drop("lease-2");
  EXPECT_FALSE(table.IsLeased("H200", "c1"));
}

TEST(LeaseTableTest, RenewsOnlyTheHoldersLeasesAndListsExpiredOnes) {
  LeaseTable table;
  table.Add("lease-1", Lease("worker-1", "H200", kNow, {}));
  table.Add("lease-2", Lease("worker-2", "H200", kNow + absl::Seconds(10), {}));
  EXPECT_FALSE(table.Renew("lease-1", "worker-2", kNow + absl::Seconds(30)));
  EXPECT_FALSE(table.Renew("lease-3", "worker-1", kNow + absl::Seconds(30)));
  EXPECT_THAT(table.Expired(kNow + absl::Seconds(1)), ElementsAre("lease-1"));
  EXPECT_TRUE(table.Renew("lease-1", "worker-1", kNow + absl::Seconds(30)));
  EXPECT_THAT(table.Expired(kNow + absl::Seconds(1)), IsEmpty());
  EXPECT_THAT(table.Expired(kNow + absl::Seconds(11)), ElementsAre("lease-2"));
}

TEST(LeaseTableTest, FindsTheWorkOfAJobAndTheLeasesThatHoldOnlyIt) {
  LeaseTable table;
  table.Add("lease-1", Lease("worker-1", "H200", kNow, {{"c1", {"job-1", "t1"}}}));
  table.Add("lease-2", Lease("worker-1", "H200", kNow, {{"c2", {"job-1", "t1"}},
                                                        {"c3", {"job-2", "t2"}}}));
  table.Add("lease-3", Lease("worker-2", "H200", kNow, {}));
  EXPECT_TRUE(table.HoldsWorkOf("job-1"));
  EXPECT_TRUE(table.HoldsWorkOf("job-2"));
  EXPECT_FALSE(table.HoldsWorkOf("job-3"));
  EXPECT_THAT(table.OnlyFor("job-1"), ElementsAre("lease-1", "lease-3"));
  EXPECT_THAT(table.CandidatesPerWorker(), UnorderedElementsAre(Pair("worker-1", 3),
                                                                Pair("worker-2", 0)));
}

TEST(LeaseTableTest, CancelledLeasesAreToldOnce) {
  LeaseTable table;
  table.NoteCancelled("worker-1", "lease-1");
  table.NoteCancelled("worker-1", "lease-2");
  EXPECT_THAT(table.TakeCancelled("worker-2"), IsEmpty());
  EXPECT_THAT(table.TakeCancelled("worker-1"), ElementsAre("lease-1", "lease-2"));
  EXPECT_THAT(table.TakeCancelled("worker-1"), IsEmpty());
}

}  // namespace
}  // namespace forge::server
