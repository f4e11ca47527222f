#include "worker/library/cublaslt_gemm.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status/status_macros.h"

namespace forge::library {

using codegen::LibraryEpilogue;
using codegen::LibraryGemmCall;
using codegen::LibraryMatrix;

namespace {

absl::Status LtStatus(cublasStatus_t status, absl::string_view call) {
  if (status == CUBLAS_STATUS_SUCCESS) return absl::OkStatus();
  return absl::InternalError(absl::StrCat(call, ": ", cublasLtGetStatusName(status), " (",
                                          cublasLtGetStatusString(status), ")"));
}

#define FORGE_LT_RETURN_IF_ERROR(expr) FORGE_RETURN_IF_ERROR(LtStatus((expr), #expr))

cudaDataType_t CudaType(forge::v1::DType dtype) {
  switch (dtype) {
    case forge::v1::DTYPE_BFLOAT16: return CUDA_R_16BF;
    case forge::v1::DTYPE_FLOAT16: return CUDA_R_16F;
    default: return CUDA_R_32F;
  }
}

cublasLtEpilogue_t LtEpilogue(LibraryEpilogue epilogue) {
  switch (epilogue) {
    case LibraryEpilogue::kNone: return CUBLASLT_EPILOGUE_DEFAULT;
    case LibraryEpilogue::kBias: return CUBLASLT_EPILOGUE_BIAS;
    case LibraryEpilogue::kRelu: return CUBLASLT_EPILOGUE_RELU;
    case LibraryEpilogue::kReluBias: return CUBLASLT_EPILOGUE_RELU_BIAS;
    case LibraryEpilogue::kGelu: return CUBLASLT_EPILOGUE_GELU;
    case LibraryEpilogue::kGeluBias: return CUBLASLT_EPILOGUE_GELU_BIAS;
  }
  return CUBLASLT_EPILOGUE_DEFAULT;
}

// The largest power of two up to 256 that divides `address` (256 for 0: an absent operand).
int Alignment(CUdeviceptr address) {
  if (address == 0) return 256;
  return static_cast<int>(std::min<CUdeviceptr>(256, address & (~address + 1)));
}

int64_t ElementBytes(forge::v1::DType dtype) { return dtype == forge::v1::DTYPE_FLOAT32 ? 4 : 2; }

}  // namespace

// Descriptors of one matmul, created once. cuBLASLt is column-major: the row-major
// D (m x n) = A (m x k) B (k x n) is computed as the column-major D^T (n x m) = B^T A^T, so
// cuBLASLt's first operand is our B and its second our A; bias[n] runs along D^T's rows.
struct CublasLtGemm::Plan {
  cublasLtMatmulDesc_t operation = nullptr;
  cublasLtMatrixLayout_t first = nullptr;   // our B
  cublasLtMatrixLayout_t second = nullptr;  // our A
  cublasLtMatrixLayout_t output = nullptr;  // D, also C (beta = 0)
  std::vector<cublasLtMatmulHeuristicResult_t> algorithms;

