// The CUTLASS GEMM family: a GEMM task (linear / addmm / mm / bmm / matmul, with the epilogue the
// partitioner fused) run by a CUTLASS kernel that Forge instantiates, compiles with nvcc into a
// shared object and launches through the host-launch ABI (host_launch_abi.h): the executor is
// Executor::kHostLaunched, the compile output CompileOutput::kNvccSharedObject.
//
// Templates (each one .cuh in this folder, between cutlass_common.cuh and
// cutlass_entry_points.cuh, which hold what they share; the 16-bit sm90 ones after sm90_gemm.cuh,
// their shared mainloop):
//  - "sm90_tma_ws" (sm90_tma_ws.cuh) for bfloat16 and float16 tasks: CUTLASS 3.x CollectiveBuilder
//    kernels for Hopper (TMA, WGMMA, warp-specialized persistent kernels, TMA epilogue with an
//    epilogue fusion), float32 accumulation. Parameters:
//      tile_m, tile_n   64, 128, 256       the CTA tile (tile_k is 64)
//      tile_k           64
//      cluster_m/_n     1, 2               the thread block cluster
//      schedule         0 cooperative (two consumer warp groups split the tile's rows: needs
//                       tile_m >= 128, and not 256 x 256: 256 accumulator registers a thread),
//                       1 ping-pong (each consumer warp group owns a whole tile: tile_m <= 128,
//                       and not 128 x 256)
//      raster           0 CUTLASS's heuristic, 1 along M, 2 along N   (tile scheduler, run time)
//      swizzle          1, 2, 4, 8         the scheduler's max swizzle size (run time)
//    TMA needs every leading dimension and batch stride of A, B, C and D to be a multiple of 16
//    bytes, and a batch stride that is not 0 for a batched operand (no broadcast batch).
//    It compiles only for "sm_90a" (WGMMA and TMA multicast need the arch-specific variant): the
//    worker's compile pool builds every shared object for that variant on sm_90
//    (compile::SharedObjectArch).
//  - "sm80_3xtf32" (sm80_3xtf32.cuh) for float32 tasks: a CUTLASS 2.x device GEMM with
//    OpMultiplyAddFastF32 (3xTF32 on mma.sync: float32 accuracy on the tensor cores; never plain
//    TF32, which fails float32's tolerance). CUTLASS 4.2 has no sm90 3xTF32 mainloop, and
//    mma.sync runs on sm_80 and later. On Ampere it beats FFMA about twofold; on the H200 the
//    CUTLASS probe (benchmarks/results/2026-12-02-h200-cutlass-probe.md) measured it below FFMA
//    (41 TFLOP/s at best against 50): there it is a competitor that loses, and the cost model
//    says so. One parameter, `config`: an index into kSm80Configs (the threadblock tile, warp
//    tile and stages of CUTLASS's own profiler list for this math; default 7, the probe's best).
//    Global accesses are 16 bytes when every leading dimension, batch stride and contiguous extent
//    is a multiple of 4 elements, else one element (K need not be a multiple of anything).
//  - "sm90_3xtf32" (sm90_3xtf32.cuh) for float32 tasks on sm_90: the three TF32 products as one
//    CUTLASS 3.x WGMMA GEMM over a tripled K, after a split kernel that writes each operand's
//    TF32 big and small parts K-major into the workspace (any layout of A and B: the split reads
//    them through runtime strides), with CUTLASS's FP8 mainloop promotion (every `promotion` MMAs
//    the tensor cores' partial sum goes into a float32 register accumulator): the tensor cores'
//    TF32 accumulation alone loses float32's tolerance over a 3K-long sum. Parameters: tile_m
//    (128, 256), tile_n (64, 128), cluster_m/_n (1, 2), raster, swizzle, promotion (4, 8: MMAs
//    of K = 8 between promotions). Cooperative schedule, TMA epilogue (D and C need 16-byte
//    leading dimensions). The CUTLASS probe measured 1.89x eager float32 at 4096^3 with 0
//    elements outside float32's tolerance (benchmarks/results/2026-12-02-h200-cutlass-probe.md).
//  - "sm90_gated" (sm90_gated.cuh) for bfloat16 and float16 gated products (SwiGLU:
//    silu(x Wg^T) * (x Wu^T), gemm_analysis.h's GatedProductAnalysis; the partitioner forms the
//    task from a Llama/Mistral MLP's gate and up projections): ONE CUTLASS 3.x WGMMA GEMM over a
//    packed weight whose rows interleave the two weights (gate j, up j), written into the
//    workspace by a packing kernel before the GEMM, with an epilogue of Forge's own that turns
//    each accumulator column pair into act(gate) * up in registers and writes the n-wide output.
//    The parameters of sm90_tma_ws (tile_n counts packed columns: tile_n / 2 output columns).
//    Needs A's leading dimension and K (and M for a column-major A) to be multiples of 8
//    elements, both weights in one layout and leading dimension, no batch; anything else
//    (float32, a bias on a projection, an epilogue after the mul) is declined with the reason.
//
// Epilogue: D = activation(alpha * (A B) + beta * C + bias) with
//  - alpha: a scalar multiply (or divide) of the product, before anything is added;
//  - bias: a contiguous [n] or [1, n] task input broadcast over rows (linear's or addmm's bias,
//    or an add after the product);
//  - C: a residual add of a contiguous task input of the product's shape (beta = 1);
//  - activation: relu, gelu (erf and tanh forms), silu, sigmoid, tanh (computed in float with the
//    accurate libm functions; cutlass_common.cuh), leaky_relu and the clamps (hardtanh, relu6,
//    clamp, clamp_min, clamp_max) with scalar parameters, compiled into the configuration.
// in that order; then only reshapes to the task's one contiguous output of the product's dtype.
// sm80_3xtf32 expresses a bias as C with leading dimension 0, so not a bias and a residual
// together. Anything else (an activation before an add, a second output, a cast...) is declined
// by Applies / Validate with the node that cannot be expressed: the task keeps gemm_library's
// candidates.
//
// Compile once, launch everywhere: a candidate's source depends on its configuration only (the
// template, dtype, operand layouts, tile, cluster, schedule, epilogue kind), never on the task's
// shapes; sizes, leading dimensions, batch strides, buffer positions, alpha, beta, raster and
// swizzle travel in LaunchPlan::runtime_args, in RuntimeArg order (below), so that two tasks with
// the same configuration share one compiled shared object.
#ifndef FORGE_COMPILER_CODEGEN_CUTLASS_GEMM_CUTLASS_GEMM_H_
#define FORGE_COMPILER_CODEGEN_CUTLASS_GEMM_CUTLASS_GEMM_H_

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "compiler/codegen/family.h"

