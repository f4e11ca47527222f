#include "server/blob_store.h"

#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/redis/transaction.h"
#include "common/status/status_macros.h"
#include "server/redis_keys.h"

namespace forge::server {
namespace {

absl::Status ErrnoError(absl::string_view action, absl::string_view path) {
  return absl::InternalError(absl::StrCat(action, " ", path, ": ", std::strerror(errno)));
}

}  // namespace

absl::Status ValidateSha256(absl::string_view sha256, absl::string_view what) {
  bool valid = sha256.size() == 64;
  for (char c : sha256) valid = valid && (absl::ascii_isdigit(c) || (c >= 'a' && c <= 'f'));
  if (!valid) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": \"", sha256, "\" is not a SHA-256 digest (64 lower-case hex digits)"));
  }
  return absl::OkStatus();
}

BlobUpload::BlobUpload(BlobStore* store, std::string sha256, std::optional<int64_t> expected_size,
                       std::string temp_path, int fd)
    : store_(store),
      sha256_(std::move(sha256)),
      expected_size_(expected_size),
      temp_path_(std::move(temp_path)),
      fd_(fd) {}

BlobUpload::~BlobUpload() {
  if (fd_ >= 0) close(fd_);
  // After a successful Commit the file has been renamed away and this fails harmlessly.
  unlink(temp_path_.c_str());
}

absl::Status BlobUpload::Append(int64_t offset, absl::string_view data) {
  if (fd_ < 0) {
    return absl::FailedPreconditionError(absl::StrCat("blob ", sha256_, ": already committed"));
  }
  if (offset != bytes_received_) {
    return absl::InvalidArgumentError(
        absl::StrCat("blob ", sha256_, ": chunk at offset ", offset, ", expected offset ",
                     bytes_received_, " (chunks must come in order, back to back)"));
  }
  if (expected_size_ && bytes_received_ + static_cast<int64_t>(data.size()) > *expected_size_) {
    return absl::InvalidArgumentError(
        absl::StrCat("blob ", sha256_, ": chunks exceed the declared size of ", *expected_size_,
                     " bytes"));
  }
  hasher_.Update(data);
  for (size_t written = 0; written < data.size();) {
    const ssize_t n = write(fd_, data.data() + written, data.size() - written);
    if (n < 0) {
      if (errno == EINTR) continue;
      return ErrnoError("writing", temp_path_);
    }
    written += static_cast<size_t>(n);
  }
  bytes_received_ += static_cast<int64_t>(data.size());
  return absl::OkStatus();
}

absl::Status BlobUpload::Commit() {
  if (fd_ < 0) {
    return absl::FailedPreconditionError(absl::StrCat("blob ", sha256_, ": already committed"));
  }
  const std::string actual = hasher_.Finish().ToHex();
  if (actual != sha256_) {
    return absl::FailedPreconditionError(absl::StrCat("blob ", sha256_, ": the ", bytes_received_,
                                                      " bytes received hash to ", actual));
  }
  if (expected_size_ && bytes_received_ != *expected_size_) {
    return absl::FailedPreconditionError(absl::StrCat("blob ", sha256_, ": received ",
                                                      bytes_received_, " bytes, the graph declares ",
                                                      *expected_size_));
  }
  // Durable before it is indexed: an index entry must never name bytes a crash could lose.
  if (fsync(fd_) != 0) return ErrnoError("syncing", temp_path_);
  close(fd_);
  fd_ = -1;
  const std::string path = store_->PathOf(sha256_);
  std::error_code error;
  std::filesystem::create_directories(std::filesystem::path(path).parent_path(), error);
  if (error) {
    return absl::InternalError(absl::StrCat("creating the directory of ", path, ": ",
                                            error.message()));
  }
  if (rename(temp_path_.c_str(), path.c_str()) != 0) return ErrnoError("renaming into", path);
  return store_->Index(sha256_, bytes_received_);
}

absl::StatusOr<std::unique_ptr<BlobStore>> BlobStore::Open(RedisClient* redis,
                                                           std::string directory) {
  return Open(redis, std::move(directory), keys::Blob(""));
}

absl::StatusOr<std::unique_ptr<BlobStore>> BlobStore::Open(RedisClient* redis,
                                                           std::string directory,
                                                           std::string index_prefix) {
  std::error_code error;
  std::filesystem::create_directories(std::filesystem::path(directory) / "tmp", error);
  if (error) {
    return absl::InternalError(
        absl::StrCat("creating the blob directory ", directory, ": ", error.message()));
  }
  return std::unique_ptr<BlobStore>(
      new BlobStore(redis, std::move(directory), std::move(index_prefix)));
}

std::string BlobStore::IndexKey(absl::string_view sha256) const {
  return absl::StrCat(index_prefix_, sha256);
}

std::string BlobStore::PathOf(absl::string_view sha256) const {
  return absl::StrCat(directory_, "/", sha256.substr(0, 2), "/", sha256);
}

