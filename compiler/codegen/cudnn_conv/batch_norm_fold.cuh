// The batch norm fold of a cudnn_conv candidate (RunKernelsSource in cudnn_conv.h): from an
// eval-mode batch norm's per-channel operands, as the task's inputs hold them, the float32 rows
// its cuDNN graph reads (runtime/extension/cudnn_conv_graph.h, Step::kBatchNorm):
//   out[0 * channels + k] = mean[k]
//   out[1 * channels + k] = weight[k] / sqrt(var[k] + eps)   (weight 1 when absent)
//   out[2 * channels + k] = bias[k]                          (0 when absent)
// so that the graph computes ((v - mean) * scale) + bias in float32: batch norm's own order of
// operations, with weight * invstd as its one derived value. One thread per channel; sqrt and the
// division are IEEE (NVRTC's defaults, no fast math). Operand types are codes
// (BatchNormFoldType): 0 float32, 1 bfloat16, 2 float16; an absent operand is a null pointer.
// Needs the kernel prelude (ForgeHalf, ForgeBFloat16) before it.
// FORGE_EMBED_BEGIN
__device__ __forceinline__ float forge_fold_load(const void* data, int type, int k) {
  switch (type) {
    case 1: return forge_bfloat16_to_float(static_cast<const ForgeBFloat16*>(data)[k]);
    case 2: return forge_half_to_float(static_cast<const ForgeHalf*>(data)[k]);
    default: return static_cast<const float*>(data)[k];
  }
}

extern "C" __global__ void forge_batch_norm_fold(const void* mean, int mean_type, const void* var,
                                                 int var_type, const void* weight, int weight_type,
                                                 const void* bias, int bias_type, float eps,
                                                 int channels, float* out) {
  const int k = blockIdx.x * blockDim.x + threadIdx.x;
  if (k >= channels) return;
  float scale = 1.0f / sqrtf(forge_fold_load(var, var_type, k) + eps);
  if (weight != nullptr) scale = forge_fold_load(weight, weight_type, k) * scale;
  out[k] = forge_fold_load(mean, mean_type, k);
  out[channels + k] = scale;
  out[2 * channels + k] = bias != nullptr ? forge_fold_load(bias, bias_type, k) : 0.0f;
}
