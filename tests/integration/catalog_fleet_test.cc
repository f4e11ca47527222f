// The compiled-object catalog across a fleet: the real forge-coordinator over TLS with worker
// tokens and a real redis-server, and compile pools (one per "worker") with the gRPC catalog client
// (worker/compile/catalog_client.h). The shared-object case runs the toolkit's real nvcc through a
// wrapper that counts its compiles.
#include <signal.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/digest/sha256.h"
#include "common/metrics/metrics.h"
#include "common/tls/tls.h"
#include "forge/v1/service.grpc.pb.h"
#include "gmock/gmock.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "tests/support/metric_value.h"
#include "tests/support/redis_server.h"
#include "tests/support/subprocess.h"
#include "tests/support/tls_certificates.h"
#include "worker/compile/catalog_client.h"
#include "worker/compile/compile_pool.h"

namespace forge {
namespace {

using ::testing::HasSubstr;

constexpr char kWorkerA[] = "gpu-a-worker-token-0001";
constexpr char kWorkerB[] = "gpu-b-worker-token-0001";
constexpr char kSubmitter[] = "alice-submit-token-0001";
constexpr char kAdmin[] = "root-admin-token-000001";

// A small NVRTC kernel, distinct per `variant`.
compile::CompileRequest CubinRequest(int variant) {
  compile::CompileRequest request;
  request.source = absl::StrCat("extern \"C\" __global__ void add_", variant,
                                "(float* data) { data[threadIdx.x] += ", variant, ".0f; }\n");
  request.name_expressions = {absl::StrCat("add_", variant)};
  return request;
}

// testdata/host_launch_scale.cu: a host-launched translation unit (one small kernel, no CUTLASS).
compile::CompileRequest SharedObjectRequest() {
  std::ifstream in(FORGE_HOST_LAUNCH_TEST_SOURCE);
  compile::CompileRequest request;
  request.output = codegen::CompileOutput::kNvccSharedObject;
  request.source.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  return request;
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// The pool's stats once `done` holds of them (publishing follows the answer to the request), or
// after 20 s.
template <typename Done>
compile::CompilePoolStats AwaitStats(const compile::CompilePool& pool, Done done) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  compile::CompilePoolStats stats = pool.stats();
  while (!done(stats) && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    stats = pool.stats();
  }
  return stats;
}

int Published(const compile::CompilePoolStats& stats) {
  return static_cast<int>(stats.catalog_publishes + stats.catalog_publish_failures);
}

class CatalogFleetTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string d = dir_.path();
    ASSERT_TRUE(testing::WriteTestCertificates(d).ok()) << "openssl failed; see " << d;
    std::ofstream(d + "/tokens") << kWorkerA << " gpu-a worker\n"
                                 << kWorkerB << " gpu-b worker\n"
                                 << kSubmitter << " alice submit\n"
                                 << kAdmin << " root admin\n";
    // nvcc, counting the compiles (not `nvcc --version`) in nvcc.count.
    std::ofstream(d + "/nvcc") << "#!/bin/sh\ncase \"$*\" in *--version*) ;; *) echo run >> " << d
                               << "/nvcc.count ;; esac\nexec " << compile::DefaultNvccPath()
                               << " \"$@\"\n";
    std::filesystem::permissions(d + "/nvcc", std::filesystem::perms::owner_all);
    absl::StatusOr<std::unique_ptr<testing::RedisServer>> redis = testing::RedisServer::Start();
    ASSERT_TRUE(redis.ok()) << redis.status();
    redis_ = *std::move(redis);
  }

  void TearDown() override {
    if (coordinator_.has_value()) coordinator_->Kill(SIGKILL);
  }

  // The coordinator over TLS with the tokens (none with `open`), and `extra` flags.
  void StartCoordinator(std::vector<std::string> extra = {}, bool open = false) {
    const std::string d = dir_.path();
    port_ = testing::PickFreePort();
    std::vector<std::string> argv = {FORGE_COORDINATOR_BINARY,
                                     absl::StrCat("--listen=127.0.0.1:", port_),
                                     absl::StrCat("--redis.port=", redis_->port()),
                                     "--redis.timeout=500ms",
                                     absl::StrCat("--blobs.dir=", d, "/blobs"),
                                     "--metrics.listen=",
                                     absl::StrCat("--tls.cert=", d, "/server.pem"),
                                     absl::StrCat("--tls.key=", d, "/server.key"),
                                     "--log.level=debug"};
    if (!open) argv.push_back(absl::StrCat("--auth.tokens=", d, "/tokens"));
    argv.insert(argv.end(), extra.begin(), extra.end());
    absl::StatusOr<testing::Subprocess> process =
        testing::Subprocess::Start(argv, d + "/coordinator.log");
    ASSERT_TRUE(process.ok()) << process.status();
    coordinator_ = *std::move(process);
    ASSERT_TRUE(testing::WaitForPort(port_, std::chrono::seconds(20))) << Log();
  }

