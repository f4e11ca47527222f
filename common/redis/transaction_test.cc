// Transaction, CheckReply, HashFields and ScanKeys against a real redis-server.
#include "common/redis/transaction.h"

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/support/redis_fixture.h"

namespace forge {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Pair;
using ::testing::UnorderedElementsAre;

class TransactionTest : public testing::RedisFixture {
 protected:
  std::string Get(const std::string& key) { return redis_->Command({"GET", key})->str(); }
};

TEST_F(TransactionTest, RunsEveryCommand) {
  ASSERT_TRUE(Transaction(*redis_, "writing", {{"SET", "a", "1"}, {"HSET", "h", "f", "x", "g", "y"}})
                  .ok());
  EXPECT_EQ(Get("a"), "1");
  absl::StatusOr<RedisReply> hash = redis_->Command({"HGETALL", "h"});
  ASSERT_TRUE(hash.ok()) << hash.status();
  EXPECT_THAT(HashFields(*hash), UnorderedElementsAre(Pair("f", "x"), Pair("g", "y")));
  EXPECT_TRUE(Transaction(*redis_, "nothing", {}).ok());
}

TEST_F(TransactionTest, ACommandRefusedWhileQueuedRunsNothing) {
  const absl::Status status =
      Transaction(*redis_, "writing a", {{"SET", "a", "1"}, {"NO-SUCH-COMMAND"}});
  EXPECT_EQ(status.code(), absl::StatusCode::kInternal);
  EXPECT_THAT(status.message(), HasSubstr("writing a: transaction failed"));
  EXPECT_TRUE(redis_->Command({"GET", "a"})->is_nil());
}

TEST_F(TransactionTest, AnErrorInsideExecFailsTheCallAfterTheOthersRan) {
  ASSERT_TRUE(redis_->Command({"SET", "text", "not a number"}).ok());
  const absl::Status status = Transaction(*redis_, "counting", {{"INCR", "text"}, {"SET", "b", "2"}});
  EXPECT_EQ(status.code(), absl::StatusCode::kInternal);
  EXPECT_THAT(status.message(), HasSubstr("counting: "));
  EXPECT_EQ(Get("b"), "2");  // Redis has no rollback
}

TEST_F(TransactionTest, AServerThatIsDownFailsWithTheOperationNamed) {
  server_->Stop();
  const absl::Status status = Transaction(*redis_, "writing c", {{"SET", "c", "3"}});
  EXPECT_EQ(status.code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(status.message(), HasSubstr("writing c: "));
  EXPECT_EQ(CheckReply("reading c", redis_->Command({"GET", "c"})).code(),
            absl::StatusCode::kUnavailable);
}

TEST_F(TransactionTest, ScanKeysListsEveryMatchOnceInOrder) {
  std::vector<std::vector<std::string>> writes;
  for (int i = 0; i < 2500; ++i) writes.push_back({"SET", absl::StrCat("k:", i), "x"});
  writes.push_back({"SET", "other", "x"});
  ASSERT_TRUE(Transaction(*redis_, "writing", writes).ok());
  absl::StatusOr<std::vector<std::string>> keys = ScanKeys(*redis_, "k:*");
  ASSERT_TRUE(keys.ok()) << keys.status();
  ASSERT_EQ(keys->size(), 2500u);
  EXPECT_TRUE(std::is_sorted(keys->begin(), keys->end()));
  EXPECT_THAT(*ScanKeys(*redis_, "k:1?"), ElementsAre("k:10", "k:11", "k:12", "k:13", "k:14",
                                                       "k:15", "k:16", "k:17", "k:18", "k:19"));
  EXPECT_THAT(*ScanKeys(*redis_, "none:*"), IsEmpty());
}

TEST(CheckReplyTest, AnErrorReplyIsInternalAndOtherRepliesAreOk) {
  EXPECT_TRUE(CheckReply("reading", RedisReply::Nil()).ok());
  const absl::Status status = CheckReply("reading", RedisReply::Error("WRONGTYPE no"));
  EXPECT_EQ(status.code(), absl::StatusCode::kInternal);
  EXPECT_EQ(status.message(), "reading: WRONGTYPE no");
}

TEST(HashFieldsTest, IgnoresAnUnpairedTailAndNonArrays) {
  EXPECT_THAT(HashFields(RedisReply::Array({RedisReply::BulkString("k"), RedisReply::BulkString("v"),
                                            RedisReply::BulkString("odd")})),
              UnorderedElementsAre(Pair("k", "v")));
  EXPECT_TRUE(HashFields(RedisReply::Nil()).empty());
}

}  // namespace
}  // namespace forge
