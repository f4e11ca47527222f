// The judge's passes over large tensors, on the GPU: an output compared with its float64
// reference, the byte equality of two buffers, and a fingerprint of a buffer. For a task with
// gigabyte tensors the host passes cost seconds per candidate (every output and input copied back
// over PCIe and walked on a few cores); these cost milliseconds. They decide nothing alone: the
// comparison's chunk tallies are the host's, bit for bit (compare_chunk.h is compiled into both),
// and whatever they find wrong the judge examines again on the host, which words the verdict.
#ifndef FORGE_WORKER_JUDGE_DEVICE_COMPARE_H_
#define FORGE_WORKER_JUDGE_DEVICE_COMPARE_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "forge/v1/graph.pb.h"
#include "worker/gpu/device.h"
#include "worker/judge/compare.h"

namespace forge::judge {

// The CUDA source of the comparison kernels: compare_chunk.h followed by the kernels (exposed for
// the test that compiles it for every supported architecture without a GPU).
const std::string& DeviceCompareSource();
// The NVRTC options the kernels must be built with: no FMA contraction, so that the device's
// arithmetic is the host's.
std::vector<std::string> DeviceCompareOptions();

// Compiles `source` with NVRTC for `device` under `options` and loads it: the judge's own kernels
// (the comparison here, the draws in device_inputs.h). Errors say `what` was compiled, with
// NVRTC's log.
absl::StatusOr<gpu::Module> CompileJudgeModule(const gpu::Device& device,
                                               const std::string& source,
                                               std::vector<std::string> options,
                                               const std::string& what);

class DeviceComparer {
 public:
  // Compiles the kernels for `device` with NVRTC and loads them.
  static absl::StatusOr<std::unique_ptr<DeviceComparer>> Create(const gpu::Device& device);

  // Whether outputs of `spec` are compared here: row-major storage (IsRowMajor: the element at
  // logical index i is stored at i) of any dtype the judge handles but complex64.
  static bool Handles(const forge::v1::TensorSpec& spec);

  // The tallies CompareOutput computes on the host, one per ThreadPool::kChunkElements elements:
  // `output` (stored as `spec`, which Handles) against `reference` (one double per element) and,
  // when not null, eager's `native` values. `poison` is what the output was filled with before
  // the launch (ChoosePoison); unset: PoisonFor. Synchronizes `stream`.
  absl::StatusOr<std::vector<ChunkTally>> CompareChunks(
      const forge::v1::TensorSpec& spec, const gpu::DeviceBuffer& output,
      const gpu::DeviceBuffer& reference, const gpu::DeviceBuffer* native,
      const Tolerances& tolerances, gpu::Stream& stream,
      std::optional<Poison> poison = std::nullopt);

  // Whether the first `bytes` bytes of `a` and `b` are equal. Synchronizes `stream`.
  absl::StatusOr<bool> Equal(const gpu::DeviceBuffer& a, const gpu::DeviceBuffer& b,
                             size_t bytes, gpu::Stream& stream);

  // A 64-bit hash of the buffer's bytes, the same for equal contents. Synchronizes `stream`.
  absl::StatusOr<uint64_t> Fingerprint(const gpu::DeviceBuffer& buffer, gpu::Stream& stream);

 private:
  DeviceComparer(const gpu::Device& device, gpu::Module module, gpu::Kernel compare,
                 gpu::Kernel differ, gpu::Kernel fingerprint)
      : device_(device),
        module_(std::move(module)),
        compare_(std::move(compare)),
        differ_(std::move(differ)),
        fingerprint_(std::move(fingerprint)) {}

  // The host's decode table of a 1- or 2-byte dtype, uploaded on first use.
  absl::StatusOr<CUdeviceptr> DecodeTable(forge::v1::DType dtype);
  // A one-word result buffer set to zero, the kernel run by `launch`, the word read back.
  template <typename Launch>
  absl::StatusOr<uint64_t> RunForWord(gpu::Stream& stream, const Launch& launch);

  const gpu::Device& device_;
  gpu::Module module_;
  gpu::Kernel compare_;
  gpu::Kernel differ_;
  gpu::Kernel fingerprint_;
  absl::Mutex mutex_;
  absl::flat_hash_map<int, gpu::DeviceBuffer> decode_tables_ ABSL_GUARDED_BY(mutex_);
};

}  // namespace forge::judge

#endif  // FORGE_WORKER_JUDGE_DEVICE_COMPARE_H_
