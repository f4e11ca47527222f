// The judge's group runner on the GPU (CudaGroupRunner): the interpreter on a CUDA device, with
// the CPU as its fallback; and the reference over device memory (CudaDeviceReferenceRunner).
#include "aten/aten.h"

#include <ATen/ops/from_blob.h>
#include <ATen/ops/where.h>
#include <c10/core/InferenceMode.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAFunctions.h>
#include <c10/cuda/CUDAGuard.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "aten/interpreter.h"
#include "common/status/status_macros.h"

namespace forge::aten {
namespace {

// The CUDA device `gpu_ordinal` names, or Unavailable.
absl::StatusOr<c10::Device> CudaDevice(int gpu_ordinal) {
  if (gpu_ordinal < 0 || gpu_ordinal >= c10::cuda::device_count()) {
    return absl::UnavailableError(absl::StrCat("no CUDA device ", gpu_ordinal, "; LibTorch sees ",
                                               static_cast<int>(c10::cuda::device_count())));
  }
  return c10::Device(c10::kCUDA, static_cast<c10::DeviceIndex>(gpu_ordinal));
}

// `body()` on `device` with LibTorch's errors as statuses; ATen's cached memory goes back to the
// driver afterwards (the judge allocates its own buffers outside ATen's cache).
template <typename Body>
auto OnCudaDevice(c10::Device device, const Body& body) -> decltype(body()) {
  decltype(body()) result = absl::InternalError("not run");
  try {
    const c10::cuda::CUDAGuard guard(device);
    c10::InferenceMode inference_mode;
    result = body();
    c10::cuda::device_synchronize();
  } catch (const c10::Error& error) {
    result = absl::InternalError(error.what_without_backtrace());
  }
  c10::cuda::CUDACachingAllocator::emptyCache();
  return result;
}

absl::StatusOr<std::vector<HostTensor>> RunOnGpu(
    const forge::v1::KernelTask& task, absl::Span<const HostTensor> inputs,
    Precision precision, int gpu_ordinal) {
  FORGE_ASSIGN_OR_RETURN(const c10::Device device, CudaDevice(gpu_ordinal));
  return OnCudaDevice(device,
                      [&] { return internal::RunTaskGroupOn(task, inputs, precision, device); });
}

// Whether a node of the group may write its arguments (an in-place or out= schema).
absl::StatusOr<bool> WritesArguments(const v1::Graph& group) {
  for (const v1::Node& node : group.nodes()) {
    FORGE_ASSIGN_OR_RETURN(c10::OperatorHandle op, internal::FindOperator(node));
    if (op.schema().is_mutable()) return true;
  }
  return false;
}

absl::Status RunOverDeviceMemory(const v1::KernelTask& task, absl::Span<const CUdeviceptr> inputs,
                                 Precision precision, absl::Span<const CUdeviceptr> outputs,
                                 c10::Device device) {
  if (inputs.size() != static_cast<size_t>(task.inputs_size()) ||
      outputs.size() != static_cast<size_t>(task.outputs_size())) {
    return absl::InvalidArgumentError(absl::StrCat(
        "task ", task.digest(), " has ", task.inputs_size(), " inputs and ", task.outputs_size(),
        " outputs; the device reference was given ", inputs.size(), " and ", outputs.size()));
  }
  FORGE_ASSIGN_OR_RETURN(const bool writes, WritesArguments(task.group()));
  std::vector<at::Tensor> wrapped;
  for (int i = 0; i < task.inputs_size(); ++i) {
    FORGE_ASSIGN_OR_RETURN(
        at::Tensor tensor,
        internal::WrapMemory(reinterpret_cast<void*>(inputs[i]), task.inputs(i), device));
    wrapped.push_back(writes ? tensor.clone(at::MemoryFormat::Preserve) : std::move(tensor));
  }
  FORGE_ASSIGN_OR_RETURN(
      std::vector<at::Tensor> results,
      internal::RunTaskGroupOnTensors(task, std::move(wrapped), precision, device));
  if (results.size() != outputs.size()) {
    return absl::InternalError(absl::StrCat("task ", task.digest(), ": the group gave ",
                                            results.size(), " outputs, the task has ",
                                            outputs.size()));
  }
  for (size_t o = 0; o < outputs.size(); ++o) {
    at::Tensor target = at::from_blob(reinterpret_cast<void*>(outputs[o]), results[o].sizes(),
                                      at::TensorOptions().dtype(at::kDouble).device(device));
    target.copy_(results[o]);
  }
  return absl::OkStatus();
}

absl::StatusOr<DeviceOutputStatistics> Statistics(CUdeviceptr values, CUdeviceptr native,
                                                  CUdeviceptr first, int64_t count, double atol,
                                                  double rtol, double overflow,
                                                  c10::Device device) {
  constexpr int64_t kSlice = int64_t{1} << 26;
  const auto options = at::TensorOptions().dtype(at::kDouble).device(device);
  auto wrap = [&](CUdeviceptr address) {
    return at::from_blob(reinterpret_cast<void*>(address), {count}, options);
  };
  const at::Tensor all = wrap(values);
  DeviceOutputStatistics statistics;
  statistics.agrees_with_first = first != 0;
  double sum = 0, squares = 0, below = 0, error_squared = 0, reference_squared = 0;
  // First pass: the mean, the root mean square, eager's error, the agreement with draw 0.
  for (int64_t begin = 0; begin < count; begin += kSlice) {
    const int64_t length = std::min(kSlice, count - begin);
    const at::Tensor x = all.narrow(0, begin, length);
    const at::Tensor finite = x.isfinite();
    sum += x.sum().item<double>();
    const at::Tensor kept = finite.logical_and(x.abs().lt(overflow));
    squares += at::where(kept, x.mul(x), 0.0).sum().item<double>();
    below += static_cast<double>(kept.sum().item<int64_t>());
    if (native != 0) {
      const at::Tensor n = wrap(native).narrow(0, begin, length);
      const at::Tensor both = finite.logical_and(n.isfinite());
      const at::Tensor difference = at::where(both, n.sub(x), 0.0);
      statistics.eager_max_abs =
          std::max(statistics.eager_max_abs, difference.abs().max().item<double>());
      error_squared += difference.mul(difference).sum().item<double>();
      reference_squared += at::where(both, x.mul(x), 0.0).sum().item<double>();
    }
    if (first != 0 && statistics.agrees_with_first) {
      const at::Tensor f = wrap(first).narrow(0, begin, length);
      const at::Tensor outside =
          finite.logical_and(f.isfinite())
              .logical_and(x.sub(f).abs().le(f.abs().mul(rtol).add(atol)).logical_not());
      statistics.agrees_with_first = !outside.any().item<bool>();
    }
  }
  statistics.rms = below > 0 ? std::sqrt(squares / below) : 0;
  statistics.eager_rel_norm =
      reference_squared > 0 ? std::sqrt(error_squared / reference_squared) : 0;
  // Second pass: near constant when every finite element lies within its tolerance of the mean.
  const double mean = count > 0 ? sum / static_cast<double>(count) : 0;
  statistics.near_constant = true;
  for (int64_t begin = 0; begin < count && statistics.near_constant; begin += kSlice) {
    const at::Tensor x = all.narrow(0, begin, std::min(kSlice, count - begin));
    const at::Tensor outside =
        x.isfinite().logical_and(x.sub(mean).abs().le(x.abs().mul(rtol).add(atol)).logical_not());
    statistics.near_constant = !outside.any().item<bool>();
  }
  return statistics;
}

}  // namespace

DeviceReferenceRunner CudaDeviceReferenceRunner(int gpu_ordinal) {
  DeviceReferenceRunner runner;
  runner.run = [gpu_ordinal](const v1::KernelTask& task, absl::Span<const CUdeviceptr> inputs,
                             Precision precision,
                             absl::Span<const CUdeviceptr> outputs) -> absl::Status {
    FORGE_ASSIGN_OR_RETURN(const c10::Device device, CudaDevice(gpu_ordinal));
    return OnCudaDevice(device, [&] {
      return RunOverDeviceMemory(task, inputs, precision, outputs, device);
    });
  };
  runner.statistics = [gpu_ordinal](CUdeviceptr values, CUdeviceptr native, CUdeviceptr first,
                                    int64_t count, double atol, double rtol,
                                    double overflow) -> absl::StatusOr<DeviceOutputStatistics> {
    FORGE_ASSIGN_OR_RETURN(const c10::Device device, CudaDevice(gpu_ordinal));
    return OnCudaDevice(device, [&] {
      return Statistics(values, native, first, count, atol, rtol, overflow, device);
    });
  };
  return runner;
}

GroupRunner CudaGroupRunner(int gpu_ordinal) {
  struct Fallbacks {
    absl::Mutex mutex;
    absl::flat_hash_set<std::string> logged ABSL_GUARDED_BY(mutex);
  };
  auto fallbacks = std::make_shared<Fallbacks>();
  return [gpu_ordinal, fallbacks](const forge::v1::KernelTask& task,
                                  absl::Span<const HostTensor> inputs,
                                  Precision precision)
             -> absl::StatusOr<std::vector<HostTensor>> {
    absl::StatusOr<std::vector<HostTensor>> outputs =
        RunOnGpu(task, inputs, precision, gpu_ordinal);
    if (outputs.ok()) return outputs;
    {
      absl::MutexLock lock(&fallbacks->mutex);
      if (fallbacks->logged.insert(task.digest()).second) {
        fprintf(stderr, "forge judge: task %s: the reference on GPU %d failed (%s); it runs on the "
                "CPU\n", task.digest().c_str(), gpu_ordinal, outputs.status().ToString().c_str());
      }
    }
    return RunTaskGroup(task, inputs, precision);
  };
}

}  // namespace forge::aten