absl::StatusOr<std::vector<std::string>> BlobStore::Missing(
    absl::Span<const std::string> sha256s) {
  std::vector<std::vector<std::string>> commands;
  commands.reserve(sha256s.size());
  for (const std::string& sha256 : sha256s) {
    FORGE_RETURN_IF_ERROR(ValidateSha256(sha256, "blob digest"));
    commands.push_back({"HGET", IndexKey(sha256), std::string(keys::kBlobSizeField)});
  }
  if (commands.empty()) return std::vector<std::string>{};
  absl::StatusOr<std::vector<RedisReply>> replies = redis_->Pipeline(commands);
  if (!replies.ok()) return Annotate(replies.status(), "looking up blobs");
  std::vector<std::string> missing;
  for (size_t i = 0; i < sha256s.size(); ++i) {
    const RedisReply& reply = (*replies)[i];
    if (reply.is_error()) {
      return absl::InternalError(
          absl::StrCat("looking up ", IndexKey(sha256s[i]), ": ", reply.str()));
    }
    struct stat file;
    const bool present = reply.is_bulk_string() &&
                         stat(PathOf(sha256s[i]).c_str(), &file) == 0 &&
                         absl::StrCat(file.st_size) == reply.str();
    if (!present) missing.push_back(sha256s[i]);
  }
  return missing;
}

absl::StatusOr<std::unique_ptr<BlobUpload>> BlobStore::StartUpload(
    absl::string_view sha256, std::optional<int64_t> expected_size) {
  FORGE_RETURN_IF_ERROR(ValidateSha256(sha256, "blob digest"));
  std::string temp_path = absl::StrCat(directory_, "/tmp/", sha256, ".XXXXXX");
  const int fd = mkstemp(temp_path.data());
  if (fd < 0) return ErrnoError("creating", temp_path);
  return std::unique_ptr<BlobUpload>(
      new BlobUpload(this, std::string(sha256), expected_size, std::move(temp_path), fd));
}

absl::StatusOr<std::string> BlobStore::Read(absl::string_view sha256) const {
  FORGE_RETURN_IF_ERROR(ValidateSha256(sha256, "blob digest"));
  std::ifstream file(PathOf(sha256), std::ios::binary);
  if (!file) return absl::NotFoundError(absl::StrCat("blob ", sha256, " is not stored"));
  std::ostringstream bytes;
  bytes << file.rdbuf();
  return bytes.str();
}

absl::StatusOr<std::vector<StoredBlob>> BlobStore::List() {
  const std::string& prefix = index_prefix_;
  FORGE_ASSIGN_OR_RETURN(const std::vector<std::string> indexed,
                         ScanKeys(*redis_, absl::StrCat(prefix, "*")));
  std::vector<std::vector<std::string>> reads;
  for (const std::string& key : indexed) {
    reads.push_back({"HMGET", key, std::string(keys::kBlobSizeField),
                     std::string(keys::kBlobStoredMsField)});
  }
  std::vector<StoredBlob> blobs;
  if (reads.empty()) return blobs;
  absl::StatusOr<std::vector<RedisReply>> replies = redis_->Pipeline(reads);
  if (!replies.ok()) return Annotate(replies.status(), "listing blobs");
  for (size_t i = 0; i < indexed.size(); ++i) {
    const RedisReply& reply = (*replies)[i];
    if (reply.is_error()) {
      return absl::InternalError(absl::StrCat("reading ", indexed[i], ": ", reply.str()));
    }
    if (reply.elements().size() != 2 || reply.elements()[0].is_nil()) continue;  // gone meanwhile
    int64_t size = 0;
    int64_t stored_ms = 0;
    (void)absl::SimpleAtoi(reply.elements()[0].str(), &size);
    (void)absl::SimpleAtoi(reply.elements()[1].str(), &stored_ms);
    blobs.push_back({.sha256 = indexed[i].substr(prefix.size()),
                     .size = size,
                     .stored = absl::FromUnixMillis(stored_ms)});
  }
  return blobs;
}

absl::Status BlobStore::Remove(absl::string_view sha256) {
  FORGE_RETURN_IF_ERROR(ValidateSha256(sha256, "blob digest"));
  FORGE_RETURN_IF_ERROR(
      CheckReply(absl::StrCat("removing blob ", sha256), redis_->Command({"DEL", IndexKey(sha256)})));
  const std::string path = PathOf(sha256);
  if (unlink(path.c_str()) != 0 && errno != ENOENT) return ErrnoError("removing", path);
  return absl::OkStatus();
}

absl::Status BlobStore::Index(absl::string_view sha256, int64_t size) {
  absl::StatusOr<RedisReply> reply = redis_->Command(
      {"HSET", IndexKey(sha256), std::string(keys::kBlobSizeField), absl::StrCat(size),
       std::string(keys::kBlobStoredMsField), absl::StrCat(absl::ToUnixMillis(absl::Now()))});
  return Annotate(reply.status(), absl::StrCat("indexing blob ", sha256));
}

}  // namespace forge::server
