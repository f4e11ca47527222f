// What an extension with host-launched steps is built with (runtime/README.md): the shared object
// of each such step (compiler/codegen/host_launch_abi.h, built by forge.runtime with nvcc from the
// bundle's translation unit), loaded with dlopen (RTLD_NOW | RTLD_LOCAL: the object's symbols,
// CUTLASS's and its static CUDA runtime's, stay its own), its ABI version checked, and its
// forge_launch called on the current CUDA stream with the tensors' addresses and the step's
// runtime arguments. The object's error text becomes the op's error.
//
// The workspace the object asks for (forge_workspace_bytes) is allocated once per device, at the
// first launch there, from PyTorch's caching allocator, and kept: a CUDA graph captured later
// holds its address, and the plan's warm-up runs come before any capture. Calls on one device share
// it, so they must be ordered on the GPU (one stream), as the plan op's arena asks too.
//
// The worker loads such objects from memory (worker/library/host_launched.h); this runs inside
// PyTorch with the object on disk, in the extension cache, so it is a plain dlopen of that file.
#pragma once

#include <dlfcn.h>

#include <ATen/ATen.h>
#include <ATen/cuda/CUDAContext.h>

#include <cstdint>
#include <map>
#include <unordered_map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "compiler/codegen/host_launch_abi.h"

namespace forge_runtime {

class HostLaunchedObject {
 public:
  // Loads the object at `path` for `op` (replacing what `op` had); a second load of the same path
  // is a no-op. Throws, naming the op and the path, when it cannot be loaded, lacks an entry point
  // or was built for another ABI version.
  static void Load(const std::string& op, const std::string& path) {
    std::lock_guard<std::mutex> lock(Mutex());
    std::unique_ptr<HostLaunchedObject>& slot = Objects()[op];
    if (slot && slot->path_ == path) return;
    void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    TORCH_CHECK(handle != nullptr, op, ": cannot load its host-launched object ", path, ": ",
                dlerror());
    auto object = std::unique_ptr<HostLaunchedObject>(new HostLaunchedObject(path, handle));
    object->version_ = Symbol<forge::codegen::HostAbiVersionFn>(
        handle, FORGE_HOST_ABI_VERSION_SYMBOL, op, path);
    object->workspace_bytes_ = Symbol<forge::codegen::WorkspaceBytesFn>(
        handle, FORGE_WORKSPACE_BYTES_SYMBOL, op, path);
    object->launch_ =
        Symbol<forge::codegen::HostLaunchFn>(handle, FORGE_LAUNCH_SYMBOL, op, path);
    const int32_t version = object->version_();
    TORCH_CHECK(version == forge::codegen::kHostLaunchAbiVersion, op, ": ", path,
                " was built for host-launch ABI version ", version, "; this extension runs ",
                forge::codegen::kHostLaunchAbiVersion);
    // A replaced object stays loaded: a CUDA graph may hold its kernels.
    if (slot) static_cast<void>(slot.release());
    slot = std::move(object);
  }

  // The object loaded for `op`; throws when none was (forge.runtime loads it with the extension).
  static HostLaunchedObject& For(const char* op) {
    std::lock_guard<std::mutex> lock(Mutex());
    const auto found = Objects().find(op);
    TORCH_CHECK(found != Objects().end() && found->second, op,
                ": its host-launched object is not loaded (torch.ops.", op,
                "_load(path) loads it)");
    return *found->second;
  }

  // forge_launch on the current stream of the buffers' device. `buffers`: the task's inputs, then
  // its outputs (the generated-kernel ABI).
  void Launch(const std::vector<at::Tensor>& buffers, const std::vector<int64_t>& runtime_args,
              const char* op) {
    const c10::Device device = buffers[0].device();
    std::vector<void*> pointers;
    for (const at::Tensor& buffer : buffers) pointers.push_back(buffer.data_ptr());
    const at::Tensor& workspace = Workspace(device, runtime_args, op);
    char error[1024] = {};
    const int32_t status = launch_(
        pointers.data(), static_cast<int32_t>(pointers.size()), runtime_args.data(),
        static_cast<int32_t>(runtime_args.size()),
        workspace.numel() > 0 ? workspace.data_ptr() : nullptr, workspace.numel(),
        at::cuda::getCurrentCUDAStream(device.index()).stream(), error, sizeof(error));
    error[sizeof(error) - 1] = '\0';
    TORCH_CHECK(status == 0, op, ": forge_launch of ", path_, " returned ", status, ": ",
                error[0] != '\0' ? error : "no message");
  }

 private:
  HostLaunchedObject(std::string path, void* handle) : path_(std::move(path)), handle_(handle) {}

  template <typename Fn>
  static Fn Symbol(void* handle, const char* name, const std::string& op,
                   const std::string& path) {
    dlerror();
    void* symbol = dlsym(handle, name);
    TORCH_CHECK(symbol != nullptr, op, ": ", path, " does not export ", name,
                " (compiler/codegen/host_launch_abi.h)");
    return reinterpret_cast<Fn>(symbol);
  }

  const at::Tensor& Workspace(c10::Device device, const std::vector<int64_t>& runtime_args,
                              const char* op) {
    std::lock_guard<std::mutex> lock(workspace_mutex_);
    at::Tensor& workspace = workspaces_[device];
    if (!workspace.defined()) {
      const int64_t bytes =
          workspace_bytes_(runtime_args.data(), static_cast<int32_t>(runtime_args.size()));
      TORCH_CHECK(bytes >= 0, op, ": ", path_, " cannot run its runtime arguments [",
                  c10::Join(", ", runtime_args), "] (forge_workspace_bytes returned ", bytes, ")");
      workspace = at::empty({bytes}, at::TensorOptions().dtype(at::kByte).device(device));
    }
    return workspace;
  }

  static std::mutex& Mutex() {
    static std::mutex mutex;
    return mutex;
  }
  // Never destroyed, as the plan's state: the objects' static CUDA runtimes must not be torn down
  // before the process's own at exit.
  static std::map<std::string, std::unique_ptr<HostLaunchedObject>>& Objects() {
    static auto* objects = new std::map<std::string, std::unique_ptr<HostLaunchedObject>>;
    return *objects;
  }

  std::string path_;
  void* handle_;
  forge::codegen::HostAbiVersionFn version_ = nullptr;
  forge::codegen::WorkspaceBytesFn workspace_bytes_ = nullptr;
  forge::codegen::HostLaunchFn launch_ = nullptr;
  std::mutex workspace_mutex_;
  std::unordered_map<c10::Device, at::Tensor> workspaces_;
};

}  // namespace forge_runtime
