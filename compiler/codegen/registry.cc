// The registry of family.h (AllFamilies and what reads it), in forge::codegen: the one library
// that links every family, so that each family's own library links only forge::codegen_core.
#include <string>
#include <vector>

#include "absl/strings/str_join.h"
#include "compiler/codegen/aten_fallback/aten_fallback.h"
#include "compiler/codegen/cudnn_conv/cudnn_conv.h"
#include "compiler/codegen/cutlass_gemm/cutlass_gemm.h"
#include "compiler/codegen/family.h"
#include "compiler/codegen/flash_attention/flash_attention.h"
#include "compiler/codegen/gemm_library/gemm_library.h"
#include "compiler/codegen/gemv/gemv.h"
#include "compiler/codegen/pointwise/pointwise.h"
#include "compiler/codegen/reduction/reduction.h"
#include "compiler/codegen/scan/scan.h"
#include "compiler/codegen/sdpa_library/sdpa_library.h"
#include "compiler/codegen/stencil/stencil.h"

namespace forge::codegen {

const std::vector<const KernelFamily*>& AllFamilies() {
  static const auto* families = new std::vector<const KernelFamily*>{
      new PointwiseFamily(), new ReductionFamily(), new ScanFamily(), new StencilFamily(),
      new CutlassGemmFamily(), new GemvFamily(), new GemmLibraryFamily(), new CudnnConvFamily(),
      new FlashAttentionFamily(), new SdpaLibraryFamily(), new AtenFallbackFamily()};
  return *families;
}

const KernelFamily* FindFamily(forge::v1::KernelFamily kind) {
  for (const KernelFamily* family : AllFamilies()) {
    if (family->kind() == kind) return family;
  }
  return nullptr;
}

std::vector<const KernelFamily*> ApplicableFamilies(const forge::v1::KernelTask& task) {
  std::vector<const KernelFamily*> applicable;
  for (const KernelFamily* family : AllFamilies()) {
    if (family->Applies(task).ok()) applicable.push_back(family);
  }
  return applicable;
}

std::string GeneratorVersions() {
  std::vector<std::string> versions;
  for (const KernelFamily* family : AllFamilies()) {
    versions.emplace_back(family->generator_version());
  }
  return absl::StrJoin(versions, "+");
}

}  // namespace forge::codegen
