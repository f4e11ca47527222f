#include "worker/library/cudnn_conv.h"

#include <algorithm>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "common/status/status_macros.h"
#include "runtime/extension/cudnn_conv_graph.h"
#include "worker/compile/compile_pool.h"

namespace forge::library {

using codegen::ConvStep;
using codegen::CudnnConvCall;

static_assert(codegen::CudnnConvFamily::kHeuristicModes == forge_cudnn::kHeuristics,
              "the search's heuristic values must be the modes the worker asks cuDNN for");

namespace {

forge_cudnn::DataType GraphType(forge::v1::DType dtype) {
  switch (dtype) {
    case forge::v1::DTYPE_BFLOAT16: return forge_cudnn::DataType::kBFloat16;
    case forge::v1::DTYPE_FLOAT16: return forge_cudnn::DataType::kHalf;
    default: return forge_cudnn::DataType::kFloat;
  }
}

// One row per codegen::ConvStep: the graph's step.
struct StepRow {
  ConvStep codegen;
  forge_cudnn::Step graph;
};
constexpr StepRow kSteps[] = {
    {ConvStep::kBias, forge_cudnn::Step::kBias},
    {ConvStep::kResidual, forge_cudnn::Step::kResidual},
    {ConvStep::kScale, forge_cudnn::Step::kScale},
    {ConvStep::kRelu, forge_cudnn::Step::kRelu},
    {ConvStep::kGelu, forge_cudnn::Step::kGelu},
    {ConvStep::kGeluTanh, forge_cudnn::Step::kGeluTanh},
    {ConvStep::kSilu, forge_cudnn::Step::kSilu},
    {ConvStep::kSigmoid, forge_cudnn::Step::kSigmoid},
    {ConvStep::kTanh, forge_cudnn::Step::kTanh},
    {ConvStep::kBatchNorm, forge_cudnn::Step::kBatchNorm},
    {ConvStep::kClamp, forge_cudnn::Step::kClamp},
};
static_assert(codegen::kBatchNormFoldRows == forge_cudnn::kBatchNormRows,
              "the fold kernel writes the rows the graph reads");

forge_cudnn::Tensor GraphTensor(const codegen::ConvTensor& tensor) {
  return {tensor.dims, tensor.strides};
}

// The graph description of `call` (its engine choice aside).
forge_cudnn::Conv GraphOf(const CudnnConvCall& call) {
  forge_cudnn::Conv conv;
  conv.type = GraphType(call.dtype);
  conv.x = GraphTensor(call.x);
  conv.w = GraphTensor(call.w);
  conv.y = GraphTensor(call.y);
  conv.padding = call.padding;
  conv.stride = call.stride;
  conv.dilation = call.dilation;
  size_t residual = 0;
  for (const codegen::CudnnConvStep& step : call.epilogue) {
    forge_cudnn::EpilogueStep graph_step;
    for (const StepRow& row : kSteps) {
      if (row.codegen == step.step) graph_step.step = row.graph;
    }
    graph_step.scalar = static_cast<float>(step.scalar);
    graph_step.upper = static_cast<float>(step.upper);
    if (step.step == ConvStep::kBias) {
      // A contiguous per-channel vector: [1, K, 1...].
      graph_step.operand.dims.assign(call.y.dims.size(), 1);
      graph_step.operand.dims[1] = call.y.dims[1];
      graph_step.operand.strides.assign(call.y.dims.size(), 1);
      graph_step.operand.strides[0] = call.y.dims[1];
    } else if (step.step == ConvStep::kResidual) {
      graph_step.operand = GraphTensor(call.residuals[residual++]);
    }
    conv.epilogue.push_back(std::move(graph_step));
  }
  return conv;
}

// Bytes of the batch norm rows of `call` (kBatchNormFoldRows float32 rows of K per kBatchNorm
// step), kept in the workspace after cuDNN's part.
int64_t FoldBytes(const CudnnConvCall& call) {
  return static_cast<int64_t>(call.batch_norms.size()) * codegen::kBatchNormFoldRows *
         call.y.dims[1] * static_cast<int64_t>(sizeof(float));
}

// Where the batch norm rows start in the workspace: after cuDNN's part, 256-byte aligned.
int64_t FoldOffset(int64_t cudnn_bytes) { return (cudnn_bytes + 255) / 256 * 256; }

// Enqueues the fold of `norm` into `rows` (K = `channels`) on `stream`.
absl::Status LaunchFold(const gpu::Kernel& fold, const codegen::CudnnBatchNorm& norm,
                        absl::Span<const CUdeviceptr> args, int64_t channels, CUdeviceptr rows,
                        gpu::Stream& stream) {
  struct Operand {
    CUdeviceptr address = 0;
    int type = 0;
  };
  Operand operands[4];
  const codegen::ChannelOperand* sources[4] = {&norm.mean, &norm.var, &norm.weight, &norm.bias};
  for (int i = 0; i < 4; ++i) {
    if (sources[i]->input < 0) continue;
    operands[i].address = args[sources[i]->input];
    FORGE_ASSIGN_OR_RETURN(operands[i].type, codegen::BatchNormFoldType(sources[i]->dtype));
  }
  float eps = static_cast<float>(norm.eps);
  int count = static_cast<int>(channels);
  void* params[] = {&operands[0].address, &operands[0].type, &operands[1].address,
                    &operands[1].type,    &operands[2].address, &operands[2].type,
                    &operands[3].address, &operands[3].type,    &eps,
                    &count,               &rows};
  constexpr uint32_t kThreads = 128;
  gpu::LaunchShape shape;
  shape.grid[0] = static_cast<uint32_t>((channels + kThreads - 1) / kThreads);
  shape.block[0] = kThreads;
  return fold.Launch(shape, params, stream);
}

// The key of a call's cached plan: everything but the engine index.
std::string PlanKey(const CudnnConvCall& call) {
  CudnnConvCall keyed = call;
  keyed.engine = 0;
  return codegen::DescribeCall(keyed);
}

}  // namespace

struct CudnnConv::State {
  const gpu::Device& device;
  cudnnHandle_t handle = nullptr;
  absl::Mutex mutex;
  std::map<std::string, std::unique_ptr<forge_cudnn::ConvPlan>> plans ABSL_GUARDED_BY(mutex);
  // Plans cuDNN could not make, with its reason, so that the next candidates of the graph fail
  // fast with the same one.
  std::map<std::string, std::string> refused ABSL_GUARDED_BY(mutex);
  std::map<CUstream, gpu::DeviceBuffer> workspaces ABSL_GUARDED_BY(mutex);
  // The batch norm fold (codegen::BatchNormFoldSource), compiled by the first call with a batch
  // norm step.
  std::optional<gpu::Module> fold_module ABSL_GUARDED_BY(mutex);
  std::optional<gpu::Kernel> fold ABSL_GUARDED_BY(mutex);

