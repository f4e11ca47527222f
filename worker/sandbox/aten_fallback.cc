#include "worker/sandbox/aten_fallback.h"

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstring>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/types/span.h"
#include "common/status/status_macros.h"
#include "compiler/codegen/aten_fallback.h"
#include "compiler/reference/reference.h"
#include "worker/baseline/aten_baseline.h"
#include "worker/judge/host_tensor.h"

namespace forge::sandbox {
namespace {

// What the launches of one candidate share.
struct AtenFallbackState {
  const gpu::Device* device = nullptr;
  forge::v1::KernelTask task;
  // The group on the last judge launch's inputs, and that launch's output buffers.
  std::unique_ptr<baseline::AtenBaseline> baseline;
  std::vector<CUdeviceptr> output_buffers;
  // Why AtenBaseline cannot run the task's group; empty while nothing says so.
  std::string unsupported;
};

// A blocking copy between host memory and a judge buffer, through the CUDA runtime (which LibTorch
// loads; gpu::Device offers copies only of its own buffers). Both work in the device's primary
// context. A copy that fails after an earlier fault reports the driver's view, which says whether
// the context is lost (gpu::IsStickyError).
absl::Status Copy(const gpu::Device& device, void* destination, const void* source, size_t bytes,
                  absl::string_view what) {
  const cudaError_t error = cudaMemcpy(destination, source, bytes, cudaMemcpyDefault);
  if (error == cudaSuccess) return absl::OkStatus();
  FORGE_RETURN_IF_ERROR(device.Synchronize());
  return absl::InternalError(absl::StrCat("cudaMemcpy (", what, ", ", bytes,
                                          " bytes): ", cudaGetErrorString(error)));
}

// True when the spec's strides are the row-major ones: storage holds the elements in order.
bool IsRowMajor(const forge::v1::TensorSpec& spec) {
  std::vector<int64_t> row_major(spec.shape_size());
  int64_t stride = 1;
  for (int d = spec.shape_size() - 1; d >= 0; --d) {
    row_major[d] = stride;
    stride *= spec.shape(d);
  }
  return judge::EffectiveStrides(spec) == row_major;
}

// Input `index` of the task, read from the judge's buffer at `address`: its elements row-major,
// its layout as strides (reference::HostTensor's form).
absl::StatusOr<reference::HostTensor> Download(const gpu::Device& device,
                                               const forge::v1::TensorSpec& spec,
                                               CUdeviceptr address, int index) {
  FORGE_ASSIGN_OR_RETURN(const int element_bytes, judge::ElementBytes(spec.dtype()));
  reference::HostTensor tensor;
  tensor.dtype = spec.dtype();
  tensor.shape.assign(spec.shape().begin(), spec.shape().end());
  tensor.strides.assign(spec.strides().begin(), spec.strides().end());
  const int64_t count = judge::ElementCount(spec);
  tensor.bytes.resize(static_cast<size_t>(count) * element_bytes);
  const std::string what = absl::StrCat("input ", index, " to the host");
  if (IsRowMajor(spec)) {
    if (count > 0) {
      FORGE_RETURN_IF_ERROR(Copy(device, tensor.bytes.data(),
                                 reinterpret_cast<const void*>(address), tensor.bytes.size(), what));
    }
    return tensor;
  }
  std::vector<std::byte> storage(judge::StorageElementCount(spec) * element_bytes);
  if (storage.empty()) return tensor;
  FORGE_RETURN_IF_ERROR(Copy(device, storage.data(), reinterpret_cast<const void*>(address),
                             storage.size(), what));
  for (int64_t e = 0; e < count; ++e) {
    std::memcpy(tensor.bytes.data() + e * element_bytes,
                storage.data() + judge::StorageOffsetOf(spec, e) * element_bytes, element_bytes);
  }
  return tensor;
}

// Writes `values` (the elements of output `index`, row-major) into the judge's buffer at
// `address`, in the spec's layout; storage the layout skips keeps what it held.
absl::Status Upload(const gpu::Device& device, const forge::v1::TensorSpec& spec,
                    const reference::HostTensor& values, CUdeviceptr address, int index) {
  FORGE_ASSIGN_OR_RETURN(const int element_bytes, judge::ElementBytes(spec.dtype()));
  const int64_t count = judge::ElementCount(spec);
  if (values.dtype != spec.dtype() ||
      values.bytes.size() != static_cast<size_t>(count) * element_bytes) {
    return absl::InternalError(absl::StrCat("ATen produced ", forge::v1::DType_Name(values.dtype),
                                            " output ", index, " of ", values.bytes.size(),
                                            " bytes; the task declares ",
                                            judge::DescribeSpec(spec)));
  }
  const std::string what = absl::StrCat("output ", index, " to the judge's buffer");
  if (IsRowMajor(spec)) {
    if (count == 0) return absl::OkStatus();
    return Copy(device, reinterpret_cast<void*>(address), values.bytes.data(), values.bytes.size(),
                what);
  }
  std::vector<std::byte> storage(judge::StorageElementCount(spec) * element_bytes);
  if (storage.empty()) return absl::OkStatus();
  FORGE_RETURN_IF_ERROR(Copy(device, storage.data(), reinterpret_cast<const void*>(address),
                             storage.size(), absl::StrCat("output ", index, " to the host")));
  for (int64_t e = 0; e < count; ++e) {
    std::memcpy(storage.data() + judge::StorageOffsetOf(spec, e) * element_bytes,
                values.bytes.data() + e * element_bytes, element_bytes);
  }
  return Copy(device, reinterpret_cast<void*>(address), storage.data(), storage.size(), what);
}

// Copies the last launch's outputs into the judge's output buffers.
absl::Status PublishOutputs(const AtenFallbackState& state) {
  FORGE_ASSIGN_OR_RETURN(std::vector<reference::HostTensor> outputs, state.baseline->Outputs());
  if (outputs.size() != state.output_buffers.size()) {
    return absl::InternalError(absl::StrCat("the ATen fallback of task ", state.task.digest(),
                                            " produced ", outputs.size(), " outputs; the task has ",
                                            state.output_buffers.size()));
  }
  for (size_t o = 0; o < outputs.size(); ++o) {
    FORGE_RETURN_IF_ERROR(Upload(*state.device, state.task.outputs(static_cast<int>(o)),
                                 outputs[o], state.output_buffers[o], static_cast<int>(o)));
  }
  return absl::OkStatus();
}

absl::Status JudgeLaunch(AtenFallbackState& state, gpu::Stream& stream,
                         absl::Span<const CUdeviceptr> args) {
  const forge::v1::KernelTask& task = state.task;
  // The judge's poisoning and earlier work are ordered on its stream; the copies are not.
  FORGE_RETURN_IF_ERROR(stream.Synchronize());
  state.baseline.reset();  // the previous draw's inputs and outputs go back to the cache first
  state.output_buffers.clear();
  std::vector<reference::HostTensor> inputs;
  for (int i = 0; i < task.inputs_size(); ++i) {
    FORGE_ASSIGN_OR_RETURN(reference::HostTensor input,
                           Download(*state.device, task.inputs(i), args[i], i));
    inputs.push_back(std::move(input));
  }
  absl::StatusOr<std::unique_ptr<baseline::AtenBaseline>> created = baseline::AtenBaseline::Create(
      task, inputs, state.device->properties().ordinal);
  if (!created.ok()) {
    // An op missing from the dispatcher, recorded with another schema, or without a CUDA kernel.
    if (absl::IsNotFound(created.status()) || absl::IsFailedPrecondition(created.status())) {
      state.unsupported = std::string(created.status().message());
    }
    return created.status();
  }
  state.baseline = *std::move(created);
  FORGE_RETURN_IF_ERROR(state.baseline->Launch(stream.handle()));
  state.output_buffers.assign(args.begin() + task.inputs_size(), args.end());
  return PublishOutputs(state);
}

absl::Status FailWithoutJudgedLaunch(const AtenFallbackState& state) {
  return absl::FailedPreconditionError(absl::StrCat("the ATen fallback of task ",
                                                    state.task.digest(),
                                                    " has not been through the judge"));
}

}  // namespace

absl::StatusOr<RunnableCandidate> LoadAtenFallback(const gpu::Device& device,
                                                   const forge::v1::KernelTask& task) {
  FORGE_RETURN_IF_ERROR(codegen::PlanAtenFallback(task).status());
  auto state = std::make_shared<AtenFallbackState>();
  state->device = &device;
  state->task = task;
  RunnableCandidate runnable;
  runnable.launch = [state](gpu::Stream& stream, absl::Span<const CUdeviceptr> args) {
    return JudgeLaunch(*state, stream, args);
  };
  runnable.timed_launch = [state](gpu::Stream& stream) {
    if (state->baseline == nullptr) return FailWithoutJudgedLaunch(*state);
    return state->baseline->Launch(stream.handle());
  };
  runnable.before_recheck = [state](gpu::Stream&) {
    if (state->baseline == nullptr) return FailWithoutJudgedLaunch(*state);
    return PublishOutputs(*state);
  };
  runnable.unsupported_reason = [state] { return state->unsupported; };
  return runnable;
}

}  // namespace forge::sandbox
