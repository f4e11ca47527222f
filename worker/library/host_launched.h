// Runs host-launched candidates (compiler/codegen/host_launch_abi.h: CUTLASS kernels, whose launch
// needs host code). The shared object nvcc built from the candidate's source (worker/compile,
// CompileOutput::kNvccSharedObject) is loaded from its bytes without a file left behind
// (memfd_create, then dlopen of /proc/self/fd/N with RTLD_NOW | RTLD_LOCAL), its ABI version is
// checked, and its forge_launch is called on the judge's or the timer's stream.
//
// nvcc links the CUDA runtime statically into the object, so it carries its own runtime; that
// runtime works in the device's primary context, the one gpu::Device::Open retains and makes
// current, so the streams and device addresses the worker's driver-API code hands it are valid
// there. Loading and forge_workspace_bytes need no GPU or driver; forge_launch does.
//
// Written here rather than taken from a library: the loading is a few system calls (memfd_create,
// dlopen, dlsym), and the ABI is Forge's own.
#ifndef FORGE_WORKER_LIBRARY_HOST_LAUNCHED_H_
#define FORGE_WORKER_LIBRARY_HOST_LAUNCHED_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "compiler/codegen/host_launch_abi.h"
#include "worker/gpu/device.h"
#include "worker/judge/judge.h"

namespace forge::library {

// One loaded shared object with the host-launch ABI. Thread-compatible: the entry points are the
// object's, which the ABI asks to be callable from any thread.
class HostLaunchedObject {
 public:
  // InvalidArgument when `bytes` are not a loadable shared object (dlerror's text), lack one of
  // the ABI's entry points, or were built against another ABI version than
  // codegen::kHostLaunchAbiVersion; Internal when the memory file cannot be made.
  static absl::StatusOr<std::unique_ptr<HostLaunchedObject>> Load(absl::string_view bytes);
  // Unloads the object (where the dynamic loader can: an object with unique symbols stays mapped,
  // and then keeps its memory file open, so that no later object is mistaken for it by name).
  ~HostLaunchedObject();
  HostLaunchedObject(const HostLaunchedObject&) = delete;
  HostLaunchedObject& operator=(const HostLaunchedObject&) = delete;

  // What forge_host_abi_version returned (Load checked it).
  int32_t abi_version() const { return abi_version_; }

  // forge_workspace_bytes for `runtime_args`. OutOfRange when the object says it cannot run them
  // (a negative answer): the candidate is unsupported for the task, not broken.
  absl::StatusOr<int64_t> WorkspaceBytes(absl::Span<const int64_t> runtime_args) const;

  // forge_launch: enqueues one execution on `stream`. Internal carrying the object's own message
  // when it returns non-zero.
  absl::Status Launch(absl::Span<const CUdeviceptr> buffers, absl::Span<const int64_t> runtime_args,
                      CUdeviceptr workspace, int64_t workspace_bytes, CUstream stream) const;

 private:
  HostLaunchedObject(int fd, std::string path, void* handle, codegen::WorkspaceBytesFn workspace,
                     codegen::HostLaunchFn launch, int32_t abi_version)
      : fd_(fd),
        path_(std::move(path)),
        handle_(handle),
        workspace_bytes_(workspace),
        launch_(launch),
        abi_version_(abi_version) {}

  int fd_;
  std::string path_;  // /proc/self/fd/<fd_>, the name the loader knows the object by
  void* handle_;
  codegen::WorkspaceBytesFn workspace_bytes_;
  codegen::HostLaunchFn launch_;
  int32_t abi_version_;
};

// The judge's launch of a host-launched candidate: `object` with `runtime_args`
// (LaunchPlan::runtime_args), and a device workspace of the size forge_workspace_bytes asks for,
// allocated on `device` here. Both live as long as the returned function. OutOfRange when the
// object cannot run `runtime_args` (see WorkspaceBytes); the launch's error is Launch's.
absl::StatusOr<judge::CandidateLaunch> LoadHostLaunchedCandidate(
    const gpu::Device& device, std::shared_ptr<const HostLaunchedObject> object,
    std::vector<int64_t> runtime_args);

}  // namespace forge::library

#endif  // FORGE_WORKER_LIBRARY_HOST_LAUNCHED_H_
