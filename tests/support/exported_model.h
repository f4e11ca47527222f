// Test support: the exported test models (tests/fixtures, $FORGE_TEST_MODELS) and the client's
// upload protocol (MissingBlobs, then SubmitJob with only the missing blobs).
#ifndef FORGE_TESTS_SUPPORT_EXPORTED_MODEL_H_
#define FORGE_TESTS_SUPPORT_EXPORTED_MODEL_H_

#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "forge/v1/service.grpc.pb.h"
#include "forge/v1/graph.pb.h"
#include "forge/v1/task.pb.h"

namespace forge::testing {

// An exported test model: its graph and its weight blobs by SHA-256.
struct ExportedModel {
  forge::v1::Graph graph;
  std::map<std::string, std::string> blobs;
};

// Reads $FORGE_TEST_MODELS/<name>/{graph.pb, blobs/}. NotFound/DataLoss naming the file.
absl::StatusOr<ExportedModel> LoadExportedModel(const std::string& name);

// The kernel tasks of an exported test model, as the partitioner makes them.
absl::StatusOr<std::vector<forge::v1::KernelTask>> ExportedModelTasks(const std::string& name);

// The first task of `family` of an exported test model, with every float32 value, input and output
// made `float_dtype` (and the digest suffixed with its name, so that caches keep the two apart)
// when that is not float32; NotFound when the model has no such task.
absl::StatusOr<forge::v1::KernelTask> ExportedModelTask(
    const std::string& name, forge::v1::KernelFamily family,
    forge::v1::DType float_dtype = forge::v1::DTYPE_FLOAT32);

// The whole file, or NotFound naming it.
absl::StatusOr<std::string> ReadWholeFile(const std::string& path);

// Submits `model` as the CLI does: asks which blobs are missing and uploads only those, in
// chunks of `chunk_bytes`. The gRPC status's code and message on failure.
absl::StatusOr<forge::v1::SubmitJobResponse> SubmitExportedModel(
    forge::v1::JobService::Stub& stub, const ExportedModel& model,
    const forge::v1::JobOptions& options, size_t chunk_bytes = 256 * 1024);

}  // namespace forge::testing

#endif  // FORGE_TESTS_SUPPORT_EXPORTED_MODEL_H_
