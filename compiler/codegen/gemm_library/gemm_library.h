// The GEMM library family: a GEMM task (linear / addmm / mm / bmm / matmul on float32, bfloat16 or
// float16, with the pointwise epilogue the partitioner fused) run through cuBLASLt instead of a
// generated matrix kernel.
//
// Templates (both have one parameter, `algo`: an index into cuBLASLt's heuristic list for the
// call, 0 = its first choice; the list is only known on the GPU, so an index past its end fails
// there as unsupported):
//  - "cublaslt": one cuBLASLt matmul whose native epilogue is the task's whole epilogue: none,
//    BIAS, RELU, RELU_BIAS, GELU, GELU_BIAS. cuBLASLt's GELU is the tanh approximation, so only
//    aten::gelu with approximate="tanh" maps to it (ATen's default is the erf form).
//  - "cublaslt_then_pointwise": the cuBLASLt matmul (with the BIAS epilogue when the task has a
//    bias) into a scratch buffer, then the rest of the epilogue (residual add, scale, silu * mul,
//    erf gelu, casts, views, several outputs...) as a kernel of the pointwise family, generated
//    at that family's default point. Offered when an epilogue remains after the native part.
//
// Generation stays pure and deterministic: DescribeGemmLibrary turns (task, point) into a
// GemmLibraryCandidate (data only); the worker (worker/library) turns that into cuBLASLt calls.
// The family's GeneratedKernel carries the call's canonical description as a comment at the top
// of `source`, followed by the pointwise epilogue's source when there is one; its kernel_name and
// launch are the epilogue kernel's (empty for "cublaslt": nothing to compile).
//
// float32 computes in CUBLAS_COMPUTE_32F, never TF32: the judge holds float32 to 1e-4.
#ifndef FORGE_COMPILER_CODEGEN_GEMM_LIBRARY_GEMM_LIBRARY_H_
#define FORGE_COMPILER_CODEGEN_GEMM_LIBRARY_GEMM_LIBRARY_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "compiler/codegen/family.h"
#include "compiler/codegen/gemm_analysis/gemm_analysis.h"

namespace forge::codegen {

// cuBLASLt's epilogues that Forge maps onto (GELU is the tanh approximation).
enum class LibraryEpilogue { kNone, kBias, kRelu, kReluBias, kGelu, kGeluBias };
// "NONE", "BIAS", "RELU", "RELU_BIAS", "GELU", "GELU_BIAS": cuBLASLt's names.
const char* LibraryEpilogueName(LibraryEpilogue epilogue);

// One matrix operand of the product (gemm_analysis.h).
using LibraryMatrix = GemmMatrix;

// One cuBLASLt matmul: for each of `batch` products, D (m x n, row-major, leading dimension n,
// batches m * n apart) = A (m x k) * B (k x n) (the shared analysis's GemmProduct), then the
// epilogue (bias[n] broadcast over rows, then the activation). A, B and D share `dtype`; the
// product accumulates in float32.
struct LibraryGemmCall : GemmProduct {
  LibraryEpilogue epilogue = LibraryEpilogue::kNone;
  int bias_input = -1;  // position among the task's inputs of the contiguous bias[n]; -1: none
  int algo = 0;         // index into cuBLASLt's heuristic list

  bool operator==(const LibraryGemmCall&) const = default;
};

// The canonical one-line description of `call` (what enters the candidate's source).
std::string DescribeCall(const LibraryGemmCall& call);

// A candidate of the family as the worker runs it.
//  - No epilogue kernel: the matmul writes task output 0 (the task's only output).
//  - With one: the matmul writes a scratch buffer of call.output_elements() elements of
//    call.dtype; then `epilogue` runs with arguments (scratch, the task inputs at
//    epilogue_task_inputs, in that order, then every task output).
// The kernel arguments it receives are the generated-kernel ABI's: task_inputs input addresses,
// then the outputs'.
struct GemmLibraryCandidate {
  int task_inputs = 0;
  LibraryGemmCall gemm;
  std::optional<GeneratedKernel> epilogue;
  std::vector<int> epilogue_task_inputs;
};

class GemmLibraryFamily : public KernelFamily {
 public:
  static constexpr char kCublasLtTemplate[] = "cublaslt";
  static constexpr char kCublasLtThenPointwiseTemplate[] = "cublaslt_then_pointwise";
  // Heuristic results the worker asks cuBLASLt for: the values of `algo` are 0 .. this - 1.
  static constexpr int kHeuristicAlgorithms = 8;

  forge::v1::KernelFamily kind() const override { return forge::v1::KERNEL_FAMILY_GEMM; }
  absl::string_view name() const override { return "gemm_library"; }
  // "gemm_library-N+<the pointwise family's version>": the epilogue kernels are the pointwise
  // family's, so a change there changes these candidates too.
  absl::string_view generator_version() const override;

  absl::Status Applies(const forge::v1::KernelTask& task) const override;
  absl::StatusOr<std::vector<TemplateSpace>> ScheduleSpace(
      const forge::v1::KernelTask& task) const override;
  absl::Status Validate(const forge::v1::KernelTask& task,
                        const SchedulePoint& point) const override;
  absl::StatusOr<LaunchPlan> Plan(const forge::v1::KernelTask& task,
                                  const SchedulePoint& point) const override;
  absl::StatusOr<std::string> Emit(const forge::v1::KernelTask& task,
                                   const LaunchPlan& plan) const override;
};

// The candidate for a valid point of the family; fails as GemmLibraryFamily::Validate does.
absl::StatusOr<GemmLibraryCandidate> DescribeGemmLibrary(const forge::v1::KernelTask& task,
                                                         const SchedulePoint& point);

}  // namespace forge::codegen

#endif  // FORGE_COMPILER_CODEGEN_GEMM_LIBRARY_GEMM_LIBRARY_H_
