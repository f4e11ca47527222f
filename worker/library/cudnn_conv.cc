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
      graph_step.operand = forge_cudnn::BiasOperand(conv.y);
    } else if (step.step == ConvStep::kResidual) {
      graph_step.operand = GraphTensor(call.residuals[residual++]);
    }
    conv.epilogue.push_back(std::move(graph_step));
  }
  return conv;
}

// The kernels a run launches around the graph (codegen::RunKernelsSource).
struct RunKernels {
  gpu::Module module;
  gpu::Kernel fold;
  gpu::Kernel transpose2;
  gpu::Kernel transpose4;
};

// Enqueues the transpose of `batch` row-major [rows, columns] matrices at `in` into `out`.
absl::Status LaunchTranspose(const RunKernels& kernels, forge::v1::DType dtype, CUdeviceptr in,
                             CUdeviceptr out, int64_t batch, int64_t rows, int64_t columns,
                             gpu::Stream& stream) {
  const codegen::TransposeShape launch = codegen::TransposeLaunch(batch, rows, columns);
  gpu::LaunchShape shape;
  std::copy(std::begin(launch.grid), std::end(launch.grid), shape.grid);
  std::copy(std::begin(launch.block), std::end(launch.block), shape.block);
  long long b = batch, r = rows, c = columns;
  void* params[] = {&in, &out, &b, &r, &c};
  return (forge_cudnn::ElementBytes(GraphType(dtype)) == 4 ? kernels.transpose4
                                                           : kernels.transpose2)
      .Launch(shape, params, stream);
}

// The (N, C, H * W) view of a 4-d NCHW tensor as the transpose's batch, rows, columns.
struct Planes {
  int64_t batch, rows, columns;
};
Planes PlanesOf(const codegen::ConvTensor& tensor) {
  return {tensor.dims[0], tensor.dims[1], tensor.dims[2] * tensor.dims[3]};
}

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
  // The kernels around the graph, compiled by the first call that needs them.
  std::optional<RunKernels> kernels ABSL_GUARDED_BY(mutex);

  explicit State(const gpu::Device& d) : device(d) {}

  // The run kernels, compiled with NVRTC and loaded at the first use.
  absl::StatusOr<const RunKernels*> Kernels() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex) {
    if (kernels.has_value()) return &*kernels;
    FORGE_ASSIGN_OR_RETURN(std::unique_ptr<compile::CompilePool> pool,
                           compile::CompilePool::Create({.threads = 1}));
    compile::CompileRequest request;
    request.source = std::string(codegen::RunKernelsSource());
    request.name_expressions = {codegen::kBatchNormFoldKernel, codegen::kTranspose2Kernel,
                                codegen::kTranspose4Kernel};
    request.arch = device.properties().arch();
    compile::CompileResult compiled = pool->Compile(request);
    if (!compiled.ok()) {
      return absl::InternalError(absl::StrCat("compiling the cudnn_conv run kernels: ",
                                              compiled.status.message(), "\n", compiled.log));
    }
    FORGE_ASSIGN_OR_RETURN(gpu::Module module, device.LoadModule(compiled.cubin));
    FORGE_ASSIGN_OR_RETURN(gpu::Kernel fold, module.GetKernel(codegen::kBatchNormFoldKernel));
    FORGE_ASSIGN_OR_RETURN(gpu::Kernel transpose2, module.GetKernel(codegen::kTranspose2Kernel));
    FORGE_ASSIGN_OR_RETURN(gpu::Kernel transpose4, module.GetKernel(codegen::kTranspose4Kernel));
    kernels.emplace(RunKernels{std::move(module), std::move(fold), std::move(transpose2),
                               std::move(transpose4)});
    return &*kernels;
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
  if (!call.batch_norms.empty() || call.channels_last_inside) {
    FORGE_RETURN_IF_ERROR(state_->Kernels().status());
  }
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
  absl::MutexLock lock(&state_->mutex);
  FORGE_ASSIGN_OR_RETURN(const forge_cudnn::ConvPlan* plan, state_->PlanFor(call));
  const forge_cudnn::Scratch scratch =
      forge_cudnn::ScratchOf(GraphOf(call), call.batch_norms.size(), call.channels_last_inside,
                             plan->WorkspaceBytes(call.engine));
  FORGE_ASSIGN_OR_RETURN(const CUdeviceptr workspace,
                         state_->Workspace(stream.handle(), scratch.total));
  const RunKernels* kernels = nullptr;
  if (!call.batch_norms.empty() || call.channels_last_inside) {
    FORGE_ASSIGN_OR_RETURN(kernels, state_->Kernels());
  }
  // Channels-last inside: the graph reads NHWC / KRSC copies of the task's NCHW tensors.
  auto graph_input = [&](int input, const codegen::ConvTensor& tensor,
                         int64_t at) -> absl::StatusOr<const void*> {
    if (!call.channels_last_inside) return address(input);
    const Planes planes = PlanesOf(tensor);
    FORGE_RETURN_IF_ERROR(LaunchTranspose(*kernels, call.dtype, args[input], workspace + at,
                                          planes.batch, planes.rows, planes.columns, stream));
    return reinterpret_cast<const void*>(workspace + at);
  };
  forge_cudnn::Operands operands;
  FORGE_ASSIGN_OR_RETURN(operands.x, graph_input(call.x_input, call.x, scratch.x));
  FORGE_ASSIGN_OR_RETURN(operands.w, graph_input(call.w_input, call.w, scratch.w));
  operands.y = call.channels_last_inside ? reinterpret_cast<void*>(workspace + scratch.y)
                                         : reinterpret_cast<void*>(args.back());
  // Each batch norm's rows, folded from the task's operands on the stream before the graph.
  const int64_t channels = call.y.dims[1];
  size_t batch_norm = 0;
  size_t residual = 0;
  for (const codegen::CudnnConvStep& step : call.epilogue) {
    if (step.step == ConvStep::kResidual) {
      FORGE_ASSIGN_OR_RETURN(const void* operand,
                             graph_input(step.input, call.residuals[residual],
                                         call.channels_last_inside ? scratch.residuals[residual] : 0));
      ++residual;
      operands.step_operands.push_back(operand);
    } else if (step.step == ConvStep::kBatchNorm) {
      const CUdeviceptr rows = workspace + scratch.fold +
                               batch_norm * codegen::kBatchNormFoldRows * channels * sizeof(float);
      FORGE_RETURN_IF_ERROR(
          LaunchFold(kernels->fold, call.batch_norms[batch_norm++], args, channels, rows, stream));
      operands.step_operands.push_back(reinterpret_cast<const void*>(rows));
    } else {
      operands.step_operands.push_back(step.input >= 0 ? address(step.input) : nullptr);
    }
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
  if (call.channels_last_inside) {
    // The graph's NHWC result, (N, P * Q, K) as matrices, into the task's NCHW output.
    const Planes planes = PlanesOf(call.y);
    FORGE_RETURN_IF_ERROR(LaunchTranspose(*kernels, call.dtype, workspace + scratch.y,
                                          args.back(), planes.batch, planes.columns, planes.rows,
                                          stream));
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

std::string DescribeCudnnConvGraph(const CudnnConvCall& call) {
  return forge_cudnn::Describe(GraphOf(call));
}

}  // namespace forge::library