  std::string Log() const { return ReadFile(dir_.path() + "/coordinator.log"); }

  std::shared_ptr<grpc::ChannelCredentials> Credentials(const std::string& token) const {
    absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> credentials =
        ClientCredentials({.tls = true, .ca_file = dir_.path() + "/ca.pem", .token = token});
    EXPECT_TRUE(credentials.ok()) << credentials.status();
    return credentials.ok() ? *credentials : nullptr;
  }

  // The catalog client of a worker holding `token`, reaching `port` (default: the coordinator).
  std::shared_ptr<compile::CatalogClient> Client(const std::string& token, int port = 0) const {
    return std::make_shared<compile::CatalogClient>(compile::CatalogClientOptions{
        .coordinator = absl::StrCat("127.0.0.1:", port != 0 ? port : port_),
        .credentials = Credentials(token),
        .fetch_timeout = absl::Seconds(5),
        .publish_timeout = absl::Seconds(5)});
  }

  // A worker's compile pool: the catalog through `catalog`, nvcc through the counting wrapper.
  std::unique_ptr<compile::CompilePool> Pool(std::shared_ptr<compile::ObjectCatalog> catalog,
                                             metrics::Registry* registry = nullptr) const {
    absl::StatusOr<std::unique_ptr<compile::CompilePool>> pool =
        compile::CompilePool::Create({.threads = 1,
                                      .nvcc_path = dir_.path() + "/nvcc",
                                      .catalog = std::move(catalog),
                                      .catalog_cubins = true,
                                      .registry = registry});
    EXPECT_TRUE(pool.ok()) << pool.status();
    return pool.ok() ? *std::move(pool) : nullptr;
  }

  int NvccRuns() const {
    const std::string text = ReadFile(dir_.path() + "/nvcc.count");
    return static_cast<int>(
        std::vector<absl::string_view>(absl::StrSplit(text, '\n', absl::SkipEmpty())).size());
  }

  template <typename Method, typename Request, typename Response>
  grpc::Status Call(const std::string& token, Method method, const Request& request,
                    Response* response) const {
    auto stub = v1::WorkerService::NewStub(
        grpc::CreateChannel(absl::StrCat("127.0.0.1:", port_), Credentials(token)));
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    return ((*stub).*method)(&context, request, response);
  }

  grpc::Status Publish(const std::string& token, const v1::PublishCompiledObjectRequest& request) {
    v1::PublishCompiledObjectResponse response;
    return Call(token, &v1::WorkerService::Stub::PublishCompiledObject, request, &response);
  }

  grpc::Status Fetch(const std::string& token, const std::string& key,
                     v1::FetchCompiledObjectResponse* response = nullptr) {
    v1::FetchCompiledObjectRequest request;
    request.set_cache_key(key);
    v1::FetchCompiledObjectResponse ignored;
    return Call(token, &v1::WorkerService::Stub::FetchCompiledObject, request,
                response != nullptr ? response : &ignored);
  }

  static v1::PublishCompiledObjectRequest Object(const std::string& key, std::string bytes) {
    v1::PublishCompiledObjectRequest request;
    request.set_cache_key(key);
    request.set_sha256(Sha256Hex(bytes));
    request.set_entry(std::move(bytes));
    request.set_kind(v1::COMPILED_OBJECT_KIND_SHARED_OBJECT);
    request.set_arch("sm_90");
    request.set_compile_seconds(1);
    return request;
  }

  testing::TempDir dir_;
  std::unique_ptr<testing::RedisServer> redis_;
  int port_ = 0;
  std::optional<testing::Subprocess> coordinator_;
};

