// What an extension with cudnn_conv steps is built with (runtime/README.md): the winner's cuDNN
// fused graph (conv fprop + its epilogue), built through cudnn_conv_graph.h, the header the
// worker judged and timed it with, so that both build the same graph, lower it with the same
// heuristic mode and count engine configurations the same way; on the same GPU and cuDNN,
// engine index `engine` is the configuration the worker measured.
//
// Per device, at the step's first call there: a cuDNN handle, the graph lowered and the engine
// built (the step's shapes are static: one plan per op and device is the cache per shape), and
// the workspace the engine asks for, from PyTorch's caching allocator, kept (the plan's warm-up
// runs come before any capture, so a CUDA graph holds its address). Every call sets the handle's
// stream to the current CUDA stream and executes the plan there: nothing allocates or
// synchronizes, so the call can be captured. Calls on one device share the handle and
// workspace, so they must be ordered on the GPU (one stream), as the plan op's arena asks too.
//
// The step is made from the plan's JSON of the winner's call (forge_cudnn::ParseCall; the client
// writes it from the judged candidate's codegen::CudnnConvCall), so that its graph is the
// candidate's. A call with a batch norm step folds the task's operands into float32 rows before
// the graph, every run, and a call channels-last inside ("graph_nhwc") transposes x, w and the
// residuals into NHWC / KRSC copies and the graph's NHWC result into the NCHW output, as the
// worker did: with the kernels the worker ran (RunKernels, nvcc's build of the bundle's copy of
// their source, cudnn_conv_kernels.cu.in), the rows and copies in the device's workspace after
// cuDNN's part (forge_cudnn::ScratchOf), their time part of the step's as it was of the
// candidate's.
//
// When cuDNN cannot run the graph here (no engine supports it on this GPU, or the index is past
// the configurations that build) the call raises with cuDNN's reason. When the engine built has
// another name than the one the worker recorded (another GPU or cuDNN: the list differs), it
// runs, with a warning once naming both.
#pragma once

#include <ATen/ATen.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "cudnn_conv_graph.h"

namespace forge_runtime {

// The launchers of the kernels around the graph (cudnn_conv_kernels.cu.in).
struct RunKernels {
  cudaError_t (*fold)(const void* mean, int mean_type, const void* var, int var_type,
                      const void* weight, int weight_type, const void* bias, int bias_type,
                      float eps, int channels, float* out, cudaStream_t stream) = nullptr;
  cudaError_t (*transpose)(int element_bytes, const void* in, void* out, long long batch,
                           long long rows, long long columns, cudaStream_t stream) = nullptr;
};

class CudnnConvStep {
 public:
  // `call_json`: the plan's cudnn_conv entry; `kernels`: null where the call has neither a batch
  // norm nor channels-last copies. Raises with what is wrong otherwise.
  CudnnConvStep(const std::string& call_json, const RunKernels* kernels, const char* op)
      : kernels_(kernels) {
    const std::string error = forge_cudnn::ParseCall(call_json, &call_);
    TORCH_CHECK(error.empty(), op, ": ", error);
    const bool around = !call_.batch_norms.empty() || call_.channels_last_inside;
    TORCH_CHECK(!around || (kernels != nullptr && kernels->fold && kernels->transpose), op,
                ": the call folds a batch norm or runs channels-last inside, and the extension "
                "has not built the kernels that do it");
    TORCH_CHECK(!call_.channels_last_inside || call_.conv.x.dims.size() == 4, op,
                ": channels-last inside is for 2-d convolutions");
  }

