// What every scan kernel shares, embedded at build time after kernel_prelude.cuh: the combine
// operations of the scans (ForgeScanSum, ForgeScanProd, ForgeScanLogAddExp, ForgeScanArgMax,
// ForgeScanArgMin), the running carries that chain a row's tiles or a column's elements
// (ForgePlainCarry, and ForgeKahanCarry for float32 sums), warp shuffles of their values, and the
// inclusive scan of a warp and the exclusive scan of a row's threads.
//
// Each operation Op has `Acc` (what is combined), `Value` (the scanned element), identity(),
// make(value, position) (an element as an Acc) and operator()(earlier, later): associative, and
// combining the identity with x gives x bit for bit, so a padded lane or the first tile needs no
// special case. ArgMax / ArgMin pair a value with its position and follow ATen's cummax / cummin
// exactly: the later element wins a tie (>= / <=), a NaN wins over any number and a later NaN
// over an earlier one. LogAddExp is ATen's _log_add_exp_helper: max + log1p(exp(min - max)),
// equal infinities returned as they are, NaN propagated.
//
// The build embeds the text after the next line, byte for byte (forge_embed_cuda): edits below it
// change the generated source, so they bump the family's generator_version.
// FORGE_EMBED_BEGIN

template <class T>
struct ForgeArgVal {
  T v;
  long long i;
};

template <class T, bool kProduct>
struct ForgeScanArithmetic {
  using Acc = T;
  using Value = T;
  static __device__ __forceinline__ T identity() { return T(kProduct ? 1 : 0); }
  static __device__ __forceinline__ T make(T value, long long) { return value; }
  __device__ __forceinline__ T operator()(T a, T b) const { return kProduct ? a * b : a + b; }
};
template <class T>
using ForgeScanSum = ForgeScanArithmetic<T, false>;
template <class T>
using ForgeScanProd = ForgeScanArithmetic<T, true>;

template <class T>
struct ForgeScanLogAddExp {
  using Acc = T;
  using Value = T;
  static __device__ __forceinline__ T identity() { return (T)-forge_inf(); }
  static __device__ __forceinline__ T make(T value, long long) { return value; }
  __device__ __forceinline__ T operator()(T a, T b) const {
    if (a != a || b != b) return a + b;
    const T hi = a > b ? a : b;
    const T lo = a > b ? b : a;
    if (lo == hi && !isfinite(lo)) return a;
    return hi + log1p(forge_exp(lo - hi));
  }
};

template <class T, bool kMax>
struct ForgeScanArg {
  using Acc = ForgeArgVal<T>;
  using Value = T;
  static __device__ __forceinline__ Acc identity() {
    return Acc{(T)(kMax ? -forge_inf() : forge_inf()), 0};
  }
  static __device__ __forceinline__ Acc make(T value, long long position) {
    return Acc{value, position};
  }
  __device__ __forceinline__ Acc operator()(const Acc& a, const Acc& b) const {
    const bool later_wins = b.v != b.v || (a.v == a.v && (kMax ? b.v >= a.v : b.v <= a.v));
    return later_wins ? b : a;
  }
};
template <class T>
using ForgeScanArgMax = ForgeScanArg<T, true>;
template <class T>
using ForgeScanArgMin = ForgeScanArg<T, false>;

// The running combination of everything before the current tile (row template) or element
// (column template).
template <class Op>
struct ForgePlainCarry {
  typename Op::Acc value;
  __device__ __forceinline__ ForgePlainCarry() : value(Op::identity()) {}
  __device__ __forceinline__ void add(const typename Op::Acc& x) { value = Op()(value, x); }
  __device__ __forceinline__ typename Op::Acc get() const { return value; }
};
// A float32 sum with Kahan's compensation: its error stays at a few ulps of the sum however
// many terms are added, where a plain float32 carry drifts by sqrt(terms) ulps.
template <class T>
struct ForgeKahanCarry {
  T sum, compensation;
  __device__ __forceinline__ ForgeKahanCarry() : sum(0), compensation(0) {}
  __device__ __forceinline__ void add(T x) {
    const T y = x - compensation;
    const T t = sum + y;
    compensation = (t - sum) - y;
    sum = t;
  }
  __device__ __forceinline__ T get() const { return sum; }
};

