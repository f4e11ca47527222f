// JobService end to end: a real redis-server (append-only, fsync always), the real service on a
// loopback gRPC port, and the exported llama_block model with its weight blobs.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "compiler/codegen/family.h"
#include "compiler/graph/partition.h"
#include "compiler/graph/task_digest.h"
#include "gmock/gmock.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "server/blob_store.h"
#include "server/job_service.h"
#include "server/job_store.h"
#include "server/result_cache.h"
#include "server/scheduler.h"
#include "server/worker_service.h"
#include "tests/support/hostile_graphs.h"
#include "tests/support/redis_server.h"
#include "tests/support/subprocess.h"

namespace forge::server {
namespace {

using ::forge::v1::Graph;
using ::forge::v1::Job;
using ::forge::v1::JobEvent;
using ::forge::v1::JobOptions;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::SizeIs;
using ::testing::UnorderedElementsAreArray;

constexpr size_t kChunkSize = 8 * 1024;  // the model's blobs are up to 32 KiB: several chunks each

std::string ReadFile(const std::filesystem::path& path) {
  std::ifstream file(path, std::ios::binary);
  std::ostringstream bytes;
  bytes << file.rdbuf();
  return bytes.str();
}

// An exported test model: its graph and its blobs by digest.
struct Model {
  Graph graph;
  std::map<std::string, std::string> blobs;
};

Model LoadModel(const std::string& name) {
  Model model;
  const char* directory = std::getenv("FORGE_TEST_MODELS");
  if (directory == nullptr) {
    ADD_FAILURE() << "FORGE_TEST_MODELS is not set; run through ctest (fixtures.make_models)";
    return model;
  }
  const std::filesystem::path root = std::filesystem::path(directory) / name;
  EXPECT_TRUE(model.graph.ParseFromString(ReadFile(root / "graph.pb"))) << root;
  for (const auto& entry : std::filesystem::directory_iterator(root / "blobs")) {
    model.blobs[entry.path().filename().string()] = ReadFile(entry.path());
  }
  return model;
}

// One coordinator: its Redis connection, stores and JobService on a free loopback port.
// Destroying it and making another over the same Redis is a coordinator restart.
class Coordinator {
 public:
  Coordinator(const testing::RedisServer& redis_server, const std::string& blob_directory) {
    const RedisClientOptions redis_options{.host = redis_server.host(),
                                           .port = redis_server.port(),
                                           .reconnect_backoff_initial = absl::Milliseconds(20),
                                           .reconnect_backoff_max = absl::Milliseconds(100)};
    redis_ = std::make_unique<RedisClient>(redis_options);
    absl::StatusOr<std::unique_ptr<BlobStore>> blobs = BlobStore::Open(redis_.get(), blob_directory);
    EXPECT_TRUE(blobs.ok()) << blobs.status();
    blobs_ = *std::move(blobs);
    jobs_ = std::make_unique<JobStore>(redis_.get());
    results_ = std::make_unique<ResultCache>(redis_.get());
    SchedulerOptions scheduler_options;
    scheduler_options.generator_versions = codegen::GeneratorVersions();
    absl::StatusOr<std::unique_ptr<Scheduler>> scheduler = Scheduler::Create(
        redis_.get(), jobs_.get(), results_.get(), &registry_, scheduler_options);
    EXPECT_TRUE(scheduler.ok()) << scheduler.status();
    scheduler_ = *std::move(scheduler);
    service_ = std::make_unique<JobService>(
        jobs_.get(), blobs_.get(), scheduler_.get(), &registry_,
        JobServiceOptions{.watch_redis = redis_options, .watch_wait = absl::Milliseconds(200)});
    worker_service_ =
        std::make_unique<WorkerService>(scheduler_.get(), service_->rpc_counter(), &registry_);
    grpc::ServerBuilder builder;
    int port = 0;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
    builder.RegisterService(service_.get());
    builder.RegisterService(worker_service_.get());
    server_ = builder.BuildAndStart();
    EXPECT_GT(port, 0);
    auto channel =
        grpc::CreateChannel(absl::StrCat("127.0.0.1:", port), grpc::InsecureChannelCredentials());
    stub_ = forge::v1::JobService::NewStub(channel);
    worker_stub_ = forge::v1::WorkerService::NewStub(channel);
  }
  ~Coordinator() { server_->Shutdown(std::chrono::system_clock::now()); }

  forge::v1::JobService::Stub& stub() { return *stub_; }
  forge::v1::WorkerService::Stub& worker_stub() { return *worker_stub_; }
  JobStore& jobs() { return *jobs_; }
  const metrics::Registry& registry() const { return registry_; }

