// The cutlass_gemm family's CUDA, kept as .cuh files in this folder and embedded at build time (forge_embed_cuda in compiler/codegen/CMakeLists.txt): each array holds
// its file's text after the "FORGE_EMBED_BEGIN" line, byte for byte, as the sources contain it.
#ifndef FORGE_COMPILER_CODEGEN_CUTLASS_GEMM_CUDA_SOURCES_H_
#define FORGE_COMPILER_CODEGEN_CUTLASS_GEMM_CUDA_SOURCES_H_

namespace forge::codegen::cutlass_gemm {

// cutlass_common.cuh: runtime-argument access, errors, accurate activation functors.
extern const char kCutlassCommon[];
// sm90_gemm.cuh: what the 16-bit sm90 templates share (Element, tiles, Sm90Gemm), before them.
extern const char kSm90Gemm[];
// One template each, after the above.
extern const char kSm90TmaWs[];
extern const char kSm80ThreeTf32[];
extern const char kSm90ThreeTf32[];
extern const char kSm90Gated[];
// cutlass_entry_points.cuh: forge_workspace_bytes and forge_launch, after the template.
extern const char kCutlassEntryPoints[];

}  // namespace forge::codegen::cutlass_gemm

#endif  // FORGE_COMPILER_CODEGEN_CUTLASS_GEMM_CUDA_SOURCES_H_
