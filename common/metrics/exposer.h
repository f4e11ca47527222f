// Serves the metrics of one or more registries at GET /metrics (Prometheus text format 0.0.4)
// over HTTP, with civetweb. Every other path answers 404.
//
//   auto exposer = MetricsExposer::Start("127.0.0.1:0");   // port 0: any free port
//   (*exposer)->AddRegistry(registry);                     // std::shared_ptr<Registry>
//   int port = (*exposer)->port();
#ifndef FORGE_COMMON_METRICS_EXPOSER_H_
#define FORGE_COMMON_METRICS_EXPOSER_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "common/metrics/metrics.h"

struct mg_context;
struct mg_connection;

namespace forge::metrics {

class MetricsExposer {
 public:
  // Listens on listen_address, "HOST:PORT" (e.g. "127.0.0.1:9464", "0.0.0.0:0"). Unavailable
  // when the address cannot be bound, naming the address and civetweb's reason.
  static absl::StatusOr<std::unique_ptr<MetricsExposer>> Start(absl::string_view listen_address);

  MetricsExposer(const MetricsExposer&) = delete;
  MetricsExposer& operator=(const MetricsExposer&) = delete;
  // Stops listening and waits for requests in flight. Takes up to 2 s once a request has been
  // served: civetweb 1.15's listener notices the stop only between 2 s polls (fixed in 1.16).
  ~MetricsExposer();

  // The port actually bound (the chosen one when started with port 0).
  int port() const { return port_; }

  // Adds a registry to what /metrics serves, from the next request on. A scrape fails with 500
  // when two registries hold families of the same name.
  void AddRegistry(std::shared_ptr<const Registry> registry);

 private:
  MetricsExposer() = default;
  static int HandleRequest(mg_connection* connection, void* exposer);
  void ServeMetrics(mg_connection* connection);

  mg_context* context_ = nullptr;
  int port_ = 0;
  absl::Mutex mutex_;
  std::vector<std::shared_ptr<const Registry>> registries_ ABSL_GUARDED_BY(mutex_);
};

}  // namespace forge::metrics

#endif  // FORGE_COMMON_METRICS_EXPOSER_H_
