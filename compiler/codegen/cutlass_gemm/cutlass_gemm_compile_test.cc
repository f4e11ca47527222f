// Compiles one configuration of each cutlass_gemm template with the worker's nvcc command line
// (nvcc_command.h, through CompileHostLaunched) into a shared object, loads it (dlopen needs no
// GPU) and checks the host-launch ABI: the three entry points, the ABI version, and that bad
// runtime arguments are refused with a reason before any CUDA call. About a minute per compile:
// labelled slow.
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

#include "compiler/codegen/cutlass_gemm/cutlass_gemm.h"
#include "compiler/codegen/host_launch_abi.h"
#include "compiler/codegen/testing/codegen_test_util.h"

namespace forge::codegen {
namespace {

using forge::v1::KernelTask;

class CutlassGemmCompileTest : public ::testing::TestWithParam<forge::v1::DType> {};

TEST_P(CutlassGemmCompileTest, CompilesToTheHostLaunchAbi) {
  if (!testing::HaveCutlass()) GTEST_SKIP() << "no CUTLASS headers (scripts/setup)";
  // gelu(linear(x, w, bias)): the bias and an activation exercise the fused epilogue.
  const KernelTask task =
      testing::LinearActivationTask(GetParam(), 256, 512, 128, true, "gelu", "tanh");
  const CutlassGemmFamily family;
  auto spaces = family.ScheduleSpace(task);
  ASSERT_TRUE(spaces.ok()) << spaces.status();
  auto kernel = family.Generate(task, DefaultPoint(spaces->front()));
  ASSERT_TRUE(kernel.ok()) << kernel.status();
  auto object = testing::CompileHostLaunched(*kernel, "sm_90");
  ASSERT_TRUE(object.ok()) << object.status();
  const HostAbiVersionFn version = (*object)->version;
  const WorkspaceBytesFn workspace = (*object)->workspace_bytes;
  const HostLaunchFn launch = (*object)->launch;
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
}

INSTANTIATE_TEST_SUITE_P(Templates, CutlassGemmCompileTest,
                         ::testing::Values(forge::v1::DTYPE_BFLOAT16, forge::v1::DTYPE_FLOAT32),
                         [](const auto& info) {
                           return info.param == forge::v1::DTYPE_BFLOAT16 ? std::string("sm90_tma_ws")
                                                                          : std::string("sm80_3xtf32");
                         });

}  // namespace
}  // namespace forge::codegen
