// The coordinator's security on loopback, for real: the forge-coordinator binary serving TLS with
// certificates made by the openssl CLI at test time and a token file, a real redis-server, and the
// forge-worker binary (emulated H200) reaching it over TLS with its own token.
#include <signal.h>
#include <sys/wait.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/signed_token/signed_token.h"
#include "common/tls/tls.h"
#include "compiler/codegen/family.h"
#include "forge/v1/service.grpc.pb.h"
#include "gmock/gmock.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "server/health/health.h"
#include "tests/support/exported_model.h"
#include "tests/support/redis_server.h"
#include "tests/support/subprocess.h"
#include "tests/support/tls_certificates.h"

namespace forge {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

constexpr char kAlice[] = "alice-submit-token-0001";
constexpr char kBob[] = "bob-submit-token-000001";
constexpr char kReader[] = "carol-read-token-000001";
constexpr char kAdmin[] = "root-admin-token-000001";
constexpr char kWorkerA[] = "gpu-a-worker-token-0001";
constexpr char kWorkerB[] = "gpu-b-worker-token-0001";

void WriteFile(const std::string& path, const std::string& text) {
  std::ofstream(path) << text;
}

class SecurityTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // A CA, a server certificate it signs for localhost and 127.0.0.1, and an unrelated CA.
    const std::string d = dir_.path();
    ASSERT_TRUE(testing::WriteTestCertificates(d).ok()) << "openssl failed; see " << d;
    WriteFile(d + "/tokens",
              absl::StrCat("# test tokens\n", kAlice, " alice submit max-priority=5\n", kBob,
                           " bob submit\n", kReader, " carol read\n", kAdmin, " root admin\n",
                           kWorkerA, " gpu-a worker\n", kWorkerB, " gpu-b worker\n"));
    absl::StatusOr<std::unique_ptr<testing::RedisServer>> redis = testing::RedisServer::Start();
    ASSERT_TRUE(redis.ok()) << redis.status();
    redis_ = *std::move(redis);
    StartCoordinator({});
  }

  // Serves on a fresh port, with `extra` flags.
  void StartCoordinator(std::vector<std::string> extra) {
    const std::string d = dir_.path();
    port_ = testing::PickFreePort();
    std::vector<std::string> argv = {
        FORGE_COORDINATOR_BINARY, absl::StrCat("--listen=127.0.0.1:", port_),
        absl::StrCat("--redis.port=", redis_->port()), "--redis.timeout=500ms",
        absl::StrCat("--blobs.dir=", d, "/blobs"), "--metrics.listen=",
        absl::StrCat("--tls.cert=", d, "/server.pem"), absl::StrCat("--tls.key=", d, "/server.key"),
        absl::StrCat("--auth.tokens=", d, "/tokens"), "--health.interval=100ms",
        "--search.trials-per-task=2", "--search.min-trials-per-task=1",
        "--scheduler.tick=100ms", "--log.level=debug"};
    argv.insert(argv.end(), extra.begin(), extra.end());
    absl::StatusOr<testing::Subprocess> process =
        testing::Subprocess::Start(argv, d + "/coordinator.log");
    ASSERT_TRUE(process.ok()) << process.status();
    coordinator_ = *std::move(process);
    ASSERT_TRUE(testing::WaitForPort(port_, std::chrono::seconds(20))) << Log("coordinator");
  }

  void TearDown() override {
    if (worker_.has_value()) worker_->Kill(SIGKILL);
    if (coordinator_.has_value()) coordinator_->Kill(SIGKILL);
  }

  std::string Log(const std::string& name) const {
    absl::StatusOr<std::string> text =
        testing::ReadWholeFile(absl::StrCat(dir_.path(), "/", name, ".log"));
    return text.ok() ? *text : "(no log)";
  }

  // By IP, as the certificate names it too: a machine without /etc/hosts cannot resolve "localhost".
  std::string Address() const { return absl::StrCat("127.0.0.1:", port_); }

  // A TLS channel to the coordinator trusting `ca` ("ca" or "other"), with `token` when set.
  // With the client certificate client.pem when `client_cert`.
  std::shared_ptr<grpc::Channel> Channel(const std::string& token, const std::string& ca = "ca",
                                         bool client_cert = false) {
    const std::string d = dir_.path();
    absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> credentials =
        ClientCredentials({.tls = true,
                           .ca_file = absl::StrCat(d, "/", ca, ".pem"),
                           .cert_file = client_cert ? d + "/client.pem" : "",
                           .key_file = client_cert ? d + "/client.key" : "",
                           .token = token});
    EXPECT_TRUE(credentials.ok()) << credentials.status();
    return grpc::CreateChannel(Address(), *credentials);
  }
  std::unique_ptr<v1::JobService::Stub> Jobs(const std::string& token) {
    return v1::JobService::NewStub(Channel(token));
  }
  std::unique_ptr<v1::WorkerService::Stub> Workers(const std::string& token) {
    return v1::WorkerService::NewStub(Channel(token));
  }

  // Submits llama_block with `options` as `token`'s owner.
  absl::StatusOr<v1::Job> Submit(const std::string& token, v1::JobOptions options = {}) {
    absl::StatusOr<testing::ExportedModel> model = testing::LoadExportedModel("llama_block");
    if (!model.ok()) return model.status();
    absl::StatusOr<v1::SubmitJobResponse> response =
        testing::SubmitExportedModel(*Jobs(token), *model, options);
    if (!response.ok()) return response.status();
    return response->job();
  }

  // The forge CLI with `args` and the connection flags to this coordinator (TLS, the test CA; no
  // token): its exit status, and its output in `output`.
  int Cli(std::vector<std::string> args, std::string* output) {
    std::vector<std::string> argv = {FORGE_CLI_BINARY};
    argv.insert(argv.end(), args.begin(), args.end());
    for (std::string flag : {std::string("--server=") + Address(), std::string("--tls"),
                             absl::StrCat("--tls-ca=", dir_.path(), "/ca.pem")}) {
      argv.push_back(std::move(flag));
    }
    const std::string name = absl::StrCat("cli-", ++cli_runs_);
    absl::StatusOr<testing::Subprocess> cli =
        testing::Subprocess::Start(argv, absl::StrCat(dir_.path(), "/", name, ".log"));
    EXPECT_TRUE(cli.ok()) << cli.status();
    if (!cli.ok()) return -1;
    const int status = cli->Wait(std::chrono::seconds(30));
    *output = Log(name);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }

  template <typename Method, typename Request, typename Response>
  static grpc::StatusCode Call(Method method, const Request& request, Response* response) {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    return method(&context, request, response).error_code();
  }

  static v1::RegisterRequest Registration(const std::string& worker_id) {
    v1::RegisterRequest request;
    request.set_worker_id(worker_id);
    request.set_generator_version(codegen::GeneratorVersions());
    v1::GpuInfo* gpu = request.add_gpus();
    gpu->set_name("H200");
    gpu->set_arch("sm_90");
    gpu->set_emulated(true);
    return request;
  }

  testing::TempDir dir_;
  std::unique_ptr<testing::RedisServer> redis_;
  int port_ = 0;
  std::optional<testing::Subprocess> coordinator_;
  std::optional<testing::Subprocess> worker_;
  int cli_runs_ = 0;
};

