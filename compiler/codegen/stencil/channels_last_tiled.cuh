// The channels_last_tiled template's kernel, embedded at build time after stencil_prelude.cuh.
// Per task, besides the prelude's: kChannelThreads, kColumnThreads, kRowThreads, kVectorWidth
// (channels per thread), kOutputsPerThread (adjacent output columns per thread).
//
// A block covers kChannelThreads * kVectorWidth consecutive channels (a chunk) of a spatial tile
// of kRowThreads output rows x kColumnThreads * kOutputsPerThread output columns of one sample
// (blocks numbered (n, row tile, column tile, chunk), the chunk fastest). Thread (x, y, z) computes
// channels x * kVectorWidth of the chunk (consecutive threads on consecutive channel vectors:
// coalesced when C is innermost in memory) at output row z and kOutputsPerThread adjacent columns
// of column group y. The block first copies its chunk's weights into shared memory, tap-major
// (a thread then reads its channels' weights of a tap as one vector); per kernel row, a thread
// loads each input vector its outputs' windows need once (through L1, where the block's other
// rows and columns find it again) and applies it to every output and tap that uses it, the
// identity outside the input.
//
// The emitter replaces FORGE_STENCIL_PARAMETERS with the kernel's parameter list (the generated-
// kernel ABI) and FORGE_STENCIL_ARGUMENTS with the same names, passed on to the element functions,
// whose vector lanes run along C here.
//
// The build embeds the text after the next line, byte for byte (forge_embed_cuda): edits below it
// change the generated source, so they bump the family's generator_version.
// FORGE_EMBED_BEGIN
constexpr int kThreads = kChannelThreads * kColumnThreads * kRowThreads;
constexpr int kChunk = kChannelThreads * kVectorWidth;
constexpr int kChunks = (kC + kChunk - 1) / kChunk;
constexpr int kTileW = kColumnThreads * kOutputsPerThread;
constexpr int kTilesW = (kOW + kTileW - 1) / kTileW;
constexpr int kTilesH = (kOH + kRowThreads - 1) / kRowThreads;
constexpr int kTaps = kKernelH * kKernelW;
// A thread's input columns in one kernel row: its outputs' windows.
constexpr int kInColumns = (kOutputsPerThread - 1) * kStrideW + (kKernelW - 1) * kDilationW + 1;

extern "C" __global__ void __launch_bounds__(kThreads) forge_stencil(FORGE_STENCIL_PARAMETERS) {
  __shared__ ForgeStencilAcc staged_weights[kStencilOp == 0 ? kTaps : 1][kChunk];
  const int chunk = (int)((ForgeStencilIndex)blockIdx.x % kChunks);
  ForgeStencilIndex rest = (ForgeStencilIndex)blockIdx.x / kChunks;
  const int tile_w = (int)(rest % kTilesW);
  rest /= kTilesW;
  const int tile_h = (int)(rest % kTilesH);
  const ForgeStencilIndex n = rest / kTilesH;
  const int tx = threadIdx.x, ty = threadIdx.y, tz = threadIdx.z;
  const int c0 = chunk * kChunk;
  if constexpr (kStencilOp == 0) {
    const int thread = (tz * kColumnThreads + ty) * kChannelThreads + tx;
    for (int i = thread; i < kTaps * kChunk; i += kThreads) {
      const int tap = i / kChunk, channel = c0 + i % kChunk;
      staged_weights[tap][i % kChunk] =
          channel < kC ? forge_stencil_weight(FORGE_STENCIL_ARGUMENTS, channel, tap / kKernelW,
                                              tap % kKernelW)
                       : (ForgeStencilAcc)0;
    }
    __syncthreads();
  }
  const int c = c0 + tx * kVectorWidth;
  const int oh = tile_h * kRowThreads + tz;
  const int ow0 = tile_w * kTileW + ty * kOutputsPerThread;
  if (c >= kC || oh >= kOH || ow0 >= kOW) return;
  ForgeStencilAcc acc[kOutputsPerThread][kVectorWidth];
#pragma unroll
  for (int j = 0; j < kOutputsPerThread; ++j) {
#pragma unroll
    for (int v = 0; v < kVectorWidth; ++v) acc[j][v] = forge_stencil_identity();
  }
  const int iw0 = ow0 * kStrideW - kPadW;
#pragma unroll kUnrollH
  for (int kh = 0; kh < kKernelH; ++kh) {
    const int ih = oh * kStrideH - kPadH + kh * kDilationH;
    if (ih < 0 || ih >= kH) continue;
    ForgeStencilAcc x[kInColumns][kVectorWidth];
#pragma unroll
    for (int q = 0; q < kInColumns; ++q) {
      const int iw = iw0 + q;
      if (iw >= 0 && iw < kW) {
        forge_stencil_load(FORGE_STENCIL_ARGUMENTS, n, c, ih, iw, x[q]);
      } else {
#pragma unroll
        for (int v = 0; v < kVectorWidth; ++v) x[q][v] = forge_stencil_identity();
      }
    }
#pragma unroll
    for (int kw = 0; kw < kKernelW; ++kw) {
      ForgeStencilAcc weight[kVectorWidth];
#pragma unroll
      for (int v = 0; v < kVectorWidth; ++v) {
        if constexpr (kStencilOp == 0) {
          weight[v] = staged_weights[kh * kKernelW + kw][tx * kVectorWidth + v];
        } else {
          weight[v] = (ForgeStencilAcc)1;
        }
      }
#pragma unroll
      for (int j = 0; j < kOutputsPerThread; ++j) {
#pragma unroll
        for (int v = 0; v < kVectorWidth; ++v) {
          forge_stencil_tap(acc[j][v], x[j * kStrideW + kw * kDilationW][v], weight[v]);
        }
      }
    }
  }
  forge_stencil_store_columns<kVectorWidth>(FORGE_STENCIL_ARGUMENTS, acc, n, c, oh, ow0);
}