 private:
  std::unique_ptr<RedisClient> redis_;
  std::unique_ptr<BlobStore> blobs_;
  std::unique_ptr<JobStore> jobs_;
  std::unique_ptr<ResultCache> results_;
  metrics::Registry registry_;
  std::unique_ptr<Scheduler> scheduler_;
  std::unique_ptr<JobService> service_;
  std::unique_ptr<WorkerService> worker_service_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<forge::v1::JobService::Stub> stub_;
  std::unique_ptr<forge::v1::WorkerService::Stub> worker_stub_;
};

class JobServiceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<std::unique_ptr<testing::RedisServer>> server =
        testing::RedisServer::Start({.append_only = true, .append_fsync = "always"});
    ASSERT_TRUE(server.ok()) << server.status();
    redis_server_ = *std::move(server);
    coordinator_ = std::make_unique<Coordinator>(*redis_server_, BlobDirectory());
    model_ = LoadModel("llama_block");
    ASSERT_FALSE(model_.blobs.empty());
  }

  std::string BlobDirectory() const { return absl::StrCat(directory_.path(), "/blobs"); }

  std::vector<std::string> AllDigests() const {
    std::vector<std::string> digests;
    for (const auto& [digest, bytes] : model_.blobs) digests.push_back(digest);
    return digests;
  }

  std::vector<std::string> Missing(const std::vector<std::string>& digests) {
    grpc::ClientContext context;
    forge::v1::MissingBlobsRequest request;
    for (const std::string& digest : digests) request.add_sha256(digest);
    forge::v1::MissingBlobsResponse response;
    grpc::Status status = coordinator_->stub().MissingBlobs(&context, request, &response);
    EXPECT_TRUE(status.ok()) << status.error_message();
    return {response.missing_sha256().begin(), response.missing_sha256().end()};
  }

  // Sends the header, then `blobs` in kChunkSize chunks; `corrupt` flips a byte of that blob's
  // second chunk.
  grpc::Status Submit(const Graph& graph, const JobOptions& options,
                      const std::vector<std::string>& blobs, forge::v1::SubmitJobResponse* response,
                      const std::string& corrupt = "") {
    grpc::ClientContext context;
    std::unique_ptr<grpc::ClientWriter<forge::v1::SubmitJobRequest>> writer =
        coordinator_->stub().SubmitJob(&context, response);
    forge::v1::SubmitJobRequest request;
    *request.mutable_header()->mutable_graph() = graph;
    *request.mutable_header()->mutable_options() = options;
    bool sent = writer->Write(request);
    for (const std::string& digest : blobs) {
      const std::string& bytes = model_.blobs.at(digest);
      for (size_t offset = 0; sent && offset < bytes.size(); offset += kChunkSize) {
        forge::v1::BlobChunk* chunk = request.mutable_chunk();
        chunk->set_sha256(digest);
        chunk->set_offset(static_cast<int64_t>(offset));
        chunk->set_data(bytes.substr(offset, kChunkSize));
        if (digest == corrupt && offset == kChunkSize) (*chunk->mutable_data())[7] ^= 0x5a;
        sent = writer->Write(request);
      }
    }
    writer->WritesDone();
    return writer->Finish();
  }

  // The client's protocol: ask what is missing, send only that.
  Job SubmitModel(const JobOptions& options = {}) {
    forge::v1::SubmitJobResponse response;
    grpc::Status status = Submit(model_.graph, options, Missing(AllDigests()), &response);
    EXPECT_TRUE(status.ok()) << status.error_message();
    return response.job();
  }

  grpc::Status GetJob(const std::string& job_id, Job* job) {
    grpc::ClientContext context;
    forge::v1::GetJobRequest request;
    request.set_job_id(job_id);
    forge::v1::GetJobResponse response;
    grpc::Status status = coordinator_->stub().GetJob(&context, request, &response);
    *job = response.job();
    return status;
  }

  grpc::Status Cancel(const std::string& job_id, Job* job) {
    grpc::ClientContext context;
    forge::v1::CancelJobRequest request;
    request.set_job_id(job_id);
    request.set_reason("test");
    forge::v1::CancelJobResponse response;
    grpc::Status status = coordinator_->stub().CancelJob(&context, request, &response);
    *job = response.job();
    return status;
  }

  forge::v1::ListJobsResponse List(const forge::v1::ListJobsRequest& request) {
    grpc::ClientContext context;
    forge::v1::ListJobsResponse response;
    grpc::Status status = coordinator_->stub().ListJobs(&context, request, &response);
    EXPECT_TRUE(status.ok()) << status.error_message();
    return response;
  }

  // Every event WatchJob sends until it ends, and how it ended.
  std::vector<JobEvent> Watch(const std::string& job_id, const std::string& resume_after,
                              grpc::Status* status) {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    forge::v1::WatchJobRequest request;
    request.set_job_id(job_id);
    request.set_resume_after(resume_after);
    std::unique_ptr<grpc::ClientReader<JobEvent>> reader =
        coordinator_->stub().WatchJob(&context, request);
    std::vector<JobEvent> events;
    JobEvent event;
    while (reader->Read(&event)) events.push_back(event);
    *status = reader->Finish();
    return events;
  }