TEST_F(SecurityTest, UnauthenticatedClientIsRefused) {
  v1::ListJobsResponse jobs;
  for (const std::string token : {"", "not-a-known-token-0000"}) {
    auto stub = Jobs(token);
    EXPECT_EQ(Call([&](auto* c, const auto& r, auto* p) { return stub->ListJobs(c, r, p); },
                   v1::ListJobsRequest(), &jobs),
              grpc::StatusCode::UNAUTHENTICATED)
        << "token \"" << token << "\"";
  }
  absl::StatusOr<v1::Job> anonymous = Submit("");
  EXPECT_TRUE(absl::IsUnauthenticated(anonymous.status())) << anonymous.status();
}

TEST_F(SecurityTest, OwnersSeeOnlyTheirOwnJobsAndAdminSeesAll) {
  v1::JobOptions options;
  options.set_owner("bob");  // a field the client fills: ignored
  absl::StatusOr<v1::Job> job = Submit(kAlice, options);
  ASSERT_TRUE(job.ok()) << job.status() << Log("coordinator");
  EXPECT_EQ(job->options().owner(), "alice");

  auto bob = Jobs(kBob);
  v1::GetJobRequest get;
  get.set_job_id(job->id());
  v1::GetJobResponse got;
  auto get_job = [](auto& stub) {
    return [&stub](auto* c, const auto& r, auto* p) { return stub->GetJob(c, r, p); };
  };
  EXPECT_EQ(Call(get_job(bob), get, &got), grpc::StatusCode::PERMISSION_DENIED);
  v1::GetResultsRequest results_request;
  results_request.set_job_id(job->id());
  v1::GetResultsResponse results;
  EXPECT_EQ(Call([&](auto* c, const auto& r, auto* p) { return bob->GetResults(c, r, p); },
                 results_request, &results),
            grpc::StatusCode::PERMISSION_DENIED);
  v1::CancelJobRequest cancel;
  cancel.set_job_id(job->id());
  v1::CancelJobResponse cancelled;
  EXPECT_EQ(Call([&](auto* c, const auto& r, auto* p) { return bob->CancelJob(c, r, p); },
                 cancel, &cancelled),
            grpc::StatusCode::PERMISSION_DENIED);
  {
    grpc::ClientContext context;
    v1::WatchJobRequest watch;
    watch.set_job_id(job->id());
    auto reader = bob->WatchJob(&context, watch);
    v1::JobEvent event;
    EXPECT_FALSE(reader->Read(&event));
    EXPECT_EQ(reader->Finish().error_code(), grpc::StatusCode::PERMISSION_DENIED);
  }
  v1::ListJobsRequest list;
  v1::ListJobsResponse listed;
  auto list_jobs = [](auto& stub) {
    return [&stub](auto* c, const auto& r, auto* p) { return stub->ListJobs(c, r, p); };
  };
  ASSERT_EQ(Call(list_jobs(bob), list, &listed), grpc::StatusCode::OK);
  EXPECT_EQ(listed.jobs_size(), 0) << "bob lists only bob's jobs";
  list.set_owner("alice");
  EXPECT_EQ(Call(list_jobs(bob), list, &listed), grpc::StatusCode::PERMISSION_DENIED);

  auto alice = Jobs(kAlice);
  EXPECT_EQ(Call(get_job(alice), get, &got), grpc::StatusCode::OK);
  auto admin = Jobs(kAdmin);
  EXPECT_EQ(Call(get_job(admin), get, &got), grpc::StatusCode::OK);
  EXPECT_EQ(got.job().options().owner(), "alice");
  ASSERT_EQ(Call(list_jobs(admin), list, &listed), grpc::StatusCode::OK);
  EXPECT_EQ(listed.jobs_size(), 1);

  // Roles and caps.
  absl::StatusOr<v1::Job> by_reader = Submit(kReader);
  EXPECT_TRUE(absl::IsPermissionDenied(by_reader.status())) << by_reader.status();
  options.set_priority(6);
  absl::StatusOr<v1::Job> over_cap = Submit(kAlice, options);
  EXPECT_TRUE(absl::IsPermissionDenied(over_cap.status())) << over_cap.status();
  EXPECT_THAT(over_cap.status().message(), HasSubstr("priority 6 is over the cap"));
  EXPECT_EQ(Call(get_job(admin), get, &got), grpc::StatusCode::OK);
  EXPECT_EQ(Call([&](auto* c, const auto& r, auto* p) { return admin->CancelJob(c, r, p); },
                 cancel, &cancelled),
            grpc::StatusCode::OK);
}

