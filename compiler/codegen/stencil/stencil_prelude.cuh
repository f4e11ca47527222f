// What the stencil family's templates share, embedded at build time after the emitter's per-task
// constants and element functions: the window's identity, one tap, and the finish of an output
// (average pooling's divisor, a convolution's bias). Per task: ForgeStencilAcc (float, or double
// for float64 tensors), ForgeStencilIndex, the constants kStencilOp (0 depthwise convolution,
// 1 max pooling, 2 average pooling), kN, kC, kH, kW, kOH, kOW, kKernelH, kKernelW, kStrideH,
// kStrideW, kPadH, kPadW, kDilationH, kDilationW, kCountIncludePad, and the element functions
// forge_stencil_load, forge_stencil_weight, forge_stencil_bias and forge_stencil_store.
//
// The helpers that take the kernel's arguments (FORGE_STENCIL_PARAMETERS, replaced by the emitter
// as in the templates' kernels, which pass FORGE_STENCIL_ARGUMENTS): a thread's weights kept in
// registers, the weight of a tap, and the finish and stores of a thread's adjacent outputs.
//
// Taps combine in a fixed order (kh, then kw): the same bits every launch. A tap outside the
// input is skipped, or (a staged tile's padding) reads the identity, which is the same: 0 for a
// sum, -inf for a max. Max pooling propagates NaN as ATen's does (forge_max keeps a NaN).
//
// The build embeds the text after the next line, byte for byte (forge_embed_cuda): edits below it
// change the generated source, so they bump the family's generator_version.
// FORGE_EMBED_BEGIN
__device__ __forceinline__ ForgeStencilAcc forge_stencil_identity() {
  if constexpr (kStencilOp == 1) return (ForgeStencilAcc)-forge_inf();
  return (ForgeStencilAcc)0;
}

__device__ __forceinline__ void forge_stencil_tap(ForgeStencilAcc& acc, ForgeStencilAcc x,
                                                  ForgeStencilAcc weight) {
  if constexpr (kStencilOp == 0) {
    acc = x * weight + acc;
  } else if constexpr (kStencilOp == 1) {
    acc = forge_max(x, acc);
  } else {
    acc += x;
  }
}

// Average pooling's divisor at output (oh, ow), as ATen's avg_pool2d computes it: the window
// clipped to the padded input (count_include_pad), or to the input itself.
__device__ __forceinline__ int forge_stencil_divisor(int oh, int ow) {
  int h0 = oh * kStrideH - kPadH, w0 = ow * kStrideW - kPadW;
  int h1 = min(h0 + kKernelH, kH + kPadH), w1 = min(w0 + kKernelW, kW + kPadW);
  if (kCountIncludePad) return (h1 - h0) * (w1 - w0);
  h0 = max(h0, 0);
  w0 = max(w0, 0);
  h1 = min(h1, kH);
  w1 = min(w1, kW);
  return (h1 - h0) * (w1 - w0);
}

__device__ __forceinline__ ForgeStencilAcc forge_stencil_finish(ForgeStencilAcc acc,
                                                                ForgeStencilAcc bias, int oh,
                                                                int ow) {
  if constexpr (kStencilOp == 0) return acc + bias;
  if constexpr (kStencilOp == 2) {
    const int divisor = forge_stencil_divisor(oh, ow);
    return divisor > 0 ? acc / (ForgeStencilAcc)divisor : (ForgeStencilAcc)0;
  }
  return acc;
}

// Tap loops unroll fully up to kMaxUnrolledTaps taps per dim.
constexpr int kMaxUnrolledTaps = 16;
constexpr int kUnrollH = kKernelH <= kMaxUnrolledTaps ? kKernelH : 1;
constexpr int kUnrollW = kKernelW <= kMaxUnrolledTaps ? kKernelW : 1;
// The weights a thread keeps in registers (a depthwise convolution of at most
// kMaxRegisterWeights taps); otherwise each tap reads its weight (through L1).
constexpr bool kWeightsInRegisters = kStencilOp == 0 && kKernelH * kKernelW <= kMaxRegisterWeights;
constexpr int kRegisterWeights = kWeightsInRegisters ? kKernelH * kKernelW : 1;

// Channel c's weights, in registers when kWeightsInRegisters (otherwise `weights` stays unused).
__device__ __forceinline__ void forge_stencil_load_weights(FORGE_STENCIL_PARAMETERS, int c,
                                                           ForgeStencilAcc (&weights)[kRegisterWeights]) {
  if constexpr (kWeightsInRegisters) {
#pragma unroll
    for (int k = 0; k < kRegisterWeights; ++k) {
      weights[k] = forge_stencil_weight(FORGE_STENCIL_ARGUMENTS, c, k / kKernelW, k % kKernelW);
    }
  }
}

// The weight of tap (kh, kw) of channel c: from `weights`, or read.
__device__ __forceinline__ ForgeStencilAcc forge_stencil_tap_weight(
    FORGE_STENCIL_PARAMETERS, const ForgeStencilAcc (&weights)[kRegisterWeights], int c, int kh,
    int kw) {
  if constexpr (kWeightsInRegisters) {
    return weights[kh * kKernelW + kw];
  } else {
    return forge_stencil_weight(FORGE_STENCIL_ARGUMENTS, c, kh, kw);
  }
}

// Finishes and stores the outputs of kChannels channels from c at kOutputsPerThread adjacent
// columns from ow0 of row oh (those inside the output): the channels-last templates', whose
// stores take kChannels = kVectorWidth = kStoreWidth lanes (a template: instantiated only there).
template <int kChannels>
__device__ __forceinline__ void forge_stencil_store_columns(
    FORGE_STENCIL_PARAMETERS, const ForgeStencilAcc (&acc)[kOutputsPerThread][kChannels],
    ForgeStencilIndex n, int c, int oh, int ow0) {
#pragma unroll
  for (int j = 0; j < kOutputsPerThread; ++j) {
    if (ow0 + j >= kOW) break;
    ForgeStencilAcc y[kChannels];
#pragma unroll
    for (int v = 0; v < kChannels; ++v) {
      y[v] = forge_stencil_finish(acc[j][v], forge_stencil_bias(FORGE_STENCIL_ARGUMENTS, c + v),
                                  oh, ow0 + j);
    }
    forge_stencil_store(FORGE_STENCIL_ARGUMENTS, n, c, oh, ow0 + j, y);
  }
}