  testing::TempDir directory_;
  std::unique_ptr<testing::RedisServer> redis_server_;
  std::unique_ptr<Coordinator> coordinator_;
  Model model_;
};

TEST_F(JobServiceTest, SubmitsModelInChunksAndResubmitsWithoutUploading) {
  EXPECT_THAT(Missing(AllDigests()), UnorderedElementsAreArray(AllDigests()));
  forge::v1::SubmitJobResponse first;
  grpc::Status status = Submit(model_.graph, {}, AllDigests(), &first);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(first.blobs_stored(), static_cast<int>(model_.blobs.size()));
  EXPECT_EQ(first.job().state(), forge::v1::JOB_STATE_QUEUED);

  absl::StatusOr<graph::PartitionResult> partition = graph::Partition(model_.graph);
  ASSERT_TRUE(partition.ok()) << partition.status();
  Job job;
  ASSERT_TRUE(GetJob(first.job().id(), &job).ok());
  EXPECT_EQ(job.state(), forge::v1::JOB_STATE_RUNNING) << "the scheduler starts it at once";
  EXPECT_EQ(job.progress().tasks_total(), static_cast<int>(partition->tasks.size()));
  EXPECT_EQ(job.model_digest(), graph::ModelDigest(model_.graph));

  grpc::ClientContext context;
  forge::v1::GetResultsRequest results_request;
  results_request.set_job_id(job.id());
  forge::v1::GetResultsResponse results;
  ASSERT_TRUE(coordinator_->stub().GetResults(&context, results_request, &results).ok());
  EXPECT_THAT(results.tasks(), SizeIs(partition->tasks.size()));

  // The same model again: nothing to upload, and a second job.
  EXPECT_THAT(Missing(AllDigests()), IsEmpty());
  forge::v1::SubmitJobResponse second;
  status = Submit(model_.graph, {}, {}, &second);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(second.blobs_stored(), 0);
  EXPECT_NE(second.job().id(), first.job().id());
  EXPECT_EQ(second.job().model_digest(), first.job().model_digest());
}

TEST_F(JobServiceTest, RejectsCorruptedChunkNamingTheDigest) {
  // The largest blob, so that it has a second chunk to corrupt.
  std::string largest;
  for (const auto& [digest, bytes] : model_.blobs) {
    if (largest.empty() || bytes.size() > model_.blobs.at(largest).size()) largest = digest;
  }
  ASSERT_GT(model_.blobs.at(largest).size(), kChunkSize);
  forge::v1::SubmitJobResponse response;
  grpc::Status status = Submit(model_.graph, {}, AllDigests(), &response, largest);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_THAT(status.error_message(), HasSubstr(largest));
  EXPECT_THAT(status.error_message(), HasSubstr("hash to"));
  EXPECT_THAT(Missing({largest}), ElementsAre(largest));
  EXPECT_THAT(List({}).jobs(), IsEmpty());
}