  // y = the call over the task's inputs (`inputs`, in task order), on the current stream of y's
  // device. Channels-last inside, a plan that keeps a tensor channels-last between two such
  // steps (the plan op: extension.py's rule) passes `nhwc_inputs`, a bit per task input whose
  // buffer already holds the NHWC copy (x or a residual: no transpose in), and `nhwc_output`
  // (the graph's NHWC result stays in y's buffer: no transpose out). The bytes each side skips
  // are the ones the other would have converted back: the result is the same.
  void Run(const std::vector<at::Tensor>& inputs, const at::Tensor& y, const char* op,
           uint64_t nhwc_inputs = 0, bool nhwc_output = false) {
    TORCH_CHECK(call_.channels_last_inside || (nhwc_inputs == 0 && !nhwc_output), op,
                ": only a step channels-last inside takes or leaves channels-last tensors");
    const c10::Device device = y.device();
    const c10::cuda::CUDAGuard guard(device);
    std::lock_guard<std::mutex> lock(mutex_);
    OnDevice& state = For(device, op);
    const cudaStream_t stream = at::cuda::getCurrentCUDAStream(device.index()).stream();
    char* const workspace =
        state.workspace.numel() > 0 ? static_cast<char*>(state.workspace.data_ptr()) : nullptr;
    const forge_cudnn::Scratch& scratch = state.scratch;
    const int element_bytes = forge_cudnn::ElementBytes(call_.conv.type);
    auto check = [op](cudaError_t error) {
      TORCH_CHECK(error == cudaSuccess, op, ": kernel launch failed: ", cudaGetErrorString(error));
    };
    // Channels-last inside, the graph reads NHWC / KRSC copies of the task's NCHW tensors: each
    // an (N, C, H * W) batch of matrices transposed.
    auto graph_input = [&](int input, const forge_cudnn::Tensor& tensor,
                           int64_t at) -> const void* {
      const void* address = inputs.at(input).data_ptr();
      if (!call_.channels_last_inside || (input < 64 && (nhwc_inputs >> input) & 1)) {
        return address;
      }
      check(kernels_->transpose(element_bytes, address, workspace + at, tensor.dims[0],
                                tensor.dims[1], tensor.dims[2] * tensor.dims[3], stream));
      return workspace + at;
    };
    forge_cudnn::Operands addresses;
    addresses.x = graph_input(call_.x_input, call_.conv.x, scratch.x);
    addresses.w = graph_input(call_.w_input, call_.conv.w, scratch.w);
    addresses.y =
        call_.channels_last_inside && !nhwc_output ? workspace + scratch.y : y.data_ptr();
    const int64_t channels = call_.conv.y.dims[1];
    size_t batch_norm = 0, residual = 0;
    for (size_t i = 0; i < call_.conv.epilogue.size(); ++i) {
      const forge_cudnn::EpilogueStep& step = call_.conv.epilogue[i];
      const int input = call_.step_inputs[i];
      if (step.step == forge_cudnn::Step::kResidual) {
        addresses.step_operands.push_back(graph_input(
            input, step.operand,
            call_.channels_last_inside ? scratch.residuals[residual] : 0));
        ++residual;
      } else if (step.step == forge_cudnn::Step::kBatchNorm) {
        // Its rows, folded from the task's operands on the stream before the graph.
        const forge_cudnn::BatchNormFold& fold = call_.batch_norms[batch_norm];
        float* rows = reinterpret_cast<float*>(
            workspace + scratch.fold +
            batch_norm * forge_cudnn::kBatchNormRows * channels * sizeof(float));
        auto operand = [&](const forge_cudnn::FoldOperand& o) -> const void* {
          return o.input >= 0 ? inputs.at(o.input).data_ptr() : nullptr;
        };
        check(kernels_->fold(operand(fold.mean), fold.mean.type, operand(fold.var),
                             fold.var.type, operand(fold.weight), fold.weight.type,
                             operand(fold.bias), fold.bias.type, fold.eps,
                             static_cast<int>(channels), rows, stream));
        addresses.step_operands.push_back(rows);
        ++batch_norm;
      } else {
        addresses.step_operands.push_back(input >= 0 ? inputs.at(input).data_ptr() : nullptr);
      }
    }
    const cudnnStatus_t set = cudnnSetStream(state.handle, stream);
    TORCH_CHECK(set == CUDNN_STATUS_SUCCESS, op, ": cudnnSetStream: ", cudnnGetErrorString(set));
    const std::string error = state.plan->Run(state.handle, addresses, call_.engine, workspace);
    TORCH_CHECK(error.empty(), op, ": ", error);
    if (call_.channels_last_inside && !nhwc_output) {
      // The graph's NHWC result, (N, P * Q, K) as matrices, into the task's NCHW output.
      const std::vector<int64_t>& dims = call_.conv.y.dims;
      check(kernels_->transpose(element_bytes, workspace + scratch.y, y.data_ptr(), dims[0],
                                dims[2] * dims[3], dims[1], stream));
    }
  }

  const forge_cudnn::Call& call() const { return call_; }

 private:
  struct OnDevice {
    cudnnHandle_t handle = nullptr;
    std::unique_ptr<forge_cudnn::ConvPlan> plan;
    forge_cudnn::Scratch scratch;
    at::Tensor workspace;
  };

  // The device's handle, plan and workspace, made at its first call (see the file comment).
  OnDevice& For(c10::Device device, const char* op) {
    std::unique_ptr<OnDevice>& slot = devices_[device.index()];
    if (slot) return *slot;
    auto state = std::make_unique<OnDevice>();
    const cudnnStatus_t created = cudnnCreate(&state->handle);
    TORCH_CHECK(created == CUDNN_STATUS_SUCCESS, op, ": cudnnCreate: ",
                cudnnGetErrorString(created), " (cuDNN ", cudnnGetVersion(), ")");
    std::string error = forge_cudnn::ConvPlan::Create(state->handle, call_.conv, call_.heuristic,
                                                      &state->plan);
    bool past_end = false;
    if (error.empty()) error = state->plan->Engine(call_.engine, &past_end);
    if (!error.empty()) cudnnDestroy(state->handle);
    TORCH_CHECK(error.empty(), op, ": cuDNN cannot run the winner's graph on ", device,
                " (cuDNN ", cudnnGetVersion(), "): ", error);
    const std::string built = state->plan->EngineName(call_.engine);
    if (!call_.engine_name.empty() && built != call_.engine_name) {
      TORCH_WARN(op, ": engine ", call_.engine, " is ", built, " with cuDNN ", cudnnGetVersion(),
                 " on this GPU; the worker measured ", call_.engine_name);
    }
    state->scratch = forge_cudnn::ScratchOf(call_.conv, call_.batch_norms.size(),
                                            call_.channels_last_inside,
                                            state->plan->WorkspaceBytes(call_.engine));
    state->workspace = at::empty({state->scratch.total},
                                 at::TensorOptions().dtype(at::kByte).device(device));
    slot = std::move(state);
    return *slot;
  }

  forge_cudnn::Call call_;
  const RunKernels* const kernels_;
  std::mutex mutex_;
  // An op makes its step once and never destroys it (as the plan's state): a workspace freed or
  // a handle destroyed after the CUDA runtime has shut down at exit fails.
  std::unordered_map<c10::DeviceIndex, std::unique_ptr<OnDevice>> devices_;
};

}  // namespace forge_runtime