  explicit State(const gpu::Device& d) : device(d) {}

  // The fold kernel, compiled with NVRTC and loaded at the first use.
  absl::StatusOr<const gpu::Kernel*> FoldKernel() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex) {
    if (fold.has_value()) return &*fold;
    FORGE_ASSIGN_OR_RETURN(std::unique_ptr<compile::CompilePool> pool,
                           compile::CompilePool::Create({.threads = 1}));
    compile::CompileRequest request;
    request.source = std::string(codegen::BatchNormFoldSource());
    request.name_expressions = {codegen::kBatchNormFoldKernel};
    request.arch = device.properties().arch();
    compile::CompileResult compiled = pool->Compile(request);
    if (!compiled.ok()) {
      return absl::InternalError(absl::StrCat("compiling the batch norm fold: ",
                                              compiled.status.message(), "\n", compiled.log));
    }
    FORGE_ASSIGN_OR_RETURN(gpu::Module module, device.LoadModule(compiled.cubin));
    FORGE_ASSIGN_OR_RETURN(gpu::Kernel kernel, module.GetKernel(codegen::kBatchNormFoldKernel));
    fold_module = std::move(module);
    fold = std::move(kernel);
    return &*fold;
  }

  // The call's plan with its engine built, or OutOfRange with cuDNN's reason.
  absl::StatusOr<forge_cudnn::ConvPlan*> PlanFor(const CudnnConvCall& call)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex) {
    const std::string key = PlanKey(call);
    if (auto refusal = refused.find(key); refusal != refused.end()) {
      return absl::OutOfRangeError(refusal->second);
    }
    auto it = plans.find(key);
    if (it == plans.end()) {
      std::unique_ptr<forge_cudnn::ConvPlan> plan;
      const std::string error = forge_cudnn::ConvPlan::Create(
          handle, GraphOf(call), static_cast<forge_cudnn::Heuristic>(call.heuristic), &plan);
      if (!error.empty()) {
        refused[key] = absl::StrCat(error, " (", codegen::DescribeCall(call), ")");
        return absl::OutOfRangeError(refused[key]);
      }
      it = plans.emplace(key, std::move(plan)).first;
    }
    bool past_end = false;
    if (const std::string error = it->second->Engine(call.engine, &past_end); !error.empty()) {
      return absl::OutOfRangeError(absl::StrCat(error, " (", codegen::DescribeCall(call), ")"));
    }
    return it->second.get();
  }

  absl::StatusOr<CUdeviceptr> Workspace(CUstream stream, int64_t bytes)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex) {
    if (bytes <= 0) return CUdeviceptr{0};
    auto it = workspaces.find(stream);
    if (it == workspaces.end() || it->second.size_bytes() < static_cast<size_t>(bytes)) {
      if (it != workspaces.end()) workspaces.erase(it);
      FORGE_ASSIGN_OR_RETURN(gpu::DeviceBuffer buffer, device.Allocate(static_cast<size_t>(bytes)));
      it = workspaces.emplace(stream, std::move(buffer)).first;
    }
    return it->second.address();
  }
};

CudnnConv::CudnnConv(std::unique_ptr<State> state) : state_(std::move(state)) {}

