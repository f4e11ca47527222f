// The remote commands against the real forge-coordinator binary and a real redis-server on
// loopback; some tests run the real forge binary to check its exit codes and messages.
#include <sys/wait.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "client/forge/connection.h"
#include "client/forge/exit_code.h"
#include "client/forge/jobs.h"
#include "client/forge/model.h"
#include "client/forge/submit.h"
#include "client/forge/watch.h"
#include "compiler/graph/task_digest.h"
#include "gmock/gmock.h"
#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/json_util.h"
#include "gtest/gtest.h"
#include "tests/support/redis_server.h"
#include "tests/support/subprocess.h"

namespace forge::client {
namespace {

namespace fs = std::filesystem;

using ::testing::AnyOf;
using ::testing::HasSubstr;
using ::testing::SizeIs;

std::string ModelPath(const std::string& name) {
  const char* directory = std::getenv("FORGE_TEST_MODELS");
  EXPECT_NE(directory, nullptr) << "FORGE_TEST_MODELS is not set; run through ctest";
  return absl::StrCat(directory == nullptr ? "" : directory, "/", name);
}

std::string ReadFile(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  std::ostringstream bytes;
  bytes << file.rdbuf();
  return bytes.str();
}

template <typename Message>
Message ParseProtoJson(const std::string& json) {
  Message message;
  const auto status = google::protobuf::util::JsonStringToMessage(json, &message);
  EXPECT_TRUE(status.ok()) << status.ToString() << "\n" << json;
  return message;
}

// Polls `path` until it contains `text`; false after `timeout`.
bool WaitForText(const std::string& path, const std::string& text, absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  while (absl::Now() < deadline) {
    if (ReadFile(path).find(text) != std::string::npos) return true;
    absl::SleepFor(absl::Milliseconds(20));
  }
  return false;
}

// A forge-coordinator process over its own redis-server, on a free loopback port.
class RemoteTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // No user config file may leak in: the default one is looked for under this test's directory.
    setenv("XDG_CONFIG_HOME", directory_.path().c_str(), /*overwrite=*/1);
    unsetenv("FORGE_SERVER");
    absl::StatusOr<std::unique_ptr<testing::RedisServer>> redis = testing::RedisServer::Start();
    ASSERT_TRUE(redis.ok()) << redis.status();
    redis_ = *std::move(redis);
    coordinator_log_ = absl::StrCat(directory_.path(), "/coordinator.log");
    absl::StatusOr<testing::Subprocess> coordinator =
        testing::Subprocess::Start({FORGE_COORDINATOR_BINARY, "--listen=127.0.0.1:0",
                                    absl::StrCat("--redis.port=", redis_->port()),
                                    absl::StrCat("--blobs.dir=", directory_.path(), "/blobs"),
                                    "--metrics.listen=", "--watch.wait=100ms", "--log.level=warn"},
                                   coordinator_log_);
    ASSERT_TRUE(coordinator.ok()) << coordinator.status();
    coordinator_ = std::make_unique<testing::Subprocess>(*std::move(coordinator));
    const std::string marker = "forge-coordinator listening on ";
    ASSERT_TRUE(WaitForText(coordinator_log_, marker, absl::Seconds(10)))
        << ReadFile(coordinator_log_);
    const std::string log = ReadFile(coordinator_log_);
    const size_t start = log.find(marker) + marker.size();
    address_ = log.substr(start, log.find('\n', start) - start);

    absl::StatusOr<std::unique_ptr<JobClient>> client =
        JobClient::Connect({.server = address_, .server_origin = "test"});
    ASSERT_TRUE(client.ok()) << client.status();
    client_ = *std::move(client);
  }

  // Runs the forge binary with `args` and --server; returns its exit code and puts its stdout and
  // stderr in `output`.
  int RunForge(std::vector<std::string> args, std::string* output) {
    const std::string log = absl::StrCat(directory_.path(), "/forge-", runs_++, ".log");
    args.insert(args.begin(), FORGE_CLI_BINARY);
    args.push_back(absl::StrCat("--server=", address_));
    absl::StatusOr<testing::Subprocess> forge = testing::Subprocess::Start(args, log);
    EXPECT_TRUE(forge.ok()) << forge.status();
    if (!forge.ok()) return -1;
    const int status = forge->Wait(std::chrono::seconds(20));
    *output = ReadFile(log);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }

  forge::v1::Job Submit(const std::string& model, SubmitOptions options = {}) {
    SubmitOutcome outcome = SubmitModel(*client_, ModelPath(model), options);
    EXPECT_TRUE(outcome.status.ok()) << outcome.status;
    return outcome.job;
  }

  testing::TempDir directory_;
  std::unique_ptr<testing::RedisServer> redis_;
  std::string coordinator_log_;
  std::unique_ptr<testing::Subprocess> coordinator_;
  std::string address_;
  std::unique_ptr<JobClient> client_;
  int runs_ = 0;
};

TEST_F(RemoteTest, SubmitsBothModelKindsAndResubmissionsUploadNothing) {
  for (const std::string model : {"mlp", "linear_mul_leaky_relu/model.pt2"}) {
    absl::StatusOr<LocalModel> local = ReadModel(ModelPath(model));
    ASSERT_TRUE(local.ok()) << local.status();
    const int named = static_cast<int>(UploadableBlobDigests(local->graph).size());
    ASSERT_GT(named, 0) << model;

    const SubmitOutcome first = SubmitModel(*client_, ModelPath(model), {});
    ASSERT_TRUE(first.status.ok()) << first.status;
    EXPECT_EQ(first.blobs_named, named);
    EXPECT_EQ(first.blobs_uploaded, named) << model;
    EXPECT_GT(first.bytes_uploaded, 0);
    EXPECT_GT(first.job.progress().tasks_total(), 0);
    EXPECT_EQ(first.job.model_digest(), graph::ModelDigest(local->graph));

    const SubmitOutcome second = SubmitModel(*client_, ModelPath(model), {});
    ASSERT_TRUE(second.status.ok()) << second.status;
    EXPECT_EQ(second.blobs_uploaded, 0) << model;
    EXPECT_EQ(second.bytes_uploaded, 0);
    EXPECT_NE(second.job.id(), first.job.id());
    EXPECT_EQ(second.job.model_digest(), first.job.model_digest());
  }
}

// The CLI runs the coordinator's intake checks itself, before it sends anything: a weight declared
// larger than its tensor is refused with the words the coordinator would use, and nothing is
// uploaded or stored.
TEST_F(RemoteTest, TheCliRefusesWhatIntakeWouldWithIntakesMessageBeforeUploading) {
  const fs::path tampered = fs::path(directory_.path()) / "tampered";
  fs::copy(ModelPath("mlp"), tampered, fs::copy_options::recursive);
  absl::StatusOr<LocalModel> local = ReadModel(tampered.string());
  ASSERT_TRUE(local.ok()) << local.status();
  forge::v1::Graph graph = local->graph;
  forge::v1::GraphInput* weight = nullptr;
  for (forge::v1::GraphInput& input : *graph.mutable_inputs()) {
    if (input.has_data() && input.data().inline_bytes().empty()) weight = &input;
  }
  ASSERT_NE(weight, nullptr);
  weight->mutable_data()->set_size_bytes(50LL << 20);  // 50 MiB declared for the real tensor
  {
    std::ofstream out(tampered / "graph.pb", std::ios::binary | std::ios::trunc);
    ASSERT_TRUE(graph.SerializeToOstream(&out));
  }

  const SubmitOutcome refused = SubmitModel(*client_, tampered.string(), {});
  ASSERT_TRUE(absl::IsInvalidArgument(refused.status)) << refused.status;
  const std::string prefix = "not submitted: graph rejected: ";
  const std::string message(refused.status.message());
  ASSERT_THAT(message, ::testing::StartsWith(prefix));
  const std::string reason = message.substr(prefix.size());
  EXPECT_THAT(reason, HasSubstr(absl::StrCat("input '", weight->value_name(),
                                             "': data.size_bytes is 52428800")));
  EXPECT_EQ(refused.blobs_uploaded, 0);
  forge::v1::ListJobsResponse listed = *client_->ListJobs(forge::v1::ListJobsRequest());
  EXPECT_EQ(listed.jobs_size(), 0) << "nothing reached the coordinator";

  // The coordinator, sent the same graph directly, says the same.
  forge::v1::SubmitJobHeader header;
  *header.mutable_graph() = graph;
  absl::StatusOr<forge::v1::SubmitJobResponse> direct = client_->SubmitJob(
      header, {}, [](const std::string&) -> absl::StatusOr<std::string> {
        return absl::NotFoundError("no upload");
      });
  ASSERT_TRUE(absl::IsInvalidArgument(direct.status())) << direct.status();
  EXPECT_THAT(std::string(direct.status().message()),
              HasSubstr(absl::StrCat("graph rejected: ", reason)));
}

