// The tiled template's kernel (NCHW-friendly, register-tiled), embedded at build time after
// stencil_prelude.cuh. Per task, besides the prelude's: kThreadsX, kThreadsY, kPlanesPerBlock,
// kRowsPerThread, kOutputsPerThread (columns per thread), kVectorWidth (elements along W per
// load and store), kStagedPitch (a staged row's elements: its columns, padded so that a warp's
// reads spread over the shared-memory banks).
//
// A block computes, for each of kPlanesPerBlock consecutive (n, c) planes (threadIdx.z), a tile of
// kThreadsY * kRowsPerThread output rows x kThreadsX * kOutputsPerThread output columns (blocks
// numbered plane-group-major). It first stages the tile's input window of each plane in shared
// memory: the fused prologue once per input element, loaded kVectorWidth columns at a time (the
// window's columns start kShift early so that every vector is aligned; a vector lies wholly
// inside or wholly outside the input, since kW is a multiple of kVectorWidth), the identity
// outside the input. Thread (x, y) then computes kRowsPerThread x kOutputsPerThread adjacent
// outputs: it reads each input row its outputs need from shared memory into registers once and
// applies it to every output and tap that uses it (register tiling: a 7x7 window over 4 x 8
// outputs reads 10 x 14 inputs, not 4 x 8 x 49), with the weights in registers. Outputs are
// stored kVectorWidth columns at a time (kOW is a multiple of it).
//
// The emitter replaces FORGE_STENCIL_PARAMETERS with the kernel's parameter list (the generated-
// kernel ABI) and FORGE_STENCIL_ARGUMENTS with the same names, passed on to the element functions,
// whose vector lanes run along W here.
//
// The build embeds the text after the next line, byte for byte (forge_embed_cuda): edits below it
// change the generated source, so they bump the family's generator_version.
// FORGE_EMBED_BEGIN
constexpr int kThreads = kThreadsX * kThreadsY * kPlanesPerBlock;
constexpr int kPlaneThreads = kThreadsX * kThreadsY;
constexpr int kTileW = kThreadsX * kOutputsPerThread;
constexpr int kTileH = kThreadsY * kRowsPerThread;
constexpr int kTilesW = (kOW + kTileW - 1) / kTileW;
constexpr int kTilesH = (kOH + kTileH - 1) / kTileH;
constexpr long long kPlanes = (long long)kN * kC;
// A thread's input rows and columns: its outputs' windows.
constexpr int kInRows = (kRowsPerThread - 1) * kStrideH + (kKernelH - 1) * kDilationH + 1;
constexpr int kInColumns = (kOutputsPerThread - 1) * kStrideW + (kKernelW - 1) * kDilationW + 1;
constexpr int kInTileH = (kTileH - 1) * kStrideH + (kKernelH - 1) * kDilationH + 1;
constexpr int kInTileW = (kTileW - 1) * kStrideW + (kKernelW - 1) * kDilationW + 1;
// Columns staged before the window's first, so that staged vectors start at multiples of
// kVectorWidth in the input (the tile's first window column is one less kPadW).
constexpr int kShift = (kVectorWidth - kPadW % kVectorWidth) % kVectorWidth;
constexpr int kStagedW = (kShift + kInTileW + kVectorWidth - 1) / kVectorWidth * kVectorWidth;
constexpr int kStagedVectors = kInTileH * (kStagedW / kVectorWidth);
static_assert(kStagedPitch >= kStagedW, "a staged row holds the window's columns");

