#include "common/metrics/exposer.h"

#include <civetweb.h>

#include <cstring>
#include <iterator>
#include <mutex>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace forge::metrics {
namespace {

// civetweb asks for one call before the first server starts.
void InitCivetwebOnce() {
  static std::once_flag once;
  std::call_once(once, [] { mg_init_library(MG_FEATURES_DEFAULT); });
}

// civetweb tells why a start failed ("cannot bind to 127.0.0.1:9464: 98 (Address already in
// use)") only to its log callback, which mg_start2 calls on the starting thread.
thread_local std::string* start_log = nullptr;

int RecordStartLog(const mg_connection* /*connection*/, const char* message) {
  if (start_log == nullptr) return 0;  // not starting: civetweb's default handling
  absl::StrAppend(start_log, start_log->empty() ? "" : "; ", message);
  return 1;
}

}  // namespace

absl::StatusOr<std::unique_ptr<MetricsExposer>> MetricsExposer::Start(
    absl::string_view listen_address) {
  InitCivetwebOnce();
  std::unique_ptr<MetricsExposer> exposer(new MetricsExposer());
  const std::string ports(listen_address);
  // Scrapes are rare and short: two request threads are plenty (civetweb's default is 50).
  const char* options[] = {"listening_ports", ports.c_str(), "num_threads", "2", nullptr};
  mg_callbacks callbacks{};
  callbacks.log_message = &RecordStartLog;
  mg_init_data init{};
  init.callbacks = &callbacks;
  init.configuration_options = options;
  unsigned error_code = 0;  // civetweb writes it; the text below says more
  char error_text[256] = "";
  mg_error_data error{};
  error.code = &error_code;
  error.text = error_text;
  error.text_buffer_size = sizeof(error_text);
  std::string log;
  start_log = &log;
  exposer->context_ = mg_start2(&init, &error);
  start_log = nullptr;
  if (exposer->context_ == nullptr) {
    return absl::UnavailableError(absl::StrCat("metrics exposer: cannot listen on ", listen_address,
                                               ": ", log.empty() ? error_text : log));
  }
  mg_server_port bound[1] = {};
  if (mg_get_server_ports(exposer->context_, 1, bound) < 1) {
    return absl::InternalError(
        absl::StrCat("metrics exposer: civetweb reports no port bound for ", listen_address));
  }
  exposer->port_ = bound[0].port;
  mg_set_request_handler(exposer->context_, "/", &MetricsExposer::HandleRequest, exposer.get());
  return exposer;
}

MetricsExposer::~MetricsExposer() {
  if (context_ != nullptr) mg_stop(context_);
}

void MetricsExposer::AddRegistry(std::shared_ptr<const Registry> registry) {
  absl::MutexLock lock(&mutex_);
  registries_.push_back(std::move(registry));
}

int MetricsExposer::HandleRequest(mg_connection* connection, void* exposer) {
  const mg_request_info* request = mg_get_request_info(connection);
  if (request->local_uri == nullptr || std::strcmp(request->local_uri, "/metrics") != 0) {
    mg_send_http_error(connection, 404, "Not found: %s (metrics are at /metrics)\n",
                       request->request_uri);
    return 404;
  }
  if (std::strcmp(request->request_method, "GET") != 0) {
    mg_send_http_error(connection, 405, "Method %s not allowed: /metrics takes GET\n",
                       request->request_method);
    return 405;
  }
  static_cast<MetricsExposer*>(exposer)->ServeMetrics(connection);
  return 200;
}

void MetricsExposer::ServeMetrics(mg_connection* connection) {
  std::vector<std::shared_ptr<const Registry>> registries;
  {
    absl::MutexLock lock(&mutex_);
    registries = registries_;
  }
  std::vector<FamilySnapshot> families;
  for (const std::shared_ptr<const Registry>& registry : registries) {
    std::vector<FamilySnapshot> collected = registry->Collect();
    std::move(collected.begin(), collected.end(), std::back_inserter(families));
  }
  absl::StatusOr<std::string> text = SerializeText(std::move(families));
  if (!text.ok()) {
    mg_send_http_error(connection, 500, "%s\n", text.status().ToString().c_str());
    return;
  }
  const std::string content_type(kTextContentType);
  mg_send_http_ok(connection, content_type.c_str(), static_cast<long long>(text->size()));
  mg_write(connection, text->data(), text->size());
}

}  // namespace forge::metrics
