// The gemv family's CUDA, kept as .cuh files in this folder and embedded at build time
// (forge_embed_cuda in compiler/codegen/CMakeLists.txt): each array holds its file's text after its
// "FORGE_EMBED_BEGIN" line, byte for byte, as the generated sources contain it.
#ifndef FORGE_COMPILER_CODEGEN_GEMV_CUDA_SOURCES_H_
#define FORGE_COMPILER_CODEGEN_GEMV_CUDA_SOURCES_H_

namespace forge::codegen::gemv {

// gemv.cuh: the shared kernel code (forge_gemv_run, the cluster's sums), after the kernel prelude
// and the FORGE_GEMV_* constants the emitter defines.
extern const char kGemvBody[];
// The templates' bodies (forge_gemv_block), after kGemvBody: gemv_ffma.cuh (template "gemv") and
// gemv_mma.cuh (template "gemv_mma").
extern const char kGemvFfmaBody[];
extern const char kGemvMmaBody[];

}  // namespace forge::codegen::gemv

#endif  // FORGE_COMPILER_CODEGEN_GEMV_CUDA_SOURCES_H_