TEST_F(RemoteTest, DirectoryOfModelsGivesOneLabelledJobEachAndASummary) {
  const std::string models = absl::StrCat(directory_.path(), "/models");
  fs::create_directories(models);
  fs::create_directory_symlink(ModelPath("softmax"), models + "/softmax");
  fs::create_symlink(ModelPath("mlp/model.pt2"), models + "/mlp.pt2");
  absl::StatusOr<std::vector<std::string>> paths =
      ExpandModelPaths({models, ModelPath("missing_model")});
  EXPECT_EQ(paths.status().code(), absl::StatusCode::kNotFound);
  paths = ExpandModelPaths({models});
  ASSERT_TRUE(paths.ok()) << paths.status();
  ASSERT_THAT(*paths, SizeIs(2));

  const std::vector<SubmitOutcome> outcomes =
      SubmitModels(*client_, *paths, {.owner = "batch", .labels = {{"team", "infra"}}});
  ASSERT_THAT(outcomes, SizeIs(2));
  EXPECT_EQ(SubmitExitCode(outcomes, /*waited=*/false), kExitOk);
  const google::protobuf::Struct summary =
      ParseProtoJson<google::protobuf::Struct>(RenderSubmitSummary(outcomes, /*json=*/true));
  EXPECT_EQ(summary.fields().at("submitted").number_value(), 2);
  for (const auto& entry : summary.fields().at("jobs").list_value().values()) {
    const auto& job = entry.struct_value().fields().at("job").struct_value().fields();
    const auto& labels = job.at("options").struct_value().fields().at("labels").struct_value();
    EXPECT_EQ(labels.fields().at("team").string_value(), "infra");
    EXPECT_EQ(labels.fields().at("model").string_value(),
              entry.struct_value().fields().at("model").string_value());
  }
  EXPECT_THAT(RenderSubmitSummary(outcomes, /*json=*/false),
              HasSubstr("2 of 2 model(s) submitted"));
}

