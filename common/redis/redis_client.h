// A synchronous Redis client over hiredis: binary-safe argv commands, pipelines, and a connection
// that reconnects by itself with exponential backoff.
#ifndef FORGE_COMMON_REDIS_REDIS_CLIENT_H_
#define FORGE_COMMON_REDIS_REDIS_CLIENT_H_

#include <chrono>
#include <cstdint>
#include <iosfwd>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "absl/types/span.h"

struct redisContext;  // hiredis; kept out of this header.

namespace forge {

// One reply from Redis (RESP2) as a plain value. Bulk strings hold arbitrary bytes, NULs included.
class RedisReply {
 public:
  enum class Type { kNil, kInteger, kSimpleString, kBulkString, kError, kArray };

  static RedisReply Nil() { return RedisReply(Type::kNil); }
  static RedisReply Integer(int64_t value);
  static RedisReply SimpleString(std::string text);  // "+OK", "+PONG", "+QUEUED"
  static RedisReply BulkString(std::string bytes);
  static RedisReply Error(std::string message);  // "WRONGTYPE Operation against a key ..."
  static RedisReply Array(std::vector<RedisReply> elements);

  Type type() const { return type_; }
  bool is_nil() const { return type_ == Type::kNil; }
  bool is_integer() const { return type_ == Type::kInteger; }
  bool is_simple_string() const { return type_ == Type::kSimpleString; }
  bool is_bulk_string() const { return type_ == Type::kBulkString; }
  bool is_error() const { return type_ == Type::kError; }
  bool is_array() const { return type_ == Type::kArray; }

  // The accessors return 0 / empty for a reply of another type, never undefined values.
  int64_t integer() const { return integer_; }
  // The text of a simple string or error, or the bytes of a bulk string.
  const std::string& str() const { return text_; }
  const std::vector<RedisReply>& elements() const { return elements_; }

  // Like redis-cli prints it, with non-printable bytes escaped: `"a\000b"`, `(integer) 3`, `nil`.
  std::string DebugString() const;

  friend bool operator==(const RedisReply& a, const RedisReply& b) = default;
  friend std::ostream& operator<<(std::ostream& out, const RedisReply& reply);

 private:
  explicit RedisReply(Type type) : type_(type) {}

  Type type_;
  int64_t integer_ = 0;
  std::string text_;
  std::vector<RedisReply> elements_;
};

struct RedisClientOptions {
  std::string host = "127.0.0.1";
  int port = 6379;
  absl::Duration connect_timeout = absl::Seconds(1);
  // Longest wait for a reply. Blocking commands (BLPOP ...) need a larger value than they block.
  absl::Duration command_timeout = absl::Seconds(2);
  // After a failed connect, calls fail fast until the backoff has passed; it doubles after each
  // failed attempt up to the max and starts over once a connect succeeds.
  absl::Duration reconnect_backoff_initial = absl::Milliseconds(100);
  absl::Duration reconnect_backoff_max = absl::Seconds(5);
  std::string password;  // sent with AUTH after each connect when not empty
  int db = 0;            // chosen with SELECT after each connect when not 0
};

struct RedisClientCounters {
  int64_t connects = 0;          // connections opened: the first one and every reconnect
  int64_t connect_failures = 0;  // connect attempts that failed (refused, timed out, AUTH rejected)
  int64_t disconnects = 0;       // connections dropped: broken, timed out, or closed by the server
};

// One connection to one Redis server, opened on first use and reopened after it breaks.
//
// Errors:
//  - Server down: every call fails fast with Unavailable ("redis at 127.0.0.1:6390 unreachable:
//    Connection refused; next reconnect attempt in 200ms"). Calls never wait out the backoff.
//  - An idle connection the server has closed (a restart, its idle timeout) is noticed before
//    sending and replaced. A connection lost mid-command gives Unavailable: the command may or
//    may not have run, and nothing is retried, since retrying INCR or RPUSH could apply it twice.
//  - No reply within command_timeout: DeadlineExceeded, and the connection is dropped so that
//    the late reply can never be read as the reply to a later command.
//  - Redis error replies ("-WRONGTYPE ...") are answers, not connection failures: the connection
//    stays up. Command turns one into FailedPrecondition carrying the server's message, or into
//    Unavailable for the errors that mean "try again later" (LOADING, BUSY, MASTERDOWN, TRYAGAIN).
//    Pipeline returns them in place as replies with is_error(), next to the other replies.
//
// A server closing the connection mid-write gives Unavailable; the SIGPIPE it raises in hiredis's
// write(2) is kept from ending the process.
//
// Thread-safe: a mutex serializes calls on the one connection (a connect attempt, bounded by
// connect_timeout, holds it too). Use several clients for parallel round trips.
class RedisClient {
 public:
  explicit RedisClient(RedisClientOptions options);
  ~RedisClient();
  RedisClient(const RedisClient&) = delete;
  RedisClient& operator=(const RedisClient&) = delete;

  // Runs one command given as its arguments: Command({"SET", key, value}).
  absl::StatusOr<RedisReply> Command(absl::Span<const std::string> args);

  // Sends all commands in one write and reads their replies, in order, in one round trip.
  // Fails as a whole on a transport error (some commands may have run); error replies come back
  // in place.
  absl::StatusOr<std::vector<RedisReply>> Pipeline(
      absl::Span<const std::vector<std::string>> commands);

  RedisClientCounters counters() const;
  // "host:port", as error messages name the server.
  const std::string& address() const { return address_; }

 private:
  struct ContextDeleter {
    void operator()(redisContext* context) const;
  };
  using Clock = std::chrono::steady_clock;

  absl::StatusOr<std::vector<RedisReply>> RoundTrip(
      absl::Span<const absl::Span<const std::string>> commands)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  absl::Status EnsureConnected() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  // Opens a connection and runs AUTH / SELECT on it; an error's message says why it failed.
  absl::StatusOr<std::unique_ptr<redisContext, ContextDeleter>> Connect() const;
  absl::Status Unreachable(Clock::time_point now) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);

  const RedisClientOptions options_;
  const std::string address_;

  mutable absl::Mutex mutex_;
  std::unique_ptr<redisContext, ContextDeleter> context_ ABSL_GUARDED_BY(mutex_);
  Clock::time_point next_connect_attempt_ ABSL_GUARDED_BY(mutex_);
  absl::Duration reconnect_backoff_ ABSL_GUARDED_BY(mutex_);
  std::string last_connect_error_ ABSL_GUARDED_BY(mutex_);
  RedisClientCounters counters_ ABSL_GUARDED_BY(mutex_);
};

}  // namespace forge

#endif  // FORGE_COMMON_REDIS_REDIS_CLIENT_H_
