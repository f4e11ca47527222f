#include "common/signed_token/signed_token.h"

#include <fstream>
#include <string>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/support/subprocess.h"

namespace forge {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::StartsWith;

constexpr char kSecret[] = "0123456789abcdef0123456789abcdef-test-secret";

TokenClaims Alice(absl::Time expires) {
  return {.owner = "alice", .role = "submit", .expires = expires, .caps = {"max-priority=5"}};
}

TEST(SignedTokenTest, ASignedTokenVerifiesUntilItExpires) {
  const absl::Time now = absl::FromUnixSeconds(1'800'000'000);
  absl::StatusOr<std::string> token = SignToken(kSecret, Alice(now + absl::Hours(1)));
  ASSERT_TRUE(token.ok()) << token.status();
  EXPECT_THAT(*token, StartsWith("forge1."));
  absl::StatusOr<TokenClaims> claims = VerifyToken(kSecret, *token, now);
  ASSERT_TRUE(claims.ok()) << claims.status();
  EXPECT_EQ(claims->owner, "alice");
  EXPECT_EQ(claims->role, "submit");
  EXPECT_EQ(claims->expires, now + absl::Hours(1));
  EXPECT_THAT(claims->caps, ElementsAre("max-priority=5"));

  absl::StatusOr<TokenClaims> expired = VerifyToken(kSecret, *token, now + absl::Hours(1));
  EXPECT_TRUE(absl::IsUnauthenticated(expired.status())) << expired.status();
  EXPECT_THAT(expired.status().message(), HasSubstr("expired at"));
}

TEST(SignedTokenTest, AnotherSecretOrAnEditedPayloadDoesNotVerify) {
  const absl::Time now = absl::Now();
  const std::string token = *SignToken(kSecret, Alice(now + absl::Hours(1)));
  absl::StatusOr<TokenClaims> other =
      VerifyToken("another-secret-of-at-least-32-bytes!!", token, now);
  EXPECT_TRUE(absl::IsUnauthenticated(other.status()));
  EXPECT_THAT(other.status().message(), HasSubstr("signature does not verify"));

  // alice makes herself admin: the payload changes, the signature does not follow.
  const size_t dot = token.rfind('.');
  const std::string forged =
      absl::StrCat("forge1.",
                   absl::WebSafeBase64Escape(absl::StrCat(
                       "alice admin exp=", absl::ToUnixSeconds(now + absl::Hours(1)))),
                   token.substr(dot));
  EXPECT_THAT(VerifyToken(kSecret, forged, now).status().message(),
              HasSubstr("signature does not verify"));
  // A signature cut short, garbage, or no token of this kind.
  for (const std::string bad : {token.substr(0, token.size() - 4), std::string("forge1.x.y"),
                                std::string("forge1."), std::string("plain-token-0000000")}) {
    EXPECT_TRUE(absl::IsUnauthenticated(VerifyToken(kSecret, bad, now).status())) << bad;
  }
}

TEST(SignedTokenTest, ClaimsThatCannotBeEncodedAreRefused) {
  const absl::Time later = absl::Now() + absl::Hours(1);
  EXPECT_TRUE(absl::IsInvalidArgument(
      SignToken(kSecret, {.owner = "two words", .role = "read", .expires = later}).status()));
  EXPECT_TRUE(absl::IsInvalidArgument(
      SignToken(kSecret, {.owner = "x", .role = "", .expires = later}).status()));
  EXPECT_TRUE(absl::IsInvalidArgument(
      SignToken(kSecret, {.owner = "x", .role = "read", .expires = later, .caps = {"exp=1"}})
          .status()));
}

TEST(SignedTokenTest, EveryTokenHasOneIdReadableWithoutTheSecret) {
  const absl::Time now = absl::Now();
  TokenClaims claims = Alice(now + absl::Hours(1));
  claims.id = MintTokenId();
  EXPECT_THAT(claims.id, ::testing::MatchesRegex("[0-9a-f]{16}"));
  EXPECT_NE(MintTokenId(), claims.id);
  const std::string token = *SignToken(kSecret, claims);
  absl::StatusOr<TokenClaims> verified = VerifyToken(kSecret, token, now);
  ASSERT_TRUE(verified.ok()) << verified.status();
  EXPECT_EQ(verified->id, claims.id);
  EXPECT_THAT(verified->caps, ElementsAre("max-priority=5")) << "the id is no cap";
  EXPECT_EQ(*TokenId(token), claims.id) << "read by the CLI, which has no secret";

  // A token signed without an id (before ids existed) and a token file's token: their digest.
  const std::string old = *SignToken(kSecret, Alice(now + absl::Hours(1)));
  const std::string digest_id = *TokenId(old);
  EXPECT_THAT(digest_id, ::testing::MatchesRegex("[0-9a-f]{16}"));
  EXPECT_EQ(VerifyToken(kSecret, old, now)->id, digest_id);
  EXPECT_NE(*TokenId("plain-token-0000000"), *TokenId("plain-token-0000001"));

  EXPECT_TRUE(absl::IsInvalidArgument(TokenId("forge1.!!!.x").status()));
  claims.id = "not-hex";
  EXPECT_TRUE(absl::IsInvalidArgument(SignToken(kSecret, claims).status()));
  claims.id = "";
  claims.caps = {"id=0123456789abcdef"};
  EXPECT_TRUE(absl::IsInvalidArgument(SignToken(kSecret, claims).status())) << "an id posing as a cap";
}

TEST(SignedTokenTest, TheSecretFileMustHoldEnoughBytes) {
  testing::TempDir dir;
  const std::string good = dir.path() + "/good", short_one = dir.path() + "/short";
  std::ofstream(good) << kSecret << "\n";
  std::ofstream(short_one) << "too short\n";
  EXPECT_EQ(*ReadTokenSecret(good), kSecret) << "without the trailing newline";
  EXPECT_THAT(ReadTokenSecret(short_one).status().message(), HasSubstr("at least 32"));
  EXPECT_TRUE(absl::IsInvalidArgument(ReadTokenSecret(dir.path() + "/none").status()));
}

}  // namespace
}  // namespace forge
