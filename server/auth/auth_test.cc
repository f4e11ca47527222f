#include "server/auth/auth.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

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

TEST(AuthenticatorTest, MalformedFilesNameTheLine) {
  for (const auto& [text, message] : std::vector<std::pair<std::string, std::string>>{
           {"short alice submit", "line 1 of f: a token has at least 16"},
           {"\nlong-enough-token-1 alice boss", "line 2 of f: role \"boss\""},
           {"long-enough-token-1 alice", "expected TOKEN OWNER ROLE"},
           {"long-enough-token-1 alice submit max-priority=x", "a cap is KEY=N"},
           {"long-enough-token-1 alice submit colour=3", "caps are max-priority"},
           {"long-enough-token-1 a read\nlong-enough-token-1 b read", "line 2 of f: the token"}}) {
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
