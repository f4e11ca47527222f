#include "compiler/codegen/nvcc_command/nvcc_command.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

#include "compiler/codegen/cutlass_gemm/cutlass_gemm.h"
#include "compiler/codegen/testing/codegen_test_util.h"

namespace forge::codegen {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using testing::TaskBuilder;
using testing::TensorArg;

const NvccToolchain kToolchain{"/usr/local/cuda/bin/nvcc", "/opt/cutlass/include"};

// The plan of mm(a, b) of `dtype` at its template's default point.
LaunchPlan MatmulPlan(forge::v1::DType dtype) {
  const forge::v1::KernelTask task =
      TaskBuilder()
          .Input("a", dtype, {64, 64})
          .Input("b", dtype, {64, 64})
          .Node("mm", "mm", "", {TensorArg("self", "a"), TensorArg("mat2", "b")}, dtype, {64, 64})
          .Output("mm")
          .Build(forge::v1::KERNEL_FAMILY_GEMM);
  const CutlassGemmFamily family;
  auto spaces = family.ScheduleSpace(task);
  EXPECT_TRUE(spaces.ok()) << spaces.status();
  auto plan = family.Plan(task, DefaultPoint(spaces->front()));
  EXPECT_TRUE(plan.ok()) << plan.status();
  return plan.ok() ? *plan : LaunchPlan{};
}

TEST(NvccCommandTest, Sm90TemplatesCompileForTheArchSpecificVariant) {
  auto argv = NvccCommand(MatmulPlan(forge::v1::DTYPE_BFLOAT16), kToolchain, "sm_90", "in.cu",
                          "out.so");
  ASSERT_TRUE(argv.ok()) << argv.status();
  EXPECT_THAT(*argv, ElementsAre("/usr/local/cuda/bin/nvcc", "-std=c++17", "-O3", "-arch=sm_90a",
                                 "-shared", "-Xcompiler", "-fPIC", "-I/opt/cutlass/include",
                                 "--expt-relaxed-constexpr", "-DNDEBUG", "-o", "out.so",
                                 "in.cu"));
}

TEST(NvccCommandTest, Sm80TemplatesCompileForTheTarget) {
  auto argv = NvccCommand(MatmulPlan(forge::v1::DTYPE_FLOAT32), kToolchain, "sm_80", "in.cu",
                          "out.so");
  ASSERT_TRUE(argv.ok()) << argv.status();
  EXPECT_THAT(*argv, ::testing::Contains("-arch=sm_80"));
}

TEST(NvccCommandTest, RefusesWhatNvccCannotBuild) {
  LaunchPlan nvrtc;
  nvrtc.kernel_name = "relu";
  EXPECT_THAT(std::string(NvccCommand(nvrtc, kToolchain, "sm_90", "in.cu", "out.so")
                              .status()
                              .message()),
              HasSubstr("not compiled by nvcc"));
  const LaunchPlan plan = MatmulPlan(forge::v1::DTYPE_BFLOAT16);
  EXPECT_THAT(std::string(NvccCommand(plan, {"/usr/local/cuda/bin/nvcc", ""}, "sm_90", "in.cu",
                                      "out.so")
                              .status()
                              .message()),
              HasSubstr("CUTLASS include"));
  EXPECT_FALSE(NvccCommand(plan, kToolchain, "hopper", "in.cu", "out.so").ok());
}

}  // namespace
}  // namespace forge::codegen
