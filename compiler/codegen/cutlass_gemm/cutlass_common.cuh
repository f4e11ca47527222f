// What every CUTLASS template of the cutlass_gemm family shares, embedded at build time after the
// generated prologue (the configuration's #defines, including the runtime-argument positions
// FORGE_ARG_* and FORGE_ARG_COUNT written from cutlass_gemm.h's table); it includes
// host_launch_abi.h, which the worker's compile pool provides beside every host-launched source:
//  - forge_cutlass::Args: checked access to the runtime arguments and the buffers they name;
//  - forge_cutlass::Fail: the error text of forge_launch;
//  - forge_cutlass::SetSm90EpilogueAndScheduler: the sm90 templates' epilogue scalars, bias and
//    tile-scheduler settings from the runtime arguments;
//  - forge_cutlass::Sm90Stride: a CuTe (rows, cols, batch) stride from a leading dimension and a
//    batch stride, for the sm90 templates' operands and outputs;
//  - activation functors (parameterized ones, leaky_relu and the clamps, when the prologue
//    defines FORGE_ACTIVATION_P0 / _P1) that compute in float with the accurate libm functions (CUTLASS's own
//    Tanh and GELU_taylor use tanh.approx.f32, about 2^-11 relative error: too coarse for
//    float32's 1e-4 tolerance), for scalars and for the fragments (cutlass::Array) the epilogues
//    apply them to.
//
// The build embeds the text after the next line, byte for byte (forge_embed_cuda): edits below it
// change the generated source, so they bump the family's generator_version.
// FORGE_EMBED_BEGIN
#include "compiler/codegen/host_launch_abi.h"

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <type_traits>

#include <cuda_runtime.h>

#include "cutlass/cutlass.h"
#include "cutlass/array.h"
#include "cutlass/numeric_types.h"
#include "cutlass/epilogue/thread/activation.h"
#include "cute/container/tuple.hpp"

extern "C" {
int32_t forge_host_abi_version(void);
int64_t forge_workspace_bytes(const int64_t* runtime_args, int32_t runtime_arg_count);
int32_t forge_launch(void* const* buffers, int32_t buffer_count, const int64_t* runtime_args,
                     int32_t runtime_arg_count, void* workspace, int64_t workspace_bytes,
                     void* stream, char* error, int32_t error_capacity);
}
// The definitions below must keep host_launch_abi.h's signatures.
static_assert(std::is_same_v<decltype(&forge_host_abi_version), forge::codegen::HostAbiVersionFn>);
static_assert(std::is_same_v<decltype(&forge_workspace_bytes), forge::codegen::WorkspaceBytesFn>);
static_assert(std::is_same_v<decltype(&forge_launch), forge::codegen::HostLaunchFn>);

namespace forge_cutlass {

// The runtime arguments of one launch, with the buffers they name.
struct Args {
  const int64_t* values;
  int32_t count;

