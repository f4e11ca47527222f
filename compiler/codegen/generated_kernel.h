// The contract between the generators (compiler/codegen) and the worker stages that compile, judge
// and time a candidate (worker/compile, worker/judge, worker/timer).
#ifndef FORGE_COMPILER_CODEGEN_GENERATED_KERNEL_H_
#define FORGE_COMPILER_CODEGEN_GENERATED_KERNEL_H_

#include <array>
#include <cstdint>
#include <map>
#include <string>

namespace forge::codegen {

// Grid and block of one launch, and the dynamic shared memory it asks for.
struct LaunchDims {
  std::array<uint32_t, 3> grid = {1, 1, 1};
  std::array<uint32_t, 3> block = {1, 1, 1};
  uint32_t dynamic_shared_bytes = 0;
};

// One generated candidate, ready for NVRTC.
//
// Kernel ABI: the kernel named `kernel_name` (extern "C", so unmangled) takes exactly one device
// pointer per task input, in forge.v1.KernelTask.inputs order, then one per task output, in
// KernelTask.outputs order, and nothing else. Shapes, strides and scalars are compile-time
// constants in the source, because a task has fixed shapes. Every output element must be written
// by the kernel: the judge poisons outputs with NaN before each launch.
struct GeneratedKernel {
  std::string source;
  std::string kernel_name;
  LaunchDims launch;
  // Template within the family and the schedule point it was generated from.
  std::string template_name;
  std::map<std::string, int64_t> parameters;
  // Enters the candidate digest: a change to a generator's output must bump it.
  std::string generator_version;

  // parameters[name], or `fallback` for a template without that parameter.
  int64_t Parameter(const std::string& name, int64_t fallback) const {
    const auto it = parameters.find(name);
    return it == parameters.end() ? fallback : it->second;
  }
};

}  // namespace forge::codegen

#endif  // FORGE_COMPILER_CODEGEN_GENERATED_KERNEL_H_
