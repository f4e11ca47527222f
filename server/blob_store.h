// Weight blobs by SHA-256: bytes in files under one directory, an index in Redis (keys:
// server/redis_keys.h).
//
// Why files and not Redis values: real weights run to gigabytes. Redis keeps every value in memory
// and rewrites its append-only file with them, and caps a value at 512 MiB; a file takes chunks as
// they arrive without holding the blob in memory. The index in Redis is what MissingBlobs asks (one
// round trip for any number of digests) and what other coordinators sharing the directory see.
//
// Uploads are verified: the bytes go to a temporary file while they are hashed, and only bytes that
// hash to the declared digest (and have the declared size) are renamed into place and indexed.
#ifndef FORGE_SERVER_BLOB_STORE_H_
#define FORGE_SERVER_BLOB_STORE_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "common/digest/sha256.h"
#include "common/redis/redis_client.h"

namespace forge::server {

// InvalidArgument unless `sha256` is 64 lower-case hex digits; `what` names it in the message.
absl::Status ValidateSha256(absl::string_view sha256, absl::string_view what);

class BlobStore;

// A blob as the index lists it.
struct StoredBlob {
  std::string sha256;
  int64_t size = 0;
  absl::Time stored;  // when its upload was committed
};

// One blob being received. Destroying it before Commit() discards the bytes.
class BlobUpload {
 public:
  BlobUpload(const BlobUpload&) = delete;
  BlobUpload& operator=(const BlobUpload&) = delete;
  ~BlobUpload();

  const std::string& sha256() const { return sha256_; }
  int64_t bytes_received() const { return bytes_received_; }

  // Appends the next chunk. InvalidArgument when `offset` is not where the previous chunk ended
  // (chunks come in order, back to back) or the blob grows past its declared size.
  absl::Status Append(int64_t offset, absl::string_view data);

  // Checks the digest (and the declared size) and stores the blob. FailedPrecondition naming the
  // declared and the actual digest when they differ; the bytes are then discarded.
  absl::Status Commit();

 private:
  friend class BlobStore;
  BlobUpload(BlobStore* store, std::string sha256, std::optional<int64_t> expected_size,
             std::string temp_path, int fd);

  BlobStore* const store_;
  const std::string sha256_;
  const std::optional<int64_t> expected_size_;
  const std::string temp_path_;
  int fd_;
  Sha256 hasher_;
  int64_t bytes_received_ = 0;
};

class BlobStore {
 public:
  // Creates `directory` when missing. `redis` must outlive the store. The index is under
  // keys::Blob (the weights'); a store of other bytes (the compiled-object catalog) names its own
  // `index_prefix` and directory, so that neither store's listing (the sweeper's) sees the other.
  static absl::StatusOr<std::unique_ptr<BlobStore>> Open(RedisClient* redis,
                                                         std::string directory);
  static absl::StatusOr<std::unique_ptr<BlobStore>> Open(RedisClient* redis, std::string directory,
                                                         std::string index_prefix);
  BlobStore(const BlobStore&) = delete;
  BlobStore& operator=(const BlobStore&) = delete;

  // The digests, in the given order, that are not stored: not indexed, or indexed but their file
  // is gone (so the next upload repairs it). InvalidArgument for a malformed digest.
  absl::StatusOr<std::vector<std::string>> Missing(absl::Span<const std::string> sha256s);

  // Starts receiving a blob; `expected_size`, when known, is checked at Commit().
  absl::StatusOr<std::unique_ptr<BlobUpload>> StartUpload(absl::string_view sha256,
                                                          std::optional<int64_t> expected_size);

  // The bytes of a stored blob; NotFound when it is not stored.
  absl::StatusOr<std::string> Read(absl::string_view sha256) const;

  // Where a blob's bytes live: <directory>/<first two digits>/<digest>.
  std::string PathOf(absl::string_view sha256) const;

  // Every indexed blob, by digest (for the sweeper, server/sweeper.h).
  absl::StatusOr<std::vector<StoredBlob>> List();
  // Removes a blob: its index entry, then its file (a file without an entry is never served:
  // Missing reports it, and an upload replaces it). OK when it is not stored.
  absl::Status Remove(absl::string_view sha256);

 private:
  friend class BlobUpload;
  BlobStore(RedisClient* redis, std::string directory, std::string index_prefix)
      : redis_(redis), directory_(std::move(directory)), index_prefix_(std::move(index_prefix)) {}
  absl::Status Index(absl::string_view sha256, int64_t size);
  std::string IndexKey(absl::string_view sha256) const;

  RedisClient* const redis_;
  const std::string directory_;
  const std::string index_prefix_;
};

}  // namespace forge::server

#endif  // FORGE_SERVER_BLOB_STORE_H_
