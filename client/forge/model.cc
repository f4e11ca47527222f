#include "client/forge/model.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/status/status_macros.h"
#include "compiler/import/pt2_importer.h"

namespace forge::client {
namespace {

namespace fs = std::filesystem;

constexpr char kGraphFile[] = "graph.pb";
constexpr char kBlobDirectory[] = "blobs";

absl::StatusOr<std::string> ReadFileBytes(const fs::path& path) {
  std::ifstream file(path, std::ios::binary);
  if (!file) return absl::NotFoundError(absl::StrCat("cannot open ", path.string()));
  std::ostringstream bytes;
  bytes << file.rdbuf();
  if (file.bad()) return absl::DataLossError(absl::StrCat("error reading ", path.string()));
  return std::move(bytes).str();
}

bool IsExportDirectory(const fs::path& path) {
  std::error_code error;
  return fs::is_directory(path, error) && fs::is_regular_file(path / kGraphFile, error);
}

absl::StatusOr<LocalModel> ReadGraphFile(const fs::path& graph_path, std::string user_path) {
  FORGE_ASSIGN_OR_RETURN(std::string bytes, ReadFileBytes(graph_path));
  LocalModel model;
  model.path = std::move(user_path);
  if (absl::StartsWith(bytes, "PK\x03\x04")) {  // a zip: a torch.export archive
    absl::StatusOr<ImportedModel> imported =
        ImportPt2FromBytes(std::move(bytes), graph_path.stem().string());
    if (!imported.ok()) return Annotate(imported.status(), absl::StrCat("importing ", model.path));
    model.graph = std::move(imported->graph);
    model.imported_blobs.insert(imported->blobs.begin(), imported->blobs.end());
    return model;
  }
  if (!model.graph.ParseFromString(bytes)) {
    return absl::InvalidArgumentError(
        absl::StrCat(model.path,
                     " is neither a torch.export archive (.pt2) nor a forge.v1.Graph (binary "
                     "protobuf) nor a directory holding graph.pb"));
  }
  if (model.graph.nodes().empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(model.path, " holds no operator nodes; is it a forge.v1.Graph?"));
  }
  model.blob_directory = (graph_path.parent_path() / kBlobDirectory).string();
  return model;
}

}  // namespace

std::string LocalModel::Name() const {
  if (!graph.metadata().name().empty()) return graph.metadata().name();
  fs::path as_given(path);
  if (!as_given.has_filename()) as_given = as_given.parent_path();  // "dir/"
  return as_given.stem().string();
}

absl::StatusOr<std::string> LocalModel::ReadBlob(absl::string_view sha256) const {
  if (auto imported = imported_blobs.find(std::string(sha256)); imported != imported_blobs.end()) {
    return imported->second;
  }
  if (blob_directory.empty()) {
    return absl::NotFoundError(
        absl::StrCat("blob ", sha256, " is named by ", path, " but its archive does not hold it"));
  }
  absl::StatusOr<std::string> bytes = ReadFileBytes(fs::path(blob_directory) / std::string(sha256));
  if (!bytes.ok()) {
    return absl::NotFoundError(absl::StrCat("blob ", sha256, " named by ", path, " is not in ",
                                            blob_directory, ": ", bytes.status().message()));
  }
  return bytes;
}

absl::StatusOr<LocalModel> ReadModel(absl::string_view path) {
  const fs::path as_given{std::string(path)};
  std::error_code error;
  if (fs::is_directory(as_given, error)) {
    if (!IsExportDirectory(as_given)) {
      return absl::NotFoundError(
          absl::StrCat(path, " is a directory without ", kGraphFile,
                       "; an exported model is a directory with graph.pb and blobs/"));
    }
    return ReadGraphFile(as_given / kGraphFile, std::string(path));
  }
  if (!fs::exists(as_given, error)) {
    return absl::NotFoundError(absl::StrCat("model ", path, " does not exist"));
  }
  return ReadGraphFile(as_given, std::string(path));
}

absl::StatusOr<forge::v1::Graph> ReadModelFile(absl::string_view path) {
  FORGE_ASSIGN_OR_RETURN(LocalModel model, ReadModel(path));
  return std::move(model.graph);
}

absl::StatusOr<std::vector<std::string>> ExpandModelPaths(const std::vector<std::string>& paths) {
  std::vector<std::string> models;
  for (const std::string& path : paths) {
    std::error_code error;
    if (!fs::exists(path, error)) {
      return absl::NotFoundError(absl::StrCat("model ", path, " does not exist"));
    }
    if (!fs::is_directory(path, error) || IsExportDirectory(path)) {
      models.push_back(path);
      continue;
    }
    std::vector<std::string> inside;
    for (const fs::directory_entry& entry : fs::directory_iterator(path, error)) {
      if (IsExportDirectory(entry.path()) ||
          (entry.is_regular_file() && entry.path().extension() == ".pt2")) {
        inside.push_back(entry.path().string());
      }
    }
    if (error) {
      return absl::InvalidArgumentError(
          absl::StrCat("cannot list directory ", path, ": ", error.message()));
    }
    if (inside.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "directory ", path, " holds no model: neither graph.pb nor */graph.pb nor *.pt2"));
    }
    std::sort(inside.begin(), inside.end());
    models.insert(models.end(), inside.begin(), inside.end());
  }
  return models;
}

std::vector<std::string> UploadableBlobDigests(const forge::v1::Graph& graph) {
  std::vector<std::string> digests;
  std::set<std::string> seen;
  for (const forge::v1::GraphInput& input : graph.inputs()) {
    const forge::v1::TensorData& data = input.data();
    if (data.sha256().empty() || !data.inline_bytes().empty()) continue;
    if (seen.insert(data.sha256()).second) digests.push_back(data.sha256());
  }
  return digests;
}


}  // namespace forge::client
