// The flash_attention family (KERNEL_FAMILY_FLASH_ATTENTION): ATTENTION tasks generated as
// online-softmax kernels. Built so far: decode, split-KV flash-decoding for few queries over a
// long KV cache (template "split_kv_decode", one NVRTC kernel, split_kv_decode.cuh), loading K
// and V into registers or through a bandwidth-oriented cp.async pipeline (parameter stages).
//
// Tasks (attention_analysis.h: SDPA or the explicit pattern; the task's family stays ATTENTION):
//   - at most kMaxQueryLength query rows per head (decode's 1, speculative decoding's few), over
//     more keys than queries (a KV cache; prefill, Sq >= Sk, is declined);
//   - float32, float16 or bfloat16 Q, K, V and output, one head dim D <= 256 for Q, K and V;
//   - Q, K, V task inputs or chains of aliasing views of them (transpose, permute, slice,
//     select, view, unsqueeze, split, ...; a reshape only of a contiguous value), read in place
//     at the strides and storage offsets the export recorded, each with a unit stride along D;
//     what the group computes (a RoPE) is declined; K/V heads shared by H / Hkv query heads (GQA
//     from enable_gqa or folded repeats), key head = query head / (H / Hkv);
//   - no mask, causal (the task's is_causal: ATen's top-left alignment, key j hidden from query i
//     when j > i), or a mask tensor that is a task input broadcastable to the scores: bool (kept
//     or masked-out scores) or additive (float32 / float16 / bfloat16), with the explicit
//     pattern's fill and order of scale and mask;
//   - no fused epilogue: the task's one output is the attention's, in its dtype, at storage
//     offset 0, any strides.
// Anything else is declined in Applies with the reason, and the task keeps sdpa_library's
// backends and the ATen fallback.
//
// Template "split_kv_decode": grid (splits, batch x K/V heads, row chunks). Each block takes one
// (batch, K/V head, split of the keys) and the query rows of that head's whole GQA group, so K and
// V are read from DRAM once per group, with loads of up to 16 bytes: lanes of a warp split a key's
// head dim, a warp reads 32 / lanes keys at a time. Scores, the running max and sums are float32
// (an online softmax in base 2, Q pre-scaled by scale * log2(e)); lane groups then warps merge
// in a fixed order; with several splits, the last block of a (batch, K/V head, chunk) to finish
// combines the splits' float32 partials in split order (a ticket counter and the partials are
// the module's own __device__ memory, sized by the point: two launches of one loaded module must
// not run concurrently, which stream order guarantees). No atomics on data: the same bits on
// every run. A row whose every score is -inf is zeros for SDPA (its safe softmax) and NaN for the
// explicit pattern (softmax's 0 / 0). Parameters:
//   split_keys    32 .. 4096   keys per block (splits = ceil(keys / split_keys))
//   warps         1, 2, 4, 8   warps per block
//   unroll        1, 2, 4      keys each lane group loads before it computes with them
//   vector_width  1, 2, 4, 8   elements per load of K and V (at most 16 bytes)
//   rows          1 .. 16      query rows per block (of the group's H / Hkv x Sq); more rows
//                              re-read the group's K and V from L2 in other blocks
//   stages        0, 2, 3, 4   0: a step's K and V loaded straight into registers, so a warp
//                              waits one DRAM latency per step; 2..4: the bandwidth-oriented
//                              schedule, a ring of that many steps in shared memory filled with
//                              cp.async (sm_80+), the next stages - 1 steps' K and V requested
//                              before a step computes. Each thread copies and reads back only its
//                              own vectors, so the ring needs no barrier. The default is the
//                              deepest ring that fits, with splits for >= 2 blocks per SM.
//   max_registers 0, 128       0: the compiler's register count (__launch_bounds__(threads, 1));
//                              128: __launch_bounds__ asks for 64K / (128 x threads) blocks per
//                              SM (four blocks of 4 warps: Llama's default grid in one wave,
//                              where the compiler's own 130 registers fit three). The default
//                              where the point's data and row state leave room under it.
// Validate declines, with reasons: vectors wider than 16 bytes or misaligned by D, a stride or a
// storage offset; a ring (stages > 0) of vectors that are not 4, 8 or 16 bytes (what cp.async
// moves); a register cap over a point whose data and row state would spill under it; points
// whose registers (queries, accumulators, loads in flight) would spill;
// shared memory (the warps' merge buffers and the ring) past 48 KiB; a split longer than twice the keys (a smaller one is the same
// kernel) or shorter than the keys one step of the block reads (idle warps); rows idle for half
// the block; partials past kMaxWorkspaceBytes; grids past CUDA's limits.
#ifndef FORGE_COMPILER_CODEGEN_FLASH_ATTENTION_FLASH_ATTENTION_H_
#define FORGE_COMPILER_CODEGEN_FLASH_ATTENTION_FLASH_ATTENTION_H_

#include <cstdint>
#include <string>
#include <vector>

#include "compiler/codegen/family.h"

namespace forge::codegen {

class FlashAttentionFamily : public KernelFamily {
 public:
  static constexpr char kDecodeTemplate[] = "split_kv_decode";
  static constexpr char kDecodeKernel[] = "forge_flash_decode";
  // The most query rows per head the decode template takes (decode: 1; speculative: a few).
  static constexpr int64_t kMaxQueryLength = 16;
  // The largest head dim (registers hold a row's share of it per query row).
  static constexpr int64_t kMaxHeadDim = 256;
  // The most bytes the splits' partials may take in the module's __device__ memory.
  static constexpr int64_t kMaxWorkspaceBytes = int64_t{64} << 20;

  forge::v1::KernelFamily kind() const override {
    return forge::v1::KERNEL_FAMILY_FLASH_ATTENTION;
  }
  absl::string_view name() const override { return "flash_attention"; }
  absl::string_view generator_version() const override { return "flash_attention-2"; }

  absl::Status Applies(const forge::v1::KernelTask& task) const override;
  absl::StatusOr<std::vector<TemplateSpace>> ScheduleSpace(
      const forge::v1::KernelTask& task) const override;
  absl::Status Validate(const forge::v1::KernelTask& task,
                        const SchedulePoint& point) const override;
  absl::StatusOr<LaunchPlan> Plan(const forge::v1::KernelTask& task,
                                  const SchedulePoint& point) const override;
  absl::StatusOr<std::string> Emit(const forge::v1::KernelTask& task,
                                   const LaunchPlan& plan) const override;
};

}  // namespace forge::codegen

#endif  // FORGE_COMPILER_CODEGEN_FLASH_ATTENTION_FLASH_ATTENTION_H_
