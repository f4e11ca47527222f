#include "server/compiled_catalog/compiled_catalog.h"

#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/digest/sha256.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/blob_store.h"
#include "tests/support/metric_value.h"
#include "tests/support/redis_fixture.h"
#include "tests/support/redis_server.h"

namespace forge::server {
namespace {

using ::testing::HasSubstr;

// A cache key as the worker's compile pool makes them: SHA-256 hex.
std::string Key(absl::string_view name) { return Sha256Hex(absl::StrCat("key:", name)); }

forge::v1::PublishCompiledObjectRequest Object(absl::string_view name, std::string bytes) {
  forge::v1::PublishCompiledObjectRequest object;
  object.set_cache_key(Key(name));
  object.set_sha256(Sha256Hex(bytes));
  object.set_entry(std::move(bytes));
  object.set_kind(forge::v1::COMPILED_OBJECT_KIND_SHARED_OBJECT);
  object.set_arch("sm_90");
  object.set_compile_seconds(42.5);
  return object;
}

// The files under `directory` (recursively), temporary upload folder included.
int CountFiles(const std::string& directory) {
  int files = 0;
  for (const auto& entry : std::filesystem::recursive_directory_iterator(directory)) {
    files += entry.is_regular_file() ? 1 : 0;
  }
  return files;
}

class CompiledCatalogTest : public testing::RedisFixture {
 protected:
  void SetUp() override {
    RedisFixture::SetUp();
    if (HasFatalFailure()) return;
    Open({});
  }

  void Open(CompiledCatalogOptions options) {
    registry_ = std::make_unique<metrics::Registry>();
    absl::StatusOr<std::unique_ptr<CompiledCatalog>> catalog =
        CompiledCatalog::Open(redis_.get(), directory(), options, registry_.get());
    ASSERT_TRUE(catalog.ok()) << catalog.status();
    catalog_ = *std::move(catalog);
  }

  std::string directory() const { return absl::StrCat(temp_.path(), "/catalog"); }

