#include "common/redis/redis_client.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/support/redis_server.h"

namespace forge {
namespace {

using ::forge::testing::RedisServer;
using ::forge::testing::RedisServerOptions;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::StartsWith;

std::unique_ptr<RedisServer> StartServer(RedisServerOptions options = {}) {
  absl::StatusOr<std::unique_ptr<RedisServer>> server = RedisServer::Start(std::move(options));
  EXPECT_TRUE(server.ok()) << server.status();
  return server.ok() ? *std::move(server) : nullptr;
}

RedisClientOptions OptionsFor(const RedisServer& server) {
  RedisClientOptions options;
  options.host = server.host();
  options.port = server.port();
  return options;
}

RedisReply Bulk(std::string bytes) { return RedisReply::BulkString(std::move(bytes)); }

// Runs a command that must succeed and returns its reply; after a failure, an error reply with
// the status, so that the caller's comparisons fail too.
RedisReply MustRun(RedisClient& client, std::vector<std::string> args) {
  absl::StatusOr<RedisReply> reply = client.Command(args);
  EXPECT_TRUE(reply.ok()) << args.front() << ": " << reply.status();
  return reply.ok() ? *std::move(reply) : RedisReply::Error(std::string(reply.status().message()));
}

// Calls `step` every 10 ms until it returns true or 5 s have passed; returns whether it did.
template <typename Step>
bool Eventually(Step step) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (std::chrono::steady_clock::now() < deadline) {
    if (step()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return false;
}

class RedisClientTest : public ::testing::Test {
 protected:
  void SetUp() override {
    server_ = StartServer();
    ASSERT_NE(server_, nullptr);
    client_ = std::make_unique<RedisClient>(OptionsFor(*server_));
  }

  std::unique_ptr<RedisServer> server_;
  std::unique_ptr<RedisClient> client_;
};

TEST_F(RedisClientTest, StringsCountersHashesAndSortedSets) {
  EXPECT_EQ(MustRun(*client_, {"SET", "greeting", "hello"}), RedisReply::SimpleString("OK"));
  EXPECT_EQ(MustRun(*client_, {"GET", "greeting"}), Bulk("hello"));

  EXPECT_EQ(MustRun(*client_, {"INCR", "jobs"}), RedisReply::Integer(1));
  EXPECT_EQ(MustRun(*client_, {"INCRBY", "jobs", "41"}), RedisReply::Integer(42));

  EXPECT_EQ(MustRun(*client_, {"HSET", "task:7", "state", "queued", "attempts", "0"}),
            RedisReply::Integer(2));
  EXPECT_EQ(MustRun(*client_, {"HGETALL", "task:7"}),
            RedisReply::Array({Bulk("state"), Bulk("queued"), Bulk("attempts"), Bulk("0")}));

  EXPECT_EQ(MustRun(*client_, {"ZADD", "frontier", "2.5", "b", "1", "a", "10", "c"}),
            RedisReply::Integer(3));
  RedisReply range = MustRun(*client_, {"ZRANGE", "frontier", "0", "-1", "WITHSCORES"});
  ASSERT_TRUE(range.is_array()) << range;
  EXPECT_THAT(range.elements(),
              ElementsAre(Bulk("a"), Bulk("1"), Bulk("b"), Bulk("2.5"), Bulk("c"), Bulk("10")));
  EXPECT_EQ(MustRun(*client_, {"PING"}).str(), "PONG");
}

TEST_F(RedisClientTest, KeysAndValuesAreBinarySafe) {
  std::string every_byte;
  for (int byte = 0; byte < 256; ++byte) every_byte.push_back(static_cast<char>(byte));
  const std::string key("key\0with\r\nbreaks", 16);

  MustRun(*client_, {"SET", key, every_byte});
  EXPECT_EQ(MustRun(*client_, {"GET", key}), Bulk(every_byte));
  EXPECT_EQ(MustRun(*client_, {"STRLEN", key}), RedisReply::Integer(256));
  EXPECT_EQ(MustRun(*client_, {"GET", std::string("key", 3)}), RedisReply::Nil());
}

TEST_F(RedisClientTest, MissingValuesAreNil) {
  EXPECT_TRUE(MustRun(*client_, {"GET", "absent"}).is_nil());
  EXPECT_TRUE(MustRun(*client_, {"HGET", "absent", "field"}).is_nil());
  EXPECT_TRUE(MustRun(*client_, {"LPOP", "absent"}).is_nil());
  MustRun(*client_, {"SET", "present", "1"});
  EXPECT_EQ(MustRun(*client_, {"MGET", "present", "absent"}),
            RedisReply::Array({Bulk("1"), RedisReply::Nil()}));
}

TEST_F(RedisClientTest, ErrorReplyIsFailedPreconditionAndKeepsTheConnection) {
  MustRun(*client_, {"SET", "plain", "value"});

  absl::StatusOr<RedisReply> wrong_type = client_->Command({"HSET", "plain", "field", "x"});
  EXPECT_EQ(wrong_type.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(wrong_type.status().message(),
            absl::StrCat("redis at ", client_->address(),
                         " rejected HSET: WRONGTYPE Operation "
                         "against a key holding the wrong kind of value"));

  EXPECT_EQ(MustRun(*client_, {"GET", "plain"}), Bulk("value"));
  EXPECT_EQ(client_->counters().connects, 1);
  EXPECT_EQ(client_->counters().disconnects, 0);
}

TEST_F(RedisClientTest, CommandWithoutArgumentsIsInvalid) {
  EXPECT_EQ(client_->Command({}).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(client_->Pipeline({{"PING"}, {}}).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(RedisClientTest, PipelineReturnsEachReplyInOrder) {
  constexpr int kKeys = 333;  // three commands per key, plus one failing command: 1000 in all
  std::vector<std::vector<std::string>> commands;
  for (int i = 0; i < kKeys; ++i) {
    commands.push_back({"SET", absl::StrCat("key:", i), absl::StrCat("value:", i)});
    commands.push_back({"INCR", "counter"});
    commands.push_back({"GET", absl::StrCat("key:", i)});
    if (i == kKeys / 2) commands.push_back({"HSET", "key:0", "field", "x"});
  }
  ASSERT_EQ(commands.size(), 1000u);

  absl::StatusOr<std::vector<RedisReply>> replies = client_->Pipeline(commands);
  ASSERT_TRUE(replies.ok()) << replies.status();
  ASSERT_EQ(replies->size(), commands.size());
  size_t next = 0;
  for (int i = 0; i < kKeys; ++i) {
    EXPECT_EQ((*replies)[next++], RedisReply::SimpleString("OK")) << "SET key:" << i;
    EXPECT_EQ((*replies)[next++], RedisReply::Integer(i + 1)) << "INCR number " << i + 1;
    EXPECT_EQ((*replies)[next++], Bulk(absl::StrCat("value:", i))) << "GET key:" << i;
    if (i == kKeys / 2) {
      const RedisReply& failed = (*replies)[next++];
      EXPECT_TRUE(failed.is_error()) << failed;
      EXPECT_THAT(failed.str(), StartsWith("WRONGTYPE"));
    }
  }
  EXPECT_EQ(client_->counters().connects, 1);
}

TEST(RedisClientConnectTest, NothingListeningFailsFastAndBacksOff) {
  const int port = ::forge::testing::PickFreePort();
  RedisClientOptions options;
  options.port = port;
  options.reconnect_backoff_initial = absl::Seconds(30);
  RedisClient client(options);

  absl::StatusOr<RedisReply> first = client.Command({"PING"});
  EXPECT_EQ(first.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(first.status().message(),
            absl::StrCat("redis at 127.0.0.1:", port,
                         " unreachable: Connection refused; next reconnect attempt in 30s"));

  // Within the backoff the client does not try again: it repeats the cause without connecting.
  absl::StatusOr<RedisReply> second = client.Command({"PING"});
  EXPECT_EQ(second.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(
      std::string(second.status().message()),
      StartsWith(absl::StrCat("redis at 127.0.0.1:", port,
                              " unreachable: Connection refused; next reconnect attempt in ")));
  EXPECT_EQ(client.counters().connect_failures, 1);
  EXPECT_EQ(client.counters().connects, 0);
}

// A bare TCP listener on 127.0.0.1, for failure modes a healthy redis-server never shows.
class LoopbackListener {
 public:
  explicit LoopbackListener(int backlog) {
    fd_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in address = Loopback(0);
    socklen_t length = sizeof(address);
    bind(fd_, reinterpret_cast<sockaddr*>(&address), sizeof(address));
    listen(fd_, backlog);
    getsockname(fd_, reinterpret_cast<sockaddr*>(&address), &length);
    port_ = ntohs(address.sin_port);
  }
  ~LoopbackListener() { close(fd_); }
  LoopbackListener(const LoopbackListener&) = delete;
  LoopbackListener& operator=(const LoopbackListener&) = delete;

  int fd() const { return fd_; }
  int port() const { return port_; }

  // Connects a plain socket to this listener; the caller closes it.
  int ConnectRaw() const {
    int client = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in address = Loopback(port_);
    connect(client, reinterpret_cast<sockaddr*>(&address), sizeof(address));
    return client;
  }

 private:
  static sockaddr_in Loopback(int port) {
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_port = htons(static_cast<uint16_t>(port));
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    return address;
  }

  int fd_ = -1;
  int port_ = 0;
};

TEST(RedisClientConnectTest, ConnectTimeoutToUnresponsiveListener) {
  // Once the accept queue (one place with backlog 0) is full, the kernel drops further SYNs, so
  // connects hang.
  LoopbackListener listener(/*backlog=*/0);
  const int queued = listener.ConnectRaw();
  RedisClientOptions options;
  options.port = listener.port();
  options.connect_timeout = absl::Milliseconds(200);
  RedisClient client(options);

  const auto started = std::chrono::steady_clock::now();
  absl::StatusOr<RedisReply> reply = client.Command({"PING"});
  const auto waited = std::chrono::steady_clock::now() - started;
  close(queued);
  EXPECT_EQ(reply.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(std::string(reply.status().message()),
              StartsWith(absl::StrCat("redis at 127.0.0.1:", listener.port(),
                                      " unreachable: Connection timed out")));
  // The kernel's own connect timeout is minutes; this checks the option bounds the wait.
  EXPECT_LT(waited, std::chrono::seconds(5));
}

TEST(RedisClientRecoveryTest, ServerKilledGivesUnavailableThenClientRecoversAfterRestart) {
  std::unique_ptr<RedisServer> server = StartServer();
  ASSERT_NE(server, nullptr);
  RedisClientOptions options = OptionsFor(*server);
  options.reconnect_backoff_initial = absl::Milliseconds(300);
  options.reconnect_backoff_max = absl::Milliseconds(600);
  RedisClient client(options);
  MustRun(client, {"SET", "k", "before the crash"});

  server->Stop(SIGKILL);
  const std::string unreachable =
      absl::StrCat("redis at 127.0.0.1:", server->port(), " unreachable: Connection refused");
  absl::StatusOr<RedisReply> after_kill = client.Command({"GET", "k"});
  EXPECT_EQ(after_kill.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(after_kill.status().message(),
            absl::StrCat(unreachable, "; next reconnect attempt in 300ms"));
  EXPECT_EQ(client.counters().disconnects, 1);

  // After the backoff the client tries again, fails, and doubles the backoff up to its max.
  absl::Status retried;
  ASSERT_TRUE(Eventually([&] {
    retried = client.Command({"GET", "k"}).status();
    return client.counters().connect_failures == 2;
  }));
  EXPECT_EQ(retried.message(), absl::StrCat(unreachable, "; next reconnect attempt in 600ms"));

  ASSERT_TRUE(server->Restart().ok());
  absl::StatusOr<RedisReply> recovered;
  ASSERT_TRUE(Eventually([&] {
    recovered = client.Command({"GET", "k"});
    return recovered.ok();
  })) << recovered.status();
  EXPECT_TRUE(recovered->is_nil()) << "no persistence: the restarted server starts empty";
  EXPECT_EQ(client.counters().connects, 2);
}

TEST(RedisClientRecoveryTest, AppendOnlyDataSurvivesKillAndRestart) {
  std::unique_ptr<RedisServer> server =
      StartServer({.append_only = true, .append_fsync = "always"});
  ASSERT_NE(server, nullptr);
  RedisClient client(OptionsFor(*server));
  MustRun(client, {"SET", "result:abc", std::string("kernel\0bytes", 12)});
  MustRun(client, {"HSET", "job:1", "state", "done"});
  MustRun(client, {"ZADD", "frontier", "3", "candidate"});

  server->Stop(SIGKILL);
  ASSERT_TRUE(server->Restart().ok());

  // The same client: it notices its connection died with the old server and reconnects.
  EXPECT_EQ(MustRun(client, {"GET", "result:abc"}), Bulk(std::string("kernel\0bytes", 12)));
  EXPECT_EQ(MustRun(client, {"HGET", "job:1", "state"}), Bulk("done"));
  EXPECT_EQ(MustRun(client, {"ZSCORE", "frontier", "candidate"}), Bulk("3"));
  EXPECT_EQ(client.counters().connects, 2);
}

TEST(RedisClientRecoveryTest, ServerDroppingTheClientMidWriteGivesUnavailableThenRecovers) {
  // Redis drops a client that announces a bulk string over this limit, while the rest of the
  // command is still being written.
  std::unique_ptr<RedisServer> server =
      StartServer({.extra_args = {"--proto-max-bulk-len", "1mb"}});
  ASSERT_NE(server, nullptr);
  RedisClient client(OptionsFor(*server));

  absl::StatusOr<RedisReply> too_big = client.Command({"SET", "big", std::string(32 << 20, 'x')});
  EXPECT_EQ(too_big.status().code(), absl::StatusCode::kUnavailable) << too_big.status();
  EXPECT_THAT(
      std::string(too_big.status().message()),
      StartsWith(absl::StrCat("redis at ", client.address(), ": connection lost during SET")));
  EXPECT_EQ(MustRun(client, {"PING"}).str(), "PONG");
}

TEST(RedisClientRecoveryTest, PeerClosingMidWriteDoesNotRaiseSigpipe) {
  // The peer reads the start of the request, closes its side (FIN), then drops the rest (RST):
  // the client's socket is in CLOSE_WAIT mid-write, where the next write(2) raises SIGPIPE,
  // whose default action would end this process.
  LoopbackListener listener(/*backlog=*/1);
  std::thread peer([&listener] {
    const int connection = accept(listener.fd(), nullptr, nullptr);
    std::vector<char> request_start(64 << 10);
    recv(connection, request_start.data(), request_start.size(), MSG_WAITALL);
    shutdown(connection, SHUT_WR);
    close(connection);
  });
  RedisClientOptions options;
  options.port = listener.port();
  RedisClient client(options);

  absl::StatusOr<RedisReply> reply = client.Command({"SET", "big", std::string(32 << 20, 'x')});
  peer.join();
  EXPECT_EQ(reply.status().code(), absl::StatusCode::kUnavailable) << reply.status();
  EXPECT_THAT(
      std::string(reply.status().message()),
      StartsWith(absl::StrCat("redis at ", client.address(), ": connection lost during SET")));
}

TEST(RedisClientTimeoutTest, CommandTimeoutDropsTheConnectionSoTheLateReplyIsNeverRead) {
  std::unique_ptr<RedisServer> server = StartServer();
  ASSERT_NE(server, nullptr);
  RedisClientOptions options = OptionsFor(*server);
  options.command_timeout = absl::Milliseconds(200);
  RedisClient client(options);
  RedisClient observer(OptionsFor(*server));
  MustRun(client, {"SET", "k", "v"});

  // Blocks on the server until something is pushed, far past the client's 200 ms.
  absl::StatusOr<RedisReply> blocked = client.Command({"BLPOP", "queue", "0"});
  EXPECT_EQ(blocked.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_EQ(blocked.status().message(),
            absl::StrCat("redis at ", client.address(),
                         ": no reply to BLPOP within 200ms; connection dropped"));

  // The server sees the connection close, so no BLPOP waits any more; a push now stays queued
  // instead of being sent as a late reply down the old connection.
  ASSERT_TRUE(Eventually([&] {
    std::string info = MustRun(observer, {"INFO", "clients"}).str();
    return info.find("blocked_clients:0\r\n") != std::string::npos;
  }));
  MustRun(observer, {"RPUSH", "queue", "late"});
  EXPECT_EQ(MustRun(client, {"GET", "k"}), Bulk("v"));
  EXPECT_EQ(MustRun(client, {"LLEN", "queue"}), RedisReply::Integer(1));
  EXPECT_EQ(client.counters().disconnects, 1);
  EXPECT_EQ(client.counters().connects, 2);
}

TEST(RedisClientTimeoutTest, BusyServerIsUnavailable) {
  std::unique_ptr<RedisServer> server = StartServer({.extra_args = {"--lua-time-limit", "50"}});
  ASSERT_NE(server, nullptr);
  RedisClientOptions options = OptionsFor(*server);
  options.command_timeout = absl::Milliseconds(200);
  RedisClient scripter(options);
  RedisClient other(OptionsFor(*server));

  // A script that never ends: after lua-time-limit, Redis answers everyone else BUSY.
  EXPECT_EQ(scripter.Command({"EVAL", "while true do end", "0"}).status().code(),
            absl::StatusCode::kDeadlineExceeded);
  absl::StatusOr<RedisReply> busy = other.Command({"GET", "k"});
  EXPECT_EQ(busy.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(std::string(busy.status().message()),
              StartsWith(absl::StrCat("redis at ", other.address(), " rejected GET: BUSY")));

  MustRun(other, {"SCRIPT", "KILL"});
  // The script stops at its next check for the kill flag, a moment after the OK.
  EXPECT_TRUE(Eventually([&] { return scripter.Command({"PING"}).ok(); }));
}

TEST(RedisClientAuthTest, PasswordAndDatabase) {
  std::unique_ptr<RedisServer> server = StartServer({.password = "s3cret"});
  ASSERT_NE(server, nullptr);
  RedisClientOptions options = OptionsFor(*server);
  options.password = "s3cret";
  options.db = 2;
  RedisClient in_db2(options);
  options.db = 0;
  RedisClient in_db0(options);
  MustRun(in_db2, {"SET", "k", "in db 2"});
  EXPECT_EQ(MustRun(in_db2, {"GET", "k"}), Bulk("in db 2"));
  EXPECT_TRUE(MustRun(in_db0, {"GET", "k"}).is_nil());

  options.password = "wrong-password";
  RedisClient wrong(options);
  absl::Status rejected = wrong.Command({"PING"}).status();
  EXPECT_EQ(rejected.code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(std::string(rejected.message()), HasSubstr("AUTH rejected: WRONGPASS"));
  EXPECT_THAT(std::string(rejected.message()), ::testing::Not(HasSubstr("wrong-password")));

  RedisClient without_password(OptionsFor(*server));
  EXPECT_THAT(std::string(without_password.Command({"GET", "k"}).status().message()),
              HasSubstr("rejected GET: NOAUTH"));
}

TEST_F(RedisClientTest, ConcurrentCallersEachGetTheirOwnReply) {
  constexpr int kThreads = 4;
  constexpr int kIncrementsPerThread = 250;
  std::vector<std::vector<int64_t>> seen(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kIncrementsPerThread; ++i) {
        absl::StatusOr<RedisReply> reply = client_->Command({"INCR", "shared"});
        seen[t].push_back(reply.ok() && reply->is_integer() ? reply->integer() : -1);
      }
    });
  }
  for (std::thread& thread : threads) thread.join();

  // Every INCR result appears exactly once: no reply went to the wrong caller or got lost.
  std::set<int64_t> values;
  for (const std::vector<int64_t>& per_thread : seen) {
    values.insert(per_thread.begin(), per_thread.end());
  }
  EXPECT_EQ(values.size(), size_t{kThreads * kIncrementsPerThread});
  EXPECT_EQ(*values.begin(), 1);
  EXPECT_EQ(*values.rbegin(), kThreads * kIncrementsPerThread);
  EXPECT_EQ(client_->counters().connects, 1);
}

TEST(RedisReplyTest, DebugStringEscapesBytes) {
  RedisReply reply =
      RedisReply::Array({Bulk(std::string("a\0b", 3)), RedisReply::Integer(7), RedisReply::Nil(),
                         RedisReply::SimpleString("OK"), RedisReply::Error("ERR nope")});
  EXPECT_EQ(reply.DebugString(), R"(["a\000b", (integer) 7, nil, OK, (error) ERR nope])");
}

}  // namespace
}  // namespace forge
