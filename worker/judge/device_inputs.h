// The judge's inputs drawn on the GPU: the first candidate of a large task draws its inputs where
// they are used instead of on the host (seconds per gigabyte there, then an upload), and nothing
// of them crosses the bus.
//
// Contract: Draw(spec, rule) leaves in the buffer exactly the bytes DrawTensor(spec, rule) (the
// host's draw, inputs.h) holds: the kernel evaluates draw_element.h's DrawElement, the same source
// the host compiles, built without FMA contraction, per logical element at its storage offset.
// The draw cache's host entries and these device draws therefore agree, and a draw made on one
// side can be remade on the other (to word a failure, or when one side has no room).
#ifndef FORGE_WORKER_JUDGE_DEVICE_INPUTS_H_
#define FORGE_WORKER_JUDGE_DEVICE_INPUTS_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "forge/v1/graph.pb.h"
#include "worker/gpu/device.h"
#include "worker/judge/draw_element.h"

namespace forge::judge {

// The NVRTC source of the draw kernel (draw_element.h, then draw_kernel.cuh) and its options:
// exposed for the test that compiles it for every supported architecture without a GPU.
const std::string& DeviceInputsSource();
std::vector<std::string> DeviceInputsOptions();

// Where `spec`'s logical elements lie in its storage; Unimplemented for a strided tensor of more
// than kMaxDrawRank dimensions (the host draws those).
absl::StatusOr<DrawLayout> DrawLayoutOf(const forge::v1::TensorSpec& spec);

class DeviceInputs {
 public:
  // Compiles the draw kernel for `device` with NVRTC and loads it.
  static absl::StatusOr<std::unique_ptr<DeviceInputs>> Create(const gpu::Device& device);

  // Fills `buffer` (StorageBytes(spec) bytes at least) with the draw `rule` of `spec`, ordered on
  // `stream`; storage between strided elements is zero. InvalidArgument when the rule's element
  // size is not the spec's or the buffer is too small; Unimplemented as DrawLayoutOf.
  absl::Status Draw(const forge::v1::TensorSpec& spec, const DrawRule& rule,
                    gpu::DeviceBuffer& buffer, gpu::Stream& stream) const;

 private:
  DeviceInputs(gpu::Module module, gpu::Kernel kernel, int sm_count)
      : module_(std::move(module)), kernel_(std::move(kernel)), sm_count_(sm_count) {}

  gpu::Module module_;
  gpu::Kernel kernel_;
  int sm_count_;
};

}  // namespace forge::judge

#endif  // FORGE_WORKER_JUDGE_DEVICE_INPUTS_H_
