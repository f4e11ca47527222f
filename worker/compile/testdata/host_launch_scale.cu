// A host-launched candidate for tests (compiler/codegen/host_launch_abi.h), small enough that nvcc
// builds it in a few seconds (no CUTLASS): out = x * factor over n float32 elements, for a task
// such as aten::mul(x, 2.0). runtime_args = {n, factor}. One kernel, which goes through a
// workspace of n floats, so that the loader's workspace allocation is exercised (a kernel reading
// a workspace that is not there faults).
//
// Built with -DFORGE_TEST_LAUNCH_FAILS, forge_launch refuses every launch with a message: the
// failing variant whose text the tests expect back in the judge's verdict.
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>

#include "compiler/codegen/host_launch_abi.h"

namespace {

__global__ void scale_through_workspace(const float* x, float* workspace, float* out,
                                        float factor, int64_t n) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n) return;
  workspace[i] = x[i];
  out[i] = workspace[i] * factor;
}

int32_t Fail(char* error, int32_t capacity, const char* message) {
  if (error != nullptr && capacity > 0) snprintf(error, static_cast<size_t>(capacity), "%s", message);
  return 1;
}

}  // namespace

extern "C" int32_t forge_host_abi_version(void) { return forge::codegen::kHostLaunchAbiVersion; }

extern "C" int64_t forge_workspace_bytes(const int64_t* runtime_args, int32_t runtime_arg_count) {
  if (runtime_arg_count != 2 || runtime_args[0] <= 0) return -1;
  return runtime_args[0] * static_cast<int64_t>(sizeof(float));
}

extern "C" int32_t forge_launch(void* const* buffers, int32_t buffer_count,
                                const int64_t* runtime_args, int32_t runtime_arg_count,
                                void* workspace, int64_t workspace_bytes, void* stream,
                                char* error, int32_t error_capacity) {
#ifdef FORGE_TEST_LAUNCH_FAILS
  return Fail(error, error_capacity, "planted failure: this object refuses every launch");
#endif
  if (buffer_count != 2) return Fail(error, error_capacity, "expected 2 buffers (x, out)");
  const int64_t needed = forge_workspace_bytes(runtime_args, runtime_arg_count);
  if (needed < 0) return Fail(error, error_capacity, "runtime_args must be {n, factor}, n > 0");
  if (workspace == nullptr || workspace_bytes < needed) {
    return Fail(error, error_capacity, "the workspace is missing or too small");
  }
  const int64_t n = runtime_args[0];
  const int threads = 256;
  const unsigned blocks = static_cast<unsigned>((n + threads - 1) / threads);
  scale_through_workspace<<<blocks, threads, 0, static_cast<cudaStream_t>(stream)>>>(
      static_cast<const float*>(buffers[0]), static_cast<float*>(workspace),
      static_cast<float*>(buffers[1]), static_cast<float>(runtime_args[1]), n);
  const cudaError_t launched = cudaGetLastError();
  if (launched != cudaSuccess) return Fail(error, error_capacity, cudaGetErrorString(launched));
  return 0;
}
