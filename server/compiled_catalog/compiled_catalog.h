// The fleet-wide catalog of compiled objects ("compile once, launch everywhere"): the objects
// worker compile pools built (host-launched candidates' shared objects, 40-75 s of nvcc per CUTLASS
// configuration; NVRTC cubins where a worker publishes them), keyed by the pool's compile-cache key
// (worker/compile/compile_pool.h, CacheKey: SHA-256 of source, options, arch and toolchain
// versions), so that one worker's compile serves every worker with the same toolchain.
//
// Storage: an index entry per key in Redis (server/redis_keys.h: forge:catalog:{key}) naming the
// object's SHA-256, size, kind, arch, compile seconds and publisher; the bytes are a BlobStore of
// their own (files under the catalog's directory, blob index under forge:catalog:object:), apart
// from the weights, so that the weight sweeper never sees them. Each publisher's keys are a set
// (forge:catalog:by:{identity}) for the admin's purge.
//
// Contract:
//  - Publish checks everything before it stores: the key and digest are SHA-256 hex, the bytes hash
//    to the declared digest (InvalidArgument naming both), the kind and arch are well-formed, the
//    object fits max_object_bytes and the catalog max_total_bytes (ResourceExhausted), and there
//    is a publisher (FailedPrecondition: only authenticated workers publish). The first object
//    published under a key stays; a later one is not stored (Publish returns false).
//  - Fetch serves only bytes that still hash to the indexed digest; an entry whose bytes are gone
//    or altered is dropped (NotFound, and the next Publish stores anew).
//  - PurgePublisher removes every object that identity published.
// The bytes are opaque here: the worker checks what they hold (its cache entry's key and checksum).
// Redis errors come back as they are (Unavailable when Redis is down).
//
// Metrics (the coordinator's registry): forge_coordinator_catalog_lookups_total{outcome=hit|miss},
// forge_coordinator_catalog_publishes_total{outcome=stored|exists|refused},
// forge_coordinator_catalog_compile_seconds{kind} (compile seconds of each stored object: the
// cost of one configuration) and forge_coordinator_catalog_saved_compile_seconds_total (the
// publisher's compile seconds, summed over hits).
#ifndef FORGE_SERVER_COMPILED_CATALOG_COMPILED_CATALOG_H_
#define FORGE_SERVER_COMPILED_CATALOG_COMPILED_CATALOG_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/metrics/metrics.h"
#include "common/redis/redis_client.h"
#include "forge/v1/service.pb.h"
#include "server/blob_store.h"

namespace forge::server {

struct CompiledCatalogOptions {
  // Largest object one Publish stores. A CUTLASS sm90 configuration's object is about 1 MB; the
  // coordinator's gRPC messages are at most 64 MiB.
  int64_t max_object_bytes = int64_t{32} << 20;
  // Largest total of every indexed object's bytes; a Publish past it is refused.
  int64_t max_total_bytes = int64_t{20} << 30;
};

class CompiledCatalog {
 public:
  // Creates `directory` when missing. `redis` and `registry` must outlive the catalog;
  // AlreadyExists when `registry` has the catalog's metric families.
  static absl::StatusOr<std::unique_ptr<CompiledCatalog>> Open(RedisClient* redis,
                                                               std::string directory,
                                                               CompiledCatalogOptions options,
                                                               metrics::Registry* registry);
  CompiledCatalog(const CompiledCatalog&) = delete;
  CompiledCatalog& operator=(const CompiledCatalog&) = delete;

  // The object published under `cache_key`, its bytes checked against its digest. NotFound when
  // none is (or its bytes were lost); InvalidArgument for a key that is no SHA-256 hex.
  absl::StatusOr<forge::v1::FetchCompiledObjectResponse> Fetch(absl::string_view cache_key);

  // Stores `object` as `publisher`'s (a worker identity): true when stored, false when the key had
  // an object already. Errors as the header comment says.
  absl::StatusOr<bool> Publish(const forge::v1::PublishCompiledObjectRequest& object,
                               absl::string_view publisher);

  // Removes every object `publisher` published: index entries, bytes, and its key set. Returns how
  // many objects went.
  absl::StatusOr<int64_t> PurgePublisher(absl::string_view publisher);

  const CompiledCatalogOptions& options() const { return options_; }

 private:
  struct Metrics {
    metrics::Family<metrics::Counter>* lookups = nullptr;
    metrics::Family<metrics::Counter>* publishes = nullptr;
    metrics::Family<metrics::Histogram>* compile_seconds = nullptr;
    metrics::Counter* saved_seconds = nullptr;
  };
  CompiledCatalog(RedisClient* redis, std::unique_ptr<BlobStore> objects,
                  CompiledCatalogOptions options, Metrics metrics)
      : redis_(redis), objects_(std::move(objects)), options_(options), metrics_(metrics) {}
  absl::Status Validate(const forge::v1::PublishCompiledObjectRequest& object,
                        absl::string_view publisher) const;
  absl::StatusOr<bool> Store(const forge::v1::PublishCompiledObjectRequest& object,
                             absl::string_view publisher);
  // Removes the entry of `cache_key` (when it still names `sha256`) and its bytes.
  absl::Status Drop(absl::string_view cache_key, absl::string_view sha256);

  RedisClient* const redis_;
  const std::unique_ptr<BlobStore> objects_;
  const CompiledCatalogOptions options_;
  const Metrics metrics_;
};

}  // namespace forge::server

#endif  // FORGE_SERVER_COMPILED_CATALOG_COMPILED_CATALOG_H_
