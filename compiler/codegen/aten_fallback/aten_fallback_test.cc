#include "compiler/codegen/aten_fallback/aten_fallback.h"

#include <vector>

#include "compiler/codegen/testing/codegen_test_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace forge::codegen {
namespace {

using ::forge::codegen::testing::MatmulReluTask;
using ::forge::codegen::testing::ReluTask;
using ::forge::codegen::testing::SoftmaxTask;
using ::forge::v1::KernelTask;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr auto kF32 = forge::v1::DTYPE_FLOAT32;

TEST(AtenFallbackTest, AppliesToAnyWellFormedTaskAndGeneratesNoSource) {
  AtenFallbackFamily family;
  for (const KernelTask& task : {ReluTask(), SoftmaxTask(kF32, 4, 16), MatmulReluTask()}) {
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
  absl::StatusOr<AtenFallbackPlan> plan = PlanAtenFallback(MatmulReluTask());
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
