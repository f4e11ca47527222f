// What every generated Forge extension is built with (runtime/README.md): checks that a buffer has
// the layout its kernel was generated for, kernel launch errors as C++ exceptions, and the cuBLASLt
// steps of a plan run through ATen's batched matrix products.
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
#include <vector>

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
enum class Epilogue { kNone, kBias, kRelu, kReluBias, kGelu, kGeluBias };

// codegen::LibraryMatrix: element (i, j) of batch b sits at b * batch_stride + i * leading_dim + j,
// or at b * batch_stride + j * leading_dim + i when transposed.
struct Operand {
  int input;
  bool transposed;
  int64_t leading_dim;
  int64_t batch_stride;
};

// codegen::LibraryGemmCall: D (batch x m x n, row-major) = A (m x k) B (k x n), then the epilogue
// (bias[n] over rows, then the activation; GELU is the tanh form, as cuBLASLt's).
struct LibraryGemm {
  at::ScalarType dtype;
  int64_t batch, m, n, k;
  Operand a, b;
  Epilogue epilogue;
  int bias_input;  // -1: none
};

inline at::Tensor OperandView(const at::Tensor& input, const Operand& operand, int64_t batch,
                              int64_t rows, int64_t columns) {
  const std::vector<int64_t> strides =
      operand.transposed ? std::vector<int64_t>{operand.batch_stride, 1, operand.leading_dim}
                         : std::vector<int64_t>{operand.batch_stride, operand.leading_dim, 1};
  return input.as_strided({batch, rows, columns}, strides, input.storage_offset());
}

// Computes the call into `destination` (batch * m * n contiguous elements of the call's dtype)
// with ATen's bmm / baddbmm, which run cuBLAS: the heuristic's algorithm choice (`algo`) is
// cuBLAS's own here, and the activation is applied after the rounding to the output dtype rather
// than inside the epilogue.
inline void RunLibraryGemm(const LibraryGemm& gemm, const std::vector<at::Tensor>& inputs,
                           const at::Tensor& destination, const char* op) {
  TORCH_CHECK(destination.is_contiguous() && destination.numel() == gemm.batch * gemm.m * gemm.n &&
                  destination.scalar_type() == gemm.dtype,
              op, ": the product's destination must be ", gemm.batch * gemm.m * gemm.n,
              " contiguous elements of ", gemm.dtype);
  const at::Tensor a = OperandView(inputs.at(gemm.a.input), gemm.a, gemm.batch, gemm.m, gemm.k);
  const at::Tensor b = OperandView(inputs.at(gemm.b.input), gemm.b, gemm.batch, gemm.k, gemm.n);
  at::Tensor d = destination.view({gemm.batch, gemm.m, gemm.n});
  const bool bias = gemm.epilogue == Epilogue::kBias || gemm.epilogue == Epilogue::kReluBias ||
                    gemm.epilogue == Epilogue::kGeluBias;
  if (bias) {
    at::baddbmm_out(d, inputs.at(gemm.bias_input).view({1, 1, gemm.n}), a, b);
  } else {
    at::bmm_out(d, a, b);
  }
  if (gemm.epilogue == Epilogue::kRelu || gemm.epilogue == Epilogue::kReluBias) at::relu_(d);
  if (gemm.epilogue == Epilogue::kGelu || gemm.epilogue == Epilogue::kGeluBias) {
    at::gelu_(d, "tanh");
  }
}

}  // namespace forge_runtime