  testing::TempDir temp_;
  std::unique_ptr<metrics::Registry> registry_;
  std::unique_ptr<CompiledCatalog> catalog_;
};

TEST_F(CompiledCatalogTest, PublishedObjectIsFetchedWithItsPublisherAndCounted) {
  const std::string bytes =
      "\x7f"
      "ELF shared object bytes";
  absl::StatusOr<forge::v1::FetchCompiledObjectResponse> before = catalog_->Fetch(Key("a"));
  EXPECT_EQ(before.status().code(), absl::StatusCode::kNotFound) << before.status();

  absl::StatusOr<bool> stored = catalog_->Publish(Object("a", bytes), "gpu-a");
  ASSERT_TRUE(stored.ok()) << stored.status();
  EXPECT_TRUE(*stored);

  absl::StatusOr<forge::v1::FetchCompiledObjectResponse> fetched = catalog_->Fetch(Key("a"));
  ASSERT_TRUE(fetched.ok()) << fetched.status();
  EXPECT_EQ(fetched->entry(), bytes);
  EXPECT_EQ(fetched->sha256(), Sha256Hex(bytes));
  EXPECT_EQ(fetched->publisher(), "gpu-a");
  EXPECT_DOUBLE_EQ(fetched->compile_seconds(), 42.5);
  EXPECT_EQ(fetched->kind(), forge::v1::COMPILED_OBJECT_KIND_SHARED_OBJECT);

  EXPECT_EQ(testing::MetricValue(*registry_, "forge_coordinator_catalog_lookups_total",
                                 {{"outcome", "hit"}}),
            1);
  EXPECT_EQ(testing::MetricValue(*registry_, "forge_coordinator_catalog_lookups_total",
                                 {{"outcome", "miss"}}),
            1);
  EXPECT_EQ(testing::MetricValue(*registry_, "forge_coordinator_catalog_publishes_total",
                                 {{"outcome", "stored"}}),
            1);
  EXPECT_DOUBLE_EQ(
      testing::MetricValue(*registry_, "forge_coordinator_catalog_saved_compile_seconds_total", {}),
      42.5);
}

TEST_F(CompiledCatalogTest, TheFirstPublisherOfAKeyStays) {
  ASSERT_TRUE(catalog_->Publish(Object("a", "first bytes"), "gpu-a").ok());
  absl::StatusOr<bool> again = catalog_->Publish(Object("a", "other bytes"), "gpu-b");
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_FALSE(*again);
  absl::StatusOr<forge::v1::FetchCompiledObjectResponse> fetched = catalog_->Fetch(Key("a"));
  ASSERT_TRUE(fetched.ok()) << fetched.status();
  EXPECT_EQ(fetched->entry(), "first bytes");
  EXPECT_EQ(fetched->publisher(), "gpu-a");
  EXPECT_EQ(testing::MetricValue(*registry_, "forge_coordinator_catalog_publishes_total",
                                 {{"outcome", "exists"}}),
            1);
}

TEST_F(CompiledCatalogTest, BytesThatDoNotHashToTheDeclaredDigestAreRefused) {
  forge::v1::PublishCompiledObjectRequest object = Object("a", "the real bytes");
  object.set_entry("swapped bytes!");
  absl::StatusOr<bool> stored = catalog_->Publish(object, "gpu-a");
  EXPECT_EQ(stored.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(stored.status().message(), HasSubstr(Sha256Hex("swapped bytes!")));
  EXPECT_THAT(stored.status().message(), HasSubstr(object.sha256()));
  EXPECT_EQ(catalog_->Fetch(Key("a")).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(CountFiles(directory()), 0);
}

TEST_F(CompiledCatalogTest, OnlyAnIdentityMayPublish) {
  absl::StatusOr<bool> stored = catalog_->Publish(Object("a", "bytes"), "");
  EXPECT_EQ(stored.status().code(), absl::StatusCode::kFailedPrecondition) << stored.status();
  EXPECT_EQ(catalog_->Fetch(Key("a")).status().code(), absl::StatusCode::kNotFound);
}

TEST_F(CompiledCatalogTest, MalformedObjectsAreRefusedNamingTheField) {
  const auto refused = [this](forge::v1::PublishCompiledObjectRequest object,
                              absl::string_view field) {
    absl::StatusOr<bool> stored = catalog_->Publish(object, "gpu-a");
    EXPECT_EQ(stored.status().code(), absl::StatusCode::kInvalidArgument) << field;
    EXPECT_THAT(stored.status().message(), HasSubstr(field));
  };
  forge::v1::PublishCompiledObjectRequest object = Object("a", "bytes");
  object.set_cache_key("../../etc/passwd");
  refused(object, "cache_key");
  object = Object("a", "bytes");
  object.set_sha256("ABC");
  refused(object, "sha256");
  object = Object("a", "bytes");
  object.set_kind(forge::v1::COMPILED_OBJECT_KIND_UNSPECIFIED);
  refused(object, "kind");
  object = Object("a", "bytes");
  object.set_arch("sm_90; rm -rf /");
  refused(object, "arch");
  object = Object("a", "bytes");
  object.set_compile_seconds(std::numeric_limits<double>::quiet_NaN());
  refused(object, "compile_seconds");
  object = Object("a", "");
  refused(object, "entry");
  EXPECT_EQ(catalog_->Fetch("not a key").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(testing::MetricValue(*registry_, "forge_coordinator_catalog_publishes_total",
                                 {{"outcome", "refused"}}),
            6);
}

TEST_F(CompiledCatalogTest, ObjectsAndTheCatalogAreBoundedInSize) {
  Open({.max_object_bytes = 100, .max_total_bytes = 150});
  absl::StatusOr<bool> big = catalog_->Publish(Object("big", std::string(101, 'x')), "gpu-a");
  EXPECT_EQ(big.status().code(), absl::StatusCode::kResourceExhausted) << big.status();
  EXPECT_THAT(big.status().message(), HasSubstr("100 bytes per object"));

  ASSERT_TRUE(catalog_->Publish(Object("a", std::string(100, 'a')), "gpu-a").ok());
  absl::StatusOr<bool> full = catalog_->Publish(Object("b", std::string(100, 'b')), "gpu-a");
  EXPECT_EQ(full.status().code(), absl::StatusCode::kResourceExhausted) << full.status();
  EXPECT_EQ(catalog_->Fetch(Key("b")).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(CountFiles(directory()), 1) << "the refused object's bytes are not kept";

  // Room again once the first goes.
  absl::StatusOr<int64_t> purged = catalog_->PurgePublisher("gpu-a");
  ASSERT_TRUE(purged.ok()) << purged.status();
  EXPECT_TRUE(catalog_->Publish(Object("b", std::string(100, 'b')), "gpu-a").ok());
}

TEST_F(CompiledCatalogTest, PurgeRemovesEveryObjectOfThatPublisherAndNoOther) {
  ASSERT_TRUE(catalog_->Publish(Object("a1", "object a1"), "gpu-a").ok());
  ASSERT_TRUE(catalog_->Publish(Object("a2", "object a2"), "gpu-a").ok());
  ASSERT_TRUE(catalog_->Publish(Object("b1", "object b1"), "gpu-b").ok());
  // gpu-b republishing a1 changes nothing: it is still gpu-a's.
  ASSERT_TRUE(catalog_->Publish(Object("a1", "object a1"), "gpu-b").ok());
  EXPECT_EQ(CountFiles(directory()), 3);

  absl::StatusOr<int64_t> purged = catalog_->PurgePublisher("gpu-a");
  ASSERT_TRUE(purged.ok()) << purged.status();
  EXPECT_EQ(*purged, 2);
  EXPECT_EQ(catalog_->Fetch(Key("a1")).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(catalog_->Fetch(Key("a2")).status().code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(catalog_->Fetch(Key("b1")).ok());
  EXPECT_EQ(CountFiles(directory()), 1);
  absl::StatusOr<RedisReply> total = redis_->Command({"GET", "forge:catalog:bytes"});
  ASSERT_TRUE(total.ok());
  EXPECT_EQ(total->str(), "9");

  // A purged key takes a new object.
  absl::StatusOr<bool> again = catalog_->Publish(Object("a1", "rebuilt a1"), "gpu-b");
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_TRUE(*again);
  EXPECT_EQ(*catalog_->PurgePublisher("nobody"), 0);
}

TEST_F(CompiledCatalogTest, AlteredBytesOnDiskAreNeverServed) {
  const std::string bytes = "object bytes";
  ASSERT_TRUE(catalog_->Publish(Object("a", bytes), "gpu-a").ok());
  const std::string sha = Sha256Hex(bytes);
  const std::string path = absl::StrCat(directory(), "/", sha.substr(0, 2), "/", sha);
  ASSERT_TRUE(std::filesystem::exists(path));
  std::ofstream(path, std::ios::trunc) << "tampered object";

  EXPECT_EQ(catalog_->Fetch(Key("a")).status().code(), absl::StatusCode::kNotFound);
  absl::StatusOr<bool> again = catalog_->Publish(Object("a", bytes), "gpu-b");
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_TRUE(*again) << "the dropped entry is published anew";
  absl::StatusOr<forge::v1::FetchCompiledObjectResponse> fetched = catalog_->Fetch(Key("a"));
  ASSERT_TRUE(fetched.ok()) << fetched.status();
  EXPECT_EQ(fetched->entry(), bytes);
}

TEST_F(CompiledCatalogTest, TheWeightBlobStoreNeverListsCatalogObjects) {
  ASSERT_TRUE(catalog_->Publish(Object("a", "object bytes"), "gpu-a").ok());
  absl::StatusOr<std::unique_ptr<BlobStore>> weights =
      BlobStore::Open(redis_.get(), absl::StrCat(temp_.path(), "/blobs"));
  ASSERT_TRUE(weights.ok()) << weights.status();
  absl::StatusOr<std::vector<StoredBlob>> listed = (*weights)->List();
  ASSERT_TRUE(listed.ok()) << listed.status();
  EXPECT_TRUE(listed->empty()) << "the sweeper would remove the catalog's objects";
}

TEST_F(CompiledCatalogTest, RedisDownIsUnavailable) {
  ASSERT_TRUE(catalog_->Publish(Object("a", "object bytes"), "gpu-a").ok());
  server_.reset();
  EXPECT_EQ(catalog_->Fetch(Key("a")).status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(catalog_->Publish(Object("b", "bytes"), "gpu-a").status().code(),
            absl::StatusCode::kUnavailable);
}

}  // namespace
}  // namespace forge::server
