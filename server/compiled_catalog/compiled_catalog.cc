#include "server/compiled_catalog/compiled_catalog.h"

#include <cmath>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/digest/sha256.h"
#include "common/logging/logging.h"
#include "common/redis/transaction.h"
#include "common/status/status_macros.h"
#include "server/redis_keys.h"

namespace forge::server {
namespace {

constexpr double kMaxCompileSeconds = 24 * 3600;
constexpr size_t kMaxArchChars = 16;

// Index fields of forge:catalog:{key}.
constexpr char kSha256[] = "sha256";
constexpr char kSize[] = "size";
constexpr char kPublisher[] = "publisher";
constexpr char kPublishedMs[] = "published_ms";
constexpr char kKind[] = "kind";
constexpr char kArch[] = "arch";
constexpr char kCompileSeconds[] = "compile_seconds";

// KEYS: the entry, the publisher's key set, the byte total. ARGV: key, sha256, size, publisher,
// published_ms, kind, arch, compile seconds, max total. Returns 1 stored, 0 the key has an
// entry, -1 the total would pass its maximum.
constexpr char kPublishScript[] = R"lua(
if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
local total = tonumber(redis.call('GET', KEYS[3]) or '0')
if total + tonumber(ARGV[3]) > tonumber(ARGV[9]) then return -1 end
redis.call('HSET', KEYS[1], 'sha256', ARGV[2], 'size', ARGV[3], 'publisher', ARGV[4],
           'published_ms', ARGV[5], 'kind', ARGV[6], 'arch', ARGV[7], 'compile_seconds', ARGV[8])
redis.call('SADD', KEYS[2], ARGV[1])
redis.call('INCRBY', KEYS[3], ARGV[3])
return 1
)lua";

// KEYS: the entry, the byte total. ARGV: key, sha256 (only an entry naming it goes), the key-set
// prefix. Returns 1 when the entry went, 0 otherwise.
constexpr char kDropScript[] = R"lua(
local fields = redis.call('HMGET', KEYS[1], 'sha256', 'size', 'publisher')
if fields[1] ~= ARGV[2] then return 0 end
redis.call('DEL', KEYS[1])
redis.call('SREM', ARGV[3] .. fields[3], ARGV[1])
redis.call('DECRBY', KEYS[2], fields[2])
return 1
)lua";

bool IsKind(forge::v1::CompiledObjectKind kind) {
  return kind == forge::v1::COMPILED_OBJECT_KIND_CUBIN ||
         kind == forge::v1::COMPILED_OBJECT_KIND_SHARED_OBJECT;
}

