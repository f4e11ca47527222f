// Models on the user's disk, in the forms the CLI accepts:
//  - a torch.export archive (.pt2, recognised by its zip signature), imported by compiler/import;
//  - a directory written by `python -m forge export`: DIR/graph.pb and DIR/blobs/<sha256>;
//  - a bare forge.v1.Graph file (binary protobuf), whose blobs, if any, sit in blobs/ beside it.
#ifndef FORGE_CLIENT_FORGE_MODEL_H_
#define FORGE_CLIENT_FORGE_MODEL_H_

#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "forge/v1/graph.pb.h"

namespace forge::client {

// A model read from disk: its graph and where the bytes of the weights it names are.
struct LocalModel {
  std::string path;  // as the user gave it
  forge::v1::Graph graph;
  // Blobs the importer produced (.pt2), by SHA-256.
  std::map<std::string, std::string> imported_blobs;
  // Where the other blobs live as files named by their SHA-256 (exports); empty for a .pt2.
  std::string blob_directory;

  // The graph's metadata name, else the file or directory name.
  std::string Name() const;

  // The bytes of blob `sha256`. NotFound, naming the digest and where it was looked for.
  absl::StatusOr<std::string> ReadBlob(absl::string_view sha256) const;
};

// Reads a model in any of the forms above. NotFound when the path does not exist or an export
// directory lacks graph.pb; InvalidArgument when a file is neither an archive nor a Graph, or the
// graph has no nodes; the importer's errors for a bad archive. Messages name the path.
absl::StatusOr<LocalModel> ReadModel(absl::string_view path);

// ReadModel(path).graph, for commands that need no weights.
absl::StatusOr<forge::v1::Graph> ReadModelFile(absl::string_view path);

// The models a command line names: a path that is a model stays one; a directory that is not an
// export directory stands for the models directly inside it (export directories and .pt2 files),
// sorted by name. InvalidArgument for a directory holding no model; NotFound for a missing path.
absl::StatusOr<std::vector<std::string>> ExpandModelPaths(const std::vector<std::string>& paths);

// The SHA-256 digests of the blobs the graph names and does not inline, each once, in the order of
// the graph's inputs: what MissingBlobs is asked about.
std::vector<std::string> UploadableBlobDigests(const forge::v1::Graph& graph);

}  // namespace forge::client

#endif  // FORGE_CLIENT_FORGE_MODEL_H_