TEST_F(JobServiceTest, RejectsMissingBlobListingIt) {
  std::vector<std::string> digests = AllDigests();
  const std::string left_out = digests.back();
  digests.pop_back();
  forge::v1::SubmitJobResponse response;
  grpc::Status status = Submit(model_.graph, {}, digests, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_THAT(status.error_message(), HasSubstr("neither stored nor sent: " + left_out));
  EXPECT_THAT(List({}).jobs(), IsEmpty());
}

TEST_F(JobServiceTest, RejectsMalformedGraphNamingTheNode) {
  Graph graph = model_.graph;
  forge::v1::Node* node = graph.mutable_nodes(3);
  node->mutable_arguments(0)->set_tensor("no_such_value");
  forge::v1::SubmitJobResponse response;
  grpc::Status status = Submit(graph, {}, {}, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(), HasSubstr(node->name()));
  EXPECT_THAT(status.error_message(), HasSubstr("graph rejected"));
}

// Intake validation (server/intake.h) over gRPC: each bad input is refused with a message naming
// the field, nothing is stored, and the model itself is still accepted.
TEST_F(JobServiceTest, RejectsInvalidInputAtIntakeNamingTheField) {
  auto refused = [&](const Graph& graph, const JobOptions& options) {
    forge::v1::SubmitJobResponse response;
    grpc::Status status = Submit(graph, options, {}, &response);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    return status.error_message();
  };
  Graph negative = model_.graph;
  negative.mutable_values(0)->mutable_tensor()->set_shape(0, -2);
  EXPECT_THAT(refused(negative, {}),
              HasSubstr(absl::StrCat("graph rejected: value '", negative.values(0).name(),
                                     "': tensor.shape[0] is -2")));
  Graph overflowing = model_.graph;
  overflowing.mutable_values(0)->mutable_tensor()->clear_strides();
  overflowing.mutable_values(0)->mutable_tensor()->clear_shape();
  overflowing.mutable_values(0)->mutable_tensor()->add_shape(int64_t{1} << 32);
  overflowing.mutable_values(0)->mutable_tensor()->add_shape(int64_t{1} << 32);
  EXPECT_THAT(refused(overflowing, {}), HasSubstr("overflows int64"));
  Graph lying = model_.graph;
  for (forge::v1::GraphInput& input : *lying.mutable_inputs()) {
    if (input.has_data()) {
      input.mutable_data()->set_size_bytes(50 << 20);
      break;
    }
  }
  EXPECT_THAT(refused(lying, {}), HasSubstr("data.size_bytes is 52428800"));
  Graph garbage = model_.graph;
  garbage.mutable_nodes(0)->set_schema("not a schema");
  EXPECT_THAT(refused(garbage, {}), HasSubstr("schema \"not a schema\""));
  JobOptions greedy;
  greedy.set_priority(1'000'000);
  EXPECT_THAT(refused(model_.graph, greedy), HasSubstr("options.priority is 1000000"));
  EXPECT_THAT(List({}).jobs(), IsEmpty());
  EXPECT_EQ(SubmitModel().state(), forge::v1::JOB_STATE_QUEUED);
}

// What forge.optimize(nn.Identity()) sends: no operation, no task. The job is DONE at once and
// the coordinator keeps serving, a restarted one too.
TEST_F(JobServiceTest, AGraphOfNoTasksIsDoneAndTheCoordinatorKeepsServing) {
  Graph identity;
  *identity.add_values() = model_.graph.values(0);
  identity.add_inputs()->set_value_name(identity.values(0).name());
  identity.add_outputs()->set_value_name(identity.values(0).name());
  forge::v1::SubmitJobResponse response;
  grpc::Status status = Submit(identity, {}, {}, &response);
  ASSERT_TRUE(status.ok()) << status.error_message();
  Job job;
  ASSERT_TRUE(GetJob(response.job().id(), &job).ok());
  EXPECT_EQ(job.state(), forge::v1::JOB_STATE_DONE);
  EXPECT_EQ(job.progress().tasks_total(), 0);
  const Job model = SubmitModel();
  EXPECT_FALSE(model.id().empty());
  coordinator_.reset();
  coordinator_ = std::make_unique<Coordinator>(*redis_server_, BlobDirectory());
  ASSERT_TRUE(GetJob(model.id(), &job).ok());
  EXPECT_EQ(job.state(), forge::v1::JOB_STATE_RUNNING);
}

TEST_F(JobServiceTest, WorkerServiceRefusesMalformedAndForeignRequestsWithClearCodes) {
  forge::v1::WorkerService::Stub& workers = coordinator_->worker_stub();
  auto call = [](auto method, const auto& request, auto* response) {
    grpc::ClientContext context;
    return method(&context, request, response);
  };
  using forge::v1::WorkerService;
  forge::v1::RegisterRequest register_request;
  register_request.set_generator_version(codegen::GeneratorVersions());
  forge::v1::RegisterResponse registered;
  auto do_register = [&](auto* context, const auto& request, auto* response) {
    return workers.Register(context, request, response);
  };
  EXPECT_EQ(call(do_register, register_request, &registered).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT)
      << "no GPU";
  forge::v1::GpuInfo* gpu = register_request.add_gpus();
  gpu->set_name("H200");
  gpu->set_arch("sm_90");
  gpu->set_emulated(true);
  register_request.set_generator_version("pointwise-0");
  grpc::Status stale = call(do_register, register_request, &registered);
  EXPECT_EQ(stale.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_THAT(stale.error_message(), HasSubstr("pointwise-0"));
  register_request.set_generator_version(codegen::GeneratorVersions());
  ASSERT_TRUE(call(do_register, register_request, &registered).ok());
  forge::v1::RegisterResponse other;
  ASSERT_TRUE(call(do_register, register_request, &other).ok());
  ASSERT_NE(other.worker_id(), registered.worker_id());

  auto do_lease = [&](auto* context, const auto& request, auto* response) {
    return workers.Lease(context, request, response);
  };
  forge::v1::LeaseRequest lease_request;
  lease_request.set_worker_id("worker-404");
  lease_request.set_max_candidates(4);
  lease_request.set_target_arch("sm_90");
  forge::v1::LeaseResponse lease;
  EXPECT_EQ(call(do_lease, lease_request, &lease).error_code(), grpc::StatusCode::NOT_FOUND);
  lease_request.set_worker_id(registered.worker_id());
  lease_request.set_max_candidates(0);
  EXPECT_EQ(call(do_lease, lease_request, &lease).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
  lease_request.set_max_candidates(4);
  lease_request.set_target_arch("sm_100");
  EXPECT_EQ(call(do_lease, lease_request, &lease).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
  lease_request.set_target_arch("sm_90");

  SubmitModel();
  ASSERT_TRUE(call(do_lease, lease_request, &lease).ok());
  ASSERT_FALSE(lease.candidates().empty());
  forge::v1::ReportRequest report;
  report.set_worker_id(other.worker_id());
  report.set_lease_id(lease.lease_id());
  report.add_results()->mutable_failure()->set_candidate_digest(lease.candidates(0).digest());
  forge::v1::ReportResponse reported;
  auto do_report = [&](auto* context, const auto& request, auto* response) {
    return workers.Report(context, request, response);
  };
  EXPECT_EQ(call(do_report, report, &reported).error_code(),
            grpc::StatusCode::PERMISSION_DENIED);
  report.set_worker_id(registered.worker_id());
  report.set_lease_id("lease-404");
  ASSERT_TRUE(call(do_report, report, &reported).ok());
  EXPECT_EQ(reported.accepted(), 0);
  EXPECT_EQ(reported.rejected_candidate_digests_size(), 1);

  grpc::ClientContext context;
  forge::v1::GetResultsRequest results_request;
  results_request.set_job_id("job-404");
  forge::v1::GetResultsResponse results;
  EXPECT_EQ(coordinator_->stub().GetResults(&context, results_request, &results).error_code(),
            grpc::StatusCode::NOT_FOUND);
}

TEST_F(JobServiceTest, RefusesAnOversizedMessageAndStaysUsable) {
  forge::v1::SubmitJobResponse response;
  grpc::ClientContext context;
  std::unique_ptr<grpc::ClientWriter<forge::v1::SubmitJobRequest>> writer =
      coordinator_->stub().SubmitJob(&context, &response);
  forge::v1::SubmitJobRequest request;
  *request.mutable_header()->mutable_graph() = model_.graph;
  writer->Write(request);
  forge::v1::BlobChunk* chunk = request.mutable_chunk();
  chunk->set_sha256(AllDigests().front());
  chunk->set_data(std::string(5 << 20, 'x'));  // over gRPC's 4 MiB default message limit
  writer->Write(request);
  writer->WritesDone();
  EXPECT_EQ(writer->Finish().error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_THAT(Missing(AllDigests()), SizeIs(AllDigests().size())) << "nothing was stored";
  EXPECT_EQ(SubmitModel().state(), forge::v1::JOB_STATE_QUEUED);
}

TEST_F(JobServiceTest, ListsJobsByStateAndLabelAPageAtATime) {
  std::vector<std::string> ids;
  for (int i = 0; i < 5; ++i) {
    JobOptions options;
    (*options.mutable_labels())["team"] = i < 3 ? "red" : "blue";
    ids.push_back(SubmitModel(options).id());
  }
  Job cancelled;
  ASSERT_TRUE(Cancel(ids[1], &cancelled).ok());

  forge::v1::ListJobsRequest request;
  request.set_page_size(2);
  std::vector<std::string> listed;
  do {
    forge::v1::ListJobsResponse page = List(request);
    EXPECT_LE(page.jobs_size(), 2);
    for (const Job& job : page.jobs()) listed.push_back(job.id());
    request.set_page_token(page.next_page_token());
  } while (!request.page_token().empty());
  EXPECT_THAT(listed, ElementsAre(ids[4], ids[3], ids[2], ids[1], ids[0]));

  forge::v1::ListJobsRequest red_running;
  (*red_running.mutable_labels())["team"] = "red";
  red_running.add_states(forge::v1::JOB_STATE_RUNNING);
  listed.clear();
  const forge::v1::ListJobsResponse red = List(red_running);
  for (const Job& job : red.jobs()) listed.push_back(job.id());
  EXPECT_THAT(listed, ElementsAre(ids[2], ids[0]));

  forge::v1::ListJobsRequest bad_token;
  bad_token.set_page_token("x");
  grpc::ClientContext context;
  forge::v1::ListJobsResponse response;
  EXPECT_EQ(coordinator_->stub().ListJobs(&context, bad_token, &response).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
}

TEST_F(JobServiceTest, CancelsOnceAndRefusesFinishedJobs) {
  const Job job = SubmitModel();
  Job cancelled;
  ASSERT_TRUE(Cancel(job.id(), &cancelled).ok());
  EXPECT_EQ(cancelled.state(), forge::v1::JOB_STATE_CANCELLED);
  ASSERT_TRUE(Cancel(job.id(), &cancelled).ok());  // idempotent
  EXPECT_EQ(cancelled.state(), forge::v1::JOB_STATE_CANCELLED);

  const Job done = SubmitModel();
  ASSERT_TRUE(coordinator_->jobs()
                  .Transition(done.id(), forge::v1::JOB_STATE_RUNNING, forge::v1::JOB_STATE_DONE, "")
                  .ok());
  Job refused;
  grpc::Status status = Cancel(done.id(), &refused);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_THAT(status.error_message(), HasSubstr("JOB_STATE_DONE"));
  EXPECT_EQ(Cancel("job-404", &refused).error_code(), grpc::StatusCode::NOT_FOUND);

  // Each answer was counted by method and code.
  std::string cancel_codes;
  for (const metrics::FamilySnapshot& family : coordinator_->registry().Collect()) {
    if (family.name != "forge_coordinator_rpcs_total") continue;
    for (const metrics::SeriesSnapshot& series : family.series) {
      if (series.labels.at("method") == "CancelJob") {
        absl::StrAppend(&cancel_codes, series.labels.at("code"), "=", series.value, " ");
      }
    }
  }
  EXPECT_EQ(cancel_codes, "FAILED_PRECONDITION=1 NOT_FOUND=1 OK=2 ");
}

TEST_F(JobServiceTest, WatchStreamsStateChangesUntilTheEndAndResumes) {
  const Job job = SubmitModel();
  JobStore& jobs = coordinator_->jobs();
  // With no worker the job stays RUNNING; the watch blocks in Redis until the test ends it.
  std::thread finisher([&] {
    absl::SleepFor(absl::Milliseconds(300));
    EXPECT_TRUE(jobs.Transition(job.id(), forge::v1::JOB_STATE_RUNNING,
                                forge::v1::JOB_STATE_DONE, "all tasks stopped")
                    .ok());
  });
  grpc::Status status;
  std::vector<JobEvent> events = Watch(job.id(), "", &status);
  finisher.join();
  ASSERT_TRUE(status.ok()) << status.error_message();
  // Submitted, started, one TaskStarted per task, done.
  const int tasks = job.progress().tasks_total();
  ASSERT_THAT(events, SizeIs(3 + tasks));
  EXPECT_EQ(events[0].state_changed().current(), forge::v1::JOB_STATE_QUEUED);
  EXPECT_EQ(events[1].state_changed().current(), forge::v1::JOB_STATE_RUNNING);
  for (int i = 0; i < tasks; ++i) EXPECT_TRUE(events[2 + i].has_task_started()) << i;
  const JobEvent& last = events.back();
  EXPECT_EQ(last.state_changed().previous(), forge::v1::JOB_STATE_RUNNING);
  EXPECT_EQ(last.state_changed().current(), forge::v1::JOB_STATE_DONE);
  EXPECT_EQ(last.state_changed().detail(), "all tasks stopped");
  EXPECT_EQ(last.progress().tasks_total(), job.progress().tasks_total());

  std::vector<JobEvent> resumed = Watch(job.id(), events[events.size() - 2].event_id(), &status);
  ASSERT_TRUE(status.ok()) << status.error_message();
  ASSERT_THAT(resumed, SizeIs(1));
  EXPECT_EQ(resumed[0].event_id(), last.event_id());
  // After the last event of a finished job there is nothing more, and the stream ends.
  EXPECT_THAT(Watch(job.id(), last.event_id(), &status), IsEmpty());
  EXPECT_TRUE(status.ok()) << status.error_message();

  Watch("job-404", "", &status);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::NOT_FOUND);
}

TEST_F(JobServiceTest, NewCoordinatorOverTheSameRedisSeesTheJobs) {
  const Job job = SubmitModel();
  coordinator_.reset();
  coordinator_ = std::make_unique<Coordinator>(*redis_server_, BlobDirectory());
  Job seen;
  ASSERT_TRUE(GetJob(job.id(), &seen).ok());
  EXPECT_EQ(seen.state(), forge::v1::JOB_STATE_RUNNING);
  EXPECT_THAT(Missing(AllDigests()), IsEmpty());
}

TEST_F(JobServiceTest, RedisCrashAndRestartLosesNoJob) {
  const Job running = SubmitModel();
  const Job cancelled = SubmitModel();
  Job ignored;
  ASSERT_TRUE(Cancel(cancelled.id(), &ignored).ok());
  redis_server_->Stop(SIGKILL);
  ASSERT_TRUE(redis_server_->Restart().ok());

  // The client reconnects by itself; the first call after the restart may still see the old
  // connection fail, so allow a short retry.
  Job seen;
  grpc::Status status = GetJob(running.id(), &seen);
  for (int attempt = 0; !status.ok() && attempt < 20; ++attempt) {
    absl::SleepFor(absl::Milliseconds(50));
    status = GetJob(running.id(), &seen);
  }
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(seen.state(), forge::v1::JOB_STATE_RUNNING);
  ASSERT_TRUE(GetJob(cancelled.id(), &seen).ok());
  EXPECT_EQ(seen.state(), forge::v1::JOB_STATE_CANCELLED);
  EXPECT_THAT(List({}).jobs(), SizeIs(2));
  // A new job after the restart gets a new id: the id sequence survived too.
  EXPECT_THAT(SubmitModel().id(), ::testing::StartsWith("job-3-"));
}

TEST_F(JobServiceTest, RedisDownIsUnavailableAndServiceRecovers) {
  const Job job = SubmitModel();
  redis_server_->Stop(SIGKILL);

  Job seen;
  grpc::Status status = GetJob(job.id(), &seen);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_THAT(status.error_message(), HasSubstr(absl::StrCat("127.0.0.1:", redis_server_->port())));
  forge::v1::SubmitJobResponse response;
  status = Submit(model_.graph, {}, {}, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAVAILABLE);
  status = Cancel(job.id(), &seen);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAVAILABLE);
  Watch(job.id(), "", &status);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAVAILABLE);

  ASSERT_TRUE(redis_server_->Restart().ok());
  // Calls fail fast during the client's reconnect backoff (at most 100 ms here).
  status = GetJob(job.id(), &seen);
  for (int attempt = 0; !status.ok() && attempt < 20; ++attempt) {
    absl::SleepFor(absl::Milliseconds(50));
    status = GetJob(job.id(), &seen);
  }
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(seen.state(), forge::v1::JOB_STATE_RUNNING);
}

// The body of GET http://127.0.0.1:port/path (HTTP/1.0, so the server closes when done).
std::string HttpGetBody(int port, const std::string& path) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<uint16_t>(port));
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  std::string response;
  if (connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) == 0) {
    const std::string request = absl::StrCat("GET ", path, " HTTP/1.0\r\n\r\n");
    if (write(fd, request.data(), request.size()) == static_cast<ssize_t>(request.size())) {
      char buffer[4096];
      for (ssize_t n; (n = read(fd, buffer, sizeof(buffer))) > 0;) response.append(buffer, n);
    }
  }
  close(fd);
  const size_t body = response.find("\r\n\r\n");
  return body == std::string::npos ? "" : response.substr(body + 4);
}

