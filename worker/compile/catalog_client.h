// The fleet's catalog of compiled objects as the compile pool sees it (object_catalog.h), over the
// coordinator's WorkerService (FetchCompiledObject, PublishCompiledObject;
// server/compiled_catalog).
//
// Contract:
//  - Fetch returns an entry only when its bytes hash to the SHA-256 the coordinator names and fit
//    max_object_bytes; otherwise DataLoss (or the call's error). NOT_FOUND is NotFound.
//  - The coordinator saying the catalog is not there for this worker turns it off for the client's
//    lifetime, logged once: FAILED_PRECONDITION or UNIMPLEMENTED from Fetch (no catalog, an older
//    coordinator) turns off both calls; FAILED_PRECONDITION, PERMISSION_DENIED or UNIMPLEMENTED
//    from Publish (no authentication, so no publisher) turns off publishing. Calls that are off
//    return Unimplemented without a round trip.
//  - Every other failure (unreachable, deadline) is the call's error; the next call tries again.
// Thread-safe: the pool's threads share one client.
#ifndef FORGE_WORKER_COMPILE_CATALOG_CLIENT_H_
#define FORGE_WORKER_COMPILE_CATALOG_CLIENT_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "grpcpp/channel.h"
#include "grpcpp/security/credentials.h"
#include "worker/compile/object_catalog.h"

namespace forge::compile {

struct CatalogClientOptions {
  // The coordinator's WorkerService, "host:port".
  std::string coordinator;
  // TLS and the worker's token (common/tls); null: plaintext, no token.
  std::shared_ptr<grpc::ChannelCredentials> credentials;
  // Deadlines of one call: a fetch is a round trip of about a megabyte, and a miss must cost
  // little next to the compile it precedes.
  absl::Duration fetch_timeout = absl::Seconds(10);
  absl::Duration publish_timeout = absl::Seconds(30);
  // Largest entry taken or sent (the coordinator's gRPC messages are at most 64 MiB).
  int64_t max_object_bytes = int64_t{60} << 20;
};

class CatalogClient final : public ObjectCatalog {
 public:
  explicit CatalogClient(CatalogClientOptions options);

  absl::StatusOr<CatalogEntry> Fetch(const Digest& key) override;
  absl::StatusOr<bool> Publish(const Digest& key, codegen::CompileOutput output,
                               absl::string_view arch, double compile_seconds,
                               absl::string_view entry) override;

 private:
  const CatalogClientOptions options_;
  std::shared_ptr<grpc::Channel> channel_;
  std::atomic<bool> fetch_off_{false};
  std::atomic<bool> publish_off_{false};
};

}  // namespace forge::compile

#endif  // FORGE_WORKER_COMPILE_CATALOG_CLIENT_H_