absl::Status ValidateArch(absl::string_view arch) {
  bool valid = !arch.empty() && arch.size() <= kMaxArchChars;
  for (char c : arch)
    valid = valid && (absl::ascii_islower(c) || absl::ascii_isdigit(c) || c == '_');
  if (!valid) {
    return absl::InvalidArgumentError(absl::StrCat(
        "arch: \"", absl::CEscape(arch.substr(0, kMaxArchChars)),
        "\" is not a GPU architecture name (lower-case letters, digits and '_', e.g. sm_90)"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<CompiledCatalog>> CompiledCatalog::Open(
    RedisClient* redis, std::string directory, CompiledCatalogOptions options,
    metrics::Registry* registry) {
  if (options.max_object_bytes < 1 || options.max_total_bytes < options.max_object_bytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "compiled catalog: max_object_bytes (", options.max_object_bytes,
        ") must be at least 1 and at most max_total_bytes (", options.max_total_bytes, ")"));
  }
  FORGE_ASSIGN_OR_RETURN(
      std::unique_ptr<BlobStore> objects,
      BlobStore::Open(redis, std::move(directory), std::string(keys::kCatalogObjectPrefix)));
  Metrics metrics;
  FORGE_ASSIGN_OR_RETURN(
      metrics.lookups,
      registry->AddCounter({"forge_coordinator_catalog_lookups_total",
                            "Compiled-object catalog lookups (FetchCompiledObject), by outcome: "
                            "hit or miss.",
                            {}}));
  FORGE_ASSIGN_OR_RETURN(
      metrics.publishes,
      registry->AddCounter({"forge_coordinator_catalog_publishes_total",
                            "Objects workers published to the catalog, by outcome: stored, exists "
                            "(the key had one), refused.",
                            {}}));
  FORGE_ASSIGN_OR_RETURN(
      metrics.compile_seconds,
      registry->AddHistogram({"forge_coordinator_catalog_compile_seconds",
                              "Compile seconds of each object stored in the catalog (one per "
                              "configuration), by kind.",
                              {}},
                             {0.1, 0.3, 1, 3, 10, 20, 30, 45, 60, 90, 120, 240, 600}));
  FORGE_ASSIGN_OR_RETURN(
      metrics::Family<metrics::Counter> * saved,
      registry->AddCounter({"forge_coordinator_catalog_saved_compile_seconds_total",
                            "Compile seconds the catalog's hits saved: the publisher's compile "
                            "time of each object served.",
                            {}}));
  metrics.saved_seconds = &saved->Add({});
  return std::unique_ptr<CompiledCatalog>(
      new CompiledCatalog(redis, std::move(objects), options, metrics));
}

absl::StatusOr<forge::v1::FetchCompiledObjectResponse> CompiledCatalog::Fetch(
    absl::string_view cache_key) {
  FORGE_RETURN_IF_ERROR(ValidateSha256(cache_key, "cache_key"));
  absl::StatusOr<RedisReply> reply = redis_->Command({"HGETALL", keys::CatalogEntry(cache_key)});
  FORGE_RETURN_IF_ERROR(CheckReply(absl::StrCat("reading catalog entry ", cache_key), reply));
  const absl::flat_hash_map<std::string, std::string> fields = HashFields(*reply);
  const auto field = [&fields](absl::string_view name) -> std::string {
    auto it = fields.find(name);
    return it == fields.end() ? "" : it->second;
  };
  const absl::Status missing =
      absl::NotFoundError(absl::StrCat("no compiled object is published under ", cache_key));
  const std::string sha256 = field(kSha256);
  if (sha256.empty()) {
    metrics_.lookups->Add({{"outcome", "miss"}}).Increment();
    return missing;
  }
  absl::StatusOr<std::string> bytes = objects_->Read(sha256);
  if (!bytes.ok() && !absl::IsNotFound(bytes.status())) return bytes.status();
  if (!bytes.ok() || Sha256Hex(*bytes) != sha256) {
    GetLogger("coordinator")
        ->warn("catalog: the object of {} ({}) is {}; dropping its entry", std::string(cache_key),
               sha256, bytes.ok() ? "altered" : "gone");
    FORGE_RETURN_IF_ERROR(Drop(cache_key, sha256));
    metrics_.lookups->Add({{"outcome", "miss"}}).Increment();
    return missing;
  }
  forge::v1::FetchCompiledObjectResponse response;
  response.set_sha256(sha256);
  response.set_entry(*std::move(bytes));
  response.set_publisher(field(kPublisher));
  double seconds = 0;
  if (absl::SimpleAtod(field(kCompileSeconds), &seconds)) response.set_compile_seconds(seconds);
  int kind = 0;
  if (absl::SimpleAtoi(field(kKind), &kind) &&
      IsKind(static_cast<forge::v1::CompiledObjectKind>(kind))) {
    response.set_kind(static_cast<forge::v1::CompiledObjectKind>(kind));
  }
  metrics_.lookups->Add({{"outcome", "hit"}}).Increment();
  metrics_.saved_seconds->Increment(response.compile_seconds());
  return response;
}

absl::Status CompiledCatalog::Validate(const forge::v1::PublishCompiledObjectRequest& object,
                                       absl::string_view publisher) const {
  if (publisher.empty()) {
    return absl::FailedPreconditionError(
        "only an authenticated worker identity may publish compiled objects");
  }
  FORGE_RETURN_IF_ERROR(ValidateSha256(object.cache_key(), "cache_key"));
  FORGE_RETURN_IF_ERROR(ValidateSha256(object.sha256(), "sha256"));
  if (object.entry().empty()) return absl::InvalidArgumentError("entry: no bytes");
  if (static_cast<int64_t>(object.entry().size()) > options_.max_object_bytes) {
    return absl::ResourceExhaustedError(
        absl::StrCat("entry: ", object.entry().size(), " bytes, past the catalog's limit of ",
                     options_.max_object_bytes, " bytes per object"));
  }
  if (!IsKind(object.kind())) {
    return absl::InvalidArgumentError(absl::StrCat("kind: ", object.kind(),
                                                   " is not a compiled object kind (cubin or "
                                                   "shared object)"));
  }
  FORGE_RETURN_IF_ERROR(ValidateArch(object.arch()));
  if (!std::isfinite(object.compile_seconds()) || object.compile_seconds() < 0 ||
      object.compile_seconds() > kMaxCompileSeconds) {
    return absl::InvalidArgumentError(absl::StrCat("compile_seconds: ", object.compile_seconds(),
                                                   " is not within [0, ", kMaxCompileSeconds, "]"));
  }
  if (const std::string actual = Sha256Hex(object.entry()); actual != object.sha256()) {
    return absl::InvalidArgumentError(absl::StrCat("entry: the ", object.entry().size(),
                                                   " bytes hash to ", actual,
                                                   ", not to the "
                                                   "declared sha256 ",
                                                   object.sha256()));
  }
  return absl::OkStatus();
}

absl::StatusOr<bool> CompiledCatalog::Publish(const forge::v1::PublishCompiledObjectRequest& object,
                                              absl::string_view publisher) {
  if (absl::Status valid = Validate(object, publisher); !valid.ok()) {
    metrics_.publishes->Add({{"outcome", "refused"}}).Increment();
    return valid;
  }
  absl::StatusOr<bool> stored = Store(object, publisher);
  if (!stored.ok()) {
    if (absl::IsResourceExhausted(stored.status())) {
      metrics_.publishes->Add({{"outcome", "refused"}}).Increment();
    }
    return stored;
  }
  metrics_.publishes->Add({{"outcome", *stored ? "stored" : "exists"}}).Increment();
  if (*stored) {
    metrics_.compile_seconds
        ->Add({{"kind", object.kind() == forge::v1::COMPILED_OBJECT_KIND_CUBIN ? "cubin"
                                                                               : "shared_object"}})
        .Observe(object.compile_seconds());
  }
  return stored;
}

absl::StatusOr<bool> CompiledCatalog::Store(const forge::v1::PublishCompiledObjectRequest& object,
                                            absl::string_view publisher) {
  const std::string& key = object.cache_key();
  // Most publishes of a known key stop here, before any bytes are written.
  absl::StatusOr<RedisReply> exists = redis_->Command({"EXISTS", keys::CatalogEntry(key)});
  FORGE_RETURN_IF_ERROR(CheckReply(absl::StrCat("looking up catalog entry ", key), exists));
  if (exists->integer() == 1) return false;

  const int64_t size = static_cast<int64_t>(object.entry().size());
  FORGE_ASSIGN_OR_RETURN(std::unique_ptr<BlobUpload> upload,
                         objects_->StartUpload(object.sha256(), size));
  FORGE_RETURN_IF_ERROR(upload->Append(0, object.entry()));
  FORGE_RETURN_IF_ERROR(upload->Commit());

  absl::StatusOr<RedisReply> indexed = redis_->Command(
      {"EVAL", kPublishScript, "3", keys::CatalogEntry(key), keys::CatalogByPublisher(publisher),
       std::string(keys::kCatalogBytes), key, object.sha256(), absl::StrCat(size),
       std::string(publisher), absl::StrCat(absl::ToUnixMillis(absl::Now())),
       absl::StrCat(object.kind()), object.arch(),
       absl::StrFormat("%.17g", object.compile_seconds()), absl::StrCat(options_.max_total_bytes)});
  FORGE_RETURN_IF_ERROR(CheckReply(absl::StrCat("indexing catalog entry ", key), indexed));
  if (indexed->integer() == 1) return true;

  // Not indexed: keep the bytes only when the entry that won names these very bytes.
  absl::StatusOr<RedisReply> winner = redis_->Command({"HGET", keys::CatalogEntry(key), kSha256});
  if (!winner.ok() || winner->str() != object.sha256()) {
    if (absl::Status removed = objects_->Remove(object.sha256()); !removed.ok()) {
      GetLogger("coordinator")->warn("catalog: removing unindexed bytes: {}", removed.ToString());
    }
  }
  if (indexed->integer() < 0) {
    return absl::ResourceExhaustedError(
        absl::StrCat("the compiled-object catalog holds its limit of ", options_.max_total_bytes,
                     " bytes (catalog.max-total-bytes); ", size, " more do not fit"));
  }
  return false;
}

absl::Status CompiledCatalog::Drop(absl::string_view cache_key, absl::string_view sha256) {
  absl::StatusOr<RedisReply> dropped = redis_->Command(
      {"EVAL", kDropScript, "2", keys::CatalogEntry(cache_key), std::string(keys::kCatalogBytes),
       std::string(cache_key), std::string(sha256), keys::CatalogByPublisher("")});
  FORGE_RETURN_IF_ERROR(CheckReply(absl::StrCat("dropping catalog entry ", cache_key), dropped));
  return objects_->Remove(sha256);
}

absl::StatusOr<int64_t> CompiledCatalog::PurgePublisher(absl::string_view publisher) {
  if (publisher.empty()) return absl::InvalidArgumentError("PurgePublisher: no publisher named");
  const std::string set = keys::CatalogByPublisher(publisher);
  absl::StatusOr<RedisReply> members = redis_->Command({"SMEMBERS", set});
  FORGE_RETURN_IF_ERROR(CheckReply(absl::StrCat("listing ", set), members));
  int64_t removed = 0;
  for (const RedisReply& member : members->elements()) {
    const std::string& key = member.str();
    absl::StatusOr<RedisReply> fields =
        redis_->Command({"HMGET", keys::CatalogEntry(key), kSha256, kPublisher});
    FORGE_RETURN_IF_ERROR(CheckReply(absl::StrCat("reading catalog entry ", key), fields));
    if (fields->elements().size() != 2 || fields->elements()[0].is_nil() ||
        fields->elements()[1].str() != publisher) {
      continue;  // gone meanwhile
    }
    FORGE_RETURN_IF_ERROR(Drop(key, fields->elements()[0].str()));
    ++removed;
  }
  FORGE_RETURN_IF_ERROR(CheckReply(absl::StrCat("removing ", set), redis_->Command({"DEL", set})));
  return removed;
}

}  // namespace forge::server
