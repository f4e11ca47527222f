// What the 16-bit sm90 templates (sm90_tma_ws.cuh, sm90_gated.cuh) share, embedded at build time
// after cutlass_common.cuh and before the template. From the prologue's FORGE_ELEMENT,
// FORGE_TILE_M/_N/_K, FORGE_CLUSTER_M/_N and FORGE_PINGPONG it defines, in namespace
// forge_cutlass: Element, kAlignment (16 bytes of it), TileShape, ClusterShape, MainloopSchedule
// (warp-specialized cooperative or ping-pong), and Sm90Gemm<LayoutA, LayoutB, CollectiveEpilogue>:
// the device-level GEMM of CUTLASS's sm90 CollectiveBuilder mainloop (TMA, WGMMA, float
// accumulation, as many stages as the epilogue's shared memory leaves room for) over the template's
// epilogue.
//
// The build embeds the text after the next line, byte for byte (forge_embed_cuda): edits below it
// change the generated source, so they bump the family's generator_version.
// FORGE_EMBED_BEGIN
#include "cute/tensor.hpp"
#include "cutlass/gemm/collective/collective_builder.hpp"
#include "cutlass/gemm/device/gemm_universal_adapter.h"
#include "cutlass/gemm/dispatch_policy.hpp"
#include "cutlass/gemm/gemm.h"
#include "cutlass/gemm/kernel/gemm_universal.hpp"

namespace forge_cutlass {

using Element = FORGE_ELEMENT;
constexpr int kAlignment = 128 / cutlass::sizeof_bits<Element>::value;
using TileShape = cute::Shape<cute::Int<FORGE_TILE_M>, cute::Int<FORGE_TILE_N>, cute::Int<FORGE_TILE_K>>;
using ClusterShape = cute::Shape<cute::Int<FORGE_CLUSTER_M>, cute::Int<FORGE_CLUSTER_N>, cute::_1>;
#if FORGE_PINGPONG
using MainloopSchedule = cutlass::gemm::KernelTmaWarpSpecializedPingpong;
#else
using MainloopSchedule = cutlass::gemm::KernelTmaWarpSpecializedCooperative;
#endif

template <class LayoutA, class LayoutB, class CollectiveEpilogue>
using Sm90Gemm = cutlass::gemm::device::GemmUniversalAdapter<cutlass::gemm::kernel::GemmUniversal<
    cute::Shape<int, int, int, int>,
    typename cutlass::gemm::collective::CollectiveBuilder<
        cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, Element, LayoutA, kAlignment, Element,
        LayoutB, kAlignment, float, TileShape, ClusterShape,
        cutlass::gemm::collective::StageCountAutoCarveout<static_cast<int>(
            sizeof(typename CollectiveEpilogue::SharedStorage))>,
        MainloopSchedule>::CollectiveOp,
    CollectiveEpilogue>>;

}  // namespace forge_cutlass