TEST_F(SecurityTest, AnOwnerOverItsActiveJobsQuotaIsRefusedAndAdminsAreExempt) {
  coordinator_->Kill(SIGKILL);
  StartCoordinator({"--intake.max-active-jobs-per-owner=1"});
  absl::StatusOr<v1::Job> first = Submit(kAlice);  // no worker: it stays running
  ASSERT_TRUE(first.ok()) << first.status() << Log("coordinator");
  absl::StatusOr<v1::Job> second = Submit(kAlice);
  EXPECT_TRUE(absl::IsResourceExhausted(second.status())) << second.status();
  EXPECT_THAT(second.status().message(), HasSubstr("owner \"alice\" has 1 jobs queued or running"));
  EXPECT_TRUE(Submit(kBob).ok()) << "another owner";
  EXPECT_TRUE(Submit(kAdmin).ok());
  EXPECT_TRUE(Submit(kAdmin).ok()) << "admins have no quota";

  v1::CancelJobRequest cancel;
  cancel.set_job_id(first->id());
  v1::CancelJobResponse cancelled;
  auto alice = Jobs(kAlice);
  ASSERT_EQ(Call([&](auto* c, const auto& r, auto* p) { return alice->CancelJob(c, r, p); },
                 cancel, &cancelled),
            grpc::StatusCode::OK);
  EXPECT_TRUE(Submit(kAlice).ok()) << "a job that ended frees its place";
}