// The port in the "listening on HOST:PORT" line the binary prints, once it is there.
int WaitForListeningPort(const std::string& log_path) {
  const std::string marker = "forge-coordinator listening on 127.0.0.1:";
  for (int attempt = 0; attempt < 100; ++attempt) {
    const std::string log = ReadFile(log_path);
    if (const size_t at = log.find(marker); at != std::string::npos) {
      const size_t end = log.find('\n', at);
      int port = 0;
      if (end != std::string::npos &&
          absl::SimpleAtoi(log.substr(at + marker.size(), end - at - marker.size()), &port)) {
        return port;
      }
    }
    absl::SleepFor(absl::Milliseconds(50));
  }
  ADD_FAILURE() << "no listening line in " << log_path << ":\n" << ReadFile(log_path);
  return 0;
}

// A chain of 2,000 `relu(x) * 1.0001` used to overflow the real coordinator's stack as soon as a
// worker leased work for it, and again at every start (the job is reloaded). The binary now
// leases that job's work, keeps serving, and starts again over the same Redis.
TEST_F(JobServiceTest, ALongChainDoesNotCrashTheCoordinatorBinary) {
  std::string log_path = absl::StrCat(directory_.path(), "/coordinator.log");
  auto start = [&]() {
    absl::StatusOr<testing::Subprocess> process =
        testing::Subprocess::Start({FORGE_COORDINATOR_BINARY, "--listen=127.0.0.1:0",
                                    absl::StrCat("--redis.port=", redis_server_->port()),
                                    "--blobs.dir=" + BlobDirectory(), "--metrics.listen="},
                                   log_path);
    EXPECT_TRUE(process.ok()) << process.status();
    return process;
  };
  absl::StatusOr<testing::Subprocess> process = start();
  ASSERT_TRUE(process.ok());
  int port = WaitForListeningPort(log_path);
  ASSERT_GT(port, 0);
  auto channel =
      grpc::CreateChannel(absl::StrCat("127.0.0.1:", port), grpc::InsecureChannelCredentials());
  auto jobs = forge::v1::JobService::NewStub(channel);
  auto workers = forge::v1::WorkerService::NewStub(channel);

  forge::v1::SubmitJobResponse submitted;
  {
    grpc::ClientContext context;
    auto writer = jobs->SubmitJob(&context, &submitted);
    forge::v1::SubmitJobRequest request;
    *request.mutable_header()->mutable_graph() = testing::PointwiseChain(2000);
    ASSERT_TRUE(writer->Write(request));
    writer->WritesDone();
    grpc::Status status = writer->Finish();
    ASSERT_TRUE(status.ok()) << status.error_message();
  }
  EXPECT_GT(submitted.job().progress().tasks_total(), 1) << "the chain is split into tasks";
  forge::v1::RegisterResponse registered;
  {
    grpc::ClientContext context;
    ASSERT_TRUE(
        workers
            ->Register(&context, testing::EmulatedWorker(codegen::GeneratorVersions()), &registered)
            .ok());
  }
  forge::v1::LeaseRequest lease;
  lease.set_worker_id(registered.worker_id());
  lease.set_max_candidates(32);
  lease.set_target_arch("sm_90");
  // The baselines, then (their predicted times reported) candidates of the searches.
  for (int round = 0; round < 3; ++round) {
    forge::v1::LeaseResponse leased;
    {
      grpc::ClientContext context;
      grpc::Status status = workers->Lease(&context, lease, &leased);
      ASSERT_TRUE(status.ok()) << status.error_message() << "; log:\n" << ReadFile(log_path);
    }
    ASSERT_GT(leased.candidates_size(), 0) << "round " << round;
    forge::v1::ReportRequest report;
    report.set_worker_id(registered.worker_id());
    report.set_lease_id(leased.lease_id());
    for (const forge::v1::Candidate& candidate : leased.candidates()) {
      forge::v1::Measurement* measured = report.add_results()->mutable_measurement();
      measured->set_candidate_digest(candidate.digest());
      measured->set_kind(forge::v1::MEASUREMENT_KIND_PREDICTED);
      measured->set_median_us(candidate.family() == forge::v1::KERNEL_FAMILY_ATEN ? 100 : 50);
    }
    grpc::ClientContext context;
    forge::v1::ReportResponse reported;
    grpc::Status status = workers->Report(&context, report, &reported);
    ASSERT_TRUE(status.ok()) << status.error_message();
    EXPECT_EQ(reported.accepted(), leased.candidates_size());
  }
  ASSERT_EQ(process->Wait(std::chrono::milliseconds(0)), -1) << ReadFile(log_path);
  EXPECT_EQ(WIFEXITED(process->Kill(SIGTERM)), true);

  // A restart reloads the running job and serves.
  log_path = absl::StrCat(directory_.path(), "/restarted.log");
  process = start();
  ASSERT_TRUE(process.ok());
  port = WaitForListeningPort(log_path);
  ASSERT_GT(port, 0) << ReadFile(log_path);
  jobs = forge::v1::JobService::NewStub(
      grpc::CreateChannel(absl::StrCat("127.0.0.1:", port), grpc::InsecureChannelCredentials()));
  grpc::ClientContext context;
  forge::v1::GetJobRequest request;
  request.set_job_id(submitted.job().id());
  forge::v1::GetJobResponse response;
  ASSERT_TRUE(jobs->GetJob(&context, request, &response).ok());
  EXPECT_THAT(response.job().state(),
              ::testing::AnyOf(forge::v1::JOB_STATE_RUNNING, forge::v1::JOB_STATE_DONE))
      << response.job().error();
}

