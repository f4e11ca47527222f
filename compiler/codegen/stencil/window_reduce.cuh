// The window_reduce template's kernel (a window as a reduction: global and other large-window
// pools), embedded at build time after stencil_prelude.cuh. Per task, besides the prelude's:
// kWindowThreads (threads per window, a multiple of 32), kWindowsPerBlock, kVectorWidth (window
// columns per load).
//
// threadIdx.y picks one of the block's kWindowsPerBlock outputs (numbered (n, c, oh, ow),
// ow fastest); its kWindowThreads threads take the window's vectors in turn (consecutive threads
// on consecutive vectors of a window row: coalesced over an NCHW plane), each folding its taps
// into one accumulator (a vector outside the input is skipped: it lies wholly outside, since
// vectors start at multiples of kVectorWidth and kW is one). The threads then combine in a fixed
// order (warp shuffles, then the warps' values through shared memory in warp order): the same
// bits every launch. The window's first thread finishes and stores the output.
//
// The emitter replaces FORGE_STENCIL_PARAMETERS with the kernel's parameter list (the generated-
// kernel ABI) and FORGE_STENCIL_ARGUMENTS with the same names, passed on to the element functions,
// whose load lanes run along W and whose store writes one element (kStoreWidth 1).
//
// The build embeds the text after the next line, byte for byte (forge_embed_cuda): edits below it
// change the generated source, so they bump the family's generator_version.
// FORGE_EMBED_BEGIN
constexpr int kThreads = kWindowThreads * kWindowsPerBlock;
constexpr int kWarps = kWindowThreads / 32;
constexpr int kRowVectors = kKernelW / kVectorWidth;
constexpr int kWindowVectors = kKernelH * kRowVectors;
constexpr long long kOutputs = (long long)kN * kC * kOH * kOW;

__device__ __forceinline__ ForgeStencilAcc forge_stencil_combine(ForgeStencilAcc a,
                                                                 ForgeStencilAcc b) {
  if constexpr (kStencilOp == 1) return forge_max(a, b);
  return a + b;
}

extern "C" __global__ void __launch_bounds__(kThreads) forge_stencil(FORGE_STENCIL_PARAMETERS) {
  __shared__ ForgeStencilAcc partial[kWindowsPerBlock][kWarps];
  const int tx = threadIdx.x, ty = threadIdx.y;
  const ForgeStencilIndex output = (ForgeStencilIndex)blockIdx.x * kWindowsPerBlock + ty;
  const bool in_outputs = output < kOutputs;
  const int ow = in_outputs ? (int)(output % kOW) : 0;
  ForgeStencilIndex rest = output / kOW;
  const int oh = in_outputs ? (int)(rest % kOH) : 0;
  rest /= kOH;
  const int c = in_outputs ? (int)(rest % kC) : 0;
  const ForgeStencilIndex n = in_outputs ? rest / kC : 0;
  const int ih0 = oh * kStrideH - kPadH, iw0 = ow * kStrideW - kPadW;
  ForgeStencilAcc acc = forge_stencil_identity();
  if (in_outputs) {
    for (int e = tx; e < kWindowVectors; e += kWindowThreads) {
      const int kh = e / kRowVectors, kw = e % kRowVectors * kVectorWidth;
      const int ih = ih0 + kh * kDilationH, iw = iw0 + kw * kDilationW;
      if (ih < 0 || ih >= kH || iw < 0 || iw >= kW) continue;
      ForgeStencilAcc x[kVectorWidth];
      forge_stencil_load(FORGE_STENCIL_ARGUMENTS, n, c, ih, iw, x);
#pragma unroll
      for (int v = 0; v < kVectorWidth; ++v) {
        forge_stencil_tap(acc, x[v], forge_stencil_weight(FORGE_STENCIL_ARGUMENTS, c, kh, kw + v));
      }
    }
  }
#pragma unroll
  for (int offset = 16; offset > 0; offset /= 2) {
    acc = forge_stencil_combine(acc, __shfl_down_sync(0xffffffffu, acc, offset));
  }
  if constexpr (kWarps > 1) {
    if (tx % 32 == 0) partial[ty][tx / 32] = acc;
    __syncthreads();
    if (tx == 0) {
      acc = partial[ty][0];
#pragma unroll
      for (int w = 1; w < kWarps; ++w) acc = forge_stencil_combine(acc, partial[ty][w]);
    }
  }
  if (tx != 0 || !in_outputs) return;
  const ForgeStencilAcc y[kStoreWidth] = {
      forge_stencil_finish(acc, forge_stencil_bias(FORGE_STENCIL_ARGUMENTS, c), oh, ow)};
  forge_stencil_store(FORGE_STENCIL_ARGUMENTS, n, c, oh, ow, y);
}
