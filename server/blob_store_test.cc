#include "server/blob_store.h"

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/digest/sha256.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/support/redis_server.h"

namespace forge::server {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

class BlobStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<std::unique_ptr<testing::RedisServer>> server = testing::RedisServer::Start();
    ASSERT_TRUE(server.ok()) << server.status();
    redis_server_ = *std::move(server);
    redis_ = std::make_unique<RedisClient>(
        RedisClientOptions{.host = redis_server_->host(), .port = redis_server_->port()});
    absl::StatusOr<std::unique_ptr<BlobStore>> store =
        BlobStore::Open(redis_.get(), absl::StrCat(directory_.path(), "/blobs"));
    ASSERT_TRUE(store.ok()) << store.status();
    store_ = *std::move(store);
  }

  // Uploads `bytes` in chunks of `chunk_size` under `sha256` and commits.
  absl::Status Upload(const std::string& sha256, const std::string& bytes, size_t chunk_size) {
    absl::StatusOr<std::unique_ptr<BlobUpload>> upload =
        store_->StartUpload(sha256, static_cast<int64_t>(bytes.size()));
    if (!upload.ok()) return upload.status();
    for (size_t offset = 0; offset < bytes.size(); offset += chunk_size) {
      absl::Status appended = (*upload)->Append(static_cast<int64_t>(offset),
                                                absl::string_view(bytes).substr(offset, chunk_size));
      if (!appended.ok()) return appended;
    }
    return (*upload)->Commit();
  }

  testing::TempDir directory_;
  std::unique_ptr<testing::RedisServer> redis_server_;
  std::unique_ptr<RedisClient> redis_;
  std::unique_ptr<BlobStore> store_;
};

TEST_F(BlobStoreTest, StoresChunkedUploadAndReportsOnlyWhatIsMissing) {
  const std::string bytes(10000, 'w');
  const std::string other(300, 'x');
  const std::string sha = Sha256Hex(bytes);
  const std::string other_sha = Sha256Hex(other);

  absl::StatusOr<std::vector<std::string>> missing = store_->Missing({sha, other_sha});
  ASSERT_TRUE(missing.ok()) << missing.status();
  EXPECT_THAT(*missing, ElementsAre(sha, other_sha));

  ASSERT_TRUE(Upload(sha, bytes, 4096).ok());
  missing = store_->Missing({sha, other_sha});
  ASSERT_TRUE(missing.ok()) << missing.status();
  EXPECT_THAT(*missing, ElementsAre(other_sha));

  absl::StatusOr<std::string> read = store_->Read(sha);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(*read, bytes);
}

TEST_F(BlobStoreTest, RejectsBytesThatDoNotHashToTheDeclaredDigest) {
  const std::string bytes(5000, 'a');
  const std::string sha = Sha256Hex(bytes);
  std::string corrupted = bytes;
  corrupted[4321] = 'b';

  absl::Status status = Upload(sha, corrupted, 1024);
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(status.message(), HasSubstr(sha));
  EXPECT_THAT(status.message(), HasSubstr(Sha256Hex(corrupted)));

  absl::StatusOr<std::vector<std::string>> missing = store_->Missing({sha});
  ASSERT_TRUE(missing.ok()) << missing.status();
  EXPECT_THAT(*missing, ElementsAre(sha));
  EXPECT_FALSE(std::filesystem::exists(store_->PathOf(sha)));
  // No temporary file is left behind.
  EXPECT_TRUE(std::filesystem::is_empty(absl::StrCat(directory_.path(), "/blobs/tmp")));
}

TEST_F(BlobStoreTest, RejectsChunksOutOfOrderAndWrongSizes) {
  const std::string bytes(3000, 'c');
  const std::string sha = Sha256Hex(bytes);
  absl::StatusOr<std::unique_ptr<BlobUpload>> upload = store_->StartUpload(sha, 3000);
  ASSERT_TRUE(upload.ok()) << upload.status();
  ASSERT_TRUE((*upload)->Append(0, absl::string_view(bytes).substr(0, 1000)).ok());
  absl::Status gap = (*upload)->Append(2000, absl::string_view(bytes).substr(2000));
  EXPECT_EQ(gap.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(gap.message(), HasSubstr("expected offset 1000"));
  absl::Status too_long = (*upload)->Append(1000, std::string(2001, 'c'));
  EXPECT_EQ(too_long.code(), absl::StatusCode::kInvalidArgument);

  // The right bytes under a declared size the graph got wrong.
  absl::StatusOr<std::unique_ptr<BlobUpload>> short_declared = store_->StartUpload(sha, 4000);
  ASSERT_TRUE(short_declared.ok());
  ASSERT_TRUE((*short_declared)->Append(0, bytes).ok());
  absl::Status size = (*short_declared)->Commit();
  EXPECT_EQ(size.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(size.message(), HasSubstr("declares 4000"));
}

TEST_F(BlobStoreTest, IndexedBlobWhoseFileIsGoneCountsAsMissing) {
  const std::string bytes = "weights";
  const std::string sha = Sha256Hex(bytes);
  ASSERT_TRUE(Upload(sha, bytes, 3).ok());
  std::filesystem::remove(store_->PathOf(sha));
  absl::StatusOr<std::vector<std::string>> missing = store_->Missing({sha});
  ASSERT_TRUE(missing.ok()) << missing.status();
  EXPECT_THAT(*missing, ElementsAre(sha));
  ASSERT_TRUE(Upload(sha, bytes, 3).ok());
  missing = store_->Missing({sha});
  ASSERT_TRUE(missing.ok());
  EXPECT_THAT(*missing, IsEmpty());
}

TEST_F(BlobStoreTest, MalformedDigestsAreInvalidArguments) {
  absl::StatusOr<std::vector<std::string>> missing = store_->Missing({"ABC"});
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(missing.status().message(), HasSubstr("\"ABC\""));
  // Upper-case hex names the same bytes but is not the canonical spelling the index uses.
  EXPECT_EQ(store_->StartUpload(std::string(64, 'A'), std::nullopt).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_F(BlobStoreTest, RedisDownIsUnavailable) {
  redis_server_->Stop();
  absl::StatusOr<std::vector<std::string>> missing = store_->Missing({std::string(64, 'a')});
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(missing.status().message(), HasSubstr("looking up blobs"));
}

}  // namespace
}  // namespace forge::server