TEST_F(SecurityTest, OnlyWorkerIdentitiesRegisterAndOnlyAsThemselves) {
  v1::RegisterResponse registered;
  auto register_as = [](auto& stub) {
    return [&stub](auto* c, const auto& r, auto* p) { return stub->Register(c, r, p); };
  };
  auto client = Workers(kAdmin);
  EXPECT_EQ(Call(register_as(client), Registration(""), &registered),
            grpc::StatusCode::PERMISSION_DENIED)
      << "a client token, even admin, is no worker";
  auto anonymous = Workers("");
  EXPECT_EQ(Call(register_as(anonymous), Registration(""), &registered),
            grpc::StatusCode::UNAUTHENTICATED);
  auto worker_a = Workers(kWorkerA);
  EXPECT_EQ(Call(register_as(worker_a), Registration("gpu-b"), &registered),
            grpc::StatusCode::PERMISSION_DENIED);
  ASSERT_EQ(Call(register_as(worker_a), Registration(""), &registered), grpc::StatusCode::OK);
  EXPECT_EQ(registered.worker_id(), "gpu-a");
  ASSERT_EQ(Call(register_as(worker_a), Registration("gpu-a/1"), &registered),
            grpc::StatusCode::OK);

  // Nor can a client token heartbeat, lease or report, even for a registered worker's id.
  v1::HeartbeatRequest beat;
  beat.set_worker_id("gpu-a");
  v1::LeaseRequest lease_request;
  lease_request.set_worker_id("gpu-a");
  lease_request.set_max_candidates(1);
  lease_request.set_target_arch("sm_90");
  v1::ReportRequest report;
  report.set_worker_id("gpu-a");
  report.set_lease_id("lease-1");
  for (const char* token : {kAlice, kAdmin}) {
    auto stub = Workers(token);
    v1::HeartbeatResponse beaten;
    v1::LeaseResponse leased;
    v1::ReportResponse reported;
    const grpc::StatusCode codes[] = {
        Call([&](auto* c, const auto& r, auto* p) { return stub->Heartbeat(c, r, p); }, beat,
             &beaten),
        Call([&](auto* c, const auto& r, auto* p) { return stub->Lease(c, r, p); }, lease_request,
             &leased),
        Call([&](auto* c, const auto& r, auto* p) { return stub->Report(c, r, p); }, report,
             &reported)};
    for (const grpc::StatusCode code : codes) {
      EXPECT_EQ(code, grpc::StatusCode::PERMISSION_DENIED) << token;
    }
  }
}