namespace forge::codegen {

// LaunchPlan::runtime_args of a cutlass_gemm candidate, by position. Buffer positions index the
// generated-kernel ABI's buffers (task inputs, then outputs); -1 is "absent". Scalars are the
// bits of an IEEE-754 double. The emitted source reads them as FORGE_ARG_<name> (the names below,
// from RuntimeArgName), so that this enum is their only definition.
enum RuntimeArg : int {
  kArgM,              // rows of A and D
  kArgN,              // columns of B and D
  kArgK,              // the reduction dimension
  kArgBatch,          // products (1: not batched)
  kArgA,              // buffer of A
  kArgLda,            // A's leading dimension (the stride of its non-unit dimension)
  kArgBatchStrideA,   // elements between A's batches (0: one A for every batch)
  kArgB,              // buffer of B
  kArgLdb,
  kArgBatchStrideB,
  kArgBias,           // buffer of bias[n] (sm90_tma_ws), or -1
  kArgC,              // buffer of C (residual; sm80_3xtf32: or the bias), or -1
  kArgLdc,            // C's row stride (0: a bias broadcast over rows)
  kArgBatchStrideC,
  kArgD,              // buffer of D (the task's output)
  kArgLdd,
  kArgBatchStrideD,
  kArgAlpha,          // double bits
  kArgBeta,           // double bits
  kArgRaster,         // sm90_tma_ws's raster order (0 heuristic, 1 along M, 2 along N)
  kArgSwizzle,        // sm90_tma_ws's max swizzle size
  kArgARowMajor,      // sm90_3xtf32: 1 when A (m x k) is row-major, 0 column-major
  kArgBRowMajor,      // sm90_3xtf32: 1 when B (k x n) is row-major, 0 column-major
  kArgPromotion,      // sm90_3xtf32: MMAs between promotions into float32 registers
  kArgBUp,            // sm90_gated: buffer of the up projection's B (B is the gate's), or -1
  kRuntimeArgCount,
};
// "M", "N", ..., "SWIZZLE": the FORGE_ARG_ suffix of `arg`.
const char* RuntimeArgName(RuntimeArg arg);

// One sm80_3xtf32 configuration: threadblock tile, warp tile, pipeline stages.
struct Sm80Config {
  int tb_m, tb_n, tb_k;
  int warp_m, warp_n, warp_k;
  int stages;
};
// CUTLASS's profiler list for 3xTF32 on sm80 (generator.py, GenerateSM80_TensorOp_1688_fast_fp32_
// math): the values of sm80_3xtf32's `config`.
inline constexpr std::array<Sm80Config, 9> kSm80Configs = {{
    {128, 128, 16, 32, 64, 16, 4},
    {128, 128, 16, 32, 64, 16, 3},
    {256, 64, 16, 64, 32, 16, 3},
    {64, 256, 16, 32, 64, 16, 3},
    {128, 64, 16, 64, 32, 16, 4},
    {64, 128, 16, 32, 64, 16, 4},
    {64, 64, 16, 32, 32, 16, 3},
    {128, 128, 32, 32, 64, 32, 3},
    {64, 64, 32, 32, 32, 32, 3},
}};

class CutlassGemmFamily : public KernelFamily {
 public:
  static constexpr char kSm90Template[] = "sm90_tma_ws";
  static constexpr char kSm80Template[] = "sm80_3xtf32";
  static constexpr char kSm90ThreeTf32Template[] = "sm90_3xtf32";
  static constexpr char kSm90GatedTemplate[] = "sm90_gated";

