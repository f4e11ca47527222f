// Runs the gemm_library family's candidates (compiler/codegen/gemm_library.h) through cuBLASLt.
//
// libcublasLt is linked, not loaded with dlopen: it needs no CUDA driver to load (it finds
// libcuda itself at run time), so binaries that link it still start on machines without a GPU.
// cuBLASLt works in whatever context is current, here the device's primary context that
// gpu::Device::Open made current; a CUstream is the cudaStream_t it takes.
#ifndef FORGE_WORKER_LIBRARY_CUBLASLT_GEMM_H_
#define FORGE_WORKER_LIBRARY_CUBLASLT_GEMM_H_

#include <cublasLt.h>

#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "compiler/codegen/gemm_library/gemm_library.h"
#include "runtime/extension/cublaslt_matmul.h"
#include "worker/gpu/device.h"
#include "worker/judge/judge.h"

namespace forge::library {

// Device addresses of one call's matrices; bias is 0 when the call has none.
struct GemmOperands {
  CUdeviceptr a = 0;
  CUdeviceptr b = 0;
  CUdeviceptr bias = 0;
  CUdeviceptr d = 0;
};

// A cuBLASLt handle for one device, the matmul plans (descriptors and heuristic list, made by
// runtime/extension/cublaslt_matmul.h as generated extensions make them) cached per call shape,
// dtype, epilogue and operand alignment, and a workspace per stream.
class CublasLtGemm {
 public:
  // Workspace offered to cuBLASLt per stream.
  static constexpr uint64_t kWorkspaceBytes = forge_cublaslt::kWorkspaceBytes;

  // Unavailable when there is no usable GPU (gpu::DriverStatus); Internal when cuBLASLt fails.
  static absl::StatusOr<std::unique_ptr<CublasLtGemm>> Create(const gpu::Device& device);
  ~CublasLtGemm();
  CublasLtGemm(const CublasLtGemm&) = delete;
  CublasLtGemm& operator=(const CublasLtGemm&) = delete;

  // How many algorithms cuBLASLt's heuristic offers for `call` (at most
  // GemmLibraryFamily::kHeuristicAlgorithms) with operands aligned like fresh allocations.
  absl::StatusOr<int> AlgorithmCount(const codegen::LibraryGemmCall& call);

  // The algorithm that call.algo selects from that list, described by its configuration
  // (forge_cublaslt::DescribeAlgorithm: what forge.v1.Measurement.library_algorithm records).
  // OutOfRange when call.algo is past the list.
  absl::StatusOr<std::string> AlgorithmDescription(const codegen::LibraryGemmCall& call);

  // Enqueues `call` on `stream`. OutOfRange when call.algo is past the heuristic list (the
  // candidate is unsupported on this GPU); Internal naming the cuBLASLt status otherwise.
  absl::Status Run(const codegen::LibraryGemmCall& call, const GemmOperands& operands,
                   CUstream stream);

 private:
  CublasLtGemm(const gpu::Device& device, cublasLtHandle_t handle);
  absl::StatusOr<forge_cublaslt::MatmulPlan*> PlanFor(const codegen::LibraryGemmCall& call,
                                                      const GemmOperands& operands)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  // The plan for operands aligned like fresh allocations (as the judge's buffers are).
  absl::StatusOr<forge_cublaslt::MatmulPlan*> PlanForFreshOperands(
      const codegen::LibraryGemmCall& call) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  // OutOfRange when call.algo is not an index into plan's heuristic list.
  static absl::Status CheckAlgo(const codegen::LibraryGemmCall& call,
                                const forge_cublaslt::MatmulPlan& plan);
  absl::StatusOr<const gpu::DeviceBuffer*> WorkspaceFor(CUstream stream)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);

  const gpu::Device& device_;
  cublasLtHandle_t handle_;
  absl::Mutex mutex_;
  // By the call's description without algo and input positions, plus the operands' alignments.
  std::map<std::string, std::unique_ptr<forge_cublaslt::MatmulPlan>> plans_
      ABSL_GUARDED_BY(mutex_);
  std::map<CUstream, gpu::DeviceBuffer> workspaces_ ABSL_GUARDED_BY(mutex_);
};

// The judge's launch of a gemm_library candidate: the cuBLASLt call and, when the candidate has
// one, its pointwise epilogue kernel, loaded from `epilogue_cubin` (the compiled
// candidate.epilogue; ignored without one), with the scratch buffer between them owned by the
// returned function. `gemm` must outlive it.
absl::StatusOr<judge::CandidateLaunch> LoadGemmLibraryCandidate(
    const gpu::Device& device, CublasLtGemm& gemm, const codegen::GemmLibraryCandidate& candidate,
    absl::string_view epilogue_cubin);

}  // namespace forge::library

#endif  // FORGE_WORKER_LIBRARY_CUBLASLT_GEMM_H_
