#include "compiler/codegen/family.h"

#include <string>
#include <vector>

#include "absl/strings/str_join.h"
#include "compiler/codegen/aten_fallback.h"
#include "compiler/codegen/codegen_test_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace forge::codegen {
namespace {

using ::forge::codegen::testing::IntArg;
using ::forge::codegen::testing::TaskBuilder;
using ::forge::codegen::testing::TensorArg;
using ::forge::v1::KernelTask;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr auto kF32 = forge::v1::DTYPE_FLOAT32;

KernelTask ReluTask() {
  return TaskBuilder()
      .Input("x", kF32, {16})
      .Node("relu", "relu", "default", {TensorArg("self", "x")}, kF32, {16})
      .Output("relu")
      .Build(forge::v1::KERNEL_FAMILY_POINTWISE);
}

KernelTask SoftmaxTask() {
  return TaskBuilder()
      .Input("x", kF32, {4, 16})
      .Node("softmax", "softmax", "int", {TensorArg("self", "x"), IntArg("dim", -1)}, kF32, {4, 16})
      .Output("softmax")
      .Build(forge::v1::KERNEL_FAMILY_REDUCTION);
}

KernelTask MatmulTask() {
  return TaskBuilder()
      .Input("a", kF32, {4, 8})
      .Input("b", kF32, {8, 2})
      .Node("mm", "mm", "default", {TensorArg("self", "a"), TensorArg("mat2", "b")}, kF32, {4, 2})
      .Node("relu", "relu", "default", {TensorArg("self", "mm")}, kF32, {4, 2})
      .Output("relu")
      .Build(forge::v1::KERNEL_FAMILY_ATEN);
}

std::vector<std::string> Names(const std::vector<const KernelFamily*>& families) {
  std::vector<std::string> names;
  for (const KernelFamily* family : families) names.emplace_back(family->name());
  return names;
}

TEST(FamilyTest, RegistryListsEveryFamilyOnce) {
  EXPECT_THAT(Names(AllFamilies()), ElementsAre("pointwise", "reduction", "gemm_library", "aten"));
  EXPECT_EQ(FindFamily(forge::v1::KERNEL_FAMILY_REDUCTION)->name(), "reduction");
  EXPECT_EQ(FindFamily(forge::v1::KERNEL_FAMILY_GEMM)->name(), "gemm_library");
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
  EXPECT_THAT(Names(ApplicableFamilies(SoftmaxTask())), ElementsAre("reduction", "aten"));
  EXPECT_THAT(Names(ApplicableFamilies(MatmulTask())), ElementsAre("gemm_library", "aten"));
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

TEST(AtenFallbackTest, AppliesToAnyWellFormedTaskAndGeneratesNoSource) {
  AtenFallbackFamily family;
  for (const KernelTask& task : {ReluTask(), SoftmaxTask(), MatmulTask()}) {
    absl::StatusOr<std::vector<TemplateSpace>> space = family.ScheduleSpace(task);
    ASSERT_TRUE(space.ok()) << space.status();
    ASSERT_EQ(space->size(), 1u);
    EXPECT_TRUE(space->front().parameters.empty());
    absl::StatusOr<GeneratedKernel> kernel = family.Generate(task, DefaultPoint(space->front()));
    ASSERT_TRUE(kernel.ok()) << kernel.status();
    EXPECT_TRUE(IsAtenFallback(*kernel));
    EXPECT_EQ(kernel->template_name, "aten_calls");
    EXPECT_EQ(kernel->generator_version, "aten-1");
  }
  EXPECT_THAT(family.Validate(ReluTask(), SchedulePoint{"aten_calls", {{"threads", 1}}}).message(),
              HasSubstr("has no parameter 'threads'"));
}

TEST(AtenFallbackTest, PlanListsTheCallsInOrder) {
  absl::StatusOr<AtenFallbackPlan> plan = PlanAtenFallback(MatmulTask());
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_THAT(plan->input_values, ElementsAre("a", "b"));
  ASSERT_EQ(plan->calls.size(), 2u);
  EXPECT_EQ(plan->calls[0].op, "aten::mm");
  EXPECT_EQ(plan->calls[0].node_name, "mm");
  EXPECT_EQ(plan->calls[1].op, "aten::relu");
  EXPECT_THAT(plan->output_values, ElementsAre("relu"));
}

TEST(AtenFallbackTest, RejectsGroupsItCannotRun) {
  KernelTask dangling = ReluTask();
  dangling.mutable_group()->mutable_nodes(0)->mutable_arguments(0)->set_tensor("ghost");
  absl::Status status = AtenFallbackFamily().Applies(dangling);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("aten::relu.default (node relu) reads 'ghost'"));

  KernelTask no_schema = ReluTask();
  no_schema.mutable_group()->mutable_nodes(0)->clear_schema();
  EXPECT_THAT(AtenFallbackFamily().Applies(no_schema).message(),
              HasSubstr("node 'relu' has no op or schema"));
}

}  // namespace
}  // namespace forge::codegen