TEST_F(SecurityTest, WorkerCannotReportAnotherWorkersLease) {
  auto worker_a = Workers(kWorkerA);
  auto worker_b = Workers(kWorkerB);
  v1::RegisterResponse registered;
  ASSERT_EQ(Call([&](auto* c, const auto& r, auto* p) { return worker_a->Register(c, r, p); },
                 Registration("gpu-a"), &registered),
            grpc::StatusCode::OK);
  ASSERT_EQ(Call([&](auto* c, const auto& r, auto* p) { return worker_b->Register(c, r, p); },
                 Registration("gpu-b"), &registered),
            grpc::StatusCode::OK);
  ASSERT_TRUE(Submit(kAlice).ok());
  v1::LeaseRequest lease_request;
  lease_request.set_worker_id("gpu-a");
  lease_request.set_max_candidates(4);
  lease_request.set_target_arch("sm_90");
  v1::LeaseResponse lease;
  auto lease_a = [&](auto* c, const auto& r, auto* p) { return worker_a->Lease(c, r, p); };
  const absl::Time deadline = absl::Now() + absl::Seconds(20);
  while (lease.candidates().empty() && absl::Now() < deadline) {
    ASSERT_EQ(Call(lease_a, lease_request, &lease), grpc::StatusCode::OK);
    if (lease.candidates().empty()) absl::SleepFor(absl::Milliseconds(100));
  }
  ASSERT_FALSE(lease.candidates().empty()) << Log("coordinator");
  lease_request.set_worker_id("gpu-a");
  auto lease_b = [&](auto* c, const auto& r, auto* p) { return worker_b->Lease(c, r, p); };
  EXPECT_EQ(Call(lease_b, lease_request, &lease), grpc::StatusCode::PERMISSION_DENIED);

  v1::ReportRequest report;
  report.set_lease_id(lease.lease_id());
  report.add_results()->mutable_failure()->set_candidate_digest(lease.candidates(0).digest());
  v1::ReportResponse reported;
  auto report_b = [&](auto* c, const auto& r, auto* p) { return worker_b->Report(c, r, p); };
  report.set_worker_id("gpu-a");  // B claiming A's id
  EXPECT_EQ(Call(report_b, report, &reported), grpc::StatusCode::PERMISSION_DENIED);
  report.set_worker_id("gpu-b");  // B as itself, for A's lease
  EXPECT_EQ(Call(report_b, report, &reported), grpc::StatusCode::PERMISSION_DENIED);
}

