#include "worker/judge/single_launch.h"

#include <utility>
#include <vector>

#include "common/status/status_macros.h"
#include "worker/judge/host_tensor.h"
#include "worker/judge/inputs.h"

namespace forge::judge {

absl::Status LaunchOnDrawZero(const gpu::Device& device, const forge::v1::KernelTask& task,
                              const CandidateLaunch& launch, const JudgeOptions& options) {
  FORGE_ASSIGN_OR_RETURN(const std::vector<InputDomain> domains,
                         InputDomainsWith(task, options.integer_ranges));
  FORGE_ASSIGN_OR_RETURN(gpu::Stream stream, device.CreateStream());
  std::vector<gpu::DeviceBuffer> buffers;
  std::vector<CUdeviceptr> args;
  // Pageable host memory: each upload is staged before CopyFromHostAsync returns, and ordered
  // before the launch on the stream.
  for (int i = 0; i < task.inputs_size(); ++i) {
    FORGE_ASSIGN_OR_RETURN(const HostTensor input,
                           DrawInput(task.inputs(i), domains[i], /*draw=*/0, i, options.seed));
    FORGE_ASSIGN_OR_RETURN(gpu::DeviceBuffer buffer, device.Allocate(input.storage.size()));
    FORGE_RETURN_IF_ERROR(
        buffer.CopyFromHostAsync(input.storage.data(), input.storage.size(), stream));
    args.push_back(buffer.address());
    buffers.push_back(std::move(buffer));
  }
  for (const forge::v1::TensorSpec& spec : task.outputs()) {
    FORGE_ASSIGN_OR_RETURN(const size_t bytes, StorageBytes(spec));
    FORGE_ASSIGN_OR_RETURN(gpu::DeviceBuffer buffer, device.Allocate(bytes));
    args.push_back(buffer.address());
    buffers.push_back(std::move(buffer));
  }
  FORGE_ASSIGN_OR_RETURN(gpu::Event finished, device.CreateEvent());
  FORGE_RETURN_IF_ERROR(launch(stream, args));
  FORGE_RETURN_IF_ERROR(finished.Record(stream));
  FORGE_RETURN_IF_ERROR(finished.Synchronize());
  return device.Synchronize();
}

}  // namespace forge::judge
