// The CUDA of the stencil family, embedded at build time from the .cuh files of this folder
// (forge_embed_cuda in CMakeLists.txt): each symbol is the file's text after its
// "// FORGE_EMBED_BEGIN" line.
#ifndef FORGE_COMPILER_CODEGEN_STENCIL_CUDA_SOURCES_H_
#define FORGE_COMPILER_CODEGEN_STENCIL_CUDA_SOURCES_H_

namespace forge::codegen::stencil {

extern const char kStencilPrelude[];    // stencil_prelude.cuh
extern const char kPlanarBody[];        // planar.cuh
extern const char kChannelsLastBody[];  // channels_last.cuh
extern const char kTiledBody[];         // tiled.cuh
extern const char kChannelsLastTiledBody[];  // channels_last_tiled.cuh
extern const char kWindowReduceBody[];  // window_reduce.cuh

}  // namespace forge::codegen::stencil

#endif  // FORGE_COMPILER_CODEGEN_STENCIL_CUDA_SOURCES_H_
