// The channels_last template's kernel, embedded at build time after stencil_prelude.cuh. Per
// task, besides the prelude's: kVectorWidth, kOutputsPerThread, kThreads.
//
// Thread i computes kVectorWidth consecutive channels (the fastest-varying part of i: consecutive
// threads read consecutive channel vectors, coalesced when C is innermost in memory) at
// kOutputsPerThread consecutive output columns of one output row; its inputs are read through L1,
// a vector of channels per tap and column where the tensor allows (forge_stencil_load). A tap
// outside the input is skipped.
//
// The emitter replaces FORGE_STENCIL_PARAMETERS with the kernel's parameter list (the generated-
// kernel ABI) and FORGE_STENCIL_ARGUMENTS with the same names, passed on to the element functions.
//
// The build embeds the text after the next line, byte for byte (forge_embed_cuda): edits below it
// change the generated source, so they bump the family's generator_version.
// FORGE_EMBED_BEGIN
constexpr int kChannelVectors = kC / kVectorWidth;
constexpr int kColumnGroups = (kOW + kOutputsPerThread - 1) / kOutputsPerThread;
constexpr long long kItems = (long long)kN * kOH * kColumnGroups * kChannelVectors;

extern "C" __global__ void __launch_bounds__(kThreads) forge_stencil(FORGE_STENCIL_PARAMETERS) {
  const ForgeStencilIndex item = (ForgeStencilIndex)blockIdx.x * kThreads + threadIdx.x;
  if (item >= kItems) return;
  const int c = (int)(item % kChannelVectors) * kVectorWidth;
  ForgeStencilIndex rest = item / kChannelVectors;
  const int ow0 = (int)(rest % kColumnGroups) * kOutputsPerThread;
  rest /= kColumnGroups;
  const int oh = (int)(rest % kOH);
  const ForgeStencilIndex n = rest / kOH;
  ForgeStencilAcc acc[kOutputsPerThread][kVectorWidth];
#pragma unroll
  for (int j = 0; j < kOutputsPerThread; ++j) {
#pragma unroll
    for (int v = 0; v < kVectorWidth; ++v) acc[j][v] = forge_stencil_identity();
  }
#pragma unroll kUnrollH
  for (int kh = 0; kh < kKernelH; ++kh) {
    const int ih = oh * kStrideH - kPadH + kh * kDilationH;
    if (ih < 0 || ih >= kH) continue;
#pragma unroll kUnrollW
    for (int kw = 0; kw < kKernelW; ++kw) {
      ForgeStencilAcc weight[kVectorWidth];
#pragma unroll
      for (int v = 0; v < kVectorWidth; ++v) {
        weight[v] = forge_stencil_weight(FORGE_STENCIL_ARGUMENTS, c + v, kh, kw);
      }
#pragma unroll
      for (int j = 0; j < kOutputsPerThread; ++j) {
        const int iw = (ow0 + j) * kStrideW - kPadW + kw * kDilationW;
        if (ow0 + j >= kOW || iw < 0 || iw >= kW) continue;
        ForgeStencilAcc x[kVectorWidth];
        forge_stencil_load(FORGE_STENCIL_ARGUMENTS, n, c, ih, iw, x);
#pragma unroll
        for (int v = 0; v < kVectorWidth; ++v) forge_stencil_tap(acc[j][v], x[v], weight[v]);
      }
    }
  }
  forge_stencil_store_columns<kVectorWidth>(FORGE_STENCIL_ARGUMENTS, acc, n, c, oh, ow0);
}
