#include "common/redis/redis_client.h"

#include <hiredis/hiredis.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>

#include <algorithm>
#include <cerrno>
#include <ostream>
#include <utility>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status/status_macros.h"

namespace forge {
namespace {

using CommandArgs = absl::Span<const std::string>;

// hiredis writes with write(2), so writing to a connection the server has closed raises SIGPIPE,
// which ends the process by default. This blocks SIGPIPE on the calling thread for the scope and
// discards the ones raised meanwhile; the failed write still reports EPIPE.
class ScopedSigpipeSuppression {
 public:
  ScopedSigpipeSuppression() {
    sigemptyset(&sigpipe_);
    sigaddset(&sigpipe_, SIGPIPE);
    sigset_t pending;
    sigpending(&pending);
    already_pending_ = sigismember(&pending, SIGPIPE) == 1;
    pthread_sigmask(SIG_BLOCK, &sigpipe_, &previous_mask_);
  }
  ~ScopedSigpipeSuppression() {
    // A SIGPIPE pending from before belongs to someone else; leave it.
    if (!already_pending_) {
      const timespec no_wait{};
      while (sigtimedwait(&sigpipe_, nullptr, &no_wait) == SIGPIPE) {
      }
    }
    pthread_sigmask(SIG_SETMASK, &previous_mask_, nullptr);
  }
  ScopedSigpipeSuppression(const ScopedSigpipeSuppression&) = delete;
  ScopedSigpipeSuppression& operator=(const ScopedSigpipeSuppression&) = delete;

