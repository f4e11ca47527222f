// Compiles one configuration of each cutlass_gemm template with the worker's nvcc command line
// (nvcc_command.h) into a shared object, loads it (dlopen needs no GPU) and checks the
// host-launch ABI: the three entry points, the ABI version, and that bad runtime arguments are
// refused with a reason before any CUDA call. About a minute per compile: labelled slow.
#include <dlfcn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

#include "compiler/codegen/cutlass_gemm/cutlass_gemm.h"
#include "compiler/codegen/host_launch_abi.h"
#include "compiler/codegen/nvcc_command/nvcc_command.h"
#include "compiler/codegen/testing/codegen_test_util.h"

namespace forge::codegen {
namespace {

using forge::v1::KernelTask;
using testing::OptionalTensorArg;
using testing::StringArg;
using testing::TaskBuilder;
using testing::TensorArg;

// gelu(linear(x, w, bias)) of `dtype`: the bias and an activation exercise the fused epilogue.
KernelTask LinearGeluTask(forge::v1::DType dtype) {
  return TaskBuilder()
      .Input("x", dtype, {256, 128})
      .Input("w", dtype, {512, 128})
      .Input("bias", dtype, {512})
      .Node("linear", "linear", "",
            {TensorArg("input", "x"), TensorArg("weight", "w"), OptionalTensorArg("bias", "bias")},
            dtype, {256, 512})
      .Node("act", "gelu", "", {TensorArg("self", "linear"), StringArg("approximate", "tanh")},
            dtype, {256, 512})
      .Output("act")
      .Build(forge::v1::KERNEL_FAMILY_GEMM);
}

// Runs argv, returns its exit status.
int RunCommand(const std::vector<std::string>& argv) {
  const pid_t pid = fork();
  if (pid == 0) {
    std::vector<char*> args;
    for (const std::string& arg : argv) args.push_back(const_cast<char*>(arg.c_str()));
    args.push_back(nullptr);
    execv(args[0], args.data());
    _exit(127);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

class CutlassGemmCompileTest : public ::testing::TestWithParam<forge::v1::DType> {};

TEST_P(CutlassGemmCompileTest, CompilesToTheHostLaunchAbi) {
  const NvccToolchain toolchain{FORGE_TEST_NVCC, FORGE_TEST_CUTLASS_INCLUDE};
  if (toolchain.cutlass_include.empty()) GTEST_SKIP() << "no CUTLASS headers (scripts/setup)";
  const KernelTask task = LinearGeluTask(GetParam());
  const CutlassGemmFamily family;
  auto spaces = family.ScheduleSpace(task);
  ASSERT_TRUE(spaces.ok()) << spaces.status();
  auto kernel = family.Generate(task, DefaultPoint(spaces->front()));
  ASSERT_TRUE(kernel.ok()) << kernel.status();

  const std::filesystem::path dir = std::filesystem::path(::testing::TempDir()) /
                                    ("cutlass_" + kernel->kernel_name);
  std::filesystem::create_directories(dir);
  const std::string source = (dir / "candidate.cu").string();
  const std::string object = (dir / "candidate.so").string();
  std::ofstream(source) << kernel->source;
  auto argv = NvccCommand(*kernel, toolchain, "sm_90", source, object);
  ASSERT_TRUE(argv.ok()) << argv.status();
  ASSERT_EQ(RunCommand(*argv), 0) << kernel->kernel_name << " failed to compile";

  void* handle = dlopen(object.c_str(), RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(handle, nullptr) << dlerror();
  auto version = reinterpret_cast<HostAbiVersionFn>(dlsym(handle, FORGE_HOST_ABI_VERSION_SYMBOL));
  auto workspace = reinterpret_cast<WorkspaceBytesFn>(dlsym(handle, FORGE_WORKSPACE_BYTES_SYMBOL));
  auto launch = reinterpret_cast<HostLaunchFn>(dlsym(handle, FORGE_LAUNCH_SYMBOL));
  ASSERT_NE(version, nullptr);
  ASSERT_NE(workspace, nullptr);
  ASSERT_NE(launch, nullptr);
  EXPECT_EQ(version(), kHostLaunchAbiVersion);
  // Too few runtime arguments, and a problem of no rows: refused before any CUDA call.
  EXPECT_EQ(workspace(kernel->runtime_args.data(), 3), -1);
  std::vector<int64_t> empty = kernel->runtime_args;
  empty[kArgM] = 0;
  EXPECT_EQ(workspace(empty.data(), static_cast<int32_t>(empty.size())), -1);
  char error[256] = {};
  void* buffers[4] = {};
  EXPECT_NE(launch(buffers, 4, empty.data(), static_cast<int32_t>(empty.size()), nullptr, 0,
                   nullptr, error, sizeof(error)),
            0);
  EXPECT_THAT(std::string(error), ::testing::HasSubstr("the problem sizes are not positive"));
  // A buffer position past the buffers.
  EXPECT_NE(launch(buffers, 2, kernel->runtime_args.data(),
                   static_cast<int32_t>(kernel->runtime_args.size()), nullptr, 0, nullptr, error,
                   sizeof(error)),
            0);
  EXPECT_THAT(std::string(error), ::testing::HasSubstr("names no buffer"));
  dlclose(handle);
}

INSTANTIATE_TEST_SUITE_P(Templates, CutlassGemmCompileTest,
                         ::testing::Values(forge::v1::DTYPE_BFLOAT16, forge::v1::DTYPE_FLOAT32),
                         [](const auto& info) {
                           return info.param == forge::v1::DTYPE_BFLOAT16 ? std::string("sm90_tma_ws")
                                                                          : std::string("sm80_3xtf32");
                         });

}  // namespace
}  // namespace forge::codegen
