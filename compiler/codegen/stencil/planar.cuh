// The planar template's kernel, embedded at build time after stencil_prelude.cuh. Per task,
// besides the prelude's: kThreadsX, kThreadsY, kOutputsPerThread, kStageInShared.
//
// A block computes a tile of kThreadsY output rows x kThreadsX * kOutputsPerThread output columns
// of one (n, c) plane (blocks numbered plane-major); thread (x, y) computes row y's outputs at
// columns x, x + kThreadsX, ... (consecutive threads, consecutive columns: coalesced). With
// kStageInShared the block first computes the tile's input window into shared memory (each input
// element's fused prologue once; outside the input, the identity) and the taps read it there;
// otherwise every tap loads its input element (through L1) and skips one outside the input.
//
// The emitter replaces FORGE_STENCIL_PARAMETERS with the kernel's parameter list (the generated-
// kernel ABI) and FORGE_STENCIL_ARGUMENTS with the same names, passed on to the element functions.
//
// The build embeds the text after the next line, byte for byte (forge_embed_cuda): edits below it
// change the generated source, so they bump the family's generator_version.
// FORGE_EMBED_BEGIN
constexpr int kThreads = kThreadsX * kThreadsY;
constexpr int kTileW = kThreadsX * kOutputsPerThread;
constexpr int kTilesW = (kOW + kTileW - 1) / kTileW;
constexpr int kTilesH = (kOH + kThreadsY - 1) / kThreadsY;
constexpr int kInTileH = (kThreadsY - 1) * kStrideH + (kKernelH - 1) * kDilationH + 1;
constexpr int kInTileW = (kTileW - 1) * kStrideW + (kKernelW - 1) * kDilationW + 1;

extern "C" __global__ void __launch_bounds__(kThreads) forge_stencil(FORGE_STENCIL_PARAMETERS) {
  __shared__ ForgeStencilAcc staged[kStageInShared ? kInTileH : 1][kStageInShared ? kInTileW : 1];
  const ForgeStencilIndex plane = (ForgeStencilIndex)blockIdx.x / (kTilesW * kTilesH);
  const int tile = (int)((ForgeStencilIndex)blockIdx.x % (kTilesW * kTilesH));
  const int oh0 = (tile / kTilesW) * kThreadsY;
  const int ow0 = (tile % kTilesW) * kTileW;
  const ForgeStencilIndex n = plane / kC;
  const int c = (int)(plane % kC);
  const int tx = threadIdx.x, ty = threadIdx.y;
  ForgeStencilAcc weights[kRegisterWeights];
  forge_stencil_load_weights(FORGE_STENCIL_ARGUMENTS, c, weights);
  if constexpr (kStageInShared) {
    const int ih0 = oh0 * kStrideH - kPadH, iw0 = ow0 * kStrideW - kPadW;
    for (int i = ty * kThreadsX + tx; i < kInTileH * kInTileW; i += kThreads) {
      const int r = i / kInTileW, q = i % kInTileW;
      const int ih = ih0 + r, iw = iw0 + q;
      ForgeStencilAcc x[1] = {forge_stencil_identity()};
      if (ih >= 0 && ih < kH && iw >= 0 && iw < kW) {
        forge_stencil_load(FORGE_STENCIL_ARGUMENTS, n, c, ih, iw, x);
      }
      staged[r][q] = x[0];
    }
    __syncthreads();
  }
  const int oh = oh0 + ty;
  if (oh >= kOH) return;
  const ForgeStencilAcc bias = forge_stencil_bias(FORGE_STENCIL_ARGUMENTS, c);
#pragma unroll
  for (int j = 0; j < kOutputsPerThread; ++j) {
    const int column = tx + j * kThreadsX;
    const int ow = ow0 + column;
    if (ow >= kOW) break;
    ForgeStencilAcc acc = forge_stencil_identity();
#pragma unroll kUnrollH
    for (int kh = 0; kh < kKernelH; ++kh) {
#pragma unroll kUnrollW
      for (int kw = 0; kw < kKernelW; ++kw) {
        const ForgeStencilAcc weight =
            forge_stencil_tap_weight(FORGE_STENCIL_ARGUMENTS, weights, c, kh, kw);
        if constexpr (kStageInShared) {
          forge_stencil_tap(
              acc, staged[ty * kStrideH + kh * kDilationH][column * kStrideW + kw * kDilationW],
              weight);
        } else {
          const int ih = oh * kStrideH - kPadH + kh * kDilationH;
          const int iw = ow * kStrideW - kPadW + kw * kDilationW;
          if (ih >= 0 && ih < kH && iw >= 0 && iw < kW) {
            ForgeStencilAcc x[1];
            forge_stencil_load(FORGE_STENCIL_ARGUMENTS, n, c, ih, iw, x);
            forge_stencil_tap(acc, x[0], weight);
          }
        }
      }
    }
    const ForgeStencilAcc y[1] = {forge_stencil_finish(acc, bias, oh, ow)};
    forge_stencil_store(FORGE_STENCIL_ARGUMENTS, n, c, oh, ow, y);
  }
}