  int64_t operator[](int index) const { return values[index]; }
  // A scalar passed as the bits of an IEEE-754 double.
  double Scalar(int index) const {
    double value;
    std::memcpy(&value, &values[index], sizeof(value));
    return value;
  }
  // The buffer whose position the argument at `index` holds; nullptr for -1 (absent) and
  // without buffers (forge_workspace_bytes).
  template <class T>
  T* Buffer(void* const* buffers, int index) const {
    const int64_t position = values[index];
    return position < 0 || buffers == nullptr ? nullptr : static_cast<T*>(buffers[position]);
  }
};

// Empty when the arguments fit the buffers (any buffers for buffer_count < 0); the reason
// otherwise.
inline const char* CheckArgs(const Args& args, int32_t buffer_count) {
  if (args.values == nullptr || args.count != FORGE_ARG_COUNT) {
    return "wrong number of runtime arguments";
  }
  if (args[FORGE_ARG_M] <= 0 || args[FORGE_ARG_N] <= 0 || args[FORGE_ARG_K] <= 0 ||
      args[FORGE_ARG_BATCH] <= 0) {
    return "the problem sizes are not positive";
  }
  if (buffer_count < 0) return "";
  for (int index : {FORGE_ARG_A, FORGE_ARG_B, FORGE_ARG_D}) {
    if (args[index] < 0 || args[index] >= buffer_count) return "an operand names no buffer";
  }
  for (int index : {FORGE_ARG_BIAS, FORGE_ARG_C, FORGE_ARG_B_UP}) {
    if (args[index] < -1 || args[index] >= buffer_count) return "an operand names no buffer";
  }
  return "";
}

// Writes what + stage + detail into `error` (at most `capacity` bytes) and returns 1.
inline int32_t Fail(char* error, int32_t capacity, const char* what, const char* stage,
                    const char* detail = "") {
  if (error != nullptr && capacity > 0) {
    std::snprintf(error, capacity, "%s%s%s", what, stage, detail);
  }
  return 1;
}

// The scalar functions, in float.
struct TanhOp {
  CUTLASS_HOST_DEVICE static float Apply(float x) { return tanhf(x); }
};
// torch's gelu(approximate="tanh"): 0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3))).
struct GeluTanhOp {
  CUTLASS_HOST_DEVICE static float Apply(float x) {
    return 0.5f * x * (1.0f + tanhf(0.7978845608028654f * (x + 0.044715f * x * x * x)));
  }
};
struct SigmoidOp {
  CUTLASS_HOST_DEVICE static float Apply(float x) { return 1.0f / (1.0f + expf(-x)); }
};
struct SiluOp {
  CUTLASS_HOST_DEVICE static float Apply(float x) { return x / (1.0f + expf(-x)); }
};

// An epilogue functor of Op: on one element, or on each element of a fragment.
template <class Op, class T>
struct Elementwise {
  static const bool kIsHeavy = true;
  CUTLASS_HOST_DEVICE T operator()(T const& x) const { return T(Op::Apply(float(x))); }
};
template <class Op, class T, int N>
struct Elementwise<Op, cutlass::Array<T, N>> {
  static const bool kIsHeavy = true;
  CUTLASS_HOST_DEVICE cutlass::Array<T, N> operator()(cutlass::Array<T, N> const& x) const {
    cutlass::Array<T, N> y;
    CUTLASS_PRAGMA_UNROLL
    for (int i = 0; i < N; ++i) y[i] = T(Op::Apply(float(x[i])));
    return y;
  }
};

#ifdef FORGE_ACTIVATION_P0
// The parameterized activations: their constants come with the configuration (the prologue's
// FORGE_ACTIVATION_P0 / _P1, double literals), converted to float as ATen's float math does.
// leaky_relu(x, slope P0); clamp to [P0, P1] (hardtanh, relu6, clamp, clamp_min, clamp_max). A
// NaN passes through both, as in ATen.
struct LeakyReluOp {
  CUTLASS_HOST_DEVICE static float Apply(float x) {
    return x > 0.0f ? x : x * static_cast<float>(FORGE_ACTIVATION_P0);
  }
};
struct ClampOp {
  CUTLASS_HOST_DEVICE static float Apply(float x) {
    const float low = static_cast<float>(FORGE_ACTIVATION_P0);
    const float high = static_cast<float>(FORGE_ACTIVATION_P1);
    return x < low ? low : (x > high ? high : x);
  }
};
template <class T>
using LeakyRelu = Elementwise<LeakyReluOp, T>;
template <class T>
using Clamp = Elementwise<ClampOp, T>;
#endif

template <class T>
using Tanh = Elementwise<TanhOp, T>;
template <class T>
using GeluTanh = Elementwise<GeluTanhOp, T>;
template <class T>
using Sigmoid = Elementwise<SigmoidOp, T>;
template <class T>
using Silu = Elementwise<SiluOp, T>;

// The sm90 templates (CUTLASS 3.x): the epilogue fusion's alpha, beta and bias (of ElementBias),
// and the persistent tile scheduler's raster order and max swizzle, from the runtime arguments.
template <class ElementBias, class Arguments>
void SetSm90EpilogueAndScheduler(const Args& args, void* const* buffers, Arguments& arguments) {
  auto& fusion = arguments.epilogue.thread;
  fusion.alpha = static_cast<float>(args.Scalar(FORGE_ARG_ALPHA));
  fusion.beta = static_cast<float>(args.Scalar(FORGE_ARG_BETA));
#if FORGE_HAS_BIAS
  fusion.bias_ptr = args.Buffer<const ElementBias>(buffers, FORGE_ARG_BIAS);
#endif
  using RasterOrder = decltype(arguments.scheduler.raster_order);
  static constexpr RasterOrder kRasterOrders[] = {RasterOrder::Heuristic, RasterOrder::AlongM,
                                                  RasterOrder::AlongN};
  const int64_t raster = args[FORGE_ARG_RASTER];
  arguments.scheduler.raster_order = kRasterOrders[raster >= 0 && raster < 3 ? raster : 0];
  arguments.scheduler.max_swizzle_size = static_cast<int>(args[FORGE_ARG_SWIZZLE]);
}

// CUTLASS 3's (rows, K or N, batch) stride of an operand or output from its leading dimension
// and batch stride: the unit-stride mode is the one the layout makes contiguous (the second when
// kUnitStrideSecond: a K-major A or B, a row-major C or D).
template <class Stride, bool kUnitStrideSecond>
Stride Sm90Stride(int64_t leading_dim, int64_t batch_stride) {
  Stride stride{};
  if constexpr (kUnitStrideSecond) {
    cute::get<0>(stride) = leading_dim;
  } else {
    cute::get<1>(stride) = leading_dim;
  }
  cute::get<2>(stride) = batch_stride;
  return stride;
}

}  // namespace forge_cutlass

extern "C" int32_t forge_host_abi_version(void) { return forge::codegen::kHostLaunchAbiVersion; }
