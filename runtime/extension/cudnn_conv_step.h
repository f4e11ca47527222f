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
// When cuDNN cannot run the graph here (no engine supports it on this GPU, or the index is past
// the configurations that build) the call raises with cuDNN's reason. When the engine built has
// another name than the one the worker recorded (another GPU or cuDNN: the list differs), it
// runs, with a warning once naming both.
#pragma once

#include <ATen/ATen.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>

#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "cudnn_conv_graph.h"

namespace forge_runtime {

class CudnnConvStep {
 public:
  CudnnConvStep(forge_cudnn::Conv conv, forge_cudnn::Heuristic heuristic, int engine,
                std::string engine_name)
      : conv_(std::move(conv)),
        heuristic_(heuristic),
        engine_(engine),
        engine_name_(std::move(engine_name)) {}

  // y = the graph over x, w and the epilogue's operands (one per step: undefined for steps
  // without), on the current stream of y's device.
  void Run(const at::Tensor& x, const at::Tensor& w, const std::vector<at::Tensor>& operands,
           const at::Tensor& y, const char* op) {
    const c10::Device device = y.device();
    const c10::cuda::CUDAGuard guard(device);
    forge_cudnn::Operands addresses;
    addresses.x = x.data_ptr();
    addresses.w = w.data_ptr();
    addresses.y = y.data_ptr();
    for (const at::Tensor& operand : operands) {
      addresses.step_operands.push_back(operand.defined() ? operand.data_ptr() : nullptr);
    }
    std::lock_guard<std::mutex> lock(mutex_);
    OnDevice& state = For(device, op);
    const cudaStream_t stream = at::cuda::getCurrentCUDAStream(device.index()).stream();
    const cudnnStatus_t set = cudnnSetStream(state.handle, stream);
    TORCH_CHECK(set == CUDNN_STATUS_SUCCESS, op, ": cudnnSetStream: ", cudnnGetErrorString(set));
    const std::string error =
        state.plan->Run(state.handle, addresses, engine_,
                        state.workspace.numel() > 0 ? state.workspace.data_ptr() : nullptr);
    TORCH_CHECK(error.empty(), op, ": ", error);
  }

 private:
  struct OnDevice {
    cudnnHandle_t handle = nullptr;
    std::unique_ptr<forge_cudnn::ConvPlan> plan;
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
    std::string error = forge_cudnn::ConvPlan::Create(state->handle, conv_, heuristic_,
                                                      &state->plan);
    bool past_end = false;
    if (error.empty()) error = state->plan->Engine(engine_, &past_end);
    if (!error.empty()) cudnnDestroy(state->handle);
    TORCH_CHECK(error.empty(), op, ": cuDNN cannot run the winner's graph on ", device,
                " (cuDNN ", cudnnGetVersion(), "): ", error);
    const std::string built = state->plan->EngineName(engine_);
    if (!engine_name_.empty() && built != engine_name_) {
      TORCH_WARN(op, ": engine ", engine_, " is ", built, " with cuDNN ", cudnnGetVersion(),
                 " on this GPU; the worker measured ", engine_name_);
    }
    state->workspace = at::empty({state->plan->WorkspaceBytes(engine_)},
                                 at::TensorOptions().dtype(at::kByte).device(device));
    slot = std::move(state);
    return *slot;
  }

  const forge_cudnn::Conv conv_;
  const forge_cudnn::Heuristic heuristic_;
  const int engine_;
  const std::string engine_name_;
  std::mutex mutex_;
  // An op makes its step once and never destroys it (as the plan's state): a workspace freed or
  // a handle destroyed after the CUDA runtime has shut down at exit fails.
  std::unordered_map<c10::DeviceIndex, std::unique_ptr<OnDevice>> devices_;
};

}  // namespace forge_runtime
