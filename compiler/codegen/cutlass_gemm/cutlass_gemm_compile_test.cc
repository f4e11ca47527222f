// Compiles one configuration of each cutlass_gemm template into a shared object through the
// worker's compile pool (its nvcc command line), loads it with the worker's loader (dlopen needs
// no GPU) and checks the host-launch ABI: the entry points, the ABI version, and that bad runtime
// arguments are refused with a reason before any CUDA call. About a minute per compile: labelled
// slow.
#include <algorithm>
#include <ostream>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

#include "compiler/codegen/cutlass_gemm/cutlass_gemm.h"
#include "compiler/codegen/host_launch_abi.h"
#include "worker/library/host_launched.h"
#include "compiler/codegen/testing/codegen_test_util.h"

namespace forge::codegen {
namespace {

using forge::v1::KernelTask;

// A template, the dtype of the task that exercises it, and whether that task is a gated
// product (SwiGLU) rather than gelu(linear(x, w, bias)).
struct TemplateCase {
  const char* template_name;
  forge::v1::DType dtype;
  bool gated = false;
};

void PrintTo(const TemplateCase& c, std::ostream* os) { *os << c.template_name; }

class CutlassGemmCompileTest : public ::testing::TestWithParam<TemplateCase> {};

TEST_P(CutlassGemmCompileTest, CompilesToTheHostLaunchAbi) {
  if (!testing::HaveCutlass()) GTEST_SKIP() << "no CUTLASS headers (scripts/setup)";
  // gelu(linear(x, w, bias)): the bias and an activation exercise the fused epilogue; the gated
  // template's silu(x Wg^T) * (x Wu^T) its packing kernel and pair-combining epilogue.
  const KernelTask task =
      GetParam().gated
          ? testing::GatedLinearTask(GetParam().dtype, 256, 512, 128)
          : testing::LinearActivationTask(GetParam().dtype, 256, 512, 128, true, "gelu", "tanh");
  const CutlassGemmFamily family;
  auto spaces = family.ScheduleSpace(task);
  ASSERT_TRUE(spaces.ok()) << spaces.status();
  const auto space = std::find_if(spaces->begin(), spaces->end(), [](const TemplateSpace& s) {
    return s.template_name == GetParam().template_name;
  });
  ASSERT_NE(space, spaces->end()) << GetParam().template_name;
  auto kernel = family.Generate(task, DefaultPoint(*space));
  ASSERT_TRUE(kernel.ok()) << kernel.status();
  auto bytes = testing::CompileSharedObject(*kernel, "sm_90");
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  auto object = library::HostLaunchedObject::Load(*bytes);
  ASSERT_TRUE(object.ok()) << object.status();
  EXPECT_EQ((*object)->abi_version(), kHostLaunchAbiVersion);
  // Too few runtime arguments, and a problem of no rows: refused before any CUDA call.
  const std::vector<int64_t>& args = kernel->runtime_args;
  EXPECT_EQ((*object)->WorkspaceBytes(absl::MakeConstSpan(args).subspan(0, 3)).status().code(),
            absl::StatusCode::kOutOfRange);
  std::vector<int64_t> empty = args;
  empty[kArgM] = 0;
  EXPECT_EQ((*object)->WorkspaceBytes(empty).status().code(), absl::StatusCode::kOutOfRange);
  const std::vector<CUdeviceptr> buffers(4, 0);
  const absl::Status no_rows = (*object)->Launch(buffers, empty, 0, 0, nullptr);
  EXPECT_THAT(std::string(no_rows.message()),
              ::testing::HasSubstr("the problem sizes are not positive"));
  // A buffer position past the buffers.
  const absl::Status too_few =
      (*object)->Launch(absl::MakeConstSpan(buffers).subspan(0, 2), args, 0, 0, nullptr);
  EXPECT_THAT(std::string(too_few.message()), ::testing::HasSubstr("names no buffer"));
}

INSTANTIATE_TEST_SUITE_P(
    Templates, CutlassGemmCompileTest,
    ::testing::Values(TemplateCase{CutlassGemmFamily::kSm90Template, forge::v1::DTYPE_BFLOAT16},
                      TemplateCase{CutlassGemmFamily::kSm90ThreeTf32Template,
                                   forge::v1::DTYPE_FLOAT32},
                      TemplateCase{CutlassGemmFamily::kSm80Template, forge::v1::DTYPE_FLOAT32},
                      TemplateCase{CutlassGemmFamily::kSm90GatedTemplate,
                                   forge::v1::DTYPE_BFLOAT16, /*gated=*/true}),
    [](const auto& info) { return std::string(info.param.template_name); });

}  // namespace
}  // namespace forge::codegen