TEST_F(CatalogFleetTest, ASecondWorkerLoadsTheFirstWorkersObjectAndRunsNoNvcc) {
  StartCoordinator();
  compile::CompileResult built;
  {
    metrics::Registry registry;
    std::unique_ptr<compile::CompilePool> first = Pool(Client(kWorkerA), &registry);
    ASSERT_NE(first, nullptr);
    built = first->Compile(SharedObjectRequest());
    ASSERT_TRUE(built.ok()) << built.status << "\n" << built.log;
    EXPECT_EQ(built.source, compile::CompileSource::kCompiled);
    EXPECT_EQ(NvccRuns(), 1);
    const compile::CompilePoolStats stats =
        AwaitStats(*first, [](const auto& stats) { return Published(stats) == 1; });
    EXPECT_EQ(stats.catalog_misses, 1);
    EXPECT_EQ(stats.catalog_publishes, 1) << Log();
    EXPECT_EQ(
        testing::MetricValue(registry, "forge_worker_catalog_lookups_total", {{"outcome", "miss"}}),
        1);
    EXPECT_EQ(testing::MetricValue(registry, "forge_worker_catalog_publishes_total",
                                   {{"outcome", "stored"}}),
              1);
  }
  // Another worker identity, a fresh pool (no memory or disk cache): the catalog's object.
  metrics::Registry registry;
  std::unique_ptr<compile::CompilePool> second = Pool(Client(kWorkerB), &registry);
  ASSERT_NE(second, nullptr);
  const auto started = std::chrono::steady_clock::now();
  const compile::CompileResult fetched = second->Compile(SharedObjectRequest());
  const std::chrono::duration<double> fetch_seconds = std::chrono::steady_clock::now() - started;
  ASSERT_TRUE(fetched.ok()) << fetched.status;
  std::cout << "nvcc built the " << built.cubin.size() << "-byte object in "
            << built.compile_seconds << " s; the second worker had it from the catalog in "
            << fetch_seconds.count() << " s\n";
  EXPECT_EQ(fetched.source, compile::CompileSource::kCatalog);
  EXPECT_EQ(fetched.cubin, built.cubin);
  EXPECT_DOUBLE_EQ(fetched.compile_seconds, built.compile_seconds);
  EXPECT_EQ(fetched.ptxas.functions.size(), built.ptxas.functions.size());
  EXPECT_EQ(NvccRuns(), 1) << "the second worker ran nvcc";
  EXPECT_EQ(second->stats().compiles, 0);
  EXPECT_EQ(second->stats().catalog_hits, 1);
  EXPECT_EQ(
      testing::MetricValue(registry, "forge_worker_catalog_lookups_total", {{"outcome", "hit"}}),
      1);

  v1::FetchCompiledObjectResponse entry;
  ASSERT_TRUE(Fetch(kWorkerB, second->CacheKey(SharedObjectRequest()).ToHex(), &entry).ok());
  EXPECT_EQ(entry.publisher(), "gpu-a");
  EXPECT_EQ(entry.kind(), v1::COMPILED_OBJECT_KIND_SHARED_OBJECT);
}

