#include "worker/library/cudnn_conv.h"

#include <algorithm>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "common/status/status_macros.h"
#include "runtime/extension/cudnn_conv_graph.h"

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
};

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
    if (step.step == ConvStep::kBias) {
      graph_step.operand = forge_cudnn::BiasOperand(conv.y);
    } else if (step.step == ConvStep::kResidual) {
      graph_step.operand = GraphTensor(call.residuals[residual++]);
    }
    conv.epilogue.push_back(std::move(graph_step));
  }
  return conv;
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

  explicit State(const gpu::Device& d) : device(d) {}

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
  return plan->EngineName(call.engine);
}

absl::Status CudnnConv::Run(const CudnnConvCall& call, absl::Span<const CUdeviceptr> args,
                            int task_inputs, CUstream stream) {
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
  for (const codegen::CudnnConvStep& step : call.epilogue) {
    operands.step_operands.push_back(step.input >= 0 ? address(step.input) : nullptr);
  }
  absl::MutexLock lock(&state_->mutex);
  FORGE_ASSIGN_OR_RETURN(const forge_cudnn::ConvPlan* plan, state_->PlanFor(call));
  FORGE_ASSIGN_OR_RETURN(const CUdeviceptr workspace,
                         state_->Workspace(stream, plan->WorkspaceBytes(call.engine)));
  if (const cudnnStatus_t status =
          cudnnSetStream(state_->handle, reinterpret_cast<cudaStream_t>(stream));
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
    return conv.Run(call, args, task_inputs, stream.handle());
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