TEST_F(SecurityTest, WorkerOverTlsWithItsTokenProducesAttributedResultsAndAnAdminPurgesThem) {
  absl::StatusOr<v1::Job> job = Submit(kAlice);
  ASSERT_TRUE(job.ok()) << job.status();
  absl::StatusOr<testing::Subprocess> worker = testing::Subprocess::Start(
      {FORGE_WORKER_BINARY, absl::StrCat("--coordinator=", Address()), "--emulate=H200",
       "--tls", absl::StrCat("--tls-ca=", dir_.path(), "/ca.pem"),
       absl::StrCat("--token=", kWorkerA), "--compile-threads=1", "--metrics.port=0",
       absl::StrCat("--compile-cache-dir=", ::testing::TempDir(), "forge-security-test-cubins")},
      dir_.path() + "/worker.log");
  ASSERT_TRUE(worker.ok()) << worker.status();
  worker_ = *std::move(worker);
  auto alice = Jobs(kAlice);
  v1::GetJobRequest get;
  get.set_job_id(job->id());
  v1::GetJobResponse got;
  const absl::Time deadline = absl::Now() + absl::Seconds(240);
  while (absl::Now() < deadline) {
    ASSERT_EQ(Call([&](auto* c, const auto& r, auto* p) { return alice->GetJob(c, r, p); }, get,
                   &got),
              grpc::StatusCode::OK);
    if (got.job().state() == v1::JOB_STATE_DONE || got.job().state() == v1::JOB_STATE_FAILED) {
      break;
    }
    absl::SleepFor(absl::Milliseconds(200));
  }
  ASSERT_EQ(got.job().state(), v1::JOB_STATE_DONE) << Log("coordinator") << Log("worker");
  v1::GetResultsRequest results_request;
  results_request.set_job_id(job->id());
  results_request.set_include_all_results(true);
  v1::GetResultsResponse results;
  ASSERT_EQ(Call([&](auto* c, const auto& r, auto* p) { return alice->GetResults(c, r, p); },
                 results_request, &results),
            grpc::StatusCode::OK);
  int attributed = 0;
  for (const v1::TaskResults& task : results.tasks()) {
    for (const v1::Result& result : task.results()) {
      EXPECT_EQ(result.worker_identity(), "gpu-a");
      ++attributed;
    }
  }
  EXPECT_GT(attributed, 0);

  // Say gpu-a lied: only an admin may purge what it reported, and the purge is logged.
  worker_->Kill(SIGKILL);
  worker_.reset();
  v1::PurgeResultsRequest purge;
  purge.set_worker_identity("gpu-a");
  v1::PurgeResultsResponse purged;
  EXPECT_EQ(Call([&](auto* c, const auto& r, auto* p) { return alice->PurgeResults(c, r, p); },
                 purge, &purged),
            grpc::StatusCode::PERMISSION_DENIED);
  std::string output;
  EXPECT_NE(Cli({"admin", "purge-results", "--worker", "gpu-a", "--token", kAlice}, &output), 0);
  EXPECT_THAT(output, HasSubstr("PERMISSION_DENIED"));
  EXPECT_NE(Cli({"admin", "purge-results", "--token", kAdmin}, &output), 0) << "no filter";
  ASSERT_EQ(
      Cli({"admin", "purge-results", "--worker", "gpu-a", "--json", "--token", kAdmin}, &output), 0)
      << output << Log("coordinator");
  EXPECT_THAT(output, HasSubstr(absl::StrCat("\"results_removed\": \"", attributed, "\"")));
  EXPECT_THAT(output, HasSubstr("\"identity_revoked\": true"));
  EXPECT_THAT(Log("coordinator"), HasSubstr("results purged"));
  EXPECT_THAT(Log("coordinator"), HasSubstr("by=root"));

  // The purged identity is revoked with it: its token no longer registers (nor leases or reports).
  auto worker_a = Workers(kWorkerA);
  v1::RegisterResponse registered;
  grpc::ClientContext register_context;
  const grpc::Status refused =
      worker_a->Register(&register_context, Registration("gpu-a"), &registered);
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_THAT(refused.error_message(), HasSubstr("worker identity \"gpu-a\" was revoked"));
  auto worker_b = Workers(kWorkerB);
  EXPECT_EQ(Call([&](auto* c, const auto& r, auto* p) { return worker_b->Register(c, r, p); },
                 Registration("gpu-b"), &registered),
            grpc::StatusCode::OK)
      << "other identities are untouched";

  ASSERT_EQ(Call([&](auto* c, const auto& r, auto* p) { return alice->GetResults(c, r, p); },
                 results_request, &results),
            grpc::StatusCode::OK);
  for (const v1::TaskResults& task : results.tasks()) {
    EXPECT_FALSE(task.has_best()) << "a best made of purged results";
    EXPECT_THAT(task.results(), ::testing::IsEmpty());
  }
  // The next job over the same model is not answered by the cache: with no worker it waits.
  absl::StatusOr<v1::Job> next = Submit(kAlice);
  ASSERT_TRUE(next.ok()) << next.status();
  absl::SleepFor(absl::Seconds(1));
  get.set_job_id(next->id());
  ASSERT_EQ(Call([&](auto* c, const auto& r, auto* p) { return alice->GetJob(c, r, p); }, get,
                 &got),
            grpc::StatusCode::OK);
  EXPECT_EQ(got.job().state(), v1::JOB_STATE_RUNNING);
  EXPECT_EQ(got.job().progress().candidates_completed(), 0);
}

TEST_F(SecurityTest, TheCliSpeaksTlsWithItsToken) {
  ASSERT_TRUE(Submit(kAlice).ok());
  std::string output;
  EXPECT_EQ(Cli({"jobs", "--json", absl::StrCat("--token=", kAlice)}, &output), 0) << output;
  EXPECT_THAT(output, HasSubstr("alice"));
  EXPECT_EQ(Cli({"jobs", "--json", absl::StrCat("--token=", kBob)}, &output), 0) << output;
  EXPECT_THAT(output, Not(HasSubstr("alice"))) << "bob sees none of alice's jobs";
  EXPECT_NE(Cli({"jobs", "--json"}, &output), 0);
  EXPECT_THAT(output, HasSubstr("UNAUTHENTICATED"));
}

