// The CUDA source of a GPU test's kernels, kept in tests/gpu/kernels/*.cuh rather than in string
// literals and read when the test runs: from $FORGE_GPU_TEST_KERNELS when set (the GPU machine's
// checkout, benchmarks/gpu/run_gpu_tests.sh sets it), else from this source tree
// (FORGE_GPU_TEST_KERNELS_DIR, defined by tests/gpu/CMakeLists.txt). Empty when unreadable: the
// NVRTC compile of it then fails with the test's message.
#ifndef FORGE_TESTS_GPU_KERNEL_SOURCE_H_
#define FORGE_TESTS_GPU_KERNEL_SOURCE_H_

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

namespace forge::testing {

inline std::string GpuTestKernels(const std::string& file) {
  const char* dir = std::getenv("FORGE_GPU_TEST_KERNELS");
  std::ifstream in(std::string(dir != nullptr ? dir : FORGE_GPU_TEST_KERNELS_DIR) + "/" + file);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace forge::testing

#endif  // FORGE_TESTS_GPU_KERNEL_SOURCE_H_
