// The ATen baseline (Baseline): the interpreter's node loop on CUDA, on the caller's stream.
#include "aten/aten.h"

#include <ATen/Context.h>
#include <c10/cuda/CUDAFunctions.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include <algorithm>
#include <string>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "aten/interpreter.h"
#include "common/status/status_macros.h"
#include "worker/gpu/device.h"

namespace forge::aten {
namespace {

// Each node's operator must exist as recorded and be able to run on CUDA: directly, or as a
// composite of ops that can. Returns whether one of them may write its arguments (an in-place or
// out= op).
absl::StatusOr<bool> CheckOperators(const v1::Graph& group) {
  bool writes_arguments = false;
  for (const v1::Node& node : group.nodes()) {
    FORGE_ASSIGN_OR_RETURN(c10::OperatorHandle op, internal::FindOperator(node));
    if (!op.hasComputedKernelForDispatchKey(c10::DispatchKey::CUDA)) {
      return absl::FailedPreconditionError(absl::StrCat(
          internal::NodeWhere(node), ": this LibTorch has no CUDA kernel for it"));
    }
    writes_arguments |= op.schema().is_mutable();
  }
  return writes_arguments;
}

absl::Status CheckInputCount(const v1::KernelTask& task, size_t given) {
  const v1::Graph& group = task.group();
  if (task.inputs_size() == group.inputs_size() &&
      given == static_cast<size_t>(group.inputs_size())) {
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "task ", task.digest(), ": the group takes ", group.inputs_size(),
      " inputs; the task specifies ", task.inputs_size(), " and ", given, " are given"));
}

absl::Status CheckInput(const v1::TensorSpec& spec, const HostTensor& host,
                        absl::string_view where) {
  if (host.dtype != spec.dtype() ||
      !std::equal(host.shape.begin(), host.shape.end(), spec.shape().begin(), spec.shape().end())) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": ", v1::DType_Name(host.dtype), " [", absl::StrJoin(host.shape, ", "),
                     "], the task declares ", v1::DType_Name(spec.dtype()), " [",
                     absl::StrJoin(spec.shape(), ", "), "]"));
  }
  return absl::OkStatus();
}

}  // namespace

struct Baseline::State {
  v1::KernelTask task;
  c10::Device device;
  bool writes_arguments = false;  // a node may write its arguments (CheckOperators)
  // The inputs (uploaded, or wrapping the caller's device memory), by group input value name.
  absl::flat_hash_map<std::string, at::Tensor> inputs;
  std::vector<at::Tensor> outputs;
};

Baseline::Baseline(std::unique_ptr<State> state) : state_(std::move(state)) {}
Baseline::~Baseline() = default;

absl::StatusOr<std::unique_ptr<Baseline::State>> Baseline::Prepare(
    const v1::KernelTask& task, int device_ordinal) {
  absl::StatusOr<bool> writes_arguments = CheckOperators(task.group());
  FORGE_RETURN_IF_ERROR(Annotate(writes_arguments.status(), absl::StrCat("task ", task.digest())));
  FORGE_RETURN_IF_ERROR(Annotate(gpu::DriverStatus(), "the ATen baseline needs a GPU"));
  if (device_ordinal < 0 || device_ordinal >= c10::cuda::device_count()) {
    return absl::InvalidArgumentError(absl::StrCat("no CUDA device ", device_ordinal,
                                                   "; LibTorch sees ",
                                                   static_cast<int>(c10::cuda::device_count())));
  }
  // float32 stays float32: LibTorch lets cuDNN's convolutions round to TF32 by default, which
  // misses the judge's float32 tolerance, so the baseline would fail as a candidate and its time
  // would not be float32's. (cuBLAS's matrix products default to full float32 already.)
  at::globalContext().setAllowTF32CuDNN(false);
  return std::make_unique<State>(
      State{task, c10::Device(c10::kCUDA, static_cast<c10::DeviceIndex>(device_ordinal)),
            *writes_arguments, {}, {}});
}

absl::StatusOr<std::unique_ptr<Baseline>> Baseline::Create(
    const v1::KernelTask& task, absl::Span<const HostTensor> inputs,
    int device_ordinal) {
  const std::string where_task = absl::StrCat("task ", task.digest());
  const v1::Graph& group = task.group();
  // The inputs first: a mismatch is the caller's error even where no GPU could run the group.
  FORGE_RETURN_IF_ERROR(CheckInputCount(task, inputs.size()));
  for (int i = 0; i < group.inputs_size(); ++i) {
    FORGE_RETURN_IF_ERROR(CheckInput(
        task.inputs(i), inputs[i],
        absl::StrCat(where_task, " input ", i, " '", group.inputs(i).value_name(), "'")));
  }
  FORGE_ASSIGN_OR_RETURN(std::unique_ptr<State> state, Prepare(task, device_ordinal));
  for (int i = 0; i < group.inputs_size(); ++i) {
    const std::string& name = group.inputs(i).value_name();
    const std::string where = absl::StrCat(where_task, " input ", i, " '", name, "'");
    FORGE_ASSIGN_OR_RETURN(at::Tensor host, internal::ToTensor(inputs[i], where));
    try {
      // A synchronous copy; `to` keeps the strides of a dense layout.
      state->inputs.emplace(name, host.to(state->device));
    } catch (const c10::Error& error) {
      return absl::InternalError(
          absl::StrCat(where, ": upload failed: ", error.what_without_backtrace()));
    }
  }
  return std::unique_ptr<Baseline>(new Baseline(std::move(state)));
}