// `f` applied to each component of `value` (a number, or a ForgeArgVal's value and position) by
// reference: a warp shuffle, or a load through the component's address, of either kind of Acc.
template <class T, class F>
__device__ __forceinline__ T forge_scan_each(const T& value, F f) {
  return f(value);
}
template <class T, class F>
__device__ __forceinline__ ForgeArgVal<T> forge_scan_each(const ForgeArgVal<T>& value, F f) {
  return ForgeArgVal<T>{f(value.v), f(value.i)};
}
struct ForgeScanShflUp {
  int delta;
  template <class X>
  __device__ __forceinline__ X operator()(const X& x) const {
    return __shfl_up_sync(0xffffffffu, x, delta);
  }
};
struct ForgeScanShflFrom {
  int lane;
  template <class X>
  __device__ __forceinline__ X operator()(const X& x) const {
    return __shfl_sync(0xffffffffu, x, lane);
  }
};
template <class T>
__device__ __forceinline__ T forge_scan_shfl_up(const T& value, int delta) {
  return forge_scan_each(value, ForgeScanShflUp{delta});
}
template <class T>
__device__ __forceinline__ T forge_scan_shfl_from(const T& value, int lane) {
  return forge_scan_each(value, ForgeScanShflFrom{lane});
}

// The inclusive scan of `value` over the 32 lanes of the warp, in a fixed order.
template <class Op>
__device__ __forceinline__ typename Op::Acc forge_warp_inclusive_scan(typename Op::Acc value) {
  const int warp_lane = threadIdx.x & 31;
#pragma unroll
  for (int delta = 1; delta < 32; delta <<= 1) {
    const typename Op::Acc up = forge_scan_shfl_up(value, delta);
    if (warp_lane >= delta) value = Op()(up, value);
  }
  return value;
}

// The exclusive scan of `value` over the kThreads threads of a row (consecutive threads of the
// block, kThreads a multiple of 32): the combination of the values of the row's threads before
// this one (the identity for the first), and through `total` the combination of all of them.
// With several warps a row, `warp_totals` (shared memory, kThreads / 32 entries of this row) is
// written and read between two __syncthreads, which every thread of the block must reach.
template <int kThreads, class Op>
__device__ __forceinline__ typename Op::Acc forge_row_exclusive_scan(
    typename Op::Acc value, typename Op::Acc* warp_totals, typename Op::Acc* total) {
  using Acc = typename Op::Acc;
  constexpr int kWarps = kThreads / 32;
  const int warp_lane = threadIdx.x & 31;
  const int warp = (threadIdx.x % kThreads) / 32;
  const Acc inclusive = forge_warp_inclusive_scan<Op>(value);
  const Acc up = forge_scan_shfl_up(inclusive, 1);
  const Acc in_warp = warp_lane == 0 ? Op::identity() : up;
  if (kWarps == 1) {
    *total = forge_scan_shfl_from(inclusive, 31);
    return in_warp;
  }
  if (warp_lane == 31) warp_totals[warp] = inclusive;
  __syncthreads();
  if (warp == 0) {
    Acc partial = warp_lane < kWarps ? warp_totals[warp_lane] : Op::identity();
    partial = forge_warp_inclusive_scan<Op>(partial);
    if (warp_lane < kWarps) warp_totals[warp_lane] = partial;
  }
  __syncthreads();
  *total = warp_totals[kWarps - 1];
  if (warp == 0) return in_warp;
  const Acc before = warp_totals[warp - 1];
  return warp_lane == 0 ? before : Op()(before, up);
}
