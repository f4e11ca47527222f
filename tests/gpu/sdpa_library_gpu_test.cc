// The sdpa_library family's candidates through the real sandbox and forge-sandbox-child on a GPU:
// each of ATen's SDPA backends (flash, memory-efficient, cuDNN, math) that Validate accepts for an
// attention task, judged against the task's own ops in float64 and timed. Tasks: the exported
// test models' attention (GPT-2-style explicit causal attention, Mistral-style glue attention with
// GQA by repeat_interleave, SDPA with enable_gqa) in float32 and in bfloat16 / float16. A backend
// PyTorch refuses beyond Validate's checks must come back UNSUPPORTED with ATen's reason, never
// as a wrong result; the math backend must pass everywhere. Prints each backend's median.
// The child is $FORGE_SANDBOX_CHILD, else the one built here.
#include <cstdlib>
#include <iostream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "compiler/codegen/sdpa_library/sdpa_library.h"
#include "gtest/gtest.h"
#include "tests/support/exported_model.h"
#include "tests/support/gpu_test.h"
#include "worker/gpu/device.h"
#include "worker/sandbox/sandbox.h"

namespace forge::sandbox {
namespace {

// The ATTENTION task of an exported test model (tests/fixtures/make_models.py), floats as `dtype`.
forge::v1::KernelTask AttentionTask(const std::string& model,
                                    forge::v1::DType dtype = forge::v1::DTYPE_FLOAT32) {
  return testing::ExportedModelTask(model, forge::v1::KERNEL_FAMILY_ATTENTION, dtype).value();
}

std::string ChildPath() {
  const char* path = std::getenv("FORGE_SANDBOX_CHILD");
  return path != nullptr ? path : FORGE_SANDBOX_CHILD;
}

// One sandbox (one child) for every case, started at first use.
absl::StatusOr<Sandbox*> SharedSandbox() {
  static absl::StatusOr<Sandbox*>* shared = [] {
    auto sandbox = Sandbox::Create(SandboxOptions{.child_path = ChildPath()});
    return new absl::StatusOr<Sandbox*>(
        sandbox.ok() ? absl::StatusOr<Sandbox*>(sandbox->release()) : sandbox.status());
  }();
  return *shared;
}

class SdpaLibraryGpuTest : public ::testing::TestWithParam<std::pair<const char*, int>> {};

TEST_P(SdpaLibraryGpuTest, EveryValidBackendPassesTheJudgeOrIsUnsupported) {
  FORGE_SKIP_WITHOUT_GPU();
  absl::StatusOr<Sandbox*> sandbox = SharedSandbox();
  ASSERT_TRUE(sandbox.ok()) << sandbox.status();
  const auto [model, dtype] = GetParam();
  const forge::v1::KernelTask task = AttentionTask(model, static_cast<forge::v1::DType>(dtype));
  const codegen::SdpaLibraryFamily family;
  absl::StatusOr<std::vector<codegen::TemplateSpace>> spaces = family.ScheduleSpace(task);
  ASSERT_TRUE(spaces.ok()) << spaces.status();
  int passed = 0;
  for (const codegen::TemplateSpace& space : *spaces) {
    const codegen::SchedulePoint point = codegen::DefaultPoint(space);
    const std::string label = absl::StrCat(model, " ", forge::v1::DType_Name(dtype), " ",
                                           space.template_name);
    if (absl::Status valid = family.Validate(task, point); !valid.ok()) {
      std::cout << label << ": declined: " << valid.message() << "\n";
      continue;
    }
    SandboxCandidate candidate;
    candidate.digest = absl::StrCat(task.digest(), "-", space.template_name);
    candidate.task = task;
    absl::StatusOr<codegen::GeneratedKernel> kernel = family.Generate(task, point);
    ASSERT_TRUE(kernel.ok()) << kernel.status();
    candidate.kernel = *std::move(kernel);
    absl::StatusOr<SandboxOutcome> timed = (*sandbox)->Time(candidate);
    ASSERT_TRUE(timed.ok()) << label << ": " << timed.status();
    if (timed->failure.has_value()) {
      std::cout << label << ": " << timed->failure->ShortDebugString() << "\n";
      EXPECT_EQ(timed->failure->reason(), forge::v1::FAILURE_REASON_UNSUPPORTED) << label;
      EXPECT_NE(space.template_name, "sdpa_math") << label;
      continue;
    }
    ASSERT_TRUE(timed->timing.has_value()) << label;
    ++passed;
    std::cout << label << ": passed, median " << timed->timing->summary.median << " us\n";
  }
  EXPECT_GE(passed, 1);
}

INSTANTIATE_TEST_SUITE_P(
    Tasks, SdpaLibraryGpuTest,
    ::testing::Values(std::pair{"explicit_attention", int{forge::v1::DTYPE_FLOAT32}},
                      std::pair{"explicit_attention", int{forge::v1::DTYPE_BFLOAT16}},
                      std::pair{"glue_attention", int{forge::v1::DTYPE_FLOAT32}},
                      std::pair{"sdpa_gqa", int{forge::v1::DTYPE_FLOAT16}}));

}  // namespace
}  // namespace forge::sandbox