absl::StatusOr<std::unique_ptr<Baseline>> Baseline::OnDevice(
    const v1::KernelTask& task, absl::Span<const CUdeviceptr> inputs, int device_ordinal) {
  FORGE_RETURN_IF_ERROR(CheckInputCount(task, inputs.size()));
  FORGE_ASSIGN_OR_RETURN(std::unique_ptr<State> state, Prepare(task, device_ordinal));
  const v1::Graph& group = task.group();
  for (int i = 0; i < group.inputs_size(); ++i) {
    FORGE_ASSIGN_OR_RETURN(
        at::Tensor wrapped,
        internal::WrapMemory(reinterpret_cast<void*>(inputs[i]), task.inputs(i),
                                        state->device));
    // A group that writes its arguments gets device copies: the caller's memory stays as it was.
    if (state->writes_arguments) {
      try {
        wrapped = wrapped.clone(at::MemoryFormat::Preserve);
      } catch (const c10::Error& error) {
        return absl::InternalError(absl::StrCat("task ", task.digest(), " input ", i,
                                                ": copy failed: ", error.what_without_backtrace()));
      }
    }
    state->inputs.emplace(group.inputs(i).value_name(), std::move(wrapped));
  }
  return std::unique_ptr<Baseline>(new Baseline(std::move(state)));
}

absl::Status Baseline::Launch(CUstream stream) {
  c10::cuda::CUDAStreamGuard stream_guard(
      c10::cuda::getStreamFromExternal(stream, state_->device.index()));
  // The previous launch's outputs go back to the cache before this launch allocates.
  state_->outputs.clear();
  absl::flat_hash_map<std::string, at::Tensor> values = state_->inputs;
  const v1::Graph& group = state_->task.group();
  FORGE_RETURN_IF_ERROR(internal::RunNodes(group, state_->device, values));
  for (const v1::GraphOutput& output : group.outputs()) {
    auto it = values.find(output.value_name());
    if (it == values.end()) {
      return absl::InvalidArgumentError(
          absl::StrCat("output '", output.value_name(), "' is not computed by the group"));
    }
    state_->outputs.push_back(it->second);
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<HostTensor>> Baseline::Outputs() const {
  std::vector<HostTensor> outputs;
  try {
    // The launch ran on a non-blocking stream, which the copies below would not wait for.
    c10::cuda::device_synchronize();
    for (const at::Tensor& tensor : state_->outputs) {
      FORGE_ASSIGN_OR_RETURN(HostTensor host, internal::ToHost(tensor));
      outputs.push_back(std::move(host));
    }
  } catch (const c10::Error& error) {
    return absl::InternalError(
        absl::StrCat("reading the baseline's outputs: ", error.what_without_backtrace()));
  }
  return outputs;
}

absl::Status Baseline::CopyOutputsTo(absl::Span<const CUdeviceptr> outputs,
                                         CUstream stream) const {
  const v1::KernelTask& task = state_->task;
  if (outputs.size() != state_->outputs.size() ||
      outputs.size() != static_cast<size_t>(task.outputs_size())) {
    return absl::InternalError(absl::StrCat("task ", task.digest(), ": ", state_->outputs.size(),
                                            " outputs computed, ", task.outputs_size(),
                                            " declared, ", outputs.size(), " destinations"));
  }
  c10::cuda::CUDAStreamGuard stream_guard(
      c10::cuda::getStreamFromExternal(stream, state_->device.index()));
  for (size_t o = 0; o < outputs.size(); ++o) {
    const v1::TensorSpec& spec = task.outputs(static_cast<int>(o));
    const at::Tensor& computed = state_->outputs[o];
    FORGE_ASSIGN_OR_RETURN(
        at::Tensor destination,
        internal::WrapMemory(reinterpret_cast<void*>(outputs[o]), spec,
                                        state_->device));
    // copy_ would convert a wrong dtype or broadcast a wrong shape without a word.
    if (computed.scalar_type() != destination.scalar_type() ||
        computed.sizes() != destination.sizes()) {
      return absl::InternalError(absl::StrCat(
          "task ", task.digest(), ": ATen produced ", c10::toString(computed.scalar_type()), " [",
          absl::StrJoin(computed.sizes(), ", "), "] for output ", o, ", declared ",
          v1::DType_Name(spec.dtype()), " [", absl::StrJoin(spec.shape(), ", "), "]"));
    }
    try {
      destination.copy_(computed);
    } catch (const c10::Error& error) {
      return absl::InternalError(absl::StrCat("copying output ", o, " of task ", task.digest(),
                                              ": ", error.what_without_backtrace()));
    }
  }
  return absl::OkStatus();
}

}  // namespace forge::aten
