// The coordinator's grpc.health.v1 service: the server's default health service (enabled with
// grpc::EnableDefaultHealthCheckService before the server is built) kept SERVING while Redis
// answers PING and NOT_SERVING while it does not; and a client of that service, for probes
// (forge-coordinator --probe, Helm) and tests.
//
// The health service needs no credentials (probes carry no token) and tells nothing but the
// status; over TLS it is served with the same certificate as every other service.
#ifndef FORGE_SERVER_HEALTH_HEALTH_H_
#define FORGE_SERVER_HEALTH_HEALTH_H_

#include <memory>
#include <thread>

#include "absl/status/statusor.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "common/redis/redis_client.h"
#include "grpcpp/grpcpp.h"

namespace forge::server {

// Sets `server`'s overall health (every service) from a PING to Redis every `period`, starting
// with one right away; logs each change. `server` (built with the default health service) and
// `redis` must outlive the watcher; the thread stops when it is destroyed.
class RedisHealthWatcher {
 public:
  RedisHealthWatcher(grpc::Server* server, RedisClient* redis, absl::Duration period);
  ~RedisHealthWatcher();
  RedisHealthWatcher(const RedisHealthWatcher&) = delete;
  RedisHealthWatcher& operator=(const RedisHealthWatcher&) = delete;

 private:
  absl::Notification stop_;
  std::thread thread_;
};

// grpc.health.v1.Health/Check of the whole server ("") over `channel`: true for SERVING, false for
// NOT_SERVING (or any other status); the call's error (UNAVAILABLE, UNAUTHENTICATED...) when it
// fails within `timeout`.
absl::StatusOr<bool> CheckHealth(grpc::Channel& channel, absl::Duration timeout);

}  // namespace forge::server

#endif  // FORGE_SERVER_HEALTH_HEALTH_H_
