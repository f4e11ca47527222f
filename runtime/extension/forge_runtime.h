// What every generated Forge extension is built with (runtime/README.md): checks that a buffer has
// the layout its kernel was generated for, kernel launch errors as C++ exceptions, and the cuBLASLt
// steps of a plan, replayed with the call and algorithm the worker measured (cublaslt_matmul.h).
//
// Generated kernels take shapes and strides as compile-time constants, so a tensor of any other
// dtype, shape or stride would be read or written wrongly without a word: every op checks its
// arguments before it launches.
#pragma once

#include <ATen/ATen.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "cublaslt_matmul.h"

namespace forge_runtime {

// The layout a task's input or output was generated for (forge.v1.TensorSpec).
struct Layout {
  at::ScalarType dtype;
  std::vector<int64_t> sizes;
  std::vector<int64_t> strides;
};

inline void CheckTensor(const at::Tensor& tensor, const Layout& layout, const char* op,
                        const char* what) {
  TORCH_CHECK(tensor.is_cuda(), op, ": ", what, " must be a CUDA tensor, got one on ",
              tensor.device());
  TORCH_CHECK(tensor.scalar_type() == layout.dtype, op, ": ", what, " must be ", layout.dtype,
              ", got ", tensor.scalar_type());
  TORCH_CHECK(tensor.sizes() == at::IntArrayRef(layout.sizes), op, ": ", what, " must have shape ",
              at::IntArrayRef(layout.sizes), ", got ", tensor.sizes());
  for (size_t d = 0; d < layout.sizes.size(); ++d) {
    // A dimension of size 1 is only ever indexed at 0: its stride does not matter.
    TORCH_CHECK(layout.sizes[d] == 1 || tensor.stride(static_cast<int64_t>(d)) == layout.strides[d],
                op, ": ", what, " must have strides ", at::IntArrayRef(layout.strides), ", got ",
                tensor.strides());
  }
}

inline void CheckLaunch(cudaError_t error, const char* op) {
  TORCH_CHECK(error == cudaSuccess, op, ": kernel launch failed: ", cudaGetErrorString(error));
}

// codegen::LibraryEpilogue.
using Epilogue = forge_cublaslt::Epilogue;

// codegen::LibraryMatrix: element (i, j) of batch b sits at b * batch_stride + i * leading_dim + j,
// or at b * batch_stride + j * leading_dim + i when transposed.
struct Operand {
  int input;
  bool transposed;
  int64_t leading_dim;
  int64_t batch_stride;
};

// codegen::LibraryGemmCall: D (batch x m x n, row-major) = A (m x k) B (k x n), then the epilogue
// (bias[n] over rows, then the activation; GELU is the tanh form, as cuBLASLt's), with the
// algorithm described as `algorithm` in cuBLASLt's heuristic list (at `algo` where the worker
// measured it), or, when the plan recorded no description, the one at `algo`.
struct LibraryGemm {
  at::ScalarType dtype;
  int64_t batch, m, n, k;
  Operand a, b;
  Epilogue epilogue;
  int bias_input;  // -1: none
  int algo;
  const char* algorithm;  // forge_cublaslt::DescribeAlgorithm's line; "": not recorded
  const char* steps;  // the plan steps that run it, for errors: "step(s) 3, 7 (task 0123abcd4567)"
};

// The cuBLASLt handles (one per device) and the plans made on them, by matmul, device and operand
// alignments: the heuristic is asked once per plan, so runs under CUDA graph capture and later
// eager runs do no host work beyond finding the recorded algorithm in the plan's list (one string
// comparison while its recorded index still lists it) and the launch.
class LibraryGemmPlans {
 public:
  // Runs `matmul`, which describes `gemm`, on the current device with the heuristic's result that
  // gemm records (ChooseAlgorithm).
  void Run(const LibraryGemm& gemm, const forge_cublaslt::Matmul& matmul,
           const forge_cublaslt::Operands& operands, const char* op) {
    const int device = c10::cuda::current_device();
    // cuBLASLt's workspace, from PyTorch's caching allocator (the graph's pool under capture).
    const at::Tensor workspace =
        at::empty({static_cast<int64_t>(forge_cublaslt::kWorkspaceBytes)},
                  at::TensorOptions().dtype(at::kByte).device(at::kCUDA, device));
    const std::vector<int64_t> key = {
        device, matmul.type, matmul.batch, matmul.m, matmul.n, matmul.k,
        matmul.a.transposed, matmul.a.leading_dim, matmul.a.batch_stride,
        matmul.b.transposed, matmul.b.leading_dim, matmul.b.batch_stride,
        static_cast<int64_t>(matmul.epilogue),
        forge_cublaslt::Alignment(operands.a), forge_cublaslt::Alignment(operands.b),
        forge_cublaslt::Alignment(operands.bias), forge_cublaslt::Alignment(operands.d)};
    // One lock for all: a run sets its plan's bias pointer before the launch reads it.
    const std::lock_guard<std::mutex> lock(mutex_);
    std::unique_ptr<forge_cublaslt::MatmulPlan>& plan = plans_[key];
    if (plan == nullptr) {
      const forge_cublaslt::Status made =
          forge_cublaslt::MatmulPlan::Create(HandleFor(device, op), matmul, operands, &plan);
      TORCH_CHECK(made.ok(), op, " (", gemm.steps, "): describing the cuBLASLt call failed: ",
                  made.message());
    }
    const forge_cublaslt::Status ran =
        plan->Run(operands, ChooseAlgorithm(gemm, *plan, op), workspace.data_ptr(),
                  at::cuda::getCurrentCUDAStream(device));
    TORCH_CHECK(ran.ok(), op, " (", gemm.steps, "): ", ran.message());
  }