TEST_F(SecurityTest, SignedTokensMintedByTheCliAuthenticateUntilTheyExpire) {
  coordinator_->Kill(SIGKILL);
  const std::string secret_file = dir_.path() + "/token.secret";
  const std::string secret = "0123456789abcdef0123456789abcdef0123456789abcdef";
  WriteFile(secret_file, secret + "\n");
  StartCoordinator({absl::StrCat("--auth.token-secret=", secret_file)});

  std::string token;
  ASSERT_EQ(Cli({"admin", "mint-token", "--secret-file", secret_file, "--owner", "dave", "--role",
                 "submit", "--expires-in", "1h", "--cap", "max-priority=2"},
                &token),
            0)
      << token;
  token = std::string(absl::StripAsciiWhitespace(token));
  absl::StatusOr<v1::Job> job = Submit(token);
  ASSERT_TRUE(job.ok()) << job.status() << Log("coordinator");
  EXPECT_EQ(job->options().owner(), "dave");
  v1::JobOptions over;
  over.set_priority(3);
  EXPECT_TRUE(absl::IsPermissionDenied(Submit(token, over).status())) << "the token's cap";
  EXPECT_TRUE(Submit(kAlice).ok()) << "the token file still counts";

  std::string reader;
  ASSERT_EQ(Cli({"admin", "mint-token", "--secret-file", secret_file, "--owner", "dave", "--role",
                 "read"},
                &reader),
            0);
  EXPECT_TRUE(absl::IsPermissionDenied(
      Submit(std::string(absl::StripAsciiWhitespace(reader))).status()));
  std::string refused;
  EXPECT_NE(Cli({"admin", "mint-token", "--secret-file", secret_file, "--owner", "dave", "--role",
                 "boss"},
                &refused),
            0);
  EXPECT_THAT(refused, HasSubstr("role \"boss\""));

  const absl::Time later = absl::Now() + absl::Hours(1);
  const std::string expired =
      *SignToken(secret, {.owner = "dave", .role = "admin", .expires = absl::Now() - absl::Seconds(1)});
  absl::Status old = Submit(expired).status();
  EXPECT_TRUE(absl::IsUnauthenticated(old)) << old;
  EXPECT_THAT(old.message(), HasSubstr("expired"));
  const std::string forged = *SignToken("not-the-coordinators-secret-0123456789abcdef",
                                        {.owner = "dave", .role = "admin", .expires = later});
  EXPECT_TRUE(absl::IsUnauthenticated(Submit(forged).status()));
}

TEST_F(SecurityTest, ARevokedTokenIsRefusedFromTheNextCallAndOnlyThatToken) {
  coordinator_->Kill(SIGKILL);
  const std::string secret_file = dir_.path() + "/token.secret";
  WriteFile(secret_file, "0123456789abcdef0123456789abcdef0123456789abcdef\n");
  StartCoordinator({absl::StrCat("--auth.token-secret=", secret_file)});
  auto mint = [&] {
    std::string token;
    EXPECT_EQ(Cli({"admin", "mint-token", "--secret-file", secret_file, "--owner", "erin",
                   "--role", "submit"},
                  &token),
              0)
        << token;
    return std::string(absl::StripAsciiWhitespace(token));
  };
  const std::string first = mint(), second = mint();
  ASSERT_NE(*TokenId(first), *TokenId(second)) << "each minted token has its own id";
  ASSERT_TRUE(Submit(first).ok()) << Log("coordinator");

  std::string output;
  EXPECT_NE(Cli({"admin", "revoke-token", "--of-token", first, "--token", kAlice}, &output), 0)
      << "only an admin revokes";
  EXPECT_THAT(output, HasSubstr("PERMISSION_DENIED"));
  ASSERT_EQ(Cli({"admin", "revoke-token", "--of-token", first, "--token", kAdmin}, &output), 0)
      << output << Log("coordinator");
  EXPECT_THAT(output, HasSubstr(absl::StrCat("token ", *TokenId(first), " revoked")));
  const absl::Status revoked = Submit(first).status();
  EXPECT_TRUE(absl::IsUnauthenticated(revoked)) << revoked;
  EXPECT_THAT(revoked.message(), HasSubstr("was revoked"));
  EXPECT_TRUE(Submit(second).ok()) << "erin's other token still works";
  EXPECT_THAT(Log("coordinator"), HasSubstr("token revoked"));

  // A token file's token, by its id; then let back.
  ASSERT_TRUE(Submit(kBob).ok());
  ASSERT_EQ(Cli({"admin", "revoke-token", "--id", *TokenId(kBob), "--token", kAdmin}, &output), 0)
      << output;
  EXPECT_TRUE(absl::IsUnauthenticated(Submit(kBob).status()));
  ASSERT_EQ(Cli({"admin", "revoke-token", "--id", *TokenId(kBob), "--restore", "--token", kAdmin},
                &output),
            0)
      << output;
  EXPECT_TRUE(Submit(kBob).ok()) << "restored";

  // The revocation is in Redis: a restarted coordinator still refuses the token.
  coordinator_->Kill(SIGKILL);
  StartCoordinator({absl::StrCat("--auth.token-secret=", secret_file)});
  EXPECT_TRUE(absl::IsUnauthenticated(Submit(first).status()));
  EXPECT_NE(Cli({"admin", "revoke-token", "--token", kAdmin}, &output), 0) << "nothing named";
  EXPECT_THAT(output, HasSubstr("exactly one of --id, --of-token and --identity"));
}