 private:
  sigset_t sigpipe_;
  sigset_t previous_mask_;
  bool already_pending_ = false;
};

RedisReply FromHiredis(const redisReply& reply) {
  switch (reply.type) {
    case REDIS_REPLY_INTEGER:
      return RedisReply::Integer(reply.integer);
    case REDIS_REPLY_STATUS:
      return RedisReply::SimpleString(std::string(reply.str, reply.len));
    case REDIS_REPLY_STRING:
      return RedisReply::BulkString(std::string(reply.str, reply.len));
    case REDIS_REPLY_ERROR:
      return RedisReply::Error(std::string(reply.str, reply.len));
    case REDIS_REPLY_ARRAY: {
      std::vector<RedisReply> elements;
      elements.reserve(reply.elements);
      for (size_t i = 0; i < reply.elements; ++i) {
        elements.push_back(FromHiredis(*reply.element[i]));
      }
      return RedisReply::Array(std::move(elements));
    }
    default:  // REDIS_REPLY_NIL, also for a nil array; hiredis 0.14 knows no other types.
      return RedisReply::Nil();
  }
}

// The command's name for messages; never its other arguments, which may hold a password.
std::string CommandName(CommandArgs args) {
  constexpr size_t kMaxNameLength = 32;
  return absl::CEscape(absl::string_view(args.front()).substr(0, kMaxNameLength));
}

std::string DescribeCommand(absl::Span<const CommandArgs> commands, size_t index) {
  if (commands.size() == 1) return CommandName(commands[index]);
  return absl::StrCat(CommandName(commands[index]), " (command ", index + 1, " of a pipeline of ",
                      commands.size(), ")");
}

// Sends the commands in one write and reads one reply per command. A failure leaves the
// connection unusable: DeadlineExceeded when no reply came within the socket's timeout,
// Unavailable for any other I/O or protocol error. Its message names the command.
absl::Status Exchange(redisContext& context, absl::Span<const CommandArgs> commands,
                      absl::Duration timeout, std::vector<RedisReply>& replies) {
  std::vector<const char*> argv;
  std::vector<size_t> lengths;
  for (CommandArgs args : commands) {
    argv.clear();
    lengths.clear();
    for (const std::string& arg : args) {
      argv.push_back(arg.data());
      lengths.push_back(arg.size());
    }
    // Only appends to hiredis's output buffer; fails only when out of memory.
    if (redisAppendCommandArgv(&context, static_cast<int>(argv.size()), argv.data(),
                               lengths.data()) != REDIS_OK) {
      return absl::ResourceExhaustedError(
          absl::StrCat("cannot buffer ", CommandName(args), ": ", context.errstr));
    }
  }
  replies.reserve(replies.size() + commands.size());
  for (size_t i = 0; i < commands.size(); ++i) {
    void* raw = nullptr;
    if (redisGetReply(&context, &raw) != REDIS_OK) {
      // hiredis reports a read or write that hit SO_RCVTIMEO/SO_SNDTIMEO as an I/O error with
      // errno EAGAIN.
      const bool timed_out =
          context.err == REDIS_ERR_IO && (errno == EAGAIN || errno == EWOULDBLOCK);
      if (timed_out) {
        return absl::DeadlineExceededError(absl::StrCat("no reply to ",
                                                        DescribeCommand(commands, i), " within ",
                                                        absl::FormatDuration(timeout)));
      }
      return absl::UnavailableError(absl::StrCat(
          "connection lost during ", DescribeCommand(commands, i), ": ", context.errstr));
    }
    std::unique_ptr<redisReply, void (*)(void*)> owned(static_cast<redisReply*>(raw),
                                                       freeReplyObject);
    replies.push_back(FromHiredis(*owned));
  }
  return absl::OkStatus();
}

// Redis sends nothing unasked, so an idle connection that polls readable (or hung up) has been
// closed by the server: it restarted, or dropped the client after its idle timeout.
bool IdleConnectionClosed(const redisContext& context) {
  pollfd socket{.fd = context.fd, .events = POLLIN, .revents = 0};
  return poll(&socket, 1, /*timeout=*/0) != 0;
}

// Error replies that mean "the server cannot serve this now, retry later".
bool IsTransientServerError(std::string_view message) {
  std::string_view code = message.substr(0, message.find(' '));
  return code == "LOADING" || code == "BUSY" || code == "MASTERDOWN" || code == "TRYAGAIN";
}

std::string FormatRemaining(absl::Duration remaining) {
  return absl::FormatDuration(
      absl::Ceil(std::max(remaining, absl::ZeroDuration()), absl::Milliseconds(1)));
}

}  // namespace

RedisReply RedisReply::Integer(int64_t value) {
  RedisReply reply(Type::kInteger);
  reply.integer_ = value;
  return reply;
}

RedisReply RedisReply::SimpleString(std::string text) {
  RedisReply reply(Type::kSimpleString);
  reply.text_ = std::move(text);
  return reply;
}

RedisReply RedisReply::BulkString(std::string bytes) {
  RedisReply reply(Type::kBulkString);
  reply.text_ = std::move(bytes);
  return reply;
}

RedisReply RedisReply::Error(std::string message) {
  RedisReply reply(Type::kError);
  reply.text_ = std::move(message);
  return reply;
}

RedisReply RedisReply::Array(std::vector<RedisReply> elements) {
  RedisReply reply(Type::kArray);
  reply.elements_ = std::move(elements);
  return reply;
}

std::string RedisReply::DebugString() const {
  switch (type_) {
    case Type::kNil:
      return "nil";
    case Type::kInteger:
      return absl::StrCat("(integer) ", integer_);
    case Type::kSimpleString:
      return text_;
    case Type::kBulkString:
      return absl::StrCat("\"", absl::CEscape(text_), "\"");
    case Type::kError:
      return absl::StrCat("(error) ", text_);
    case Type::kArray:
      return absl::StrCat("[",
                          absl::StrJoin(elements_, ", ",
                                        [](std::string* out, const RedisReply& e) {
                                          out->append(e.DebugString());
                                        }),
                          "]");
  }
  return "";
}

std::ostream& operator<<(std::ostream& out, const RedisReply& reply) {
  return out << reply.DebugString();
}

void RedisClient::ContextDeleter::operator()(redisContext* context) const { redisFree(context); }

RedisClient::RedisClient(RedisClientOptions options)
    : options_(std::move(options)),
      address_(absl::StrCat(options_.host, ":", options_.port)),
      reconnect_backoff_(options_.reconnect_backoff_initial) {}

RedisClient::~RedisClient() = default;

absl::StatusOr<RedisReply> RedisClient::Command(absl::Span<const std::string> args) {
  const CommandArgs commands[] = {args};
  std::vector<RedisReply> replies;
  {
    absl::MutexLock lock(&mutex_);
    FORGE_ASSIGN_OR_RETURN(replies, RoundTrip(commands));
  }
  RedisReply& reply = replies.front();
  if (!reply.is_error()) return std::move(reply);
  std::string message =
      absl::StrCat("redis at ", address_, " rejected ", CommandName(args), ": ", reply.str());
  if (IsTransientServerError(reply.str())) return absl::UnavailableError(message);
  return absl::FailedPreconditionError(message);
}

absl::StatusOr<std::vector<RedisReply>> RedisClient::Pipeline(
    absl::Span<const std::vector<std::string>> commands) {
  const std::vector<CommandArgs> command_args(commands.begin(), commands.end());
  absl::MutexLock lock(&mutex_);
  return RoundTrip(command_args);
}

RedisClientCounters RedisClient::counters() const {
  absl::MutexLock lock(&mutex_);
  return counters_;
}

absl::StatusOr<std::vector<RedisReply>> RedisClient::RoundTrip(
    absl::Span<const CommandArgs> commands) {
  for (size_t i = 0; i < commands.size(); ++i) {
    if (commands[i].empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("redis command ", i + 1, " of ", commands.size(), " has no arguments"));
    }
  }
  std::vector<RedisReply> replies;
  if (commands.empty()) return replies;
  ScopedSigpipeSuppression no_sigpipe;
  FORGE_RETURN_IF_ERROR(EnsureConnected());
  absl::Status exchanged = Exchange(*context_, commands, options_.command_timeout, replies);
  if (!exchanged.ok()) {
    // The connection's state is unknown (a reply may still arrive): never reuse it. No backoff
    // is due, since the server was reachable: the next call reconnects at once.
    context_.reset();
    ++counters_.disconnects;
    return absl::Status(
        exchanged.code(),
        absl::StrCat("redis at ", address_, ": ", exchanged.message(), "; connection dropped"));
  }
  return replies;
}