extern "C" __global__ void __launch_bounds__(kThreads) forge_stencil(FORGE_STENCIL_PARAMETERS) {
  __shared__ ForgeStencilAcc staged[kPlanesPerBlock][kInTileH][kStagedPitch];
  const ForgeStencilIndex group = (ForgeStencilIndex)blockIdx.x / (kTilesW * kTilesH);
  const int tile = (int)((ForgeStencilIndex)blockIdx.x % (kTilesW * kTilesH));
  const int oh0 = (tile / kTilesW) * kTileH;
  const int ow0 = (tile % kTilesW) * kTileW;
  const int tx = threadIdx.x, ty = threadIdx.y, tz = threadIdx.z;
  const ForgeStencilIndex plane = group * kPlanesPerBlock + tz;
  const bool in_planes = plane < kPlanes;
  const ForgeStencilIndex n = in_planes ? plane / kC : 0;
  const int c = in_planes ? (int)(plane % kC) : 0;
  // Stage: each plane's threads copy its window, a vector of columns per step.
  const int ih0 = oh0 * kStrideH - kPadH, iw0 = ow0 * kStrideW - kPadW - kShift;
  for (int i = ty * kThreadsX + tx; i < kStagedVectors; i += kPlaneThreads) {
    const int r = i / (kStagedW / kVectorWidth), q = i % (kStagedW / kVectorWidth) * kVectorWidth;
    const int ih = ih0 + r, iw = iw0 + q;
    ForgeStencilAcc x[kVectorWidth];
#pragma unroll
    for (int v = 0; v < kVectorWidth; ++v) x[v] = forge_stencil_identity();
    if (in_planes && ih >= 0 && ih < kH && iw >= 0 && iw < kW) {
      forge_stencil_load(FORGE_STENCIL_ARGUMENTS, n, c, ih, iw, x);
    }
#pragma unroll
    for (int v = 0; v < kVectorWidth; ++v) staged[tz][r][q + v] = x[v];
  }
  ForgeStencilAcc weights[kRegisterWeights];
  forge_stencil_load_weights(FORGE_STENCIL_ARGUMENTS, c, weights);
  __syncthreads();
  const int oh_first = oh0 + ty * kRowsPerThread, ow_first = ow0 + tx * kOutputsPerThread;
  if (!in_planes || oh_first >= kOH || ow_first >= kOW) return;
  ForgeStencilAcc acc[kRowsPerThread][kOutputsPerThread];
#pragma unroll
  for (int t = 0; t < kRowsPerThread; ++t) {
#pragma unroll
    for (int j = 0; j < kOutputsPerThread; ++j) acc[t][j] = forge_stencil_identity();
  }
  // Input row i of the thread's window feeds output row t through kernel row (i - t * kStrideH) /
  // kDilationH where that is a whole kernel row: all known at compile time once unrolled.
#pragma unroll
  for (int i = 0; i < kInRows; ++i) {
    ForgeStencilAcc x[kInColumns];
    const ForgeStencilAcc* row = &staged[tz][ty * kRowsPerThread * kStrideH + i]
                                        [kShift + tx * kOutputsPerThread * kStrideW];
#pragma unroll
    for (int q = 0; q < kInColumns; ++q) x[q] = row[q];
#pragma unroll
    for (int t = 0; t < kRowsPerThread; ++t) {
      const int d = i - t * kStrideH;
      if (d < 0 || d % kDilationH != 0 || d / kDilationH >= kKernelH) continue;
      const int kh = d / kDilationH;
#pragma unroll
      for (int kw = 0; kw < kKernelW; ++kw) {
        const ForgeStencilAcc weight =
            forge_stencil_tap_weight(FORGE_STENCIL_ARGUMENTS, weights, c, kh, kw);
#pragma unroll
        for (int j = 0; j < kOutputsPerThread; ++j) {
          forge_stencil_tap(acc[t][j], x[j * kStrideW + kw * kDilationW], weight);
        }
      }
    }
  }
  const ForgeStencilAcc bias = forge_stencil_bias(FORGE_STENCIL_ARGUMENTS, c);
#pragma unroll
  for (int t = 0; t < kRowsPerThread; ++t) {
    const int oh = oh_first + t;
    if (oh >= kOH) break;
#pragma unroll
    for (int j = 0; j < kOutputsPerThread; j += kVectorWidth) {
      const int ow = ow_first + j;
      if (ow >= kOW) break;
      ForgeStencilAcc y[kVectorWidth];
#pragma unroll
      for (int v = 0; v < kVectorWidth; ++v) {
        y[v] = forge_stencil_finish(acc[t][j + v], bias, oh, ow + v);
      }
      forge_stencil_store(FORGE_STENCIL_ARGUMENTS, n, c, oh, ow, y);
    }
  }
}
