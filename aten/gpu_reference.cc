// The judge's group runner on the GPU (CudaGroupRunner): the interpreter on a CUDA device, with
// the CPU as its fallback.
#include "aten/aten.h"

#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAFunctions.h>
#include <c10/cuda/CUDAGuard.h>

#include <cstdio>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "aten/interpreter.h"

namespace forge::aten {
namespace {

absl::StatusOr<std::vector<HostTensor>> RunOnGpu(
    const forge::v1::KernelTask& task, absl::Span<const HostTensor> inputs,
    Precision precision, int gpu_ordinal) {
  if (gpu_ordinal < 0 || gpu_ordinal >= c10::cuda::device_count()) {
    return absl::UnavailableError(absl::StrCat("no CUDA device ", gpu_ordinal, "; LibTorch sees ",
                                               static_cast<int>(c10::cuda::device_count())));
  }
  const c10::Device device(c10::kCUDA, static_cast<c10::DeviceIndex>(gpu_ordinal));
  absl::StatusOr<std::vector<HostTensor>> outputs;
  try {
    const c10::cuda::CUDAGuard guard(device);
    outputs = internal::RunTaskGroupOn(task, inputs, precision, device);
  } catch (const c10::Error& error) {
    outputs = absl::InternalError(error.what_without_backtrace());
  }
  // Outputs are on the host by now (their copies synchronized the device).
  c10::cuda::CUDACachingAllocator::emptyCache();
  return outputs;
}

}  // namespace

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
