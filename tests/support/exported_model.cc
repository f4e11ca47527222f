#include "tests/support/exported_model.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/grpc_status/grpc_status.h"
#include "compiler/graph/partition.h"
#include "grpcpp/grpcpp.h"

namespace forge::testing {

absl::StatusOr<std::string> ReadWholeFile(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  if (!file) return absl::NotFoundError(absl::StrCat("cannot open ", path));
  std::ostringstream bytes;
  bytes << file.rdbuf();
  return bytes.str();
}

absl::StatusOr<ExportedModel> LoadExportedModel(const std::string& name) {
  const char* directory = std::getenv("FORGE_TEST_MODELS");
  if (directory == nullptr) {
    return absl::FailedPreconditionError(
        "FORGE_TEST_MODELS is not set; run through ctest (fixtures.make_models)");
  }
  const std::filesystem::path root = std::filesystem::path(directory) / name;
  ExportedModel model;
  absl::StatusOr<std::string> graph = ReadWholeFile((root / "graph.pb").string());
  if (!graph.ok()) return graph.status();
  if (!model.graph.ParseFromString(*graph)) {
    return absl::DataLossError(absl::StrCat((root / "graph.pb").string(), " is not a Graph"));
  }
  if (std::filesystem::exists(root / "blobs")) {
    for (const auto& entry : std::filesystem::directory_iterator(root / "blobs")) {
      absl::StatusOr<std::string> bytes = ReadWholeFile(entry.path().string());
      if (!bytes.ok()) return bytes.status();
      model.blobs[entry.path().filename().string()] = *std::move(bytes);
    }
  }
  return model;
}

absl::StatusOr<std::vector<forge::v1::KernelTask>> ExportedModelTasks(const std::string& name) {
  absl::StatusOr<ExportedModel> model = LoadExportedModel(name);
  if (!model.ok()) return model.status();
  absl::StatusOr<graph::PartitionResult> partition = graph::Partition(model->graph);
  if (!partition.ok()) return partition.status();
  return std::move(partition->tasks);
}

absl::StatusOr<forge::v1::KernelTask> ExportedModelTask(const std::string& name,
                                                        forge::v1::KernelFamily family,
                                                        forge::v1::DType float_dtype) {
  absl::StatusOr<std::vector<forge::v1::KernelTask>> tasks = ExportedModelTasks(name);
  if (!tasks.ok()) return tasks.status();
  for (forge::v1::KernelTask& task : *tasks) {
    if (task.family() != family) continue;
    if (float_dtype == forge::v1::DTYPE_FLOAT32) return std::move(task);
    auto convert = [float_dtype](forge::v1::TensorSpec& spec) {
      if (spec.dtype() == forge::v1::DTYPE_FLOAT32) spec.set_dtype(float_dtype);
    };
    for (auto& spec : *task.mutable_inputs()) convert(spec);
    for (auto& spec : *task.mutable_outputs()) convert(spec);
    for (auto& value : *task.mutable_group()->mutable_values()) convert(*value.mutable_tensor());
    task.set_digest(absl::StrCat(task.digest(), "-", forge::v1::DType_Name(float_dtype)));
    return std::move(task);
  }
  return absl::NotFoundError(absl::StrCat("test model ", name, " has no ",
                                          forge::v1::KernelFamily_Name(family), " task"));
}

absl::StatusOr<forge::v1::SubmitJobResponse> SubmitExportedModel(
    forge::v1::JobService::Stub& stub, const ExportedModel& model,
    const forge::v1::JobOptions& options, size_t chunk_bytes) {
  forge::v1::MissingBlobsRequest missing_request;
  for (const auto& [digest, bytes] : model.blobs) missing_request.add_sha256(digest);
  forge::v1::MissingBlobsResponse missing;
  {
    grpc::ClientContext context;
    grpc::Status status = stub.MissingBlobs(&context, missing_request, &missing);
    if (!status.ok()) return FromGrpcStatus(status, "MissingBlobs");
  }
  forge::v1::SubmitJobResponse response;
  grpc::ClientContext context;
  std::unique_ptr<grpc::ClientWriter<forge::v1::SubmitJobRequest>> writer =
      stub.SubmitJob(&context, &response);
  forge::v1::SubmitJobRequest request;
  *request.mutable_header()->mutable_graph() = model.graph;
  *request.mutable_header()->mutable_options() = options;
  bool sent = writer->Write(request);
  for (const std::string& digest : missing.missing_sha256()) {
    const std::string& bytes = model.blobs.at(digest);
    for (size_t offset = 0; sent && offset < bytes.size(); offset += chunk_bytes) {
      forge::v1::BlobChunk* chunk = request.mutable_chunk();
      chunk->set_sha256(digest);
      chunk->set_offset(static_cast<int64_t>(offset));
      chunk->set_data(bytes.substr(offset, chunk_bytes));
      sent = writer->Write(request);
    }
  }
  writer->WritesDone();
  grpc::Status status = writer->Finish();
  if (!status.ok()) return FromGrpcStatus(status, "SubmitJob");
  return response;
}

}  // namespace forge::testing
