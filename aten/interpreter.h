// The reference interpreter's pieces that the rest of the LibTorch boundary builds on: the one
// place where a node's operator is looked up, host tensors become ATen tensors and back, and a
// graph's nodes run on a device (the ATen baseline and the judge's group runner run them on the
// GPU). Unlike aten.h, this header has LibTorch types in its interface: only aten/'s .cc files
// that already pay for LibTorch include it; the rest of Forge never does.
#ifndef FORGE_ATEN_INTERPRETER_H_
#define FORGE_ATEN_INTERPRETER_H_

#include <ATen/core/Tensor.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <c10/core/Device.h>

#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "aten/aten.h"
#include "forge/v1/graph.pb.h"

namespace forge::aten::internal {

// "node 'name' (aten::op.overload)", the prefix of the interpreter's errors about a node.
std::string NodeWhere(const v1::Node& node);

// The dispatcher's operator for `node`: NotFound when this LibTorch has none, FailedPrecondition
// when the graph recorded a different schema.
absl::StatusOr<c10::OperatorHandle> FindOperator(const v1::Node& node);

// `host` as a CPU tensor laid out with its strides (see HostTensor); errors name `where`.
absl::StatusOr<at::Tensor> ToTensor(const HostTensor& host, absl::string_view where);

// `tensor`, on any device, copied into host memory.
absl::StatusOr<HostTensor> ToHost(const at::Tensor& tensor);

// A tensor over memory the caller owns and keeps alive (`data` on `device`; no copy), laid out as
// `spec` says: its strides when it has one per dimension, else row-major.
absl::StatusOr<at::Tensor> WrapMemory(void* data, const v1::TensorSpec& spec, c10::Device device);

// RunTaskGroup on `device`: the inputs are uploaded there (keeping their strides), every node runs
// there, and the outputs are copied back to the host. The caller owns the device's set-up (a CUDA
// device needs LibTorch's CUDA libraries linked) and its caching allocator's memory.
absl::StatusOr<std::vector<HostTensor>> RunTaskGroupOn(const v1::KernelTask& task,
                                                       absl::Span<const HostTensor> inputs,
                                                       Precision precision, c10::Device device);

// RunTaskGroupOn over tensors already on `device` (one per group input, in order; floating ones
// upcast in float64 mode, others used as they are: the caller copies what an op may write). The
// outputs stay on the device, one per group output.
absl::StatusOr<std::vector<at::Tensor>> RunTaskGroupOnTensors(const v1::KernelTask& task,
                                                              std::vector<at::Tensor> inputs,
                                                              Precision precision,
                                                              c10::Device device);

// Runs `graph`'s nodes in order, in the graph's own dtypes: `values` holds the tensors of the
// graph's inputs by value name and receives every node's outputs. Device arguments become
// `device`, as does the device of tensors that factory nodes make with device=None.
absl::Status RunNodes(const v1::Graph& graph, c10::Device device,
                      absl::flat_hash_map<std::string, at::Tensor>& values);

}  // namespace forge::aten::internal

#endif  // FORGE_ATEN_INTERPRETER_H_
