// The flash_attention family's CUDA, kept as .cuh files in this folder and embedded at build time
// (forge_embed_cuda in compiler/codegen/CMakeLists.txt): each array holds its file's text after
// the "FORGE_EMBED_BEGIN" line, byte for byte, as the generated sources contain it.
#ifndef FORGE_COMPILER_CODEGEN_FLASH_ATTENTION_CUDA_SOURCES_H_
#define FORGE_COMPILER_CODEGEN_FLASH_ATTENTION_CUDA_SOURCES_H_

namespace forge::codegen::flash_attention {

// split_kv_decode.cuh: the decode kernel's body (forge_fa_run), after the kernel prelude and the
// FORGE_FA_* constants the emitter defines.
extern const char kSplitKvDecodeBody[];

}  // namespace forge::codegen::flash_attention

#endif  // FORGE_COMPILER_CODEGEN_FLASH_ATTENTION_CUDA_SOURCES_H_
