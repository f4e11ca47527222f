// Probe: a CUTLASS 3.x sm90 GEMM (TMA + WGMMA, warp-specialized) behind an extern "C" host entry,
// for run_probe.sh (compile time on the GPU machine, speed against cuBLAS, context sharing with
// a static cudart inside a dlopen'ed object).
#include <cuda_runtime.h>
#include "cutlass/cutlass.h"
#include "cute/tensor.hpp"
#include "cutlass/gemm/dispatch_policy.hpp"
#include "cutlass/gemm/collective/collective_builder.hpp"
#include "cutlass/epilogue/collective/collective_builder.hpp"
#include "cutlass/gemm/device/gemm_universal_adapter.h"
#include "cutlass/gemm/kernel/gemm_universal.hpp"
using namespace cute;

#ifndef ELEMENT
#define ELEMENT cutlass::bfloat16_t
#define TILE_M 128
#define TILE_N 256
#define CLUSTER_M 2
#define SCHEDULE KernelTmaWarpSpecializedCooperative
#define EPI_SCHEDULE TmaWarpSpecializedCooperative
#endif
using Element = ELEMENT;
// A row-major (M x K), B given as its transpose (N x K row-major = column-major K x N), D row-major.
using LayoutA = cutlass::layout::RowMajor;
using LayoutB = cutlass::layout::ColumnMajor;
using LayoutC = cutlass::layout::RowMajor;
using TileShape = Shape<Int<TILE_M>, Int<TILE_N>, _64>;
using ClusterShape = Shape<Int<CLUSTER_M>, _1, _1>;
using Epilogue = typename cutlass::epilogue::collective::CollectiveBuilder<
    cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, TileShape, ClusterShape,
    cutlass::epilogue::collective::EpilogueTileAuto, float, float, Element, LayoutC, 8, Element,
    LayoutC, 8, cutlass::epilogue::EPI_SCHEDULE>::CollectiveOp;
using Mainloop = typename cutlass::gemm::collective::CollectiveBuilder<
    cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, Element, LayoutA, 8, Element, LayoutB, 8,
    float, TileShape, ClusterShape,
    cutlass::gemm::collective::StageCountAutoCarveout<static_cast<int>(
        sizeof(typename Epilogue::SharedStorage))>,
    cutlass::gemm::SCHEDULE>::CollectiveOp;
using Kernel = cutlass::gemm::kernel::GemmUniversal<Shape<int, int, int, int>, Mainloop, Epilogue>;
using Gemm = cutlass::gemm::device::GemmUniversalAdapter<Kernel>;

extern "C" int probe_gemm(int M, int N, int K, const void* A, const void* B, void* D,
                          void* stream) {
  auto sA = make_stride(int64_t(K), _1{}, int64_t(0));
  auto sB = make_stride(int64_t(K), _1{}, int64_t(0));
  auto sD = make_stride(int64_t(N), _1{}, int64_t(0));
  typename Gemm::Arguments args{cutlass::gemm::GemmUniversalMode::kGemm,
                                {M, N, K, 1},
                                {(const Element*)A, sA, (const Element*)B, sB},
                                {{1.0f, 0.0f}, (const Element*)D, sD, (Element*)D, sD}};
  Gemm gemm;
  if (gemm.can_implement(args) != cutlass::Status::kSuccess) return 1;
  if (Gemm::get_workspace_size(args) != 0) return 2;
  if (gemm.initialize(args, nullptr, (cudaStream_t)stream) != cutlass::Status::kSuccess) return 3;
  if (gemm.run((cudaStream_t)stream) != cutlass::Status::kSuccess) return 4;
  return 0;
}