TEST_F(RemoteTest, StatusJobsAndCancelSpeakJson) {
  const forge::v1::Job first = Submit("mlp", {.owner = "alice", .labels = {{"suite", "remote"}}});
  const forge::v1::Job second = Submit("softmax", {.owner = "alice"});
  Submit("softmax", {.owner = "bob"});

  absl::StatusOr<std::string> status = StatusCommand(*client_, first.id(), /*json=*/true);
  ASSERT_TRUE(status.ok()) << status.status();
  const forge::v1::Job shown = ParseProtoJson<forge::v1::Job>(*status);
  EXPECT_EQ(shown.id(), first.id());
  EXPECT_THAT(shown.state(), AnyOf(forge::v1::JOB_STATE_QUEUED, forge::v1::JOB_STATE_RUNNING));
  EXPECT_EQ(shown.options().owner(), "alice");
  EXPECT_THAT(*StatusCommand(*client_, first.id(), /*json=*/false), HasSubstr("owner      alice"));

  // Alice's jobs, one per page, every page followed: newest first.
  forge::v1::ListJobsRequest request;
  request.set_owner("alice");
  request.set_page_size(1);
  absl::StatusOr<std::string> listed = JobsCommand(*client_, request, /*all_pages=*/true, true);
  ASSERT_TRUE(listed.ok()) << listed.status();
  const auto all = ParseProtoJson<forge::v1::ListJobsResponse>(*listed);
  ASSERT_THAT(all.jobs(), SizeIs(2));
  EXPECT_EQ(all.jobs(0).id(), second.id());
  EXPECT_EQ(all.jobs(1).id(), first.id());
  EXPECT_TRUE(all.next_page_token().empty());
  const auto one_page = ParseProtoJson<forge::v1::ListJobsResponse>(
      *JobsCommand(*client_, request, /*all_pages=*/false, true));
  EXPECT_THAT(one_page.jobs(), SizeIs(1));
  EXPECT_FALSE(one_page.next_page_token().empty());

  absl::StatusOr<std::string> cancelled = CancelCommand(*client_, first.id(), "test", true);
  ASSERT_TRUE(cancelled.ok()) << cancelled.status();
  EXPECT_EQ(ParseProtoJson<forge::v1::Job>(*cancelled).state(), forge::v1::JOB_STATE_CANCELLED);

  forge::v1::ListJobsRequest by_state_and_label;
  by_state_and_label.add_states(*ParseJobState("cancelled"));
  (*by_state_and_label.mutable_labels())["suite"] = "remote";
  const auto filtered = ParseProtoJson<forge::v1::ListJobsResponse>(
      *JobsCommand(*client_, by_state_and_label, false, true));
  ASSERT_THAT(filtered.jobs(), SizeIs(1));
  EXPECT_EQ(filtered.jobs(0).id(), first.id());
  EXPECT_THAT(*JobsCommand(*client_, by_state_and_label, false, false),
              HasSubstr(absl::StrCat(first.id(), " ")));
}

TEST_F(RemoteTest, BinaryExitCodesNameTheServerAndTheCode) {
  std::string output;
  EXPECT_EQ(RunForge({"status", "job-does-not-exist"}, &output), kExitNotFound) << output;
  EXPECT_THAT(output, HasSubstr(address_));
  EXPECT_THAT(output, HasSubstr("NOT_FOUND"));

  EXPECT_EQ(RunForge({"cancel", "job-does-not-exist", "--json"}, &output), kExitNotFound);
  EXPECT_EQ(RunForge({"status"}, &output), kExitUsage) << output;
  EXPECT_THAT(output, HasSubstr("usage: forge status JOB"));
  EXPECT_EQ(RunForge({"jobs", "--state", "sleeping"}, &output), kExitUsage) << output;

  const forge::v1::Job job = Submit("mlp");
  EXPECT_EQ(RunForge({"status", job.id(), "--json"}, &output), kExitOk) << output;
  EXPECT_EQ(ParseProtoJson<forge::v1::Job>(output).id(), job.id());

  // Nothing listens on this port; the address comes from the environment this time.
  const std::string gone = absl::StrCat("127.0.0.1:", testing::PickFreePort());
  const absl::Time start = absl::Now();
  setenv("FORGE_SERVER", gone.c_str(), 1);
  const std::string log = absl::StrCat(directory_.path(), "/unreachable.log");
  absl::StatusOr<testing::Subprocess> forge =
      testing::Subprocess::Start({FORGE_CLI_BINARY, "status", "job-1"}, log);
  ASSERT_TRUE(forge.ok());
  const int status = forge->Wait(std::chrono::seconds(20));
  unsetenv("FORGE_SERVER");
  EXPECT_LT(absl::Now() - start, absl::Seconds(15));
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), kExitUnreachable);
  EXPECT_THAT(ReadFile(log), HasSubstr(gone));
  EXPECT_THAT(ReadFile(log), HasSubstr("env FORGE_SERVER"));
  EXPECT_THAT(ReadFile(log), HasSubstr("UNAVAILABLE"));
}

