#include "server/auth/auth.h"

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/support/redis_fixture.h"

namespace forge::server {
namespace {

using ::testing::HasSubstr;

constexpr char kTokens[] = R"(# token owner role caps
submit-token-alice-0001 alice submit max-priority=5 max-trials=100
read-token-bob-00000001 bob read
admin-token-root-000001 root admin
worker-token-gpu1-00001 gpu-node-1 worker
)";

Authenticator Parsed() {
  absl::StatusOr<Authenticator> authenticator = Authenticator::Parse(kTokens, "tokens");
  EXPECT_TRUE(authenticator.ok()) << authenticator.status();
  return authenticator.ok() ? *std::move(authenticator) : Authenticator();
}

TEST(AuthenticatorTest, TokensNameOwnerRoleAndCaps) {
  const Authenticator authenticator = Parsed();
  EXPECT_FALSE(authenticator.open());
  EXPECT_EQ(authenticator.size(), 4u);
  absl::StatusOr<Caller> alice =
      authenticator.AuthorizeToken("submit-token-alice-0001", {Role::kSubmit, Role::kAdmin});
  ASSERT_TRUE(alice.ok()) << alice.status();
  EXPECT_TRUE(alice->authenticated);
  EXPECT_EQ(alice->owner, "alice");
  EXPECT_EQ(alice->role, Role::kSubmit);
  EXPECT_EQ(alice->max_priority, 5);
  EXPECT_EQ(alice->max_trials, 100);
  EXPECT_FALSE(alice->SeesAll());
}

TEST(AuthenticatorTest, UnknownTokenIsUnauthenticatedAndWrongRoleDenied) {
  const Authenticator authenticator = Parsed();
  EXPECT_TRUE(absl::IsUnauthenticated(
      authenticator.AuthorizeToken("no-such-token-000000", {Role::kRead}).status()));
  absl::Status denied =
      authenticator.AuthorizeToken("read-token-bob-00000001", {Role::kSubmit}).status();
  EXPECT_TRUE(absl::IsPermissionDenied(denied)) << denied;
  EXPECT_THAT(denied.message(), HasSubstr("has role read; the call needs submit"));
  EXPECT_TRUE(absl::IsPermissionDenied(
      authenticator.AuthorizeToken("submit-token-alice-0001", {Role::kWorker}).status()));
}

TEST(AuthenticatorTest, OpenAuthenticatorLetsTheAnonymousCallerDoAnything) {
  const Authenticator open;
  absl::StatusOr<Caller> caller = open.AuthorizeToken("", {Role::kWorker});
  ASSERT_TRUE(caller.ok());
  EXPECT_FALSE(caller->authenticated);
  EXPECT_TRUE(caller->SeesAll());
  EXPECT_TRUE(CheckWorkerId(*caller, "anything").ok());
  EXPECT_TRUE(CheckOwner(*caller, "alice", "job-1").ok());
  EXPECT_TRUE(CheckCaps(*caller, 1000, 0, 0).ok());
}

constexpr char kSecret[] = "a-test-secret-of-more-than-32-bytes-0123";

std::string Signed(const TokenClaims& claims, absl::string_view secret = kSecret) {
  absl::StatusOr<std::string> token = SignToken(secret, claims);
  EXPECT_TRUE(token.ok()) << token.status();
  return token.ok() ? *token : "";
}

TEST(AuthenticatorTest, SignedTokensNameOwnerRoleAndCapsUntilTheyExpire) {
  Authenticator authenticator = Parsed();
  const absl::Time later = absl::Now() + absl::Hours(1);
  const std::string carol =
      Signed({.owner = "carol", .role = "submit", .expires = later, .caps = {"max-priority=3"}});
  EXPECT_TRUE(absl::IsUnauthenticated(
      authenticator.AuthorizeToken(carol, {Role::kSubmit}).status()))
      << "no secret configured: signed tokens are unknown";

  authenticator.AcceptSignedTokens(kSecret);
  absl::StatusOr<Caller> caller = authenticator.AuthorizeToken(carol, {Role::kSubmit});
  ASSERT_TRUE(caller.ok()) << caller.status();
  EXPECT_TRUE(caller->authenticated);
  EXPECT_EQ(caller->owner, "carol");
  EXPECT_EQ(caller->role, Role::kSubmit);
  EXPECT_EQ(caller->max_priority, 3);
  EXPECT_TRUE(authenticator.AuthorizeToken("submit-token-alice-0001", {Role::kSubmit}).ok())
      << "the token file still counts";

  // The role is the token's: a submit token cannot purge (admin) or act as a worker.
  absl::Status denied = authenticator.AuthorizeToken(carol, {Role::kAdmin}).status();
  EXPECT_TRUE(absl::IsPermissionDenied(denied)) << denied;
  EXPECT_THAT(denied.message(), HasSubstr("has role submit; the call needs admin"));
  const std::string worker = Signed({.owner = "fleet", .role = "worker", .expires = later});
  EXPECT_EQ(authenticator.AuthorizeToken(worker, {Role::kWorker})->owner, "fleet");

  // Expired, signed with another secret, or with a role this build does not know: refused.
  const std::string expired =
      Signed({.owner = "carol", .role = "submit", .expires = absl::Now() - absl::Seconds(1)});
  absl::Status old = authenticator.AuthorizeToken(expired, {Role::kSubmit}).status();
  EXPECT_TRUE(absl::IsUnauthenticated(old)) << old;
  EXPECT_THAT(old.message(), HasSubstr("expired"));
  const std::string forged = Signed({.owner = "carol", .role = "admin", .expires = later},
                                    "another-secret-of-more-than-32-bytes-xyz");
  EXPECT_THAT(authenticator.AuthorizeToken(forged, {Role::kAdmin}).status().message(),
              HasSubstr("signature does not verify"));
  const std::string unknown_role = Signed({.owner = "carol", .role = "owner", .expires = later});
  EXPECT_TRUE(absl::IsUnauthenticated(
      authenticator.AuthorizeToken(unknown_role, {Role::kAdmin}).status()));
}

class RevokedTokensTest : public testing::RedisFixture {};

TEST_F(RevokedTokensTest, ARevokedTokenOrWorkerIdentityIsRefusedOnTheNextCall) {
  Authenticator authenticator = Parsed();
  authenticator.AcceptSignedTokens(kSecret);
  auto revocations = std::make_shared<Revocations>(redis_.get());
  authenticator.CheckRevocations(revocations);
  const absl::Time later = absl::Now() + absl::Hours(1);
  const std::string carol = Signed(
      {.owner = "carol", .role = "submit", .expires = later, .id = "00000000000000c1"});
  const std::string carol_too = Signed(
      {.owner = "carol", .role = "submit", .expires = later, .id = "00000000000000c2"});
  absl::StatusOr<Caller> caller = authenticator.AuthorizeToken(carol, {Role::kSubmit});
  ASSERT_TRUE(caller.ok()) << caller.status();
  EXPECT_EQ(caller->token_id, "00000000000000c1");

  ASSERT_TRUE(revocations->RevokeToken("00000000000000c1", later, "root").ok());
  const absl::Status revoked = authenticator.AuthorizeToken(carol, {Role::kSubmit}).status();
  EXPECT_TRUE(absl::IsUnauthenticated(revoked)) << revoked;
  EXPECT_THAT(revoked.message(), HasSubstr("was revoked"));
  EXPECT_TRUE(authenticator.AuthorizeToken(carol_too, {Role::kSubmit}).ok())
      << "only that token: the owner's other tokens still work";

  // A token file's token is revoked by its digest id, as `forge admin revoke-token --token`
  // computes it.
  const std::string bob = "read-token-bob-00000001";
  ASSERT_TRUE(revocations->RevokeToken(*TokenId(bob), absl::InfiniteFuture(), "root").ok());
  EXPECT_TRUE(absl::IsUnauthenticated(authenticator.AuthorizeToken(bob, {Role::kRead}).status()));

  // A worker identity: its file token and any signed worker token naming it.
  const std::string signed_worker =
      Signed({.owner = "gpu-node-1", .role = "worker", .expires = later});
  ASSERT_TRUE(authenticator.AuthorizeToken(signed_worker, {Role::kWorker}).ok());
  ASSERT_TRUE(revocations->RevokeIdentity("gpu-node-1", "root").ok());
  for (const std::string& token : {std::string("worker-token-gpu1-00001"), signed_worker}) {
    EXPECT_THAT(authenticator.AuthorizeToken(token, {Role::kWorker}).status().message(),
                HasSubstr("worker identity \"gpu-node-1\" was revoked"));
  }
  EXPECT_TRUE(authenticator.AuthorizeToken("admin-token-root-000001", {Role::kAdmin}).ok());
}

TEST(AuthenticatorTest, ClaimsBecomeACallerOnlyWithAKnownRoleAndCaps) {
  const absl::Time later = absl::Now() + absl::Hours(1);
  EXPECT_EQ(CallerFromClaims({.owner = "x", .role = "read", .expires = later})->role, Role::kRead);
  EXPECT_TRUE(absl::IsInvalidArgument(
      CallerFromClaims({.owner = "x", .role = "boss", .expires = later}).status()));
  EXPECT_TRUE(absl::IsInvalidArgument(
      CallerFromClaims({.owner = "x", .role = "read", .expires = later, .caps = {"colour=1"}})
          .status()));
}

TEST(AuthenticatorTest, MalformedFilesNameTheLine) {
  for (const auto& [text, message] : std::vector<std::pair<std::string, std::string>>{
           {"short alice submit", "line 1 of f: a token has at least 16"},
           {"\nlong-enough-token-1 alice boss", "line 2 of f: role \"boss\""},
           {"long-enough-token-1 alice", "expected TOKEN OWNER ROLE"},
           {"long-enough-token-1 alice submit max-priority=x", "a cap is KEY=N"},
           {"long-enough-token-1 alice submit colour=3", "caps are max-priority"},
           {"long-enough-token-1 a read\nlong-enough-token-1 b read", "line 2 of f: the token"},
           {"forge1.long-enough-token alice read", "may not start with \"forge1.\""}}) {
    absl::StatusOr<Authenticator> parsed = Authenticator::Parse(text, "f");
    EXPECT_TRUE(absl::IsInvalidArgument(parsed.status())) << text;
    EXPECT_THAT(parsed.status().message(), HasSubstr(message));
  }
}

TEST(AuthTest, OwnersSeeOnlyTheirJobsAndAdminsEveryJob) {
  const Authenticator authenticator = Parsed();
  const Caller alice = *authenticator.AuthorizeToken("submit-token-alice-0001", {Role::kSubmit});
  const Caller root = *authenticator.AuthorizeToken("admin-token-root-000001", {Role::kAdmin});
  EXPECT_TRUE(CheckOwner(alice, "alice", "job-1").ok());
  EXPECT_TRUE(absl::IsPermissionDenied(CheckOwner(alice, "bob", "job-2")));
  EXPECT_TRUE(CheckOwner(root, "bob", "job-2").ok());
}

TEST(AuthTest, WorkerIdsAreBoundToTheWorkerIdentity) {
  const Authenticator authenticator = Parsed();
  const Caller worker =
      *authenticator.AuthorizeToken("worker-token-gpu1-00001", {Role::kWorker});
  EXPECT_TRUE(CheckWorkerId(worker, "gpu-node-1").ok());
  EXPECT_TRUE(CheckWorkerId(worker, "gpu-node-1/3").ok());
  EXPECT_TRUE(absl::IsPermissionDenied(CheckWorkerId(worker, "gpu-node-2")));
  EXPECT_TRUE(absl::IsPermissionDenied(CheckWorkerId(worker, "gpu-node-10")));
}

TEST(AuthTest, CapsBoundPriorityAndBudget) {
  const Authenticator authenticator = Parsed();
  const Caller alice = *authenticator.AuthorizeToken("submit-token-alice-0001", {Role::kSubmit});
  EXPECT_TRUE(CheckCaps(alice, 5, 100, 0).ok());
  EXPECT_TRUE(CheckCaps(alice, -3, 1, 1 << 20).ok());
  EXPECT_THAT(CheckCaps(alice, 6, 100, 0).message(), HasSubstr("priority 6 is over the cap"));
  EXPECT_THAT(CheckCaps(alice, 0, 0, 0).message(),
              HasSubstr("budget.max_candidate_trials 0 (unlimited) is over the cap"));
  EXPECT_TRUE(absl::IsPermissionDenied(CheckCaps(alice, 0, 101, 0)));
}

TEST(TlsTest, PlaintextOnlyOnLoopbackUnlessForced) {
  EXPECT_TRUE(IsLoopbackAddress("127.0.0.1:0"));
  EXPECT_TRUE(IsLoopbackAddress("localhost:50051"));
  EXPECT_TRUE(IsLoopbackAddress("[::1]:50051"));
  EXPECT_FALSE(IsLoopbackAddress("0.0.0.0:50051"));
  EXPECT_FALSE(IsLoopbackAddress("[::]:50051"));
  EXPECT_TRUE(ServerCredentials({}, "127.0.0.1:0", false).ok());
  absl::Status refused = ServerCredentials({}, "0.0.0.0:50051", false).status();
  EXPECT_TRUE(absl::IsInvalidArgument(refused));
  EXPECT_THAT(refused.message(), HasSubstr("--insecure"));
  EXPECT_TRUE(ServerCredentials({}, "0.0.0.0:50051", true).ok());
  EXPECT_THAT(ServerCredentials({.cert = "c.pem"}, "127.0.0.1:0", false).status().message(),
              HasSubstr("set both or neither"));
  EXPECT_THAT(
      ServerCredentials({.cert = "/no/such.pem", .key = "/no/such.key"}, "0.0.0.0:1", false)
          .status()
          .message(),
      HasSubstr("cannot read"));
}

}  // namespace
}  // namespace forge::server
