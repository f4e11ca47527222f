#include "worker/compile/ptxas_report.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace forge::compile {
namespace {

using ::testing::ElementsAre;
using ::testing::Key;

// The logs below are verbatim NVRTC 13.0 program logs (--ptxas-options=-v).

// sm_80: a templated kernel, a __constant__ reader, a __launch_bounds__ kernel and a kernel with
// `__shared__ float buf[256]`; the module has 256 bytes of __constant__ data in cmem[3].
constexpr char kSm80Log[] =
    R"(ptxas info    : 0 bytes gmem, 256 bytes cmem[3]
ptxas info    : Compiling entry function '_Z12local_kernelILi64EEvPfPKi' for 'sm_80'
ptxas info    : Function properties for _Z12local_kernelILi64EEvPfPKi
ptxas         .     0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 30 registers, used 0 barriers, 368 bytes cmem[0]
ptxas info    : Compile time = 5.432 ms
ptxas info    : Compiling entry function '_Z6constyPf' for 'sm_80'
ptxas info    : Function properties for _Z6constyPf
ptxas         .     0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 8 registers, used 0 barriers, 360 bytes cmem[0]
ptxas info    : Compile time = 0.679 ms
ptxas info    : Compiling entry function 'smem_kernel' for 'sm_80'
ptxas info    : Function properties for smem_kernel
ptxas         .     0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 10 registers, used 1 barriers, 1024 bytes smem, 360 bytes cmem[0]
ptxas info    : Compile time = 0.742 ms
)";

// sm_90 with --maxrregcount=24: a kernel with a runtime-indexed local array (stack frame), and a
// kernel calling a __noinline__ device function that has its own properties block.
constexpr char kSm90StackLog[] =
    R"(ptxas info    : Overriding maximum register limit 256 for 'calls' with  24 of maxrregcount option
ptxas info    : Overriding maximum register limit 256 for 'spill_kernel' with  24 of maxrregcount option
ptxas info    : 0 bytes gmem
ptxas info    : Compiling entry function 'calls' for 'sm_90'
ptxas info    : Function properties for calls
ptxas         .     128 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 23 registers, used 0 barriers, 128 bytes cumulative stack size
ptxas info    : Compile time = 3.522 ms
ptxas info    : Function properties for _Z6helperPfi
ptxas         .     0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Compiling entry function 'spill_kernel' for 'sm_90'
ptxas info    : Function properties for spill_kernel
ptxas         .     1024 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 24 registers, used 0 barriers, 1024 bytes cumulative stack size
ptxas info    : Compile time = 9.024 ms
)";

// sm_90 with --maxrregcount=32: 48 live accumulators force real register spills.
constexpr char kSm90SpillLog[] =
    R"(ptxas info    : 0 bytes gmem
ptxas info    : Compiling entry function 'pressure' for 'sm_90'
ptxas info    : Function properties for pressure
ptxas         .     1384 bytes stack frame, 2620 bytes spill stores, 2648 bytes spill loads
ptxas info    : Used 32 registers, used 0 barriers, 1384 bytes cumulative stack size
ptxas info    : Compile time = 108.920 ms
)";

TEST(ParsePtxasReportTest, ReadsEveryKernelOfAnSm80Log) {
  const PtxasReport report = ParsePtxasReport(kSm80Log);
  EXPECT_THAT(report.functions, ElementsAre(Key("_Z12local_kernelILi64EEvPfPKi"),
                                            Key("_Z6constyPf"), Key("smem_kernel")));
  EXPECT_EQ(report.global_memory_bytes, 0);

  const PtxasFunctionReport* smem = report.Find("smem_kernel");
  ASSERT_NE(smem, nullptr);
  PtxasFunctionReport expected;
  expected.is_entry = true;
  expected.arch = "sm_80";
  expected.registers = 10;
  expected.barriers = 1;
  expected.shared_memory_bytes = 1024;
  expected.constant_memory_bytes = 360;  // module-wide cmem[3] is not the kernel's
  EXPECT_EQ(*smem, expected);

  const PtxasFunctionReport* templated = report.Find("_Z12local_kernelILi64EEvPfPKi");
  ASSERT_NE(templated, nullptr);
  EXPECT_EQ(templated->registers, 30);
  EXPECT_EQ(templated->constant_memory_bytes, 368);
  EXPECT_EQ(templated->shared_memory_bytes, 0);
}

TEST(ParsePtxasReportTest, AttributesStackFramesToTheRightFunction) {
  const PtxasReport report = ParsePtxasReport(kSm90StackLog);
  EXPECT_THAT(report.functions,
              ElementsAre(Key("_Z6helperPfi"), Key("calls"), Key("spill_kernel")));

  const PtxasFunctionReport* calls = report.Find("calls");
  ASSERT_NE(calls, nullptr);
  EXPECT_TRUE(calls->is_entry);
  EXPECT_EQ(calls->registers, 23);
  EXPECT_EQ(calls->stack_frame_bytes, 128);
  EXPECT_EQ(calls->cumulative_stack_bytes, 128);

  const PtxasFunctionReport* helper = report.Find("_Z6helperPfi");
  ASSERT_NE(helper, nullptr);
  EXPECT_FALSE(helper->is_entry);
  EXPECT_EQ(helper->stack_frame_bytes, 0);
  EXPECT_EQ(helper->registers, 0);

  const PtxasFunctionReport* spill = report.Find("spill_kernel");
  ASSERT_NE(spill, nullptr);
  EXPECT_EQ(spill->arch, "sm_90");
  EXPECT_EQ(spill->registers, 24);
  EXPECT_EQ(spill->stack_frame_bytes, 1024);
  EXPECT_EQ(spill->cumulative_stack_bytes, 1024);
  EXPECT_EQ(spill->spill_store_bytes, 0);
}

TEST(ParsePtxasReportTest, ReadsSpillStoresAndLoads) {
  const PtxasFunctionReport* pressure = ParsePtxasReport(kSm90SpillLog).Find("pressure");
  ASSERT_NE(pressure, nullptr);
  EXPECT_EQ(pressure->registers, 32);
  EXPECT_EQ(pressure->stack_frame_bytes, 1384);
  EXPECT_EQ(pressure->spill_store_bytes, 2620);
  EXPECT_EQ(pressure->spill_load_bytes, 2648);
}

TEST(ParsePtxasReportTest, IgnoresLinesThatAreNotPtxasFigures) {
  const PtxasReport report = ParsePtxasReport(
      "probe.cu(10): error: expected a \";\"\n"
      "ptxas warning : Registers are spilled to local memory in function 'k', 8 bytes spill "
      "stores\n"
      "ptxas info    : Compiling entry function 'k' for 'sm_90'\n"
      "ptxas info    : Used many registers, 12 widgets\n"
      "ptxas info    : Used 16 registers, used 0 barriers, 64 bytes smem\r\n"
      "1 error detected in the compilation of \"probe.cu\".\n");
  EXPECT_THAT(report.functions, ElementsAre(Key("k")));
  EXPECT_EQ(report.Find("k")->registers, 16);
  EXPECT_EQ(report.Find("k")->shared_memory_bytes, 64);
  EXPECT_EQ(report.Find("k")->spill_store_bytes, 0);
}

TEST(ParsePtxasReportTest, EmptyLogGivesEmptyReport) {
  EXPECT_EQ(ParsePtxasReport(""), PtxasReport{});
  EXPECT_EQ(ParsePtxasReport("").Find("anything"), nullptr);
}

}  // namespace
}  // namespace forge::compile
