#include "compiler/codegen/nvcc_command/nvcc_command.h"

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "compiler/codegen/cutlass_gemm/cutlass_gemm.h"
#include "compiler/codegen/family.h"

namespace forge::codegen {

absl::StatusOr<std::vector<std::string>> NvccCommand(const LaunchPlan& plan,
                                                     const NvccToolchain& toolchain,
                                                     absl::string_view target_arch,
                                                     absl::string_view source_path,
                                                     absl::string_view output_path) {
  if (plan.compile_output != CompileOutput::kNvccSharedObject) {
    return absl::InvalidArgumentError(absl::StrCat(
        "candidate ", plan.kernel_name, " is not compiled by nvcc into a shared object"));
  }
  if (toolchain.nvcc.empty()) return absl::InvalidArgumentError("no nvcc executable is set");
  if (toolchain.cutlass_include.empty()) {
    return absl::InvalidArgumentError(
        "no CUTLASS include directory is set (FORGE_CUTLASS_INCLUDE; run scripts/setup)");
  }
  if (absl::StatusOr<int> capability = ComputeCapabilityOf(target_arch); !capability.ok()) {
    return capability.status();
  }
  std::vector<std::string> argv = {toolchain.nvcc,
                                   "-std=c++17",
                                   "-O3",
                                   absl::StrCat("-arch=", NvccArchFor(plan, target_arch)),
                                   "-shared",
                                   "-Xcompiler",
                                   "-fPIC",
                                   absl::StrCat("-I", toolchain.cutlass_include)};
  argv.insert(argv.end(), plan.compile_options.begin(), plan.compile_options.end());
  argv.push_back("-o");
  argv.emplace_back(output_path);
  argv.emplace_back(source_path);
  return argv;
}

}  // namespace forge::codegen