CudnnConv::~CudnnConv() {
  if (state_ != nullptr && state_->handle != nullptr) cudnnDestroy(state_->handle);
}

absl::StatusOr<std::unique_ptr<CudnnConv>> CudnnConv::Create(const gpu::Device& device) {
  auto state = std::make_unique<State>(device);
  if (const cudnnStatus_t status = cudnnCreate(&state->handle); status != CUDNN_STATUS_SUCCESS) {
    state->handle = nullptr;
    return absl::InternalError(absl::StrCat("cudnnCreate: ", cudnnGetErrorString(status),
                                            " (cuDNN ", cudnnGetVersion(), ")"));
  }
  return std::unique_ptr<CudnnConv>(new CudnnConv(std::move(state)));
}

absl::StatusOr<std::string> CudnnConv::Prepare(const CudnnConvCall& call) {
  absl::MutexLock lock(&state_->mutex);
  FORGE_ASSIGN_OR_RETURN(const forge_cudnn::ConvPlan* plan, state_->PlanFor(call));
  if (!call.batch_norms.empty()) FORGE_RETURN_IF_ERROR(state_->FoldKernel().status());
  return plan->EngineName(call.engine);
}

absl::Status CudnnConv::Run(const CudnnConvCall& call, absl::Span<const CUdeviceptr> args,
                            int task_inputs, gpu::Stream& stream) {
  if (args.size() != static_cast<size_t>(task_inputs) + 1) {
    return absl::InvalidArgumentError(absl::StrCat("a cudnn_conv candidate takes ", task_inputs,
                                                   " inputs and one output; got ", args.size(),
                                                   " addresses"));
  }
  auto address = [&](int input) { return reinterpret_cast<const void*>(args[input]); };
  forge_cudnn::Operands operands;
  operands.x = address(call.x_input);
  operands.w = address(call.w_input);
  operands.y = reinterpret_cast<void*>(args.back());
  absl::MutexLock lock(&state_->mutex);
  FORGE_ASSIGN_OR_RETURN(const forge_cudnn::ConvPlan* plan, state_->PlanFor(call));
  const int64_t fold_offset = FoldOffset(plan->WorkspaceBytes(call.engine));
  const int64_t fold_bytes = FoldBytes(call);
  FORGE_ASSIGN_OR_RETURN(
      const CUdeviceptr workspace,
      state_->Workspace(stream.handle(), fold_bytes > 0 ? fold_offset + fold_bytes
                                                        : plan->WorkspaceBytes(call.engine)));
  // Each batch norm's rows, folded from the task's operands on the stream before the graph.
  const int64_t channels = call.y.dims[1];
  size_t batch_norm = 0;
  for (const codegen::CudnnConvStep& step : call.epilogue) {
    if (step.step != ConvStep::kBatchNorm) {
      operands.step_operands.push_back(step.input >= 0 ? address(step.input) : nullptr);
      continue;
    }
    const CUdeviceptr rows = workspace + fold_offset +
                             batch_norm * codegen::kBatchNormFoldRows * channels * sizeof(float);
    FORGE_ASSIGN_OR_RETURN(const gpu::Kernel* fold, state_->FoldKernel());
    FORGE_RETURN_IF_ERROR(
        LaunchFold(*fold, call.batch_norms[batch_norm++], args, channels, rows, stream));
    operands.step_operands.push_back(reinterpret_cast<const void*>(rows));
  }
  if (const cudnnStatus_t status =
          cudnnSetStream(state_->handle, reinterpret_cast<cudaStream_t>(stream.handle()));
      status != CUDNN_STATUS_SUCCESS) {
    return absl::InternalError(absl::StrCat("cudnnSetStream: ", cudnnGetErrorString(status)));
  }
  if (const std::string error =
          plan->Run(state_->handle, operands, call.engine, reinterpret_cast<void*>(workspace));
      !error.empty()) {
    return absl::InternalError(absl::StrCat(error, " (", codegen::DescribeCall(call), ")"));
  }
  return absl::OkStatus();
}

absl::StatusOr<CudnnConvLaunch> LoadCudnnConvCandidate(CudnnConv& conv,
                                                       const forge::v1::KernelTask& task,
                                                       const codegen::SchedulePoint& point) {
  FORGE_ASSIGN_OR_RETURN(const CudnnConvCall call, codegen::DescribeCudnnConv(task, point));
  CudnnConvLaunch loaded;
  FORGE_ASSIGN_OR_RETURN(loaded.engine_name, conv.Prepare(call));
  const int task_inputs = task.inputs_size();
  loaded.launch = [&conv, call, task_inputs](gpu::Stream& stream,
                                             absl::Span<const CUdeviceptr> args) {
    return conv.Run(call, args, task_inputs, stream);
  };
  return loaded;
}

absl::Status ValidateCudnnConvGraph(const CudnnConvCall& call) {
  forge_cudnn::ConvGraph graph;
  if (const std::string error = forge_cudnn::BuildGraph(GraphOf(call), &graph); !error.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(error, " (", codegen::DescribeCall(call), ")"));
  }
  return absl::OkStatus();
}

}  // namespace forge::library
