// The worker registry: validation, re-registration, liveness and forgetting, in memory.
#include "server/worker_registry.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace forge::server {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

forge::v1::RegisterRequest Request(bool emulated = false) {
  forge::v1::RegisterRequest request;
  request.set_hostname("host");
  request.set_generator_version("gen-1");
  forge::v1::GpuInfo* gpu = request.add_gpus();
  gpu->set_name("H200");
  gpu->set_arch("sm_90");
  gpu->set_emulated(emulated);
  return request;
}

const absl::Time kStart = absl::FromUnixSeconds(1'000'000);

TEST(WorkerRegistryTest, ValidateRefusesMissingGpusNamesAndOtherGenerators) {
  EXPECT_TRUE(WorkerRegistry::Validate(Request(), "gen-1").ok());
  forge::v1::RegisterRequest no_gpus = Request();
  no_gpus.clear_gpus();
  EXPECT_EQ(WorkerRegistry::Validate(no_gpus, "gen-1").code(), absl::StatusCode::kInvalidArgument);
  forge::v1::RegisterRequest unnamed = Request();
  unnamed.mutable_gpus(0)->clear_name();
  EXPECT_EQ(WorkerRegistry::Validate(unnamed, "gen-1").code(), absl::StatusCode::kInvalidArgument);
  const absl::Status stale = WorkerRegistry::Validate(Request(), "gen-2");
  EXPECT_EQ(stale.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(stale.message(), HasSubstr("(gen-1) differ from the coordinator's (gen-2)"));
}

TEST(WorkerRegistryTest, RegisteringAgainReplacesTheStatusAndKeepsTheCounts) {
  WorkerRegistry registry(absl::Seconds(30));
  WorkerRecord& first = registry.Register("worker-1", Request(), kStart);
  WorkerRegistry::CountResult(first, /*measured=*/true);
  WorkerRegistry::CountResult(first, /*measured=*/true);
  WorkerRegistry::CountResult(first, /*measured=*/false);
  forge::v1::RegisterRequest again = Request();
  again.set_hostname("other-host");
  const WorkerRecord& second = registry.Register("worker-1", again, kStart + absl::Seconds(5));
  EXPECT_EQ(second.status.hostname(), "other-host");
  EXPECT_EQ(second.status.worker_id(), "worker-1");
  EXPECT_EQ(second.status.candidates_completed(), 2);
  EXPECT_EQ(second.status.candidates_failed(), 1);
  EXPECT_EQ(second.last_seen, kStart + absl::Seconds(5));
  EXPECT_EQ(second.status.registered_at().seconds(), absl::ToUnixSeconds(kStart) + 5);
}

TEST(WorkerRegistryTest, TouchMarksKnownWorkersSeenOnly) {
  WorkerRegistry registry(absl::Seconds(30));
  registry.Register("worker-1", Request(), kStart);
  EXPECT_EQ(registry.Touch("worker-2", kStart), nullptr);
  WorkerRecord* worker = registry.Touch("worker-1", kStart + absl::Seconds(9));
  ASSERT_NE(worker, nullptr);
  EXPECT_EQ(worker->last_seen, kStart + absl::Seconds(9));
}

TEST(WorkerRegistryTest, LivenessStatusesAndForgettingFollowLastSeen) {
  WorkerRegistry registry(absl::Seconds(30));
  registry.Register("worker-1", Request(), kStart);
  registry.Register("worker-2", Request(), kStart + absl::Seconds(40));
  WorkerRecord restored;
  restored.status.set_worker_id("worker-0");
  restored.last_seen = kStart - absl::Hours(2);
  registry.Restore("worker-0", restored);
  const absl::Time now = kStart + absl::Seconds(50);
  EXPECT_EQ(registry.LiveCount(now), 1);

  const std::vector<forge::v1::WorkerStatus> live = registry.Statuses(now, false, {{"worker-2", 3}});
  ASSERT_EQ(live.size(), 1u);
  EXPECT_EQ(live[0].worker_id(), "worker-2");
  EXPECT_TRUE(live[0].live());
  EXPECT_EQ(live[0].candidates_leased(), 3);
  const std::vector<forge::v1::WorkerStatus> all = registry.Statuses(now, true, {});
  ASSERT_EQ(all.size(), 3u);
  EXPECT_EQ(all[0].worker_id(), "worker-2");  // live first, then the dead by id
  EXPECT_EQ(all[1].worker_id(), "worker-0");
  EXPECT_EQ(all[2].worker_id(), "worker-1");
  EXPECT_FALSE(all[2].live());
  EXPECT_EQ(all[2].last_heartbeat_at().seconds(), absl::ToUnixSeconds(kStart));

  EXPECT_THAT(registry.Dead(now, absl::Hours(1)), ElementsAre("worker-0"));
  registry.Erase("worker-0");
  EXPECT_EQ(registry.Statuses(now, true, {}).size(), 2u);
}

TEST(WorkerRegistryTest, GpusSpacesAndEmulation) {
  WorkerRegistry registry(absl::Seconds(30));
  forge::v1::RegisterRequest request = Request(/*emulated=*/true);
  const WorkerRecord& worker = registry.Register("worker-1", request, kStart);
  EXPECT_EQ(WorkerRegistry::GpuOfArch(worker, "sm_80"), nullptr);
  const forge::v1::GpuInfo* gpu = WorkerRegistry::GpuOfArch(worker, "sm_90");
  ASSERT_NE(gpu, nullptr);
  EXPECT_EQ(ResultSpace(*gpu), "predicted:H200");
  EXPECT_TRUE(WorkerRegistry::IsEmulated(worker));
  const WorkerRecord& real = registry.Register("worker-2", Request(), kStart);
  EXPECT_EQ(ResultSpace(*WorkerRegistry::GpuOfArch(real, "sm_90")), "H200");
  EXPECT_FALSE(WorkerRegistry::IsEmulated(real));
}

}  // namespace
}  // namespace forge::server
