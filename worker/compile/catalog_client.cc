#include "worker/compile/catalog_client.h"

#include <chrono>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/grpc_status/grpc_status.h"
#include "common/logging/logging.h"
#include "forge/v1/service.grpc.pb.h"
#include "grpcpp/grpcpp.h"

namespace forge::compile {
namespace {

void SetDeadline(grpc::ClientContext& context, absl::Duration timeout) {
  context.set_deadline(std::chrono::system_clock::now() + absl::ToChronoNanoseconds(timeout));
}

// Turns `off` on, logging why the first time.
void TurnOff(std::atomic<bool>& off, absl::string_view what, const grpc::Status& status) {
  if (!off.exchange(true)) {
    GetLogger("worker")->warn("compiled-object catalog: {} off for this worker: {}",
                              std::string(what), status.error_message());
  }
}

}  // namespace

CatalogClient::CatalogClient(CatalogClientOptions options) : options_(std::move(options)) {
  grpc::ChannelArguments args;
  const int max_bytes = static_cast<int>(options_.max_object_bytes + (int64_t{1} << 20));
  args.SetMaxReceiveMessageSize(max_bytes);
  args.SetMaxSendMessageSize(max_bytes);
  channel_ = grpc::CreateCustomChannel(
      options_.coordinator,
      options_.credentials != nullptr ? options_.credentials : grpc::InsecureChannelCredentials(),
      args);
}

absl::StatusOr<CatalogEntry> CatalogClient::Fetch(const Digest& key) {
  if (fetch_off_) return absl::UnimplementedError("the compiled-object catalog is off");
  forge::v1::FetchCompiledObjectRequest request;
  request.set_cache_key(key.ToHex());
  forge::v1::FetchCompiledObjectResponse response;
  grpc::ClientContext context;
  SetDeadline(context, options_.fetch_timeout);
  const grpc::Status status = forge::v1::WorkerService::NewStub(channel_)->FetchCompiledObject(
      &context, request, &response);
  if (status.error_code() == grpc::StatusCode::FAILED_PRECONDITION ||
      status.error_code() == grpc::StatusCode::UNIMPLEMENTED) {
    TurnOff(fetch_off_, "lookups and publishing", status);
    publish_off_ = true;
    return absl::UnimplementedError(status.error_message());
  }
  if (!status.ok()) return FromGrpcStatus(status, "FetchCompiledObject");
  if (static_cast<int64_t>(response.entry().size()) > options_.max_object_bytes) {
    return absl::DataLossError(absl::StrCat("catalog entry ", request.cache_key(), ": ",
                                            response.entry().size(), " bytes, past the limit of ",
                                            options_.max_object_bytes));
  }
  if (const std::string actual = Sha256Hex(response.entry()); actual != response.sha256()) {
    return absl::DataLossError(absl::StrCat("catalog entry ", request.cache_key(),
                                            ": the bytes hash to ", actual,
                                            ", the coordinator names ", response.sha256()));
  }
  return CatalogEntry{.bytes = std::move(*response.mutable_entry()),
                      .publisher = response.publisher(),
                      .compile_seconds = response.compile_seconds()};
}

absl::StatusOr<bool> CatalogClient::Publish(const Digest& key, codegen::CompileOutput output,
                                            absl::string_view arch, double compile_seconds,
                                            absl::string_view entry) {
  if (publish_off_) return absl::UnimplementedError("publishing to the catalog is off");
  if (static_cast<int64_t>(entry.size()) > options_.max_object_bytes) {
    return absl::ResourceExhaustedError(absl::StrCat("catalog entry of ", entry.size(),
                                                     " bytes, past the limit of ",
                                                     options_.max_object_bytes));
  }
  forge::v1::PublishCompiledObjectRequest request;
  request.set_cache_key(key.ToHex());
  request.set_sha256(Sha256Hex(entry));
  request.set_entry(std::string(entry));
  request.set_kind(output == codegen::CompileOutput::kNvccSharedObject
                       ? forge::v1::COMPILED_OBJECT_KIND_SHARED_OBJECT
                       : forge::v1::COMPILED_OBJECT_KIND_CUBIN);
  request.set_arch(std::string(arch));
  request.set_compile_seconds(compile_seconds);
  forge::v1::PublishCompiledObjectResponse response;
  grpc::ClientContext context;
  SetDeadline(context, options_.publish_timeout);
  const grpc::Status status = forge::v1::WorkerService::NewStub(channel_)->PublishCompiledObject(
      &context, request, &response);
  if (status.error_code() == grpc::StatusCode::FAILED_PRECONDITION ||
      status.error_code() == grpc::StatusCode::PERMISSION_DENIED ||
      status.error_code() == grpc::StatusCode::UNIMPLEMENTED) {
    TurnOff(publish_off_, "publishing", status);
    return absl::UnimplementedError(status.error_message());
  }
  if (!status.ok()) return FromGrpcStatus(status, "PublishCompiledObject");
  return response.stored();
}

}  // namespace forge::compile
