// The compile pool's view of a fleet-wide catalog of compiled objects ("compile once, launch
// everywhere"): objects another worker compiled, under the pool's own cache key (CacheKey: the
// source, options, arch and toolchain versions), so that a configuration is compiled once for the
// fleet rather than once per worker. The pool consults it after its memory and disk caches and
// before compiling, and publishes what it compiled (compile_pool.h).
//
// The catalog is the coordinator's (server/compiled_catalog, through WorkerService:
// catalog_client.h); this interface keeps gRPC out of the compile pool.
//
// What travels is the pool's own cache entry (the object, its compile log and lowered names, the
// key, a checksum); the pool decodes and checks it as it does a disk entry, and takes nothing that
// does not name its key or does not hold an ELF object.
#ifndef FORGE_WORKER_COMPILE_OBJECT_CATALOG_H_
#define FORGE_WORKER_COMPILE_OBJECT_CATALOG_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/digest/sha256.h"
#include "compiler/codegen/generated_kernel.h"

namespace forge::compile {

// An entry as the catalog serves it.
struct CatalogEntry {
  std::string bytes;           // the pool's cache entry, checked against the catalog's digest
  std::string publisher;       // the worker identity that published it
  double compile_seconds = 0;  // what its compile cost the publisher
};

class ObjectCatalog {
 public:
  virtual ~ObjectCatalog() = default;

  // The entry published under `key`. NotFound when there is none; Unimplemented when this
  // catalog is off (the coordinator keeps none, or refused this worker): the pool then neither
  // counts nor asks; any other error (unreachable, timed out, bytes not matching their digest)
  // means the pool compiles for itself.
  virtual absl::StatusOr<CatalogEntry> Fetch(const Digest& key) = 0;

  // Publishes `entry`, the pool's cache entry for `key` (`output` built for `arch` in
  // `compile_seconds`): true when stored, false when the key had an entry already. Unimplemented
  // when publishing is off for this worker (no authenticated identity); other errors as Fetch's.
  virtual absl::StatusOr<bool> Publish(const Digest& key, codegen::CompileOutput output,
                                       absl::string_view arch, double compile_seconds,
                                       absl::string_view entry) = 0;
};

}  // namespace forge::compile

#endif  // FORGE_WORKER_COMPILE_OBJECT_CATALOG_H_
