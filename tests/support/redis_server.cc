#include "tests/support/redis_server.h"

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "common/redis/redis_client.h"

namespace forge::testing {
namespace {

constexpr std::chrono::seconds kStartupTimeout(10);

std::string RedisServerBinary() {
  std::string found = FindTool("FORGE_REDIS_SERVER", "redis-server");
  return found.empty() ? "/usr/bin/redis-server" : found;
}

// The end of the server's output, to say why it did not come up.
std::string LogTail(const std::string& log_path) {
  constexpr size_t kTailBytes = 2000;
  std::ifstream log(log_path);
  std::stringstream contents;
  contents << log.rdbuf();
  std::string text = contents.str();
  return text.size() > kTailBytes ? text.substr(text.size() - kTailBytes) : text;
}

}  // namespace

absl::StatusOr<std::unique_ptr<RedisServer>> RedisServer::Start(RedisServerOptions options) {
  int port = PickFreePort();
  if (port <= 0) return absl::UnavailableError("no free loopback port for redis-server");
  std::unique_ptr<RedisServer> server(new RedisServer(std::move(options), port));
  if (server->dir().empty()) {
    return absl::InternalError("cannot create a directory for redis-server");
  }
  absl::Status launched = server->Launch();
  if (!launched.ok()) return launched;
  return server;
}

RedisServer::RedisServer(RedisServerOptions options, int port)
    : options_(std::move(options)), port_(port) {}

RedisServer::~RedisServer() = default;

void RedisServer::Stop(int signal) {
  if (running()) process_->Kill(signal);
  process_.reset();
}

absl::Status RedisServer::Restart() {
  if (running()) {
    return absl::FailedPreconditionError(
        absl::StrCat("redis-server on port ", port_, " is still running; Stop() it first"));
  }
  return Launch();
}

absl::Status RedisServer::Launch() {
  // A flag and its value per line.
  // clang-format off
  std::vector<std::string> argv = {
      RedisServerBinary(),
      "--port", absl::StrCat(port_),
      "--bind", host_,
      "--daemonize", "no",
      "--save", "",
      "--appendonly", options_.append_only ? "yes" : "no",
      "--appendfsync", options_.append_fsync,
      "--dir", dir(),
  };
  // clang-format on
  if (!options_.password.empty()) argv.insert(argv.end(), {"--requirepass", options_.password});
  argv.insert(argv.end(), options_.extra_args.begin(), options_.extra_args.end());
  const std::string log_path = absl::StrCat(dir(), "/redis.log");
  absl::StatusOr<Subprocess> started = Subprocess::Start(argv, log_path);
  if (!started.ok()) return started.status();
  process_.emplace(*std::move(started));

  // PING rather than a bare TCP connect: while loading the append-only file, redis accepts
  // connections but answers LOADING.
  RedisClientOptions client_options;
  client_options.host = host_;
  client_options.port = port_;
  client_options.reconnect_backoff_initial = absl::Milliseconds(10);
  client_options.reconnect_backoff_max = absl::Milliseconds(50);
  client_options.password = options_.password;
  RedisClient client(client_options);
  const auto deadline = std::chrono::steady_clock::now() + kStartupTimeout;
  absl::Status last_ping;
  while (std::chrono::steady_clock::now() < deadline) {
    if (process_->Wait(std::chrono::milliseconds(0)) != -1) {
      process_.reset();
      return absl::InternalError(absl::StrCat("redis-server on port ", port_,
                                              " exited while starting; its output:\n",
                                              LogTail(log_path)));
    }
    absl::StatusOr<RedisReply> pong = client.Command({"PING"});
    if (pong.ok()) return absl::OkStatus();
    last_ping = pong.status();
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  Stop();
  return absl::DeadlineExceededError(absl::StrCat(
      "redis-server on port ", port_, " did not answer PING within ", kStartupTimeout.count(),
      "s (", last_ping.ToString(), "); its output:\n", LogTail(log_path)));
}

}  // namespace forge::testing
