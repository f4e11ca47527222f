#include "compiler/codegen/family.h"

#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/match.h"
#include "absl/strings/str_join.h"
#include "compiler/codegen/testing/codegen_test_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace forge::codegen {
namespace {

using ::forge::codegen::testing::CumsumTask;
using ::forge::codegen::testing::MatmulReluTask;
using ::forge::codegen::testing::ReluTask;
using ::forge::codegen::testing::SoftmaxTask;
using ::forge::v1::KernelTask;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr auto kF32 = forge::v1::DTYPE_FLOAT32;

std::vector<std::string> Names(const std::vector<const KernelFamily*>& families) {
  std::vector<std::string> names;
  for (const KernelFamily* family : families) names.emplace_back(family->name());
  return names;
}

TEST(FamilyTest, RegistryListsEveryFamilyOnce) {
  EXPECT_THAT(Names(AllFamilies()),
              ElementsAre("pointwise", "reduction", "scan", "stencil", "cutlass_gemm", "gemv",
                          "gemm_library", "cudnn_conv", "flash_attention", "sdpa_library",
                          "aten"));
  EXPECT_EQ(FindFamily(forge::v1::KERNEL_FAMILY_REDUCTION)->name(), "reduction");
  EXPECT_EQ(FindFamily(forge::v1::KERNEL_FAMILY_SCAN)->name(), "scan");
  EXPECT_EQ(FindFamily(forge::v1::KERNEL_FAMILY_STENCIL)->name(), "stencil");
  EXPECT_EQ(FindFamily(forge::v1::KERNEL_FAMILY_GEMM)->name(), "gemm_library");
  EXPECT_EQ(FindFamily(forge::v1::KERNEL_FAMILY_CUTLASS_GEMM)->name(), "cutlass_gemm");
  EXPECT_EQ(FindFamily(forge::v1::KERNEL_FAMILY_GEMV)->name(), "gemv");
  EXPECT_EQ(FindFamily(forge::v1::KERNEL_FAMILY_CUDNN_CONV)->name(), "cudnn_conv");
  EXPECT_EQ(FindFamily(forge::v1::KERNEL_FAMILY_SDPA_LIBRARY)->name(), "sdpa_library");
  EXPECT_EQ(FindFamily(forge::v1::KERNEL_FAMILY_FLASH_ATTENTION)->name(), "flash_attention");
  EXPECT_EQ(FindFamily(forge::v1::KERNEL_FAMILY_CONV), nullptr);
  for (const KernelFamily* family : AllFamilies()) {
    EXPECT_FALSE(family->generator_version().empty()) << family->name();
  }
}

TEST(FamilyTest, ComputeCapabilityOfReadsTheArch) {
  EXPECT_EQ(*ComputeCapabilityOf("sm_80"), 80);
  EXPECT_EQ(*ComputeCapabilityOf("sm_90a"), 90);
  EXPECT_EQ(*ComputeCapabilityOf("sm_100"), 100);
  for (const char* bad : {"", "sm_", "sm_9", "compute_90", "sm_9x", "gfx90a"}) {
    EXPECT_EQ(ComputeCapabilityOf(bad).status().code(), absl::StatusCode::kInvalidArgument) << bad;
  }
}

TEST(FamilyTest, GeneratorVersionsNameEveryFamilysVersionInRegistryOrder) {
  std::vector<std::string> versions;
  for (const KernelFamily* family : AllFamilies()) {
    versions.emplace_back(family->generator_version());
  }
  EXPECT_EQ(GeneratorVersions(), absl::StrJoin(versions, "+"));
  EXPECT_THAT(GeneratorVersions(), ::testing::HasSubstr(std::string(
                                       FindFamily(forge::v1::KERNEL_FAMILY_REDUCTION)
                                           ->generator_version())));
}

TEST(FamilyTest, ApplicableFamiliesAlwaysIncludeTheAtenFallback) {
  EXPECT_THAT(Names(ApplicableFamilies(ReluTask())), ElementsAre("pointwise", "aten"));
  EXPECT_THAT(Names(ApplicableFamilies(SoftmaxTask(kF32, 4, 16))), ElementsAre("reduction", "aten"));
  EXPECT_THAT(Names(ApplicableFamilies(MatmulReluTask())),
              ElementsAre("cutlass_gemm", "gemv", "gemm_library", "aten"));
  EXPECT_THAT(Names(ApplicableFamilies(CumsumTask(kF32, 4, 16))), ElementsAre("scan", "aten"));
}

TEST(FamilyTest, EnumeratePointsIsTheCartesianProductInAFixedOrder) {
  const TemplateSpace space{"t", {{"a", {1, 2}, 1}, {"b", {0, 1, 2}, 2}}};
  const std::vector<SchedulePoint> points = EnumeratePoints(space);
  ASSERT_EQ(points.size(), 6u);
  EXPECT_EQ(points.front().parameters, (std::map<std::string, int64_t>{{"a", 1}, {"b", 0}}));
  EXPECT_EQ(points.back().parameters, (std::map<std::string, int64_t>{{"a", 2}, {"b", 2}}));
  EXPECT_EQ(DefaultPoint(space).parameters, (std::map<std::string, int64_t>{{"a", 1}, {"b", 2}}));
  for (const SchedulePoint& point : points) EXPECT_TRUE(CheckPointInSpace(space, point).ok());
  EXPECT_THAT(CheckPointInSpace(space, SchedulePoint{"u", {}}).message(),
              HasSubstr("template 'u' is not 't'"));
}

// Plan is Generate without the source: the coordinator ranks points from plans alone, so a
// plan's launch and cost hints must be the generated kernel's.
TEST(FamilyTest, PlanIsTheGeneratedKernelWithoutItsSource) {
  for (const KernelTask& task : {ReluTask(), SoftmaxTask(kF32, 4, 16), MatmulReluTask(),
                                 CumsumTask(kF32, 4, 16), CumsumTask(kF32, 2, 1 << 20)}) {
    for (const KernelFamily* family : ApplicableFamilies(task)) {
      absl::StatusOr<std::vector<TemplateSpace>> spaces = family->ScheduleSpace(task);
      ASSERT_TRUE(spaces.ok()) << spaces.status();
      for (const TemplateSpace& space : *spaces) {
        const SchedulePoint point = DefaultPoint(space);
        absl::StatusOr<LaunchPlan> plan = family->Plan(task, point);
        absl::StatusOr<GeneratedKernel> kernel = family->Generate(task, point);
        ASSERT_TRUE(plan.ok()) << plan.status();
        ASSERT_TRUE(kernel.ok()) << kernel.status();
        const std::string label = absl::StrCat(family->name(), "/", space.template_name);
        EXPECT_EQ(plan->kernel_name, kernel->kernel_name) << label;
        EXPECT_EQ(plan->launch.grid, kernel->launch.grid) << label;
        EXPECT_EQ(plan->launch.block, kernel->launch.block) << label;
        EXPECT_EQ(plan->launch.dynamic_shared_bytes, kernel->launch.dynamic_shared_bytes) << label;
        EXPECT_EQ(plan->template_name, point.template_name) << label;
        EXPECT_EQ(plan->parameters, point.parameters) << label;
        EXPECT_EQ(plan->generator_version, family->generator_version()) << label;
        EXPECT_EQ(plan->hints.executor, kernel->hints.executor) << label;
        EXPECT_EQ(plan->hints.bytes_in_flight_per_thread, kernel->hints.bytes_in_flight_per_thread)
            << label;
        absl::StatusOr<std::string> source = family->Emit(task, *plan);
        ASSERT_TRUE(source.ok()) << source.status();
        EXPECT_EQ(*source, kernel->source) << label;
      }
    }
  }
}

// The hints say what runs the candidate, so that the cost models need no template names.
TEST(FamilyTest, CostHintsNameTheExecutor) {
  const auto executor = [](const KernelFamily& family, const KernelTask& task) {
    absl::StatusOr<std::vector<TemplateSpace>> spaces = family.ScheduleSpace(task);
    EXPECT_TRUE(spaces.ok()) << spaces.status();
    absl::StatusOr<LaunchPlan> plan = family.Plan(task, DefaultPoint(spaces->front()));
    EXPECT_TRUE(plan.ok()) << plan.status();
    return plan->hints.executor;
  };
  EXPECT_EQ(executor(*FindFamily(forge::v1::KERNEL_FAMILY_POINTWISE), ReluTask()),
            Executor::kGeneratedKernel);
  EXPECT_EQ(executor(*FindFamily(forge::v1::KERNEL_FAMILY_GEMM), MatmulReluTask()),
            Executor::kCublasLt);
  EXPECT_EQ(executor(*FindFamily(forge::v1::KERNEL_FAMILY_ATEN), MatmulReluTask()),
            Executor::kAten);
}

// The compile cost class of every template's default point, as the scheduler reads it: nvcc for
// CUTLASS's shared objects, NVRTC for a named generated kernel (a cuBLASLt call's epilogue
// kernel included), nothing for the ATen fallback and a plain cuBLASLt call.
TEST(FamilyTest, CompileCostOfFollowsWhatTheWorkerCompiles) {
  // tanh(a @ b) in bf16: cuBLASLt has no tanh epilogue (cublaslt_then_pointwise adds a kernel),
  // CUTLASS's epilogue has one.
  constexpr auto kBf16 = forge::v1::DTYPE_BFLOAT16;
  const KernelTask matmul_tanh =
      testing::TaskBuilder()
          .Input("a", kBf16, {128, 256})
          .Input("b", kBf16, {256, 512})
          .Node("mm", "mm", "default",
                {testing::TensorArg("self", "a"), testing::TensorArg("mat2", "b")}, kBf16,
                {128, 512})
          .Node("tanh", "tanh", "default", {testing::TensorArg("self", "mm")}, kBf16, {128, 512})
          .Output("tanh")
          .Build(forge::v1::KERNEL_FAMILY_GEMM);
  std::map<std::string, forge::v1::CompileCost> costs;
  for (const KernelTask& task : {ReluTask(), matmul_tanh}) {
    for (const KernelFamily* family : ApplicableFamilies(task)) {
      absl::StatusOr<std::vector<TemplateSpace>> spaces = family->ScheduleSpace(task);
      ASSERT_TRUE(spaces.ok()) << spaces.status();
      for (const TemplateSpace& space : *spaces) {
        absl::StatusOr<LaunchPlan> plan = family->Plan(task, DefaultPoint(space));
        if (!plan.ok()) continue;  // a default point this task's shapes rule out
        costs[absl::StrCat(family->name(), "/", space.template_name)] = CompileCostOf(*plan);
      }
    }
  }
  std::string listed;
  for (const auto& [name, cost] : costs) {
    absl::StrAppend(&listed, name, "=", forge::v1::CompileCost_Name(cost), " ");
  }
  const auto cost_of = [&](const std::string& name) {
    const auto it = costs.find(name);
    EXPECT_NE(it, costs.end()) << name << " not planned; planned: " << listed;
    return it == costs.end() ? forge::v1::COMPILE_COST_UNSPECIFIED : it->second;
  };
  EXPECT_EQ(cost_of("pointwise/pointwise_flat"), forge::v1::COMPILE_COST_NVRTC);
  EXPECT_EQ(cost_of("gemm_library/cublaslt_then_pointwise"), forge::v1::COMPILE_COST_NVRTC);
  EXPECT_EQ(cost_of("aten/aten_calls"), forge::v1::COMPILE_COST_NONE);
  int cutlass = 0;
  for (const auto& [name, cost] : costs) {
    if (!absl::StartsWith(name, "cutlass_gemm/")) continue;
    EXPECT_EQ(cost, forge::v1::COMPILE_COST_NVCC) << name;
    ++cutlass;
  }
  EXPECT_GT(cutlass, 0) << "no CUTLASS template planned; planned: " << listed;
  // A plain cuBLASLt call compiles nothing.
  LaunchPlan library;
  library.hints.executor = Executor::kCublasLt;
  EXPECT_EQ(CompileCostOf(library), forge::v1::COMPILE_COST_NONE);
}

}  // namespace
}  // namespace forge::codegen