TEST_F(CatalogFleetTest, OnlyWorkerIdentitiesPublishOrFetch) {
  StartCoordinator();
  const v1::PublishCompiledObjectRequest object = Object(Sha256Hex("key"),
                                                         "\x7f"
                                                         "ELF object");
  for (const char* token : {kSubmitter, kAdmin}) {
    EXPECT_EQ(Publish(token, object).error_code(), grpc::StatusCode::PERMISSION_DENIED) << token;
    EXPECT_EQ(Fetch(token, object.cache_key()).error_code(), grpc::StatusCode::PERMISSION_DENIED)
        << token;
  }
  EXPECT_EQ(Publish("", object).error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(Publish("not-a-known-token-0000", object).error_code(),
            grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(Fetch(kWorkerA, object.cache_key()).error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_TRUE(Publish(kWorkerA, object).ok());
  EXPECT_TRUE(Fetch(kWorkerB, object.cache_key()).ok());
}

TEST_F(CatalogFleetTest, ACoordinatorWithoutAuthenticationTakesNoObjects) {
  StartCoordinator({}, /*open=*/true);
  const v1::PublishCompiledObjectRequest object = Object(Sha256Hex("key"),
                                                         "\x7f"
                                                         "ELF object");
  const grpc::Status published = Publish("", object);
  EXPECT_EQ(published.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_THAT(published.error_message(), HasSubstr("authenticated"));
  // A worker there compiles; its client turns publishing off at the refusal, which the pool
  // counts as no failure.
  std::shared_ptr<compile::CatalogClient> client = Client("");
  std::unique_ptr<compile::CompilePool> pool = Pool(client);
  ASSERT_NE(pool, nullptr);
  ASSERT_TRUE(pool->Compile(CubinRequest(1)).ok());
  ASSERT_TRUE(pool->Compile(CubinRequest(2)).ok());
  EXPECT_EQ(pool->stats().compiles, 2);
  EXPECT_EQ(pool->stats().catalog_misses, 2);
  const Digest key = pool->CacheKey(CubinRequest(1));
  EXPECT_EQ(client->Publish(key, codegen::CompileOutput::kNvrtcCubin, "sm_90", 1, "entry")
                .status()
                .code(),
            absl::StatusCode::kUnimplemented);
  pool.reset();  // joins the compile threads, so their publishes are done
  EXPECT_EQ(Fetch("", key.ToHex()).error_code(), grpc::StatusCode::NOT_FOUND);
}

TEST_F(CatalogFleetTest, BytesThatDoNotMatchTheirDigestAreRefused) {
  StartCoordinator();
  v1::PublishCompiledObjectRequest object = Object(Sha256Hex("key"),
                                                   "\x7f"
                                                   "ELF object");
  object.set_entry(
      "\x7f"
      "ELF other!");
  const grpc::Status published = Publish(kWorkerA, object);
  EXPECT_EQ(published.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(published.error_message(), HasSubstr("hash to"));
  EXPECT_EQ(Fetch(kWorkerA, object.cache_key()).error_code(), grpc::StatusCode::NOT_FOUND);
}

TEST_F(CatalogFleetTest, ObjectsPastTheSizeLimitAreRefused) {
  StartCoordinator({"--catalog.max-object-bytes=1000"});
  const v1::PublishCompiledObjectRequest big = Object(Sha256Hex("big"), std::string(1001, 'x'));
  EXPECT_EQ(Publish(kWorkerA, big).error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_TRUE(Publish(kWorkerA, Object(Sha256Hex("small"), std::string(1000, 'x'))).ok());
}

TEST_F(CatalogFleetTest, PurgingAWorkerRemovesItsObjects) {
  StartCoordinator();
  std::unique_ptr<compile::CompilePool> first = Pool(Client(kWorkerA));
  ASSERT_NE(first, nullptr);
  ASSERT_TRUE(first->Compile(CubinRequest(1)).ok());
  ASSERT_EQ(AwaitStats(*first, [](const auto& stats) { return Published(stats) == 1; })
                .catalog_publishes,
            1)
      << Log();
  const std::string key = first->CacheKey(CubinRequest(1)).ToHex();
  ASSERT_TRUE(Fetch(kWorkerB, key).ok());

  auto jobs = v1::JobService::NewStub(
      grpc::CreateChannel(absl::StrCat("127.0.0.1:", port_), Credentials(kAdmin)));
  v1::PurgeResultsRequest purge;
  purge.set_worker_identity("gpu-a");
  v1::PurgeResultsResponse purged;
  grpc::ClientContext context;
  const grpc::Status status = jobs->PurgeResults(&context, purge, &purged);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(purged.compiled_objects_removed(), 1);
  EXPECT_EQ(Fetch(kWorkerB, key).error_code(), grpc::StatusCode::NOT_FOUND);

  // The next worker compiles it anew.
  std::unique_ptr<compile::CompilePool> second = Pool(Client(kWorkerB));
  ASSERT_NE(second, nullptr);
  const compile::CompileResult again = second->Compile(CubinRequest(1));
  ASSERT_TRUE(again.ok()) << again.status;
  EXPECT_EQ(again.source, compile::CompileSource::kCompiled);
}

TEST_F(CatalogFleetTest, GarbageFromTheCatalogIsRejectedAndCompiledLocally) {
  StartCoordinator();
  std::unique_ptr<compile::CompilePool> pool = Pool(Client(kWorkerB));
  ASSERT_NE(pool, nullptr);
  // A worker publishes bytes that are no cache entry under the key the pool will ask for.
  const std::string key = pool->CacheKey(CubinRequest(3)).ToHex();
  ASSERT_TRUE(Publish(kWorkerA, Object(key,
                                       "\x7f"
                                       "ELF but no cache entry"))
                  .ok());
  const compile::CompileResult result = pool->Compile(CubinRequest(3));
  ASSERT_TRUE(result.ok()) << result.status;
  EXPECT_EQ(result.source, compile::CompileSource::kCompiled);
  EXPECT_EQ(pool->stats().catalog_rejects, 1);
  EXPECT_EQ(pool->stats().compiles, 1);
}

TEST_F(CatalogFleetTest, TheWorkerCompilesLocallyWhenTheCatalogIsDownOrOff) {
  // Nothing listens on this port: every lookup and publish fails; every compile succeeds.
  std::unique_ptr<compile::CompilePool> unreachable =
      Pool(Client(kWorkerA, testing::PickFreePort()));
  ASSERT_NE(unreachable, nullptr);
  ASSERT_TRUE(unreachable->Compile(CubinRequest(1)).ok());
  ASSERT_TRUE(unreachable->Compile(CubinRequest(2)).ok());
  const compile::CompilePoolStats stats =
      AwaitStats(*unreachable, [](const auto& stats) { return Published(stats) == 2; });
  EXPECT_EQ(stats.compiles, 2);
  EXPECT_EQ(stats.catalog_errors, 2);
  EXPECT_EQ(stats.catalog_publish_failures, 2);

  // A coordinator without a catalog: the worker stops asking after the first answer.
  StartCoordinator({"--catalog.enabled=false"});
  std::unique_ptr<compile::CompilePool> off = Pool(Client(kWorkerA));
  ASSERT_NE(off, nullptr);
  ASSERT_TRUE(off->Compile(CubinRequest(1)).ok());
  ASSERT_TRUE(off->Compile(CubinRequest(2)).ok());
  EXPECT_EQ(off->stats().compiles, 2);
  EXPECT_EQ(off->stats().catalog_errors + off->stats().catalog_misses, 0);
}

}  // namespace
}  // namespace forge
