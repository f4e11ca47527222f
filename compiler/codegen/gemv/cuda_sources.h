// The gemv family's CUDA, kept as a .cuh file in this folder and embedded at build time
// (forge_embed_cuda in compiler/codegen/CMakeLists.txt): the array holds the file's text after its
// "FORGE_EMBED_BEGIN" line, byte for byte, as the generated sources contain it.
#ifndef FORGE_COMPILER_CODEGEN_GEMV_CUDA_SOURCES_H_
#define FORGE_COMPILER_CODEGEN_GEMV_CUDA_SOURCES_H_

namespace forge::codegen::gemv {

// gemv.cuh: the kernel body (forge_gemv_run), after the kernel prelude and the FORGE_GEMV_*
// constants the emitter defines.
extern const char kGemvBody[];

}  // namespace forge::codegen::gemv

#endif  // FORGE_COMPILER_CODEGEN_GEMV_CUDA_SOURCES_H_
