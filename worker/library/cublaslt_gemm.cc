#include "worker/library/cublaslt_gemm.h"

#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status/status_macros.h"

namespace forge::library {

using codegen::LibraryEpilogue;
using codegen::LibraryGemmCall;
using codegen::LibraryMatrix;

static_assert(codegen::GemmLibraryFamily::kHeuristicAlgorithms ==
                  forge_cublaslt::kHeuristicAlgorithms,
              "the search's algo values must index the heuristic list the worker asks for");

namespace {

// `status` as an absl::Status naming what the failed cuBLASLt call was `for_what`.
absl::Status LtStatus(const forge_cublaslt::Status& status, absl::string_view for_what) {
  if (status.ok()) return absl::OkStatus();
  return absl::InternalError(absl::StrCat(status.message(), " for ", for_what));
}

cudaDataType_t CudaType(forge::v1::DType dtype) {
  switch (dtype) {
    case forge::v1::DTYPE_BFLOAT16: return CUDA_R_16BF;
    case forge::v1::DTYPE_FLOAT16: return CUDA_R_16F;
    default: return CUDA_R_32F;
  }
}

forge_cublaslt::Epilogue MatmulEpilogue(LibraryEpilogue epilogue) {
  switch (epilogue) {
    case LibraryEpilogue::kNone: return forge_cublaslt::Epilogue::kNone;
    case LibraryEpilogue::kBias: return forge_cublaslt::Epilogue::kBias;
    case LibraryEpilogue::kRelu: return forge_cublaslt::Epilogue::kRelu;
    case LibraryEpilogue::kReluBias: return forge_cublaslt::Epilogue::kReluBias;
    case LibraryEpilogue::kGelu: return forge_cublaslt::Epilogue::kGelu;
    case LibraryEpilogue::kGeluBias: return forge_cublaslt::Epilogue::kGeluBias;
  }
  return forge_cublaslt::Epilogue::kNone;
}

forge_cublaslt::Matrix MatmulMatrix(const LibraryMatrix& matrix) {
  return {matrix.transposed, matrix.leading_dim, matrix.batch_stride};
}

forge_cublaslt::Matmul MatmulOf(const LibraryGemmCall& call) {
  return {CudaType(call.dtype), call.batch, call.m, call.n, call.k, MatmulMatrix(call.a),
          MatmulMatrix(call.b), MatmulEpilogue(call.epilogue)};
}

forge_cublaslt::Operands MatmulOperands(const GemmOperands& operands) {
  return {reinterpret_cast<const void*>(operands.a), reinterpret_cast<const void*>(operands.b),
          reinterpret_cast<const void*>(operands.bias), reinterpret_cast<void*>(operands.d)};
}

int64_t ElementBytes(forge::v1::DType dtype) { return dtype == forge::v1::DTYPE_FLOAT32 ? 4 : 2; }

}  // namespace

absl::StatusOr<std::unique_ptr<CublasLtGemm>> CublasLtGemm::Create(const gpu::Device& device) {
  FORGE_RETURN_IF_ERROR(gpu::DriverStatus());
  FORGE_RETURN_IF_ERROR(device.MakeCurrent());
  cublasLtHandle_t handle = nullptr;
  FORGE_RETURN_IF_ERROR(LtStatus({cublasLtCreate(&handle), "cublasLtCreate"}, "a handle"));
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

absl::StatusOr<forge_cublaslt::MatmulPlan*> CublasLtGemm::PlanFor(const LibraryGemmCall& call,
                                                                  const GemmOperands& operands) {
  LibraryGemmCall shape = call;
  shape.algo = 0;
  shape.a.input = shape.b.input = 0;
  shape.bias_input = call.bias_input >= 0 ? 0 : -1;
  const forge_cublaslt::Operands matmul_operands = MatmulOperands(operands);
  const std::string key = absl::StrCat(codegen::DescribeCall(shape), " aligned ",
                                       forge_cublaslt::Alignment(matmul_operands.a), " ",
                                       forge_cublaslt::Alignment(matmul_operands.b), " ",
                                       forge_cublaslt::Alignment(matmul_operands.bias), " ",
                                       forge_cublaslt::Alignment(matmul_operands.d));
  if (auto it = plans_.find(key); it != plans_.end()) return it->second.get();
  std::unique_ptr<forge_cublaslt::MatmulPlan> plan;
  FORGE_RETURN_IF_ERROR(
      LtStatus(forge_cublaslt::MatmulPlan::Create(handle_, MatmulOf(call), matmul_operands, &plan),
               codegen::DescribeCall(shape)));
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

absl::StatusOr<forge_cublaslt::MatmulPlan*> CublasLtGemm::PlanForFreshOperands(
    const LibraryGemmCall& call) {
  const GemmOperands aligned{256, 256, call.bias_input >= 0 ? 256u : 0u, 256};
  return PlanFor(call, aligned);
}

absl::Status CublasLtGemm::CheckAlgo(const LibraryGemmCall& call,
                                     const forge_cublaslt::MatmulPlan& plan) {
  if (call.algo >= 0 && call.algo < plan.algorithm_count()) return absl::OkStatus();
  return absl::OutOfRangeError(absl::StrCat("cuBLASLt offers ", plan.algorithm_count(),
                                            " algorithms for ", codegen::DescribeCall(call),
                                            "; algo ", call.algo, " is past them"));
}

absl::StatusOr<int> CublasLtGemm::AlgorithmCount(const LibraryGemmCall& call) {
  absl::MutexLock lock(&mutex_);
  FORGE_ASSIGN_OR_RETURN(const forge_cublaslt::MatmulPlan* plan, PlanForFreshOperands(call));
  return plan->algorithm_count();
}

absl::StatusOr<std::string> CublasLtGemm::AlgorithmDescription(const LibraryGemmCall& call) {
  absl::MutexLock lock(&mutex_);
  FORGE_ASSIGN_OR_RETURN(const forge_cublaslt::MatmulPlan* plan, PlanForFreshOperands(call));
  FORGE_RETURN_IF_ERROR(CheckAlgo(call, *plan));
  return plan->algorithm_description(call.algo);
}

absl::Status CublasLtGemm::Run(const LibraryGemmCall& call, const GemmOperands& operands,
                               CUstream stream) {
  absl::MutexLock lock(&mutex_);
  FORGE_ASSIGN_OR_RETURN(forge_cublaslt::MatmulPlan* plan, PlanFor(call, operands));
  FORGE_RETURN_IF_ERROR(CheckAlgo(call, *plan));
  FORGE_ASSIGN_OR_RETURN(const gpu::DeviceBuffer* workspace, WorkspaceFor(stream));
  return LtStatus(plan->Run(MatmulOperands(operands), call.algo,
                            reinterpret_cast<void*>(workspace->address()), stream),
                  codegen::DescribeCall(call));
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
