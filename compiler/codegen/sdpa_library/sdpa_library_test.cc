#include "compiler/codegen/sdpa_library/sdpa_library.h"

#include <cmath>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "compiler/codegen/aten_fallback/aten_fallback.h"
#include "compiler/codegen/family.h"
#include "compiler/codegen/testing/codegen_test_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/support/exported_model.h"

namespace forge::codegen {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

// The ATTENTION task of an exported test model (tests/fixtures/make_models.py), floats as `dtype`.
forge::v1::KernelTask AttentionTask(const std::string& model,
                                    forge::v1::DType dtype = forge::v1::DTYPE_FLOAT32) {
  return forge::testing::ExportedModelTask(model, forge::v1::KERNEL_FAMILY_ATTENTION, dtype).value();
}

std::vector<std::string> Ops(const forge::v1::KernelTask& task) {
  std::vector<std::string> ops;
  for (const auto& node : task.group().nodes()) ops.push_back(node.op().substr(6));
  return ops;
}

const forge::v1::Node& SdpaNode(const forge::v1::KernelTask& task) {
  for (const auto& node : task.group().nodes()) {
    if (node.op() == "aten::scaled_dot_product_attention") return node;
  }
  ADD_FAILURE() << "no SDPA node";
  return task.group().nodes(0);
}

const forge::v1::Argument& Arg(const forge::v1::Node& node, const std::string& name) {
  for (const auto& argument : node.arguments()) {
    if (argument.name() == name) return argument;
  }
  ADD_FAILURE() << "no argument " << name;
  return node.arguments(0);
}

// The templates whose points Validate accepts, and the reasons of the others.
std::vector<std::string> ValidTemplates(const forge::v1::KernelTask& task,
                                        std::vector<std::string>* reasons = nullptr) {
  const SdpaLibraryFamily family;
  absl::StatusOr<std::vector<TemplateSpace>> spaces = family.ScheduleSpace(task);
  EXPECT_TRUE(spaces.ok()) << spaces.status();
  std::vector<std::string> valid;
  if (!spaces.ok()) return valid;
  for (const TemplateSpace& space : *spaces) {
    absl::Status status = family.Validate(task, DefaultPoint(space));
    if (status.ok()) {
      valid.push_back(space.template_name);
    } else if (reasons != nullptr) {
      reasons->push_back(std::string(status.message()));
    }
  }
  return valid;
}

TEST(SdpaLibraryTest, Float32AttentionHasTheEfficientAndMathBackendsOnly) {
  const forge::v1::KernelTask task = AttentionTask("explicit_attention");
  std::vector<std::string> reasons;
  EXPECT_THAT(ValidTemplates(task, &reasons), ElementsAre("sdpa_efficient", "sdpa_math"));
  EXPECT_THAT(reasons, ElementsAre(HasSubstr("flash backend refuses B2 H4/4 Sq7 Sk7 D8/8 float32 "
                                             "causal scale 0.3536: it runs float16 and bfloat16"),
                                   HasSubstr("cudnn backend refuses")));
}

TEST(SdpaLibraryTest, HalfPrecisionCausalAttentionHasEveryBackend) {
  const forge::v1::KernelTask task =
      AttentionTask("explicit_attention", forge::v1::DTYPE_BFLOAT16);
  EXPECT_THAT(ValidTemplates(task),
              ElementsAre("sdpa_flash", "sdpa_efficient", "sdpa_cudnn", "sdpa_math"));
}

TEST(SdpaLibraryTest, GroupedQuerySdpaDeclinesTheEfficientKernel) {
  const forge::v1::KernelTask task = AttentionTask("sdpa_gqa", forge::v1::DTYPE_FLOAT16);
  std::vector<std::string> reasons;
  EXPECT_THAT(ValidTemplates(task, &reasons), ElementsAre("sdpa_flash", "sdpa_cudnn", "sdpa_math"));
  EXPECT_THAT(reasons, ElementsAre(HasSubstr("no grouped-query heads")));
}

TEST(SdpaLibraryTest, FlashDeclinesCausalAttentionWhoseQueryAndKeyLengthsDiffer) {
  // PyTorch refuses it at run time ("Invalid backend", found on the H200 with 3 queries over
  // 500 keys), so Validate declines it with the reason.
  const forge::v1::KernelTask task = codegen::testing::SdpaTask(
      forge::v1::DTYPE_BFLOAT16,
      {.batch = 1, .heads = 4, .kv_heads = 4, .q_len = 3, .kv_len = 500, .head_dim = 64},
      "causal");
  std::vector<std::string> reasons;
  EXPECT_THAT(ValidTemplates(task, &reasons), ElementsAre("sdpa_efficient", "sdpa_cudnn",
                                                          "sdpa_math"));
  EXPECT_THAT(reasons, ElementsAre(HasSubstr("no is_causal when the query and key lengths differ")));
}

TEST(SdpaLibraryTest, ExplicitAttentionBecomesOneSdpaCallWithTheBackend) {
  const forge::v1::KernelTask task = AttentionTask("explicit_attention");
  absl::StatusOr<forge::v1::KernelTask> rewritten =
      SdpaLibraryTask(task, SchedulePoint{"sdpa_efficient", {}});
  ASSERT_TRUE(rewritten.ok()) << rewritten.status();
  // The views that lay Q, K and V out of the fused projection stay, the chain and the causal
  // mask's builders go, and the epilogue (back to [B, S, H*D]) stays.
  EXPECT_THAT(Ops(*rewritten),
              ElementsAre("split", "view", "transpose", "view", "transpose", "view", "transpose",
                          "scaled_dot_product_attention", "transpose", "clone"));
  const forge::v1::Node& sdpa = SdpaNode(*rewritten);
  EXPECT_EQ(sdpa.attributes().at(kSdpaBackendAttribute), "efficient");
  EXPECT_TRUE(Arg(sdpa, "is_causal").bool_value());
  EXPECT_TRUE(Arg(sdpa, "attn_mask").has_none());
  EXPECT_NEAR(Arg(sdpa, "scale").float_value(), 1 / std::sqrt(8.0), 1e-15);
  // The same inputs and outputs: the worker binds the task's buffers to it.
  EXPECT_EQ(rewritten->group().inputs_size(), task.group().inputs_size());
  EXPECT_EQ(rewritten->group().outputs_size(), task.group().outputs_size());
  EXPECT_TRUE(PlanAtenFallback(*rewritten).ok()) << PlanAtenFallback(*rewritten).status();
}

TEST(SdpaLibraryTest, AnAtenCandidateRunsTheRewrittenTaskOrTheTaskItself) {
  const forge::v1::KernelTask task = AttentionTask("explicit_attention");
  absl::StatusOr<forge::v1::KernelTask> sdpa =
      AtenExecutedTask(task, SchedulePoint{"sdpa_math", {}});
  ASSERT_TRUE(sdpa.ok()) << sdpa.status();
  EXPECT_EQ(SdpaNode(*sdpa).attributes().at(kSdpaBackendAttribute), "math");
  absl::StatusOr<forge::v1::KernelTask> fallback =
      AtenExecutedTask(task, SchedulePoint{std::string(AtenFallbackFamily::kTemplateName), {}});
  ASSERT_TRUE(fallback.ok()) << fallback.status();
  EXPECT_EQ(fallback->SerializeAsString(), task.SerializeAsString());
  // A backend the task cannot take is the rewrite's error, not the task run otherwise.
  EXPECT_FALSE(AtenExecutedTask(task, SchedulePoint{"sdpa_flash", {}}).ok());
}

TEST(SdpaLibraryTest, AMaskThatIsNotCausalIsPassedAsTheKeptScores) {
  forge::v1::KernelTask task = AttentionTask("explicit_attention");
  // tril(ones, 1): the mask keeps one key past the diagonal, so it is not causal.
  for (auto& node : *task.mutable_group()->mutable_nodes()) {
    if (node.op() != "aten::tril") continue;
    auto* diagonal = node.add_arguments();
    diagonal->set_name("diagonal");
    diagonal->set_int_value(1);
  }
  std::vector<std::string> reasons;
  EXPECT_THAT(ValidTemplates(task, &reasons), ElementsAre("sdpa_efficient", "sdpa_math"));
  absl::StatusOr<forge::v1::KernelTask> rewritten =
      SdpaLibraryTask(task, SchedulePoint{"sdpa_math", {}});
  ASSERT_TRUE(rewritten.ok()) << rewritten.status();
  EXPECT_THAT(Ops(*rewritten), ::testing::IsSupersetOf({"ones", "tril", "bitwise_not",
                                                        "logical_not"}));
  const forge::v1::Node& sdpa = SdpaNode(*rewritten);
  EXPECT_FALSE(Arg(sdpa, "is_causal").bool_value());
  EXPECT_THAT(Arg(sdpa, "attn_mask").optional_tensor().value_name(), HasSubstr("_keep"));
}

TEST(SdpaLibraryTest, TheFamilyIsRegisteredAndPlansAnAtenCall) {
  const forge::v1::KernelTask task = AttentionTask("sdpa_gqa");
  const KernelFamily* family = FindFamily(forge::v1::KERNEL_FAMILY_SDPA_LIBRARY);
  ASSERT_NE(family, nullptr);
  std::vector<std::string> applicable;
  for (const KernelFamily* each : ApplicableFamilies(task)) {
    applicable.emplace_back(each->name());
  }
  EXPECT_THAT(applicable, ElementsAre("sdpa_library", "aten"));
  absl::StatusOr<GeneratedKernel> kernel =
      family->Generate(task, SchedulePoint{"sdpa_math", {}});
  ASSERT_TRUE(kernel.ok()) << kernel.status();
  EXPECT_EQ(kernel->hints.executor, Executor::kAten);
  EXPECT_EQ(kernel->hints.kernel_launches, 1);
  EXPECT_TRUE(kernel->source.empty());
  EXPECT_TRUE(IsSdpaLibraryTemplate(kernel->template_name));
  EXPECT_FALSE(IsSdpaLibraryTemplate(AtenFallbackFamily::kTemplateName));
  // Points outside the space and tasks that are not attention name the problem.
  EXPECT_THAT(family->Validate(task, SchedulePoint{"sdpa_fast", {}}).message(),
              HasSubstr("no template 'sdpa_fast'"));
  forge::v1::KernelTask gemm;
  gemm.set_family(forge::v1::KERNEL_FAMILY_GEMM);
  EXPECT_THAT(family->Applies(gemm).message(), HasSubstr("not an ATTENTION task"));
}

}  // namespace
}  // namespace forge::codegen
