// The nvcc command line that builds a host-launched candidate (Executor::kHostLaunched,
// CompileOutput::kNvccSharedObject: host_launch_abi.h) into a shared object. One place for it, so
// that the worker's compile stage and the tests that compile such sources here run the same
// command: the toolkit's nvcc, C++17, -O3, a position-independent shared object, the CUTLASS
// include directory, the -arch the plan needs for the target (NvccArchFor: sm90 CUTLASS
// templates need the arch-specific "sm_90a"), then the plan's own compile_options, the output
// and the source.
#ifndef FORGE_COMPILER_CODEGEN_NVCC_COMMAND_NVCC_COMMAND_H_
#define FORGE_COMPILER_CODEGEN_NVCC_COMMAND_NVCC_COMMAND_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "compiler/codegen/generated_kernel.h"

namespace forge::codegen {

// Where the tools are on the machine that compiles.
struct NvccToolchain {
  std::string nvcc;             // the nvcc executable, e.g. /usr/local/cuda/bin/nvcc
  std::string cutlass_include;  // CUTLASS's include directory (FORGE_CUTLASS_INCLUDE)
};

// The argv (argv[0] = toolchain.nvcc) that compiles `source_path`, the emitted source of `plan`,
// into the shared object `output_path` for `target_arch` ("sm_90"). InvalidArgument when the
// plan is not compiled by nvcc (compile_output is not kNvccSharedObject), the toolchain lacks
// nvcc or the CUTLASS include directory, or the arch is not an "sm_NN" name.
absl::StatusOr<std::vector<std::string>> NvccCommand(const LaunchPlan& plan,
                                                     const NvccToolchain& toolchain,
                                                     absl::string_view target_arch,
                                                     absl::string_view source_path,
                                                     absl::string_view output_path);

}  // namespace forge::codegen

#endif  // FORGE_COMPILER_CODEGEN_NVCC_COMMAND_NVCC_COMMAND_H_
