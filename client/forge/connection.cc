#include "client/forge/connection.h"

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <set>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/config/config.h"
#include "common/status/status_macros.h"
#include "common/tls/tls.h"
#include "forge/v1/service.grpc.pb.h"
#include "grpcpp/grpcpp.h"

namespace forge::client {
namespace {

constexpr size_t kChunkBytes = 1 << 20;  // service.proto: at most 1 MiB per chunk
// Results with every candidate's result can be large; the default 4 MiB is not enough.
constexpr int kMaxReceiveBytes = 512 << 20;
// An upload's deadline grows with its size, assuming at least this rate.
constexpr double kSlowestUploadBytesPerSecond = 1 << 20;

std::string EnvironmentValue(const std::optional<std::vector<std::string>>& environment,
                             absl::string_view name) {
  if (!environment.has_value()) {
    const char* value = std::getenv(std::string(name).c_str());
    return value == nullptr ? "" : value;
  }
  const std::string prefix = absl::StrCat(name, "=");
  for (const std::string& entry : *environment) {
    if (absl::StartsWith(entry, prefix)) return entry.substr(prefix.size());
  }
  return "";
}

std::chrono::system_clock::time_point DeadlineAfter(absl::Duration timeout) {
  return std::chrono::system_clock::now() + absl::ToChronoNanoseconds(timeout);
}

}  // namespace

void AddConnectionKeys(ConfigSchema& schema) {
  schema.String("server", "", "coordinator address HOST:PORT")
      .String("config", "", "config file (default ~/.config/forge/config)")
      .Bool("tls", false, "connect with TLS")
      .String("tls-ca", "", "PEM roots that sign the coordinator's certificate")
      .String("token", "", "bearer token sent with every call; needs --tls")
      .Duration("connect-timeout", absl::Seconds(5), "give up connecting after this (5s)")
      .Duration("timeout", absl::Seconds(30), "deadline of each call but watch (30s)");
}

std::string DefaultConfigPath(const std::optional<std::vector<std::string>>& environment) {
  if (std::string xdg = EnvironmentValue(environment, "XDG_CONFIG_HOME"); !xdg.empty()) {
    return absl::StrCat(xdg, "/forge/config");
  }
  if (std::string home = EnvironmentValue(environment, "HOME"); !home.empty()) {
    return absl::StrCat(home, "/.config/forge/config");
  }
  return "";
}

absl::StatusOr<ConnectionSettings> LoadConnectionSettings(
    const std::vector<std::string>& flags,
    const std::optional<std::vector<std::string>>& environment) {
  ConfigSchema schema;
  AddConnectionKeys(schema);
  return LoadCommandConnectionSettings(schema, flags, environment);
}

absl::StatusOr<ConnectionSettings> LoadCommandConnectionSettings(
    const ConfigSchema& schema, const std::vector<std::string>& args,
    const std::optional<std::vector<std::string>>& environment) {
  // Flags and environment first, to learn the config file; then everything, with the file.
  FORGE_ASSIGN_OR_RETURN(Config config,
                         Config::Load(schema, {.environment = environment, .args = args}));
  std::string file = config.GetString("config");
  if (file.empty()) {
    const std::string default_path = DefaultConfigPath(environment);
    std::error_code error;
    if (!default_path.empty() && std::filesystem::is_regular_file(default_path, error)) {
      file = default_path;
    }
  }
  if (!file.empty()) {
    FORGE_ASSIGN_OR_RETURN(
        config, Config::Load(schema, {.file = file, .environment = environment, .args = args}));
  }
  ConnectionSettings settings{
      .server = config.GetString("server"),
      .server_origin = config.Origin("server"),
      .tls = config.GetBool("tls"),
      .tls_ca_file = config.GetString("tls-ca"),
      .token = config.GetString("token"),
      .connect_timeout = config.GetDuration("connect-timeout"),
      .call_timeout = config.GetDuration("timeout"),
  };
  if (settings.server.empty()) {
    const std::string default_path = DefaultConfigPath(environment);
    return absl::InvalidArgumentError(
        absl::StrCat("no coordinator address: pass --server HOST:PORT, set FORGE_SERVER, or write "
                     "server = \"HOST:PORT\" in ",
                     default_path.empty() ? "a config file given with --config" : default_path));
  }
  if (!settings.token.empty() && !settings.tls) {
    return absl::InvalidArgumentError(absl::StrCat("a token is configured (",
                                                   config.Origin("token"),
                                                   ") but tls is off: refusing to send it "
                                                   "in plaintext to ",
                                                   settings.server));
  }
  return settings;
}

struct JobClient::Channel {
  std::string address;
  std::string token;
  absl::Duration call_timeout;
  std::shared_ptr<grpc::Channel> channel;
  std::unique_ptr<forge::v1::JobService::Stub> stub;
  std::unique_ptr<forge::v1::CostModelService::Stub> cost_models;