absl::Status RedisClient::EnsureConnected() {
  if (context_ != nullptr) {
    // Noticing this before sending saves a command from failing on a connection known dead.
    if (!IdleConnectionClosed(*context_)) return absl::OkStatus();
    context_.reset();
    ++counters_.disconnects;
  }
  if (Clock::now() < next_connect_attempt_) return Unreachable(Clock::now());
  absl::StatusOr<std::unique_ptr<redisContext, ContextDeleter>> connected = Connect();
  if (connected.ok()) {
    context_ = *std::move(connected);
    ++counters_.connects;
    reconnect_backoff_ = options_.reconnect_backoff_initial;
    return absl::OkStatus();
  }
  ++counters_.connect_failures;
  last_connect_error_ = std::string(connected.status().message());
  const Clock::time_point now = Clock::now();
  next_connect_attempt_ = now + absl::ToChronoNanoseconds(reconnect_backoff_);
  reconnect_backoff_ = std::min(reconnect_backoff_ * 2, options_.reconnect_backoff_max);
  return Unreachable(now);
}

absl::StatusOr<std::unique_ptr<redisContext, RedisClient::ContextDeleter>> RedisClient::Connect()
    const {
  std::unique_ptr<redisContext, ContextDeleter> context(redisConnectWithTimeout(
      options_.host.c_str(), options_.port, absl::ToTimeval(options_.connect_timeout)));
  if (context == nullptr) return absl::ResourceExhaustedError("cannot allocate a hiredis context");
  if (context->err != 0) return absl::UnavailableError(context->errstr);
  if (redisSetTimeout(context.get(), absl::ToTimeval(options_.command_timeout)) != REDIS_OK) {
    return absl::UnavailableError(
        absl::StrCat("cannot set the command timeout: ", context->errstr));
  }
  if (redisEnableKeepAlive(context.get()) != REDIS_OK) {
    return absl::UnavailableError(absl::StrCat("cannot enable TCP keepalive: ", context->errstr));
  }

  std::vector<std::vector<std::string>> setup;
  if (!options_.password.empty()) setup.push_back({"AUTH", options_.password});
  if (options_.db != 0) setup.push_back({"SELECT", absl::StrCat(options_.db)});
  const std::vector<CommandArgs> setup_args(setup.begin(), setup.end());
  std::vector<RedisReply> replies;
  FORGE_RETURN_IF_ERROR(Exchange(*context, setup_args, options_.command_timeout, replies));
  for (size_t i = 0; i < replies.size(); ++i) {
    if (replies[i].is_error()) {
      return absl::UnavailableError(absl::StrCat(setup[i][0], " rejected: ", replies[i].str()));
    }
  }
  return context;
}

absl::Status RedisClient::Unreachable(Clock::time_point now) const {
  return absl::UnavailableError(absl::StrCat(
      "redis at ", address_, " unreachable: ", last_connect_error_, "; next reconnect attempt in ",
      FormatRemaining(absl::FromChrono(next_connect_attempt_ - now))));
}

}  // namespace forge