TEST_F(SecurityTest, WrongCaAndPlaintextFail) {
  auto wrong_ca = v1::JobService::NewStub(Channel(kAdmin, "other"));
  v1::ListJobsResponse listed;
  EXPECT_EQ(Call([&](auto* c, const auto& r, auto* p) { return wrong_ca->ListJobs(c, r, p); },
                 v1::ListJobsRequest(), &listed),
            grpc::StatusCode::UNAVAILABLE);
  auto plaintext = v1::JobService::NewStub(
      grpc::CreateChannel(Address(), grpc::InsecureChannelCredentials()));
  EXPECT_EQ(Call([&](auto* c, const auto& r, auto* p) { return plaintext->ListJobs(c, r, p); },
                 v1::ListJobsRequest(), &listed),
            grpc::StatusCode::UNAVAILABLE);
}

TEST_F(SecurityTest, MutualTlsRefusesClientsWithoutACertificate) {
  coordinator_->Kill(SIGKILL);
  const std::string d = dir_.path();
  StartCoordinator({absl::StrCat("--tls.client-ca=", d, "/ca.pem"), "--tls.require-client-cert"});
  v1::ListJobsResponse listed;
  for (const bool client_cert : {false, true}) {
    auto stub = v1::JobService::NewStub(Channel(kAdmin, "ca", client_cert));
    EXPECT_EQ(Call([&](auto* c, const auto& r, auto* p) { return stub->ListJobs(c, r, p); },
                   v1::ListJobsRequest(), &listed),
              client_cert ? grpc::StatusCode::OK : grpc::StatusCode::UNAVAILABLE)
        << "client certificate: " << client_cert << Log("coordinator");
  }
  // The certificate proves the connection, the token still decides: none is refused.
  auto anonymous = v1::JobService::NewStub(Channel("", "ca", true));
  EXPECT_EQ(Call([&](auto* c, const auto& r, auto* p) { return anonymous->ListJobs(c, r, p); },
                 v1::ListJobsRequest(), &listed),
            grpc::StatusCode::UNAUTHENTICATED);
}

TEST_F(SecurityTest, HealthIsNotServingWhileRedisIsDownAndProbeSaysSo) {
  std::shared_ptr<grpc::Channel> channel = Channel("");  // probes carry no token
  auto becomes = [&](bool serving) {
    const absl::Time deadline = absl::Now() + absl::Seconds(15);
    while (absl::Now() < deadline) {
      absl::StatusOr<bool> health = server::CheckHealth(*channel, absl::Seconds(2));
      if (health.ok() && *health == serving) return true;
      absl::SleepFor(absl::Milliseconds(100));
    }
    return false;
  };
  auto probe = [&] {
    absl::StatusOr<testing::Subprocess> process = testing::Subprocess::Start(
        {FORGE_COORDINATOR_BINARY, absl::StrCat("--probe=", Address()),
         absl::StrCat("--probe.ca=", dir_.path(), "/ca.pem")},
        dir_.path() + "/probe.log");
    EXPECT_TRUE(process.ok());
    const int status = process->Wait(std::chrono::seconds(20));
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  };
  EXPECT_TRUE(becomes(true));
  EXPECT_EQ(probe(), 0) << Log("probe");
  redis_->Stop();
  EXPECT_TRUE(becomes(false)) << Log("coordinator");
  EXPECT_EQ(probe(), 1) << Log("probe");
  ASSERT_TRUE(redis_->Restart().ok());
  EXPECT_TRUE(becomes(true));
}

}  // namespace
}  // namespace forge
