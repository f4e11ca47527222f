// Test support: a real redis-server on a free loopback port, in its own temporary directory.
#ifndef FORGE_TESTS_SUPPORT_REDIS_SERVER_H_
#define FORGE_TESTS_SUPPORT_REDIS_SERVER_H_

#include <csignal>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "tests/support/subprocess.h"

namespace forge::testing {

struct RedisServerOptions {
  bool append_only = false;
  // "always" makes each write durable before its reply, so a SIGKILL loses nothing acknowledged.
  std::string append_fsync = "everysec";
  // When set, clients must AUTH with it (--requirepass).
  std::string password;
  // More redis-server flags, e.g. {"--maxmemory", "1mb"}.
  std::vector<std::string> extra_args;
};

// Runs $FORGE_REDIS_SERVER (else /usr/bin/redis-server) with --bind 127.0.0.1, --save "" and
// --daemonize no; the process is killed and its directory removed when this object goes away.
class RedisServer {
 public:
  // Starts the server and waits until it answers PING.
  static absl::StatusOr<std::unique_ptr<RedisServer>> Start(RedisServerOptions options = {});
  RedisServer(const RedisServer&) = delete;
  RedisServer& operator=(const RedisServer&) = delete;
  ~RedisServer();

  const std::string& host() const { return host_; }
  int port() const { return port_; }
  // Holds the append-only files and redis.log (the server's output).
  const std::string& dir() const { return dir_.path(); }
  bool running() const { return process_.has_value() && process_->running(); }

  // Sends the signal (SIGKILL: a crash; SIGTERM: a clean shutdown) and waits for the exit.
  void Stop(int signal = SIGKILL);
  // Starts a stopped server again on the same port with the same directory, so data in the
  // append-only file survives; waits until it answers PING (after loading that file).
  absl::Status Restart();

 private:
  RedisServer(RedisServerOptions options, int port);
  absl::Status Launch();

  const RedisServerOptions options_;
  const std::string host_ = "127.0.0.1";
  const int port_;
  TempDir dir_;  // declared before process_, so the process is gone before its directory
  std::optional<Subprocess> process_;
};

}  // namespace forge::testing

#endif  // FORGE_TESTS_SUPPORT_REDIS_SERVER_H_