  forge::v1::KernelFamily kind() const override { return forge::v1::KERNEL_FAMILY_CUTLASS_GEMM; }
  absl::string_view name() const override { return "cutlass_gemm"; }
  absl::string_view generator_version() const override { return "cutlass_gemm-5"; }

  absl::Status Applies(const forge::v1::KernelTask& task) const override;
  absl::StatusOr<std::vector<TemplateSpace>> ScheduleSpace(
      const forge::v1::KernelTask& task) const override;
  absl::Status Validate(const forge::v1::KernelTask& task,
                        const SchedulePoint& point) const override;
  absl::StatusOr<LaunchPlan> Plan(const forge::v1::KernelTask& task,
                                  const SchedulePoint& point) const override;
  // A whole CUDA translation unit: a comment naming the configuration, its #defines (the
  // configuration and the FORGE_ARG_* positions), cutlass_common.cuh (which includes
  // "compiler/codegen/host_launch_abi.h": the compile pool provides it), the template's .cuh and
  // cutlass_entry_points.cuh. Identical for every task planned to the same configuration.
  absl::StatusOr<std::string> Emit(const forge::v1::KernelTask& task,
                                   const LaunchPlan& plan) const override;
  // sm90_tma_ws, sm90_3xtf32 and sm90_gated: sm_90 (Hopper) only; sm80_3xtf32: sm_80 and later.
  absl::Status SupportsArch(const forge::v1::KernelTask& task, const SchedulePoint& point,
                            absl::string_view target_arch) const override;
};

}  // namespace forge::codegen

#endif  // FORGE_COMPILER_CODEGEN_CUTLASS_GEMM_CUTLASS_GEMM_H_
