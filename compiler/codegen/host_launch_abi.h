// The host-launch ABI: how the worker runs a candidate whose kernels need host code to launch
// (CUTLASS 3.x kernels build TMA descriptors and a tile scheduler's parameters on the host, and
// may need a workspace). Such a candidate's source is a whole CUDA translation unit; the worker's
// compile stage builds it with nvcc into a shared object (CompileOutput::kNvccSharedObject), and
// the sandbox child loads that object (dlopen) and calls its entry points. This header is the
// contract between the families that emit such sources and the worker that loads them; it has no
// dependencies so that emitted sources may include it too.
//
// Every entry point is extern "C" and named below. Buffers are the generated-kernel ABI's (one
// device address per task input, in KernelTask.inputs order, then one per task output); runtime
// arguments are LaunchPlan::runtime_args, in the family's own order.
//
//   int32_t forge_host_abi_version(void);
//       kHostLaunchAbiVersion of the header the object was built with.
//   int64_t forge_workspace_bytes(const int64_t* runtime_args, int32_t runtime_arg_count);
//       Device scratch bytes one launch needs (0: none); negative when the arguments are not
//       runnable by this object (then forge_launch fails with the reason).
//   int32_t forge_launch(void* const* buffers, int32_t buffer_count,
//                        const int64_t* runtime_args, int32_t runtime_arg_count,
//                        void* workspace, int64_t workspace_bytes, void* stream,
//                        char* error, int32_t error_capacity);
//       Enqueues one execution on `stream` (a CUstream / cudaStream_t) and returns 0. It never
//       synchronizes, allocates device memory or touches another stream, so that the judge's
//       stream ordering and the timer's events hold. On failure it returns non-zero and writes a
//       NUL-terminated reason of at most error_capacity bytes into `error`.
//
// Each output element must be written by every launch (the judge poisons outputs between
// launches), as for generated kernels.
#ifndef FORGE_COMPILER_CODEGEN_HOST_LAUNCH_ABI_H_
#define FORGE_COMPILER_CODEGEN_HOST_LAUNCH_ABI_H_

#include <stdint.h>

#define FORGE_HOST_ABI_VERSION_SYMBOL "forge_host_abi_version"
#define FORGE_WORKSPACE_BYTES_SYMBOL "forge_workspace_bytes"
#define FORGE_LAUNCH_SYMBOL "forge_launch"

#ifdef __cplusplus
namespace forge::codegen {
inline constexpr int32_t kHostLaunchAbiVersion = 1;
using HostAbiVersionFn = int32_t (*)();
using WorkspaceBytesFn = int64_t (*)(const int64_t* runtime_args, int32_t runtime_arg_count);
using HostLaunchFn = int32_t (*)(void* const* buffers, int32_t buffer_count,
                                 const int64_t* runtime_args, int32_t runtime_arg_count,
                                 void* workspace, int64_t workspace_bytes, void* stream,
                                 char* error, int32_t error_capacity);
}  // namespace forge::codegen
#endif

#endif  // FORGE_COMPILER_CODEGEN_HOST_LAUNCH_ABI_H_