TEST_F(JobServiceTest, CoordinatorBinaryServesMetricsAndStopsOnSigterm) {
  const Job job = SubmitModel();  // through the test's own coordinator, over the same Redis
  const int metrics_port = testing::PickFreePort();
  const std::string log_path = absl::StrCat(directory_.path(), "/coordinator.log");
  absl::StatusOr<testing::Subprocess> process = testing::Subprocess::Start(
      {FORGE_COORDINATOR_BINARY, "--listen=127.0.0.1:0",
       absl::StrCat("--redis.port=", redis_server_->port()), "--blobs.dir=" + BlobDirectory(),
       absl::StrCat("--metrics.listen=127.0.0.1:", metrics_port), "--metrics.refresh=50ms"},
      log_path);
  ASSERT_TRUE(process.ok()) << process.status();
  const int port = WaitForListeningPort(log_path);
  ASSERT_GT(port, 0);

  auto stub = forge::v1::JobService::NewStub(
      grpc::CreateChannel(absl::StrCat("127.0.0.1:", port), grpc::InsecureChannelCredentials()));
  grpc::ClientContext context;
  forge::v1::GetJobRequest request;
  request.set_job_id(job.id());
  forge::v1::GetJobResponse response;
  ASSERT_TRUE(stub->GetJob(&context, request, &response).ok());
  EXPECT_EQ(response.job().state(), forge::v1::JOB_STATE_RUNNING);

  std::string metrics;
  for (int attempt = 0; attempt < 40; ++attempt) {  // until the gauge has been refreshed
    metrics = HttpGetBody(metrics_port, "/metrics");
    if (metrics.find("forge_coordinator_jobs{state=\"running\"} 1") != std::string::npos) break;
    absl::SleepFor(absl::Milliseconds(50));
  }
  EXPECT_THAT(metrics, HasSubstr("forge_coordinator_jobs{state=\"running\"} 1"));
  EXPECT_THAT(metrics, HasSubstr("forge_coordinator_state{what=\"running_jobs\"} 1"));
  EXPECT_THAT(metrics, HasSubstr("forge_coordinator_rpcs_total{code=\"OK\",method=\"GetJob\"} 1"));

  const int wait_status = process->Kill(SIGTERM);
  EXPECT_TRUE(WIFEXITED(wait_status) && WEXITSTATUS(wait_status) == 0)
      << "wait status " << wait_status << "; log:\n" << ReadFile(log_path);
  EXPECT_THAT(ReadFile(log_path), HasSubstr("stopped"));
}

}  // namespace
}  // namespace forge::server