  // A context with the bearer token and, when `timeout` is finite, a deadline.
  std::unique_ptr<grpc::ClientContext> Context(absl::Duration timeout) const {
    auto context = std::make_unique<grpc::ClientContext>();
    if (timeout != absl::InfiniteDuration()) context->set_deadline(DeadlineAfter(timeout));
    if (!token.empty()) context->AddMetadata("authorization", absl::StrCat("Bearer ", token));
    return context;
  }

  absl::Status Error(absl::string_view method, const grpc::Status& status) const {
    // absl::StatusCode and grpc::StatusCode share their numbering.
    const auto code = static_cast<absl::StatusCode>(status.error_code());
    return absl::Status(
        code, absl::StrCat("coordinator ", address, ": ", method, " failed (",
                           absl::StatusCodeToString(code), "): ", status.error_message()));
  }

  template <typename Request, typename Response>
  absl::StatusOr<Response> Unary(absl::string_view method,
                                 grpc::Status (forge::v1::JobService::Stub::*call)(
                                     grpc::ClientContext*, const Request&, Response*),
                                 const Request& request) const {
    return UnaryOn(*stub, method, call, request);
  }

  template <typename Stub, typename Request, typename Response>
  absl::StatusOr<Response> UnaryOn(Stub& on, absl::string_view method,
                                   grpc::Status (Stub::*call)(grpc::ClientContext*,
                                                              const Request&, Response*),
                                   const Request& request) const {
    std::unique_ptr<grpc::ClientContext> context = Context(call_timeout);
    Response response;
    grpc::Status status = (on.*call)(context.get(), request, &response);
    if (!status.ok()) return Error(method, status);
    return response;
  }
};

JobClient::JobClient(std::unique_ptr<Channel> channel) : channel_(std::move(channel)) {}
JobClient::~JobClient() = default;

absl::StatusOr<std::unique_ptr<JobClient>> JobClient::Connect(const ConnectionSettings& settings) {
  // The token goes on each call's metadata (Context), so the credentials carry none.
  FORGE_ASSIGN_OR_RETURN(
      std::shared_ptr<grpc::ChannelCredentials> credentials,
      ClientCredentials({.tls = settings.tls, .ca_file = settings.tls_ca_file}));
  grpc::ChannelArguments arguments;
  arguments.SetMaxReceiveMessageSize(kMaxReceiveBytes);
  auto channel = std::make_unique<Channel>();
  channel->address = settings.server;
  channel->token = settings.token;
  channel->call_timeout = settings.call_timeout;
  channel->channel = grpc::CreateCustomChannel(settings.server, credentials, arguments);
  // Until connected, refused (the first TRANSIENT_FAILURE: no point retrying for a CLI), or out
  // of time.
  const auto deadline = DeadlineAfter(settings.connect_timeout);
  grpc_connectivity_state state = channel->channel->GetState(/*try_to_connect=*/true);
  while (state != GRPC_CHANNEL_READY && state != GRPC_CHANNEL_TRANSIENT_FAILURE &&
         channel->channel->WaitForStateChange(state, deadline)) {
    state = channel->channel->GetState(/*try_to_connect=*/true);
  }
  if (state != GRPC_CHANNEL_READY) {
    return absl::UnavailableError(absl::StrCat(
        "cannot reach the coordinator at ", settings.server, " (from ", settings.server_origin,
        "): ",
        state == GRPC_CHANNEL_TRANSIENT_FAILURE
            ? "the connection failed"
            : absl::StrCat("no connection within ", absl::FormatDuration(settings.connect_timeout)),
        " (UNAVAILABLE; ", settings.tls ? "TLS" : "plaintext", " gRPC)"));
  }
  channel->stub = forge::v1::JobService::NewStub(channel->channel);
  channel->cost_models = forge::v1::CostModelService::NewStub(channel->channel);
  return std::unique_ptr<JobClient>(new JobClient(std::move(channel)));
}

const std::string& JobClient::address() const { return channel_->address; }

absl::StatusOr<forge::v1::MissingBlobsResponse> JobClient::MissingBlobs(
    const forge::v1::MissingBlobsRequest& request) {
  return channel_->Unary("MissingBlobs", &forge::v1::JobService::Stub::MissingBlobs, request);
}

absl::StatusOr<forge::v1::SubmitJobResponse> JobClient::SubmitJob(
    const forge::v1::SubmitJobHeader& header, const std::vector<std::string>& upload_digests,
    const BlobReader& read_blob) {
  const std::set<std::string> uploading(upload_digests.begin(), upload_digests.end());
  std::set<std::string> counted;
  int64_t upload_bytes = 0;
  for (const forge::v1::GraphInput& input : header.graph().inputs()) {
    const forge::v1::TensorData& data = input.data();
    if (uploading.contains(data.sha256()) && counted.insert(data.sha256()).second) {
      upload_bytes += data.size_bytes();
    }
  }
  std::unique_ptr<grpc::ClientContext> context = channel_->Context(
      channel_->call_timeout + absl::Seconds(upload_bytes / kSlowestUploadBytesPerSecond));
  forge::v1::SubmitJobResponse response;
  std::unique_ptr<grpc::ClientWriter<forge::v1::SubmitJobRequest>> writer =
      channel_->stub->SubmitJob(context.get(), &response);
  forge::v1::SubmitJobRequest request;
  *request.mutable_header() = header;
  bool open = writer->Write(request);
  for (const std::string& digest : upload_digests) {
    if (!open) break;
    absl::StatusOr<std::string> bytes = read_blob(digest);
    if (!bytes.ok()) {
      context->TryCancel();
      writer->Finish().IgnoreError();
      return bytes.status();
    }
    // At least one chunk, so that an empty blob is stored too.
    size_t offset = 0;
    do {
      forge::v1::BlobChunk* chunk = request.mutable_chunk();
      chunk->set_sha256(digest);
      chunk->set_offset(static_cast<int64_t>(offset));
      chunk->set_data(bytes->substr(offset, kChunkBytes));
      open = writer->Write(request);
      offset += kChunkBytes;
    } while (open && offset < bytes->size());
  }
  if (open) writer->WritesDone();
  grpc::Status status = writer->Finish();
  if (!status.ok()) return channel_->Error("SubmitJob", status);
  return response;
}

absl::StatusOr<forge::v1::Job> JobClient::GetJob(absl::string_view job_id) {
  forge::v1::GetJobRequest request;
  request.set_job_id(std::string(job_id));
  FORGE_ASSIGN_OR_RETURN(forge::v1::GetJobResponse response,
                         channel_->Unary("GetJob", &forge::v1::JobService::Stub::GetJob, request));
  return std::move(*response.mutable_job());
}

absl::Status JobClient::WatchJob(const forge::v1::WatchJobRequest& request,
                                 const std::function<bool(const forge::v1::JobEvent&)>& on_event) {
  std::unique_ptr<grpc::ClientContext> context = channel_->Context(absl::InfiniteDuration());
  std::unique_ptr<grpc::ClientReader<forge::v1::JobEvent>> reader =
      channel_->stub->WatchJob(context.get(), request);
  forge::v1::JobEvent event;
  while (reader->Read(&event)) {
    if (!on_event(event)) {
      context->TryCancel();
      reader->Finish().IgnoreError();  // CANCELLED, by us
      return absl::OkStatus();
    }
  }
  grpc::Status status = reader->Finish();
  if (!status.ok()) return channel_->Error("WatchJob", status);
  return absl::OkStatus();
}

absl::StatusOr<forge::v1::Job> JobClient::CancelJob(absl::string_view job_id,
                                                    absl::string_view reason) {
  forge::v1::CancelJobRequest request;
  request.set_job_id(std::string(job_id));
  request.set_reason(std::string(reason));
  FORGE_ASSIGN_OR_RETURN(
      forge::v1::CancelJobResponse response,
      channel_->Unary("CancelJob", &forge::v1::JobService::Stub::CancelJob, request));
  return std::move(*response.mutable_job());
}

absl::StatusOr<forge::v1::ListJobsResponse> JobClient::ListJobs(
    const forge::v1::ListJobsRequest& request) {
  return channel_->Unary("ListJobs", &forge::v1::JobService::Stub::ListJobs, request);
}

absl::StatusOr<forge::v1::GetResultsResponse> JobClient::GetResults(
    const forge::v1::GetResultsRequest& request) {
  return channel_->Unary("GetResults", &forge::v1::JobService::Stub::GetResults, request);
}

absl::StatusOr<forge::v1::ListWorkersResponse> JobClient::ListWorkers(
    const forge::v1::ListWorkersRequest& request) {
  return channel_->Unary("ListWorkers", &forge::v1::JobService::Stub::ListWorkers, request);
}

absl::StatusOr<forge::v1::PurgeResultsResponse> JobClient::PurgeResults(
    const forge::v1::PurgeResultsRequest& request) {
  return channel_->Unary("PurgeResults", &forge::v1::JobService::Stub::PurgeResults, request);
}

absl::StatusOr<forge::v1::GetCostModelResponse> JobClient::GetCostModel(
    const forge::v1::GetCostModelRequest& request) {
  return channel_->UnaryOn(*channel_->cost_models, "GetCostModel",
                           &forge::v1::CostModelService::Stub::GetCostModel, request);
}

absl::StatusOr<forge::v1::RevokeTokenResponse> JobClient::RevokeToken(
    const forge::v1::RevokeTokenRequest& request) {
  return channel_->Unary("RevokeToken", &forge::v1::JobService::Stub::RevokeToken, request);
}

}  // namespace forge::client
