// The reference interpreter: runs Forge's graph IR through ATen on the CPU, one dispatcher call
// per node, looked up by operator schema. Its outputs are the ground truth candidates are judged
// against, in the graph's own dtypes (native) or with all floating-point math in float64.
//
// The API speaks HostTensor, not at::Tensor, so that callers (judge, tests, tools) stay clear of
// LibTorch headers; only this library's .cc files include them.
#ifndef FORGE_COMPILER_REFERENCE_REFERENCE_H_
#define FORGE_COMPILER_REFERENCE_REFERENCE_H_

#include <cstdint>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "forge/v1/graph.pb.h"
#include "forge/v1/task.pb.h"

namespace forge::reference {

// A dense tensor in host memory.
struct HostTensor {
  v1::DType dtype = v1::DTYPE_UNSPECIFIED;
  std::vector<std::int64_t> shape;
  // Element strides of the tensor's layout, one per dimension; empty means row-major. Inputs are
  // laid out this way before the graph runs (so views see the layout the model saw), outputs
  // report the layout ATen produced. `bytes` is row-major either way.
  std::vector<std::int64_t> strides;
  // The elements in row-major order, little-endian, no padding (Forge's TensorData convention).
  std::string bytes;
};

// How floating-point math runs.
enum class Precision {
  // In the graph's dtypes, as the model runs.
  kNative,
  // Floating tensors (inputs, weights, and every floating dtype= argument) become float64, so
  // the whole computation is float64; integer and bool tensors keep their dtypes.
  kFloat64,
};

// Where the bytes of parameters, buffers and constants come from, by SHA-256 hex digest. The
// interpreter verifies digest and size of whatever a source returns.
class BlobSource {
 public:
  virtual ~BlobSource() = default;
  // The blob's bytes; NotFound when the source does not hold it.
  virtual absl::StatusOr<std::string> Read(absl::string_view sha256_hex) const = 0;
};

// Blobs stored as files named by their digest in one directory (as the model exporter writes
// them).
class DirectoryBlobSource : public BlobSource {
 public:
  explicit DirectoryBlobSource(std::filesystem::path directory) : directory_(std::move(directory)) {}
  absl::StatusOr<std::string> Read(absl::string_view sha256_hex) const override;

 private:
  std::filesystem::path directory_;
};

// Blobs held in memory, keyed by digest (e.g. forge.export's blobs, or what a worker fetched).
class InMemoryBlobSource : public BlobSource {
 public:
  explicit InMemoryBlobSource(absl::flat_hash_map<std::string, std::string> blobs)
      : blobs_(std::move(blobs)) {}
  absl::StatusOr<std::string> Read(absl::string_view sha256_hex) const override;

 private:
  absl::flat_hash_map<std::string, std::string> blobs_;
};

// Runs share no state, so separate threads may run graphs at the same time.
//
// Runs a whole graph. `user_inputs` are the graph's INPUT_KIND_USER_INPUT tensors in input order;
// every other input is loaded from its inline bytes or from `blobs`. Returns the
// OUTPUT_KIND_USER_OUTPUT values in output order. Errors name the node, argument or input at
// fault.
absl::StatusOr<std::vector<HostTensor>> RunGraph(const v1::Graph& graph,
                                                 absl::Span<const HostTensor> user_inputs,
                                                 const BlobSource& blobs, Precision precision);

// Runs one kernel task's group: `inputs` are one per group input, in order. Returns every group
// output, in order.
absl::StatusOr<std::vector<HostTensor>> RunTaskGroup(const v1::KernelTask& task,
                                                     absl::Span<const HostTensor> inputs,
                                                     Precision precision);

}  // namespace forge::reference

#endif  // FORGE_COMPILER_REFERENCE_REFERENCE_H_