  ~Plan() {
    if (operation != nullptr) cublasLtMatmulDescDestroy(operation);
    for (cublasLtMatrixLayout_t layout : {first, second, output}) {
      if (layout != nullptr) cublasLtMatrixLayoutDestroy(layout);
    }
  }
};

namespace {

// The layout of `matrix` (rows x cols as the product uses it) in cuBLASLt's column-major terms:
// a row-major rows x cols matrix is a column-major cols x rows one.
absl::Status CreateLayout(const LibraryMatrix& matrix, int64_t rows, int64_t cols,
                          const LibraryGemmCall& call, cublasLtMatrixLayout_t* layout) {
  const uint64_t stored_rows = matrix.transposed ? rows : cols;
  const uint64_t stored_cols = matrix.transposed ? cols : rows;
  FORGE_LT_RETURN_IF_ERROR(cublasLtMatrixLayoutCreate(layout, CudaType(call.dtype), stored_rows,
                                                      stored_cols, matrix.leading_dim));
  if (call.batch > 1) {
    const int32_t count = static_cast<int32_t>(call.batch);
    FORGE_LT_RETURN_IF_ERROR(cublasLtMatrixLayoutSetAttribute(
        *layout, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count, sizeof(count)));
    FORGE_LT_RETURN_IF_ERROR(cublasLtMatrixLayoutSetAttribute(
        *layout, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &matrix.batch_stride,
        sizeof(matrix.batch_stride)));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<CublasLtGemm>> CublasLtGemm::Create(const gpu::Device& device) {
  FORGE_RETURN_IF_ERROR(gpu::DriverStatus());
  FORGE_RETURN_IF_ERROR(device.MakeCurrent());
  cublasLtHandle_t handle = nullptr;
  FORGE_LT_RETURN_IF_ERROR(cublasLtCreate(&handle));
  return std::unique_ptr<CublasLtGemm>(new CublasLtGemm(device, handle));
}

CublasLtGemm::CublasLtGemm(const gpu::Device& device, cublasLtHandle_t handle)
    : device_(device), handle_(handle) {}

CublasLtGemm::~CublasLtGemm() {
  {
    absl::MutexLock lock(&mutex_);
    plans_.clear();
  }
  cublasLtDestroy(handle_);
}

absl::StatusOr<const CublasLtGemm::Plan*> CublasLtGemm::PlanFor(const LibraryGemmCall& call,
                                                                const GemmOperands& operands) {
  LibraryGemmCall shape = call;
  shape.algo = 0;
  shape.a.input = shape.b.input = 0;
  shape.bias_input = call.bias_input >= 0 ? 0 : -1;
  const std::string key =
      absl::StrCat(codegen::DescribeCall(shape), " aligned ", Alignment(operands.a), " ",
                   Alignment(operands.b), " ", Alignment(operands.bias), " ", Alignment(operands.d));
  if (auto it = plans_.find(key); it != plans_.end()) return it->second.get();

  auto plan = std::make_unique<Plan>();
  // float32 stays float32: CUBLAS_COMPUTE_32F, never the TF32 fast path.
  FORGE_LT_RETURN_IF_ERROR(cublasLtMatmulDescCreate(&plan->operation, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  const cublasOperation_t first_op = call.b.transposed ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t second_op = call.a.transposed ? CUBLAS_OP_T : CUBLAS_OP_N;
  FORGE_LT_RETURN_IF_ERROR(cublasLtMatmulDescSetAttribute(
      plan->operation, CUBLASLT_MATMUL_DESC_TRANSA, &first_op, sizeof(first_op)));
  FORGE_LT_RETURN_IF_ERROR(cublasLtMatmulDescSetAttribute(
      plan->operation, CUBLASLT_MATMUL_DESC_TRANSB, &second_op, sizeof(second_op)));
  const cublasLtEpilogue_t epilogue = LtEpilogue(call.epilogue);
  FORGE_LT_RETURN_IF_ERROR(cublasLtMatmulDescSetAttribute(
      plan->operation, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue, sizeof(epilogue)));
  if (call.bias_input >= 0) {
    const cudaDataType_t bias_type = CudaType(call.dtype);
    FORGE_LT_RETURN_IF_ERROR(cublasLtMatmulDescSetAttribute(
        plan->operation, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bias_type, sizeof(bias_type)));
    const void* bias = reinterpret_cast<const void*>(operands.bias);
    FORGE_LT_RETURN_IF_ERROR(cublasLtMatmulDescSetAttribute(
        plan->operation, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof(bias)));
  }
  FORGE_RETURN_IF_ERROR(CreateLayout(call.b, call.k, call.n, call, &plan->first));
  FORGE_RETURN_IF_ERROR(CreateLayout(call.a, call.m, call.k, call, &plan->second));
  const LibraryMatrix output{-1, false, call.n, call.m * call.n};
  FORGE_RETURN_IF_ERROR(CreateLayout(output, call.m, call.n, call, &plan->output));

  cublasLtMatmulPreference_t preference = nullptr;
  FORGE_LT_RETURN_IF_ERROR(cublasLtMatmulPreferenceCreate(&preference));
  const uint64_t workspace = kWorkspaceBytes;
  cublasStatus_t status = cublasLtMatmulPreferenceSetAttribute(
      preference, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace, sizeof(workspace));
  const std::pair<cublasLtMatmulPreferenceAttributes_t, CUdeviceptr> alignments[] = {
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, operands.b},
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, operands.a},
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, operands.d},
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, operands.d}};
  for (const auto& [attribute, address] : alignments) {
    const uint32_t bytes = Alignment(address);
    if (status == CUBLAS_STATUS_SUCCESS) {
      status = cublasLtMatmulPreferenceSetAttribute(preference, attribute, &bytes, sizeof(bytes));
    }
  }
  std::vector<cublasLtMatmulHeuristicResult_t> results(
      codegen::GemmLibraryFamily::kHeuristicAlgorithms);
  int returned = 0;
  if (status == CUBLAS_STATUS_SUCCESS) {
    status = cublasLtMatmulAlgoGetHeuristic(handle_, plan->operation, plan->first, plan->second,
                                            plan->output, plan->output, preference,
                                            static_cast<int>(results.size()), results.data(),
                                            &returned);
  }
  cublasLtMatmulPreferenceDestroy(preference);
  FORGE_RETURN_IF_ERROR(LtStatus(
      status, absl::StrCat("cublasLtMatmulAlgoGetHeuristic(", codegen::DescribeCall(shape), ")")));
  for (int i = 0; i < returned; ++i) {
    if (results[i].state == CUBLAS_STATUS_SUCCESS) plan->algorithms.push_back(results[i]);
  }
  return (plans_[key] = std::move(plan)).get();
}

absl::StatusOr<const gpu::DeviceBuffer*> CublasLtGemm::WorkspaceFor(CUstream stream) {
  auto it = workspaces_.find(stream);
  if (it == workspaces_.end()) {
    FORGE_ASSIGN_OR_RETURN(gpu::DeviceBuffer buffer, device_.Allocate(kWorkspaceBytes));
    it = workspaces_.emplace(stream, std::move(buffer)).first;
  }
  return &it->second;
}

absl::StatusOr<int> CublasLtGemm::AlgorithmCount(const LibraryGemmCall& call) {
  absl::MutexLock lock(&mutex_);
  const GemmOperands aligned{256, 256, call.bias_input >= 0 ? 256u : 0u, 256};
  FORGE_ASSIGN_OR_RETURN(const Plan* plan, PlanFor(call, aligned));
  return static_cast<int>(plan->algorithms.size());
}

absl::Status CublasLtGemm::Run(const LibraryGemmCall& call, const GemmOperands& operands,
                               CUstream stream) {
  absl::MutexLock lock(&mutex_);
  FORGE_ASSIGN_OR_RETURN(const Plan* plan, PlanFor(call, operands));
  if (call.algo < 0 || call.algo >= static_cast<int>(plan->algorithms.size())) {
    return absl::OutOfRangeError(absl::StrCat("cuBLASLt offers ", plan->algorithms.size(),
                                              " algorithms for ", codegen::DescribeCall(call),
                                              "; algo ", call.algo, " is past them"));
  }
  if (call.bias_input >= 0) {
    const void* bias = reinterpret_cast<const void*>(operands.bias);
    FORGE_LT_RETURN_IF_ERROR(cublasLtMatmulDescSetAttribute(
        plan->operation, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof(bias)));
  }
  FORGE_ASSIGN_OR_RETURN(const gpu::DeviceBuffer* workspace, WorkspaceFor(stream));
  const float alpha = 1.0f;
  const float beta = 0.0f;
  void* d = reinterpret_cast<void*>(operands.d);
  return LtStatus(
      cublasLtMatmul(handle_, plan->operation, &alpha, reinterpret_cast<const void*>(operands.b),
                     plan->first, reinterpret_cast<const void*>(operands.a), plan->second, &beta,
                     d, plan->output, d, plan->output, &plan->algorithms[call.algo].algo,
                     reinterpret_cast<void*>(workspace->address()), workspace->size_bytes(),
                     stream),
      absl::StrCat("cublasLtMatmul(", codegen::DescribeCall(call), ")"));
}

absl::StatusOr<judge::CandidateLaunch> LoadGemmLibraryCandidate(
    const gpu::Device& device, CublasLtGemm& gemm, const codegen::GemmLibraryCandidate& candidate,
    absl::string_view epilogue_cubin) {
  const LibraryGemmCall call = candidate.gemm;
  auto operands = [call](absl::Span<const CUdeviceptr> args, CUdeviceptr d) {
    return GemmOperands{args[call.a.input], args[call.b.input],
                        call.bias_input >= 0 ? args[call.bias_input] : 0, d};
  };
  if (!candidate.epilogue) {
    // Kernel arguments: the task inputs, then its one output.
    return [&gemm, call, operands](gpu::Stream& stream, absl::Span<const CUdeviceptr> args) {
      return gemm.Run(call, operands(args, args.back()), stream.handle());
    };
  }
  FORGE_ASSIGN_OR_RETURN(judge::CandidateLaunch epilogue,
                         judge::LoadGeneratedKernel(device, epilogue_cubin, *candidate.epilogue));
  FORGE_ASSIGN_OR_RETURN(
      gpu::DeviceBuffer scratch,
      device.Allocate(static_cast<size_t>(call.output_elements() * ElementBytes(call.dtype))));
  auto shared_scratch = std::make_shared<gpu::DeviceBuffer>(std::move(scratch));
  const std::vector<int> epilogue_inputs = candidate.epilogue_task_inputs;
  const size_t task_inputs = static_cast<size_t>(candidate.task_inputs);
  return [&gemm, call, operands, epilogue, shared_scratch, epilogue_inputs, task_inputs](
             gpu::Stream& stream, absl::Span<const CUdeviceptr> args) -> absl::Status {
    FORGE_RETURN_IF_ERROR(
        gemm.Run(call, operands(args, shared_scratch->address()), stream.handle()));
    std::vector<CUdeviceptr> epilogue_args = {shared_scratch->address()};
    for (int input : epilogue_inputs) epilogue_args.push_back(args[input]);
    epilogue_args.insert(epilogue_args.end(), args.begin() + task_inputs, args.end());
    return epilogue(stream, epilogue_args);
  };
}

}  // namespace forge::library
