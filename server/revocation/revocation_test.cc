#include "server/revocation/revocation.h"

#include <string>

#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/support/redis_fixture.h"

namespace forge::server {
namespace {

using ::testing::HasSubstr;

class RevocationTest : public testing::RedisFixture {};

TEST_F(RevocationTest, ARevokedTokenIsRefusedAndOthersPass) {
  Revocations revocations(redis_.get());
  EXPECT_TRUE(revocations.Check("00000000000000aa", "").ok());
  ASSERT_TRUE(revocations.RevokeToken("00000000000000aa", absl::InfiniteFuture(), "root").ok());
  const absl::Status refused = revocations.Check("00000000000000aa", "");
  EXPECT_TRUE(absl::IsUnauthenticated(refused)) << refused;
  EXPECT_THAT(refused.message(), HasSubstr("token 00000000000000aa was revoked"));
  EXPECT_TRUE(revocations.Check("00000000000000bb", "").ok());
  ASSERT_TRUE(revocations.RestoreToken("00000000000000aa").ok());
  EXPECT_TRUE(revocations.Check("00000000000000aa", "").ok());
}

TEST_F(RevocationTest, ARevokedIdentityRefusesEveryTokenOfItUntilRestored) {
  Revocations revocations(redis_.get());
  ASSERT_TRUE(revocations.RevokeIdentity("gpu-a", "root").ok());
  EXPECT_THAT(revocations.Check("00000000000000aa", "gpu-a").message(),
              HasSubstr("worker identity \"gpu-a\" was revoked"));
  EXPECT_TRUE(revocations.Check("00000000000000aa", "gpu-b").ok());
  EXPECT_TRUE(revocations.Check("00000000000000aa", "").ok()) << "a client token names no identity";
  ASSERT_TRUE(revocations.RestoreIdentity("gpu-a").ok());
  EXPECT_TRUE(revocations.Check("00000000000000aa", "gpu-a").ok());
}

TEST_F(RevocationTest, AnotherCoordinatorSeesARevocationOnceItsCacheIsOld) {
  Revocations here(redis_.get(), absl::Milliseconds(200));
  Revocations there(redis_.get(), absl::Milliseconds(200));
  ASSERT_TRUE(there.Check("00000000000000cc", "").ok());  // loads its (empty) copy
  ASSERT_TRUE(here.RevokeToken("00000000000000cc", absl::InfiniteFuture(), "root").ok());
  absl::SleepFor(absl::Milliseconds(250));
  EXPECT_TRUE(absl::IsUnauthenticated(there.Check("00000000000000cc", "")));
  ASSERT_TRUE(here.RevokeIdentity("gpu-c", "root").ok());
  absl::SleepFor(absl::Milliseconds(250));
  EXPECT_TRUE(absl::IsUnauthenticated(there.Check("00000000000000dd", "gpu-c")));
}

TEST_F(RevocationTest, AnEntryPastTheTokensExpiryIsDropped) {
  Revocations revocations(redis_.get(), absl::ZeroDuration());
  ASSERT_TRUE(
      revocations.RevokeToken("00000000000000ee", absl::Now() - absl::Seconds(1), "root").ok());
  ASSERT_TRUE(
      revocations.RevokeToken("00000000000000ff", absl::Now() + absl::Hours(1), "root").ok());
  EXPECT_TRUE(revocations.Check("00000000000000ee", "").ok()) << "expired: refused anyway";
  EXPECT_FALSE(revocations.Check("00000000000000ff", "").ok());
  EXPECT_EQ(revocations.Count()->tokens, 1) << "the expired entry left Redis";
}

TEST_F(RevocationTest, FailsClosedWhileRedisIsDownAndRejectsEmptyNames) {
  Revocations revocations(redis_.get(), absl::ZeroDuration());
  EXPECT_TRUE(absl::IsInvalidArgument(revocations.RevokeToken("", absl::InfiniteFuture(), "x")));
  EXPECT_TRUE(absl::IsInvalidArgument(revocations.RevokeIdentity("two words", "x")));
  server_->Stop();
  const absl::Status down = revocations.Check("00000000000000aa", "");
  EXPECT_TRUE(absl::IsUnavailable(down)) << down;
}

}  // namespace
}  // namespace forge::server
