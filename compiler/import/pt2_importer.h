// The C++ importer of torch.export archives: a .pt2 file written by torch.export.save (torch 2.11)
// -> Forge's graph IR (forge.v1.Graph) and the weight bytes it names by SHA-256.
//
// The archive is read with LibTorch's own zip reader; the program comes from its JSON
// (models/<name>.json), the weights from the raw tensor files. Pickled records (sample inputs,
// pickled payloads) are never read, so no archive code ever runs.
//
// The graph is the one Python's forge.export builds for the same module (same ops, schemas,
// canonical argument lists, value specs, input kinds and weight digests) when the archive holds a
// functional program: save `torch.export.export(m, args).run_decompositions({})`.
//
// Archives of plain `torch.export.export(m, args)` import too. Their CompositeImplicit ops
// (batch_norm, chunk, reshape, linear, ...) stay as they are: the dispatcher runs them. Their
// in-place ops are functionalized where that is safe: an op aten::X_ that writes only its first
// argument `self` and returns it (relu_, add_.Tensor, mul_.Tensor, copy_, ...) becomes aten::X at
// the same overload when LibTorch registers it with the same schema apart from alias annotations,
// and when the written tensor is an intermediate: the result of a node that returns fresh tensors,
// not a graph input (user input, parameter, buffer, constant), not a view, and not a tensor a view
// was taken of. Later readers of the written tensor read the functional op's result. Every other
// mutation (of inputs or views, out= variants, ops writing several arguments) is refused, naming
// the node. Shapes must be static: a symbolic size is refused
// rather than specialized. Operators LibTorch does not register are refused: Forge needs their
// schema. Every error is an absl::Status naming the problem and where it is (record inside the
// archive, node, field).
#ifndef FORGE_COMPILER_IMPORT_PT2_IMPORTER_H_
#define FORGE_COMPILER_IMPORT_PT2_IMPORTER_H_

#include <cstdint>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "forge/v1/graph.pb.h"

namespace forge {

// Bounds on what an archive may ask the importer to do; an archive past one is refused with
// ResourceExhausted naming the limit.
struct ImportOptions {
  // Size of the archive, and of each record once decompressed.
  std::uint64_t max_archive_bytes = std::uint64_t{64} << 30;
  // Operator calls in the program.
  std::int64_t max_nodes = 1'000'000;
  // Elements of any one tensor value.
  std::int64_t max_tensor_elements = std::int64_t{1} << 36;
  // Dimensions of any one tensor value.
  int max_rank = 16;
  // Parameters, buffers and constants at most this large also travel inside the graph
  // (TensorData.inline_bytes), as forge.export's inline_limit.
  std::int64_t inline_limit_bytes = 64;
  // Which program of the archive (models/<model_name>.json); empty: the archive's only one.
  std::string model_name;
};

struct ImportedModel {
  forge::v1::Graph graph;
  // The bytes of every parameter, buffer and constant, keyed by their SHA-256 (64 hex digits).
  absl::flat_hash_map<std::string, std::string> blobs;
};

// Imports the archive at `path`; the graph's metadata names the model after the file's stem.
absl::StatusOr<ImportedModel> ImportPt2(const std::string& path, const ImportOptions& options = {});

// Imports an archive held in memory; `name` becomes the graph's metadata name.
absl::StatusOr<ImportedModel> ImportPt2FromBytes(std::string bytes, absl::string_view name,
                                                 const ImportOptions& options = {});

}  // namespace forge

#endif  // FORGE_COMPILER_IMPORT_PT2_IMPORTER_H_
