// The reduction family's CUDA, kept as .cuh files in this folder and embedded at build time
// (forge_embed_cuda in compiler/codegen/CMakeLists.txt): each array holds its file's text after
// the "FORGE_EMBED_BEGIN" line, byte for byte, as the generated sources contain it.
#ifndef FORGE_COMPILER_CODEGEN_REDUCTION_CUDA_SOURCES_H_
#define FORGE_COMPILER_CODEGEN_REDUCTION_CUDA_SOURCES_H_

namespace forge::codegen::reduction {

// reduction_prelude.cuh: row accumulators (softmax, Welford) and their combination across the
// threads of a row (warps, shared memory) or of a col_reduce row; follows the kernel prelude in
// every kernel of the family.
extern const char kReductionPrelude[];
// cluster_prelude.cuh: thread block cluster helpers (distributed shared memory, cp.async) of
// row_reduce with cluster_blocks > 1; its FORGE_WAIT_PENDING_CASES line is for the emitter to
// replace.
extern const char kClusterPrelude[];
// cross_entropy.cuh: the cross_entropy kernel, after the constants the emitter defines; its
// FORGE_CE_PARAMETERS and FORGE_CE_ALIASES are for the emitter to replace.
extern const char kCrossEntropyBody[];

}  // namespace forge::codegen::reduction

#endif  // FORGE_COMPILER_CODEGEN_REDUCTION_CUDA_SOURCES_H_