 private:
  // The index in plan's heuristic list of the algorithm gemm records, or a clear error when this
  // cuBLASLt does not list it for the product (another index would run another algorithm).
  static int ChooseAlgorithm(const LibraryGemm& gemm, const forge_cublaslt::MatmulPlan& plan,
                             const char* op) {
    if (*gemm.algorithm == '\0') {  // a plan from before algorithms were recorded
      TORCH_CHECK(gemm.algo >= 0 && gemm.algo < plan.algorithm_count(), op, " (", gemm.steps,
                  "): the plan runs algorithm ", gemm.algo, " of cuBLASLt's heuristic list, but ",
                  "on this GPU cuBLASLt ", cublasLtGetVersion(), " offers ",
                  plan.algorithm_count(), " algorithm(s) for this product (the plan was ",
                  "searched on another GPU or cuBLASLt version); optimize the model on this GPU");
      return gemm.algo;
    }
    const int found = plan.FindAlgorithm(gemm.algorithm, gemm.algo);
    if (found < 0) {
      std::string offered;
      for (int i = 0; i < plan.algorithm_count(); ++i) {
        offered += "\n  " + std::to_string(i) + ": " + plan.algorithm_description(i);
      }
      TORCH_CHECK(false, op, " (", gemm.steps, "): the plan runs the cuBLASLt algorithm '",
                  gemm.algorithm, "' (heuristic result ", gemm.algo, " where it was measured), ",
                  "but on this GPU cuBLASLt ", cublasLtGetVersion(), "'s heuristic does not ",
                  "offer it for this product; it offers ", plan.algorithm_count(),
                  " algorithm(s)", offered.empty() ? "" : ":", offered, "\nThe plan was ",
                  "searched on another GPU or cuBLASLt version; optimize the model on this GPU");
    }
    return found;
  }

  cublasLtHandle_t HandleFor(int device, const char* op) {
    cublasLtHandle_t& handle = handles_[device];
    if (handle == nullptr) {
      const forge_cublaslt::Status created{cublasLtCreate(&handle), "cublasLtCreate"};
      TORCH_CHECK(created.ok(), op, ": ", created.message());
    }
    return handle;
  }

  std::mutex mutex_;
  std::map<int, cublasLtHandle_t> handles_;
  std::map<std::vector<int64_t>, std::unique_ptr<forge_cublaslt::MatmulPlan>> plans_;
};

// The extension's plans, left alive at exit (destroying handles after the CUDA runtime has shut
// down fails). Internal linkage on purpose: the static of an inline function would be one object
// for every extension in the process, whichever version of this header each was built with.
static LibraryGemmPlans& Plans() {
  static LibraryGemmPlans* plans = new LibraryGemmPlans;
  return *plans;
}

inline cudaDataType_t CudaType(at::ScalarType dtype) {
  switch (dtype) {
    case at::kFloat: return CUDA_R_32F;
    case at::kBFloat16: return CUDA_R_16BF;
    case at::kHalf: return CUDA_R_16F;
    default: TORCH_CHECK(false, "cuBLASLt steps run on float32, bfloat16 or float16, not ", dtype);
  }
}

// Computes the call into `destination` (batch * m * n contiguous elements of the call's dtype):
// the cuBLASLt matmul the worker judged and timed, with its epilogue and heuristic algorithm.
inline void RunLibraryGemm(const LibraryGemm& gemm, const std::vector<at::Tensor>& inputs,
                           const at::Tensor& destination, const char* op) {
  TORCH_CHECK(destination.is_contiguous() && destination.numel() == gemm.batch * gemm.m * gemm.n &&
                  destination.scalar_type() == gemm.dtype,
              op, ": the product's destination must be ", gemm.batch * gemm.m * gemm.n,
              " contiguous elements of ", gemm.dtype);
  const auto matrix = [](const Operand& operand) {
    return forge_cublaslt::Matrix{operand.transposed, operand.leading_dim, operand.batch_stride};
  };
  const forge_cublaslt::Matmul matmul{CudaType(gemm.dtype), gemm.batch, gemm.m, gemm.n, gemm.k,
                                      matrix(gemm.a), matrix(gemm.b), gemm.epilogue};
  const forge_cublaslt::Operands operands{
      inputs.at(gemm.a.input).data_ptr(), inputs.at(gemm.b.input).data_ptr(),
      forge_cublaslt::HasBias(gemm.epilogue) ? inputs.at(gemm.bias_input).data_ptr() : nullptr,
      destination.data_ptr()};
  Plans().Run(gemm, matmul, operands, op);
}

}  // namespace forge_runtime