TEST_F(RemoteTest, SubmitFlagsSetTheJobsBudget) {
  std::string output;
  ASSERT_EQ(RunForge({"submit", ModelPath("mlp"), "--budget", "7", "--max-seconds", "30", "--json"},
                     &output),
            kExitOk)
      << output;
  const std::string job = ParseProtoJson<google::protobuf::Struct>(output)
                              .fields().at("jobs").list_value().values(0).struct_value()
                              .fields().at("job").struct_value().fields().at("id").string_value();
  ASSERT_EQ(RunForge({"status", job, "--json"}, &output), kExitOk) << output;
  const forge::v1::JobBudget budget = ParseProtoJson<forge::v1::Job>(output).options().budget();
  EXPECT_EQ(budget.max_candidate_trials(), 7);
  EXPECT_EQ(budget.max_wall_seconds(), 30);

  EXPECT_EQ(RunForge({"submit", ModelPath("mlp"), "--max-seconds", "soon"}, &output), kExitUsage);
  EXPECT_THAT(output,
              HasSubstr("max-seconds = \"soon\" (from flag --max-seconds): not an integer"));
}

TEST_F(RemoteTest, WatchOfACancelledJobEndsWithExitCodeOne) {
  const forge::v1::Job job = Submit("mlp");
  const std::string log = absl::StrCat(directory_.path(), "/watch.log");
  absl::StatusOr<testing::Subprocess> watch = testing::Subprocess::Start(
      {FORGE_CLI_BINARY, "watch", job.id(), "--plain", absl::StrCat("--server=", address_)}, log);
  ASSERT_TRUE(watch.ok()) << watch.status();
  ASSERT_TRUE(WaitForText(log, "following job", absl::Seconds(10))) << ReadFile(log);
  EXPECT_EQ(watch->Wait(std::chrono::milliseconds(300)), -1) << "watch ended before the job did";

  ASSERT_TRUE(client_->CancelJob(job.id(), "test").ok());
  const int status = watch->Wait(std::chrono::seconds(10));
  ASSERT_TRUE(WIFEXITED(status)) << "wait status " << status << "\n" << ReadFile(log);
  EXPECT_EQ(WEXITSTATUS(status), kExitJobUnsuccessful) << ReadFile(log);
  EXPECT_THAT(ReadFile(log), HasSubstr("-> cancelled"));
}

TEST_F(RemoteTest, FollowJobStreamsJsonLinesAndRedrawsTheTerminalView) {
  for (WatchOutput output : {WatchOutput::kJsonLines, WatchOutput::kTerminal}) {
    const forge::v1::Job job = Submit("mlp");
    std::ostringstream out;
    absl::StatusOr<forge::v1::Job> ended;
    std::thread follower([&] {
      ended = FollowJob(*client_, job.id(),
                        {.output = output, .redraw_interval = absl::ZeroDuration()}, out);
    });
    absl::SleepFor(absl::Milliseconds(300));
    ASSERT_TRUE(client_->CancelJob(job.id(), "test").ok());
    follower.join();
    ASSERT_TRUE(ended.ok()) << ended.status();
    EXPECT_EQ(ended->state(), forge::v1::JOB_STATE_CANCELLED);
    EXPECT_EQ(ExitCodeForJob(*ended), kExitJobUnsuccessful);
    if (output == WatchOutput::kJsonLines) {
      std::vector<std::string> lines = absl::StrSplit(out.str(), '\n', absl::SkipEmpty());
      ASSERT_FALSE(lines.empty());
      for (const std::string& line : lines) ParseProtoJson<forge::v1::JobEvent>(line);
      const auto last = ParseProtoJson<forge::v1::JobEvent>(lines.back());
      EXPECT_EQ(last.state_changed().current(), forge::v1::JOB_STATE_CANCELLED);
    } else {
      EXPECT_THAT(out.str(), HasSubstr("\x1b["));  // redrawn in place
      EXPECT_THAT(out.str(), HasSubstr("CANCELLED"));
      EXPECT_THAT(out.str(), HasSubstr("job cancelled"));
    }
  }
}

}  // namespace
}  // namespace forge::client
