#include "compiler/codegen/reduction.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/strip.h"
#include "compiler/codegen/cuda_expr.h"

namespace forge::codegen {
namespace {

using forge::v1::Argument;
using forge::v1::KernelTask;
using forge::v1::Node;
using forge::v1::TensorSpec;

// Row accumulators and their cross-thread combination. Every lane of a row group ends with the
// row's result; warps of one row meet in shared memory.
constexpr char kReductionPrelude[] = R"(
template <typename T>
struct ForgeSoftmaxAcc {
  T max;
  T sum;  // of exp(x - max)
};
template <typename T>
struct ForgeWelfordAcc {
  T count;
  T mean;
  T m2;  // sum of squared deviations from mean
};

template <typename T>
__device__ __forceinline__ T forge_shfl_xor(T value, int mask) {
  return __shfl_xor_sync(0xffffffffu, value, mask);
}
template <typename T>
__device__ __forceinline__ ForgeSoftmaxAcc<T> forge_shfl_xor(ForgeSoftmaxAcc<T> value, int mask) {
  return {forge_shfl_xor(value.max, mask), forge_shfl_xor(value.sum, mask)};
}
template <typename T>
__device__ __forceinline__ ForgeWelfordAcc<T> forge_shfl_xor(ForgeWelfordAcc<T> value, int mask) {
  return {forge_shfl_xor(value.count, mask), forge_shfl_xor(value.mean, mask),
          forge_shfl_xor(value.m2, mask)};
}

struct ForgeSumOp {
  template <typename T>
  __device__ __forceinline__ T operator()(T a, T b) const { return a + b; }
};
struct ForgeMaxOp {
  template <typename T>
  __device__ __forceinline__ T operator()(T a, T b) const { return forge_max<T>(a, b); }
};
struct ForgeMinOp {
  template <typename T>
  __device__ __forceinline__ T operator()(T a, T b) const { return forge_min<T>(a, b); }
};
// exp of the softmax family (its sums and outputs), as 2^(x log2 e - shift log2 e) with the row's
// shift scaled once: one FMA and (for float) one ex2 instruction, where expf takes eight.
constexpr double kForgeLog2e = 1.4426950408889634;
template <typename T>
__device__ __forceinline__ T forge_exp_from(T x, T shift_log2e) {
  return forge_fast_exp2(fma(x, T(kForgeLog2e), -shift_log2e));
}
// The shift of an online softmax whose max is `max`: 0 while no element is finite, so that
// exp(-inf - shift) is 0 where -inf - -inf would be NaN.
template <typename T>
__device__ __forceinline__ T forge_softmax_shift_log2e(T max) {
  return (max == -T(forge_inf()) ? T(0) : max) * T(kForgeLog2e);
}
struct ForgeSoftmaxOp {
  template <typename T>
  __device__ __forceinline__ ForgeSoftmaxAcc<T> operator()(ForgeSoftmaxAcc<T> a,
                                                           ForgeSoftmaxAcc<T> b) const {
    const T max = forge_max<T>(a.max, b.max);
    const T shift_log2e = forge_softmax_shift_log2e(max);
    return {max, a.sum * forge_exp_from(a.max, shift_log2e) +
                     b.sum * forge_exp_from(b.max, shift_log2e)};
  }
};
struct ForgeWelfordOp {
  template <typename T>
  __device__ __forceinline__ ForgeWelfordAcc<T> operator()(ForgeWelfordAcc<T> a,
                                                           ForgeWelfordAcc<T> b) const {
    const T count = a.count + b.count;
    if (count == T(0)) return {T(0), T(0), T(0)};
    const T delta = b.mean - a.mean;
    const T b_share = b.count / count;
    return {count, a.mean + delta * b_share, a.m2 + b.m2 + delta * delta * a.count * b_share};
  }
};

// Adds a chunk of elements: one rescale per chunk, no branch (a data-dependent branch per element
// splits the chunk loop, and the compiler then no longer issues the next loads early). A NaN
// element needs no NaN-aware max: exp(NaN - shift) makes the sum, so the row, NaN as in ATen.
template <typename T, int N>
__device__ __forceinline__ void forge_softmax_add(ForgeSoftmaxAcc<T>& acc, const T (&x)[N]) {
  T max = acc.max;
#pragma unroll
  for (int i = 0; i < N; ++i) max = fmax(max, x[i]);
  const T shift_log2e = forge_softmax_shift_log2e(max);
  T sum = acc.sum * forge_exp_from(acc.max, shift_log2e);
#pragma unroll
  for (int i = 0; i < N; ++i) sum += forge_exp_from(x[i], shift_log2e);
  acc = {max, sum};
}
// Welford over a whole chunk: the chunk's own mean and squared deviations, merged into `acc` as
// ForgeWelfordOp merges two threads' (Chan et al.). One division per chunk where adding element
// by element took one per element, each waiting for the last (the 16 x 4 M layer norm's
// per-element Welford ran at 33% of the DRAM floor on the H200).
template <typename T, int N>
__device__ __forceinline__ void forge_welford_add(ForgeWelfordAcc<T>& acc, const T (&x)[N]) {
  T sum = x[0];
#pragma unroll
  for (int i = 1; i < N; ++i) sum += x[i];
  const T chunk_mean = sum * (T(1) / T(N));
  T chunk_m2 = 0;
#pragma unroll
  for (int i = 0; i < N; ++i) {
    const T deviation = x[i] - chunk_mean;
    chunk_m2 = fma(deviation, deviation, chunk_m2);
  }
  const T count = acc.count + T(N);
  const T delta = chunk_mean - acc.mean;
  const T share = T(N) / count;
  acc.m2 += chunk_m2 + delta * delta * acc.count * share;
  acc.mean = fma(delta, share, acc.mean);
  acc.count = count;
}

// `scratch` holds one slot per warp of this row; unused when the row is one warp.
template <int kThreadsPerRow, typename Acc, typename Op>
__device__ __forceinline__ Acc forge_row_allreduce(Acc value, Op op, Acc* scratch) {
#pragma unroll
  for (int mask = 16; mask > 0; mask >>= 1) value = op(value, forge_shfl_xor(value, mask));
  if (kThreadsPerRow > 32) {
    if (threadIdx.x % 32 == 0) scratch[(threadIdx.x % kThreadsPerRow) / 32] = value;
    __syncthreads();
    value = scratch[0];
#pragma unroll
    for (int warp = 1; warp < kThreadsPerRow / 32; ++warp) value = op(value, scratch[warp]);
    __syncthreads();
  }
  return value;
}

// col_reduce: the kSplit threads of one row are threadIdx.x % kRows apart; they meet in
// `scratch` (kSplit * kRows slots) and combine in lane order, so the result is deterministic.
template <int kSplit, int kRows, typename Acc, typename Op>
__device__ __forceinline__ Acc forge_col_allreduce(Acc value, Op op, Acc* scratch) {
  if (kSplit == 1) return value;
  const int row = threadIdx.x % kRows;
  scratch[threadIdx.x] = value;
  __syncthreads();
  value = scratch[row];
#pragma unroll
  for (int lane = 1; lane < kSplit; ++lane) value = op(value, scratch[lane * kRows + row]);
  __syncthreads();
  return value;
}
)";

// row_reduce with cluster_blocks > 1: the blocks of one thread block cluster share a row and
// combine their partial results through distributed shared memory (sm_90 and newer).
constexpr char kClusterPrelude[] = R"(
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 900
#error "row_reduce with cluster_blocks > 1 needs thread block clusters: sm_90 or newer"
#endif
__device__ __forceinline__ unsigned forge_cluster_blocks() {
  unsigned blocks;
  asm volatile("mov.u32 %0, %%cluster_nctarank;" : "=r"(blocks));
  return blocks;
}
// Every block of the cluster arrives before any continues; shared-memory writes made before are
// visible to the other blocks after.
__device__ __forceinline__ void forge_cluster_sync() {
  asm volatile("barrier.cluster.arrive.release.aligned;\n\tbarrier.cluster.wait.acquire.aligned;"
               ::: "memory");
}
// An asynchronous copy of kBytes (4, 8 or 16, aligned) from global to shared memory; 16-byte
// copies bypass L1.
template <int kBytes>
__device__ __forceinline__ void forge_cp_async(void* shared, const void* global) {
  const unsigned address = static_cast<unsigned>(__cvta_generic_to_shared(shared));
  if (kBytes == 16) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(address), "l"(global) : "memory");
  } else {
    asm volatile("cp.async.ca.shared.global [%0], [%1], %2;" ::"r"(address), "l"(global),
                 "n"(kBytes) : "memory");
  }
}
// This thread's copies have landed (each thread reads only what it copied: no barrier).
__device__ __forceinline__ void forge_cp_async_wait_all() {
  asm volatile("cp.async.wait_all;" ::: "memory");
}
// Closes a group of this thread's copies.
__device__ __forceinline__ void forge_cp_async_commit() {
  asm volatile("cp.async.commit_group;" ::: "memory");
}
// Waits until at most `pending` of this thread's groups are in flight. wait_group takes an
// immediate: `pending` is a constant once the caller's loop is unrolled, and the switch folds.
__device__ __forceinline__ void forge_cp_async_wait_pending(int pending) {
  switch (pending) {
FORGE_WAIT_PENDING_CASES
    default: asm volatile("cp.async.wait_all;" ::: "memory");
  }
}
// `local`'s counterpart in the shared memory of the cluster's block `rank`.
template <typename T>
__device__ __forceinline__ const T* forge_cluster_map(const T* local, unsigned rank) {
  unsigned long long remote;
  asm volatile("mapa.u64 %0, %1, %2;" : "=l"(remote) : "l"(local), "r"(rank));
  return reinterpret_cast<const T*>(remote);
}
// The blocks combine their parts of the row in rank order: every block ends with the same,
// deterministic value. The second barrier keeps each block's slot (and the block) alive until
// every block has read it.
template <int kBlocks, typename Acc, typename Op>
__device__ __forceinline__ Acc forge_cluster_allreduce(Acc value, Op op, Acc* slot) {
  if (threadIdx.x == 0) *slot = value;
  forge_cluster_sync();
  value = *forge_cluster_map(slot, 0);
#pragma unroll
  for (unsigned rank = 1; rank < kBlocks; ++rank) value = op(value, *forge_cluster_map(slot, rank));
  forge_cluster_sync();
  return value;
}
)";

constexpr int64_t kMaxGridBlocks = std::numeric_limits<int32_t>::max();
// Register budget of cache_row: elements of the row-sized inputs one thread keeps.
constexpr int64_t kMaxCachedElementsPerThread = 64;
// Shared-memory budget of cache_row with cluster_blocks > 1 (the row's part of one block): below
// the 227 KiB a block may opt into on sm_90, leaving room for the static scratch.
constexpr int64_t kMaxClusterCacheBytes = 200 * 1024;
// Rows of more elements (times row-sized inputs) than one block can keep in registers get the
// cluster_blocks parameter.
constexpr int64_t kClusterRowElements = kMaxCachedElementsPerThread * 1024;
// An H100-class GPU's SMs: fewer rows leave SMs idle with a block per row.
constexpr int64_t kRowsToFillTheGpu = 132;
// A cached cluster's first pass waits for each chunk's copies alone (cp.async.wait_group takes
// an immediate: the loop unrolls fully) up to this many chunks per thread; past it, for all.
constexpr int64_t kMaxPipelinedChunks = 32;
// Threads and shared memory of one SM of sm_90, which bound the blocks resident per SM.
constexpr int64_t kThreadsPerSm = 2048;
constexpr int64_t kSharedBytesPerSm = 228 * 1024;
// 32-bit registers of one SM (sm_80 to sm_100), which max_registers divides among blocks.
constexpr int64_t kRegistersPerSm = 64 * 1024;
// Registers a thread needs besides the row it caches: indices, accumulators, the statistics.
constexpr int64_t kRegistersBesidesTheCache = 16;

enum class ReductionKind { kSum, kMean, kMax, kMin, kSoftmax, kLogSoftmax, kLayerNorm, kVar };

struct Reduction {
  const Node* node = nullptr;
  ReductionKind kind = ReductionKind::kSum;
  std::string input;
  std::string weight, bias;  // layer_norm's, empty when None
  double eps = 1e-5;
  double correction = 1;  // var's: the variance divides by (length - correction)
  std::vector<int> depends_on;  // indices of reductions whose results its input reads
};

struct ReductionTask {
  explicit ReductionTask(GroupView group_view) : view(std::move(group_view)) {}
  // The task the view reads when Analyze rewrote it (layer norm over several trailing dims, seen
  // as over their product); null when the view reads the caller's task.
  std::shared_ptr<const KernelTask> flattened;
  GroupView view;
  std::vector<int64_t> row_shape;  // the reduced tensor's shape
  int axis = -1;                   // the reduced dimension of row_shape
  int64_t columns = 0;             // row_shape[axis]: elements reduced per row
  int64_t rows = 0;
  int64_t inner = 1;               // elements of the dims after axis: 1 for row_reduce
  std::vector<Reduction> reductions;
  std::map<std::string, int, std::less<>> reduction_of_value;  // output value -> reduction
  std::string acc_type;  // "float" or "double"
  bool wide_index = false;
  int64_t widest_access = 1;
  int row_sized_inputs = 0;  // inputs of the row tensor's shape: what cache_row keeps
  bool has_softmax = false, has_moments = false;  // softmax / layer_norm or var present
};

absl::StatusOr<ReductionKind> KindOf(absl::string_view op) {
  absl::ConsumePrefix(&op, "aten::");
  if (op == "sum") return ReductionKind::kSum;
  if (op == "mean") return ReductionKind::kMean;
  if (op == "amax") return ReductionKind::kMax;
  if (op == "amin") return ReductionKind::kMin;
  if (op == "softmax" || op == "_softmax") return ReductionKind::kSoftmax;
  if (op == "log_softmax" || op == "_log_softmax") return ReductionKind::kLogSoftmax;
  if (op == "layer_norm") return ReductionKind::kLayerNorm;
  if (op == "var" || op == "var_mean") return ReductionKind::kVar;
  return absl::NotFoundError(op);
}

// Layer norm and var: a mean and a sum of squared deviations (Welford, or two passes).
bool Moments(ReductionKind kind) {
  return kind == ReductionKind::kLayerNorm || kind == ReductionKind::kVar;
}

bool ElementwiseInRow(ReductionKind kind) {
  return kind == ReductionKind::kSoftmax || kind == ReductionKind::kLogSoftmax ||
         kind == ReductionKind::kLayerNorm;
}

std::vector<int64_t> ShapeOf(const TensorSpec& spec) {
  return {spec.shape().begin(), spec.shape().end()};
}

// Reductions reachable from `value` through elementwise producers.
void CollectDependencies(const ReductionTask& task, const std::string& value,
                         std::set<int>& found, std::set<std::string>& seen) {
  if (!seen.insert(value).second) return;
  if (auto it = task.reduction_of_value.find(value); it != task.reduction_of_value.end()) {
    found.insert(it->second);
    return;
  }
  const Node* producer = task.view.Producer(value);
  if (producer == nullptr) return;
  for (const Argument& argument : producer->arguments()) {
    if (argument.value_case() == Argument::kTensor) {
      CollectDependencies(task, argument.tensor(), found, seen);
    } else if (argument.value_case() == Argument::kOptionalTensor &&
               argument.optional_tensor().has_value_name()) {
      CollectDependencies(task, argument.optional_tensor().value_name(), found, seen);
    }
  }
}

std::string TensorArgument(const Node& node, absl::string_view name) {
  const Argument* argument = FindArgument(node, name);
  if (argument == nullptr) return "";
  if (argument->value_case() == Argument::kTensor) return argument->tensor();
  if (argument->value_case() == Argument::kOptionalTensor &&
      argument->optional_tensor().has_value_name()) {
    return argument->optional_tensor().value_name();
  }
  return "";
}

// Layer norm over the k > 1 trailing dims of its input (nn.LayerNorm((C, H, W))) is layer norm
// over one dim of their product when each tensor of the group is contiguous across them: the
// task rewritten that way, or nullopt when the group has no such layer norm. A group that mixes it
// with another reduction, a view op, a tensor that broadcasts within the trailing dims, or one
// that is not contiguous across them, stays as it is (and the analysis says what it cannot do).
struct TrailingDims {
  std::vector<int64_t> row_shape;
  int count = 0;  // k
};

std::optional<TrailingDims> NormalizedTrailingDims(const GroupView& view) {
  std::optional<TrailingDims> found;
  for (const Node& node : view.group().nodes()) {
    if (IsPointwiseOp(node)) continue;
    const absl::StatusOr<ReductionKind> kind = KindOf(node.op());
    if (!kind.ok() || *kind != ReductionKind::kLayerNorm) return std::nullopt;
    const Argument* normalized = FindArgument(node, "normalized_shape");
    const std::vector<int64_t> shape = view.Shape(TensorArgument(node, "input"));
    if (normalized == nullptr) return std::nullopt;
    const int count = normalized->ints().values_size();
    if (count < 2 || count > static_cast<int>(shape.size()) ||
        !std::equal(normalized->ints().values().begin(), normalized->ints().values().end(),
                    shape.end() - count)) {
      return std::nullopt;
    }
    if (found.has_value() && (found->row_shape != shape || found->count != count)) {
      return std::nullopt;
    }
    found = TrailingDims{shape, count};
  }
  return found;
}

// `spec` with the trailing dims merged into one: those dims right-aligned against the row's must
// all match the row's (merged to their product, if contiguous) or all be 1 (merged to 1).
bool MergeTrailingDims(const TrailingDims& dims, TensorSpec& spec) {
  const int rank = spec.shape_size();
  if (rank == 0) return true;
  const int row_rank = static_cast<int>(dims.row_shape.size());
  if (rank > row_rank) return false;
  const int first = std::max(0, rank - dims.count);  // spec's first merged dim
  bool all_match = rank >= dims.count, all_one = true;
  for (int d = first; d < rank; ++d) {
    all_match = all_match && spec.shape(d) == dims.row_shape[row_rank - rank + d];
    all_one = all_one && spec.shape(d) == 1;
  }
  if (!all_match && !all_one) return false;
  int64_t merged_size = 1, merged_stride = 1;
  for (int d = rank - 1; d >= first; --d) {
    if (spec.shape(d) == 1) continue;
    if (merged_size == 1) {
      merged_stride = spec.strides_size() == rank ? spec.strides(d) : 1;
    } else if (spec.strides_size() == rank && spec.strides(d) != merged_stride * merged_size) {
      return false;
    }
    merged_size *= spec.shape(d);
  }
  // A spec with fewer dims than merged ones keeps its leading size-1 padding out: merging leaves
  // one dim where `rank - first` were.
  std::vector<int64_t> shape(spec.shape().begin(), spec.shape().begin() + first);
  shape.push_back(merged_size);
  spec.mutable_shape()->Assign(shape.begin(), shape.end());
  if (spec.strides_size() == rank) {
    std::vector<int64_t> strides(spec.strides().begin(), spec.strides().begin() + first);
    strides.push_back(merged_stride);
    spec.mutable_strides()->Assign(strides.begin(), strides.end());
  }
  return true;
}

std::optional<KernelTask> FlattenNormalizedDims(const KernelTask& task, const GroupView& view) {
  const std::optional<TrailingDims> dims = NormalizedTrailingDims(view);
  if (!dims.has_value()) return std::nullopt;
  KernelTask flattened = task;
  for (TensorSpec& spec : *flattened.mutable_inputs()) {
    if (!MergeTrailingDims(*dims, spec)) return std::nullopt;
  }
  for (TensorSpec& spec : *flattened.mutable_outputs()) {
    if (!MergeTrailingDims(*dims, spec)) return std::nullopt;
  }
  for (forge::v1::Value& value : *flattened.mutable_group()->mutable_values()) {
    if (!MergeTrailingDims(*dims, *value.mutable_tensor())) return std::nullopt;
  }
  int64_t product = 1;
  for (int d = static_cast<int>(dims->row_shape.size()) - dims->count;
       d < static_cast<int>(dims->row_shape.size()); ++d) {
    product *= dims->row_shape[d];
  }
  for (Node& node : *flattened.mutable_group()->mutable_nodes()) {
    for (Argument& argument : *node.mutable_arguments()) {
      if (argument.name() == "normalized_shape") {
        argument.mutable_ints()->clear_values();
        argument.mutable_ints()->add_values(product);
      }
    }
  }
  return flattened;
}

absl::StatusOr<ReductionTask> AnalyzeAsGiven(GroupView view);

absl::StatusOr<ReductionTask> Analyze(const KernelTask& task) {
  absl::StatusOr<GroupView> view = GroupView::Create(task);
  if (!view.ok()) return view.status();
  std::optional<KernelTask> flattened = FlattenNormalizedDims(task, *view);
  if (!flattened.has_value()) return AnalyzeAsGiven(*std::move(view));
  auto owned = std::make_shared<const KernelTask>(*std::move(flattened));
  absl::StatusOr<GroupView> flattened_view = GroupView::Create(*owned);
  if (!flattened_view.ok()) return flattened_view.status();
  absl::StatusOr<ReductionTask> analysis = AnalyzeAsGiven(*std::move(flattened_view));
  if (analysis.ok()) analysis->flattened = std::move(owned);
  return analysis;
}

// The analysis of the task `view` reads, as it is.
absl::StatusOr<ReductionTask> AnalyzeAsGiven(GroupView view) {
  const KernelTask& task = view.task();
  ReductionTask analysis(std::move(view));
  const forge::v1::Graph& group = task.group();
  for (const Node& node : group.nodes()) {
    absl::StatusOr<ReductionKind> kind = KindOf(node.op());
    if (!kind.ok()) {
      // View ops fold into the indices the emitter reads their sources at.
      if (IsPointwiseOp(node) || IsViewOp(node)) continue;
      return absl::UnimplementedError(absl::StrCat(
          "reduction: ", DescribeNode(node),
          " is neither a supported reduction, elementwise nor a view"));
    }
    Reduction reduction;
    reduction.node = &node;
    reduction.kind = *kind;
    reduction.input = TensorArgument(node, *kind == ReductionKind::kLayerNorm ? "input" : "self");
    if (reduction.input.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("reduction: ", DescribeNode(node), " has no tensor input"));
    }
    const std::vector<int64_t> shape = analysis.view.Shape(reduction.input);
    if (shape.empty()) {
      return absl::UnimplementedError(
          absl::StrCat("reduction: ", DescribeNode(node), " reduces a 0-d tensor"));
    }
    if (analysis.row_shape.empty()) analysis.row_shape = shape;
    if (shape != analysis.row_shape) {
      return absl::UnimplementedError(absl::StrCat(
          "reduction: ", DescribeNode(node), " reduces a tensor of another shape than the first "
          "reduction's; one kernel reduces rows of one shape"));
    }
    const int64_t rank = static_cast<int64_t>(shape.size());
    // The one dimension `dims` names (none: every dimension, which is one for a vector).
    auto one_axis = [&](std::vector<int64_t> dims) -> absl::StatusOr<int> {
      if (dims.empty() && rank == 1) return 0;
      if (dims.size() == 1 && dims[0] >= -rank && dims[0] < rank) {
        return static_cast<int>(dims[0] < 0 ? dims[0] + rank : dims[0]);
      }
      return absl::UnimplementedError(absl::StrCat(
          "reduction: ", DescribeNode(node), " reduces dims [", absl::StrJoin(dims, ", "),
          "] of a rank-", rank, " tensor; only one dimension is supported"));
    };
    absl::StatusOr<int> axis = absl::InternalError("unset");
    switch (*kind) {
      case ReductionKind::kSum:
      case ReductionKind::kMean:
      case ReductionKind::kMax:
      case ReductionKind::kMin:
      case ReductionKind::kVar: {
        const Argument* dims = FindArgument(node, "dim");
        axis = one_axis(dims == nullptr || dims->value_case() != Argument::kInts
                            ? std::vector<int64_t>()
                            : std::vector<int64_t>(dims->ints().values().begin(),
                                                   dims->ints().values().end()));
        if (*kind != ReductionKind::kVar) break;
        // var.dim says `unbiased` (default true); var.correction / var_mean.correction say
        // `correction` (default None: 1).
        if (const Argument* unbiased = FindArgument(node, "unbiased"); unbiased != nullptr) {
          reduction.correction = unbiased->bool_value() ? 1 : 0;
        }
        if (const Argument* correction = FindArgument(node, "correction"); correction != nullptr) {
          if (correction->value_case() == Argument::kFloatValue) {
            reduction.correction = correction->float_value();
          } else if (correction->value_case() == Argument::kIntValue) {
            reduction.correction = static_cast<double>(correction->int_value());
          }
        }
        analysis.has_moments = true;
        break;
      }
      case ReductionKind::kSoftmax:
      case ReductionKind::kLogSoftmax: {
        const Argument* dim = FindArgument(node, "dim");
        if (dim == nullptr || dim->value_case() != Argument::kIntValue) {
          return absl::InvalidArgumentError(absl::StrCat("reduction: ", DescribeNode(node), " has no dim"));
        }
        axis = one_axis({dim->int_value()});
        analysis.has_softmax = true;
        break;
      }
      case ReductionKind::kLayerNorm: {
        const Argument* normalized = FindArgument(node, "normalized_shape");
        if (normalized == nullptr || normalized->ints().values_size() != 1 ||
            normalized->ints().values(0) != shape.back()) {
          return absl::UnimplementedError(absl::StrCat(
              "reduction: ", DescribeNode(node), " normalizes more than the last dimension"));
        }
        axis = static_cast<int>(rank - 1);
        reduction.weight = TensorArgument(node, "weight");
        reduction.bias = TensorArgument(node, "bias");
        if (const Argument* eps = FindArgument(node, "eps"); eps != nullptr) {
          reduction.eps = eps->value_case() == Argument::kFloatValue
                              ? eps->float_value()
                              : static_cast<double>(eps->int_value());
        }
        analysis.has_moments = true;
        break;
      }
    }
    if (!axis.ok()) return axis.status();
    if (analysis.axis < 0) analysis.axis = *axis;
    if (*axis != analysis.axis) {
      return absl::UnimplementedError(absl::StrCat(
          "reduction: ", DescribeNode(node), " reduces dim ", *axis,
          " but the first reduction reduces dim ", analysis.axis,
          "; one kernel reduces one dimension"));
    }
    if (!IsFloatingDType(analysis.view.DType(reduction.input))) {
      return absl::UnimplementedError(absl::StrCat("reduction: ", DescribeNode(node),
                                                   " reduces a non-floating tensor"));
    }
    for (const std::string& output : node.outputs()) {  // var_mean: var and mean
      analysis.reduction_of_value[output] = static_cast<int>(analysis.reductions.size());
    }
    analysis.reductions.push_back(std::move(reduction));
  }
  if (analysis.reductions.empty()) {
    return absl::UnimplementedError(absl::StrCat("reduction: task ", task.digest(),
                                                 " has no reduction"));
  }
  analysis.columns = analysis.row_shape[analysis.axis];
  analysis.rows = 1;
  for (size_t d = 0; d < analysis.row_shape.size(); ++d) {
    if (static_cast<int>(d) == analysis.axis) continue;
    analysis.rows *= analysis.row_shape[d];
    if (static_cast<int>(d) > analysis.axis) analysis.inner *= analysis.row_shape[d];
  }
  if (analysis.columns == 0 || analysis.rows == 0) {
    return absl::UnimplementedError("reduction: the reduced tensor is empty");
  }

  analysis.acc_type = "float";
  int64_t largest = 0;
  for (const forge::v1::Value& value : group.values()) {
    if (!StorageType(value.tensor().dtype()).ok()) {
      return absl::UnimplementedError(absl::StrCat("reduction: value '", value.name(),
                                                   "' has unsupported dtype ",
                                                   DTypeName(value.tensor().dtype())));
    }
    if (value.tensor().dtype() == forge::v1::DTYPE_FLOAT64) analysis.acc_type = "double";
    largest = std::max(largest, NumElements(value.tensor().shape()));
  }
  // Outputs: row-shaped (written per element) or one value per row (keepdim or not).
  std::vector<int64_t> per_row_keepdim = analysis.row_shape;
  per_row_keepdim[analysis.axis] = 1;
  std::vector<int64_t> per_row = analysis.row_shape;
  per_row.erase(per_row.begin() + analysis.axis);
  for (int o = 0; o < task.outputs_size(); ++o) {
    const TensorSpec& spec = task.outputs(o);
    const std::string& name = group.outputs(o).value_name();
    const std::vector<int64_t> shape = ShapeOf(spec);
    if (shape != analysis.view.Shape(name) || spec.dtype() != analysis.view.DType(name)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "reduction: output ", o, " ('", name, "') TensorSpec disagrees with its Value"));
    }
    if (shape != analysis.row_shape && shape != per_row_keepdim && shape != per_row) {
      return absl::UnimplementedError(absl::StrCat(
          "reduction: output ", o, " ('", name, "') has shape [", absl::StrJoin(shape, ", "),
          "], neither the rows' [", absl::StrJoin(analysis.row_shape, ", "), "] nor one per row"));
    }
    largest = std::max(largest, MaxOffset(spec) + 1);
    analysis.widest_access = std::max(analysis.widest_access, ElementBytes(spec.dtype()));
  }
  for (int i = 0; i < task.inputs_size(); ++i) {
    largest = std::max(largest, MaxOffset(task.inputs(i)) + 1);
    if (ShapeOf(task.inputs(i)) == analysis.row_shape) {
      ++analysis.row_sized_inputs;
      analysis.widest_access = std::max(analysis.widest_access, ElementBytes(task.inputs(i).dtype()));
    }
  }
  analysis.wide_index = largest >= (int64_t{1} << 30);

  for (size_t r = 0; r < analysis.reductions.size(); ++r) {
    Reduction& reduction = analysis.reductions[r];
    std::set<int> dependencies;
    std::set<std::string> seen;
    CollectDependencies(analysis, reduction.input, dependencies, seen);
    reduction.depends_on.assign(dependencies.begin(), dependencies.end());
  }
  return analysis;
}

int64_t Parameter(const SchedulePoint& point, const std::string& name, int64_t fallback) {
  auto it = point.parameters.find(name);
  return it == point.parameters.end() ? fallback : it->second;
}

// col_reduce when the reduced dimension has inner elements after it.
bool ColumnTemplate(const ReductionTask& analysis) { return analysis.inner > 1; }

// Rows too long for one block to keep in registers: row_reduce offers cluster_blocks.
bool LongRows(const ReductionTask& analysis) {
  return !ColumnTemplate(analysis) &&
         analysis.columns * std::max(1, analysis.row_sized_inputs) > kClusterRowElements;
}

TemplateSpace SpaceOf(const ReductionTask& analysis) {
  TemplateSpace space =
      ColumnTemplate(analysis)
          ? TemplateSpace{ReductionFamily::kColumnTemplateName,
                          {{"threads_per_block", {64, 128, 256, 512}, 256},
                           {"reduce_threads", {1, 2, 4, 8, 16, 32, 64}, 1},
                           {"cache_row", {0, 1}, 0}}}
          : TemplateSpace{ReductionFamily::kTemplateName,
                          {{"threads_per_row", {32, 64, 128, 256, 512, 1024}, 32},
                           {"rows_per_block", {1, 2, 4, 8}, 1},
                           {"vector_width", {1, 2, 4, 8}, 1},
                           {"cache_row", {0, 1}, 0},
                           {"max_registers", {0, 64, 80, 96, 128}, 0}}};
  if (LongRows(analysis)) {
    space.parameters.push_back({"cluster_blocks", {1, 2, 4, 8}, 1});
  }
  if (analysis.has_softmax) space.parameters.push_back({"online_softmax", {0, 1}, 1});
  if (analysis.has_moments) space.parameters.push_back({"welford", {0, 1}, 1});
  return space;
}

// How a point maps rows and their elements onto threads, in both templates' terms: a row is
// reduced by threads_per_row threads (col_reduce: reduce_threads), each taking vector_width
// consecutive elements per step (col_reduce: 1).
struct Layout {
  int64_t threads_per_row = 32;
  int64_t rows_per_block = 1;
  int64_t width = 1;
  bool cache_row = false;
  // row_reduce: blocks of one cluster that share a row, each taking `segment` consecutive columns
  // (the last one what is left); cache_row then keeps the row in shared memory.
  int64_t cluster_blocks = 1;
  int64_t segment = 0;
  // row_reduce: a cap on registers per thread (0: the compiler's choice), for more resident warps.
  int64_t max_registers = 0;
  bool SharedCache() const { return cache_row && cluster_blocks > 1; }
  int64_t BlockThreads() const { return threads_per_row * rows_per_block; }
  // The blocks per SM that __launch_bounds__ asks for to keep each thread under max_registers.
  int64_t MinBlocksPerSm() const {
    return max_registers == 0 ? 0 : kRegistersPerSm / (max_registers * BlockThreads());
  }
  int64_t ChunksPerThread() const {
    return (segment + threads_per_row * width - 1) / (threads_per_row * width);
  }
};

Layout LayoutOf(const ReductionTask& analysis, const SchedulePoint& point) {
  Layout layout;
  layout.cache_row = Parameter(point, "cache_row", 0) == 1;
  if (ColumnTemplate(analysis)) {
    layout.threads_per_row = Parameter(point, "reduce_threads", 1);
    layout.rows_per_block =
        std::max<int64_t>(1, Parameter(point, "threads_per_block", 256) / layout.threads_per_row);
  } else {
    layout.threads_per_row = Parameter(point, "threads_per_row", 32);
    layout.rows_per_block = Parameter(point, "rows_per_block", 1);
    layout.width = Parameter(point, "vector_width", 1);
    layout.cluster_blocks = Parameter(point, "cluster_blocks", 1);
    layout.max_registers = Parameter(point, "max_registers", 0);
  }
  // Whole vectors per block: a vector never straddles two blocks' parts.
  const int64_t vectors = (analysis.columns + layout.width - 1) / layout.width;
  layout.segment =
      (vectors + layout.cluster_blocks - 1) / layout.cluster_blocks * layout.width;
  return layout;
}

// The shared-memory row cache of a cluster point: each row-sized input's part of the row as
// stored in memory (copied there by cp.async), in input order.
struct SharedCache {
  std::map<int, int64_t> offsets;  // bytes, by input position
  int64_t bytes = 0;
};

SharedCache SharedCacheOf(const ReductionTask& analysis, const Layout& layout) {
  SharedCache cache;
  if (!layout.SharedCache()) return cache;
  for (int i = 0; i < analysis.view.task().inputs_size(); ++i) {
    const TensorSpec& spec = analysis.view.task().inputs(i);
    if (ShapeOf(spec) != analysis.row_shape) continue;
    cache.offsets[i] = cache.bytes;
    cache.bytes += layout.ChunksPerThread() * layout.width * layout.threads_per_row *
                   ElementBytes(spec.dtype());
  }
  return cache;
}

// Whether `spec` (row-shaped, or broadcast against the row from fewer or size-1 dims, but not
// along the reduced dim) has unit stride along the row and every chunk of `width` elements
// starts at a multiple of `width`.
bool AlignedAlongTheRow(const ReductionTask& analysis, const TensorSpec& spec, int64_t width) {
  const int rank = spec.shape_size();
  const int axis = analysis.axis - (static_cast<int>(analysis.row_shape.size()) - rank);
  if (axis < 0 || spec.shape(axis) != analysis.columns) return false;
  if (spec.strides(axis) != 1 || spec.storage_offset() % width != 0) return false;
  for (int d = 0; d < rank; ++d) {
    if (d != axis && spec.shape(d) > 1 && spec.strides(d) % width != 0) return false;
  }
  return true;
}

// Clusters of a cached-cluster launch: each takes rows until none is left, so the launch needs
// only as many as can be resident at once. Twice the estimate for an H100-class GPU covers larger
// GPUs; a cluster beyond those resident starts when the rows are gone and ends at once.
int64_t PersistentClusters(const ReductionTask& analysis, const Layout& layout) {
  const int64_t shared_bytes = SharedCacheOf(analysis, layout).bytes + 1024;
  const int64_t resident_per_sm = std::max<int64_t>(
      1, std::min(kThreadsPerSm / layout.BlockThreads(), kSharedBytesPerSm / shared_bytes));
  return std::min(analysis.rows,
                  2 * kRowsToFillTheGpu * resident_per_sm / layout.cluster_blocks + 1);
}

// The row_reduce constraints, shared by the cross_entropy template (whose rows are the logits').
absl::Status ValidateRowLayout(int64_t rows, int64_t columns, int64_t widest_access,
                               const Layout& layout) {
  const int64_t threads_per_row = layout.threads_per_row;
  const int64_t rows_per_block = layout.rows_per_block;
  const int64_t width = layout.width;
  if (layout.BlockThreads() > 1024) {
    return absl::InvalidArgumentError(absl::StrCat("threads_per_row ", threads_per_row,
                                                   " x rows_per_block ", rows_per_block,
                                                   " exceeds 1024 threads per block"));
  }
  if (columns % width != 0) {
    return absl::InvalidArgumentError(absl::StrCat("vector_width ", width,
                                                   " does not divide the row length ", columns));
  }
  if (width * widest_access > 16) {
    return absl::InvalidArgumentError(absl::StrCat("vector_width ", width, " of ",
                                                   widest_access,
                                                   "-byte elements exceeds a 16-byte vector access"));
  }
  // With cluster_blocks a block's threads share only its part of the row.
  const int64_t block_columns = layout.cluster_blocks > 1 ? layout.segment : columns;
  if (threads_per_row > 32 && block_columns <= (threads_per_row / 2) * width) {
    return absl::InvalidArgumentError(absl::StrCat("threads_per_row ", threads_per_row,
                                                   " leaves half the row's threads idle for ",
                                                   block_columns, " columns of vector_width ",
                                                   width));
  }
  if (rows_per_block > 1 && rows <= rows_per_block / 2) {
    return absl::InvalidArgumentError(absl::StrCat("rows_per_block ", rows_per_block,
                                                   " leaves half the block idle for ",
                                                   rows, " rows"));
  }
  return absl::OkStatus();
}

absl::Status ValidateColumnPoint(const ReductionTask& analysis, const SchedulePoint& point,
                                 const Layout& layout) {
  const int64_t threads_per_block = Parameter(point, "threads_per_block", 256);
  if (layout.threads_per_row > threads_per_block) {
    return absl::InvalidArgumentError(absl::StrCat("reduce_threads ", layout.threads_per_row,
                                                   " exceeds threads_per_block ",
                                                   threads_per_block));
  }
  if (layout.threads_per_row > 1 && analysis.columns <= layout.threads_per_row / 2) {
    return absl::InvalidArgumentError(absl::StrCat(
        "reduce_threads ", layout.threads_per_row, " leaves half of them idle for ",
        analysis.columns, " reduced elements"));
  }
  if (layout.rows_per_block > 1 && analysis.rows <= layout.rows_per_block / 2) {
    return absl::InvalidArgumentError(absl::StrCat(
        "threads_per_block ", threads_per_block, " / reduce_threads ", layout.threads_per_row,
        " = ", layout.rows_per_block, " rows per block leaves half the block idle for ",
        analysis.rows, " rows"));
  }
  return absl::OkStatus();
}

absl::Status ValidateClusterPoint(const ReductionTask& analysis, const Layout& layout) {
  const int64_t blocks = layout.cluster_blocks;
  if (layout.rows_per_block != 1) {
    return absl::InvalidArgumentError(absl::StrCat("cluster_blocks ", blocks,
                                                   " gives each block part of one row: needs "
                                                   "rows_per_block 1, not ",
                                                   layout.rows_per_block));
  }
  if ((blocks - 1) * layout.segment >= analysis.columns) {
    return absl::InvalidArgumentError(absl::StrCat("cluster_blocks ", blocks,
                                                   " leaves a block without columns of the ",
                                                   analysis.columns, "-column row"));
  }
  if (const int64_t bytes = SharedCacheOf(analysis, layout).bytes; bytes > kMaxClusterCacheBytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "cluster_blocks ", blocks, " leaves each block ", bytes,
        " bytes of the row to keep in shared memory; more than ", kMaxClusterCacheBytes));
  }
  if (!layout.SharedCache()) return absl::OkStatus();
  // cp.async copies 4, 8 or 16 bytes from an address aligned to them.
  for (const TensorSpec& spec : analysis.view.task().inputs()) {
    if (ShapeOf(spec) != analysis.row_shape) continue;
    if (layout.width * ElementBytes(spec.dtype()) < 4 ||
        !AlignedAlongTheRow(analysis, spec, layout.width)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "cache_row with cluster_blocks ", blocks, " copies the row in vectors of vector_width ",
          layout.width, ": needs row-sized inputs of unit stride along the row, aligned to the "
          "vector, of at least 4 bytes per vector"));
    }
  }
  return absl::OkStatus();
}

absl::Status ValidatePoint(const ReductionTask& analysis, const SchedulePoint& point) {
  if (absl::Status status = CheckPointInSpace(SpaceOf(analysis), point); !status.ok()) {
    return status;
  }
  const Layout layout = LayoutOf(analysis, point);
  if (absl::Status status = ColumnTemplate(analysis)
                                ? ValidateColumnPoint(analysis, point, layout)
                                : ValidateRowLayout(analysis.rows, analysis.columns,
                                                    analysis.widest_access, layout);
      !status.ok()) {
    return status;
  }
  if (layout.cluster_blocks > 1) {
    if (absl::Status status = ValidateClusterPoint(analysis, layout); !status.ok()) return status;
  }
  const int64_t chunks_per_thread = layout.ChunksPerThread();
  const int64_t cached_in_registers =
      layout.cache_row && !layout.SharedCache()
          ? chunks_per_thread * layout.width * std::max(1, analysis.row_sized_inputs)
          : 0;
  if (cached_in_registers > kMaxCachedElementsPerThread) {
    return absl::InvalidArgumentError(absl::StrCat(
        "cache_row keeps ", chunks_per_thread * layout.width, " elements of each of ",
        analysis.row_sized_inputs, " row-sized inputs per thread; more than ",
        kMaxCachedElementsPerThread, " registers"));
  }
  if (layout.max_registers > 0) {
    // One block per SM already caps a thread at the SM's registers over the block's threads.
    if (layout.MinBlocksPerSm() < 2) {
      return absl::InvalidArgumentError(absl::StrCat(
          "max_registers ", layout.max_registers, " with ", layout.BlockThreads(),
          "-thread blocks leaves room for fewer than two blocks per SM: no cap beyond the "
          "block size's own"));
    }
    if (cached_in_registers * (analysis.acc_type == "double" ? 2 : 1) + kRegistersBesidesTheCache >
        layout.max_registers) {
      return absl::InvalidArgumentError(absl::StrCat(
          "max_registers ", layout.max_registers, " is too few for the ", cached_in_registers,
          " cached row elements per thread: the cache would spill"));
    }
  }
  if ((analysis.rows + layout.rows_per_block - 1) / layout.rows_per_block *
          layout.cluster_blocks >
      kMaxGridBlocks) {
    return absl::InvalidArgumentError(
        absl::StrCat(analysis.rows, " rows need more than 2^31-1 blocks"));
  }
  return absl::OkStatus();
}

// How close a row layout is to "widest vectors, about `chunks_per_thread` chunks per thread, 256
// threads per block": the default point of row_reduce (4 chunks) and cross_entropy maximizes it.
double RowLayoutScore(int64_t columns, int64_t chunks_per_thread, const Layout& layout) {
  const double target_threads = std::clamp<double>(
      static_cast<double>(columns) / static_cast<double>(chunks_per_thread), 32, 1024);
  const double threads = static_cast<double>(layout.threads_per_row);
  const double width = static_cast<double>(layout.width);
  const double block = threads * static_cast<double>(layout.rows_per_block);
  return 100 * std::log2(width) - 10 * std::abs(std::log2(threads * width / target_threads)) -
         5 * std::abs(std::log2(block / 256));
}

// One accumulation of a pass: a reduction's first or second stage.
struct Stage {
  int reduction = 0;
  int step = 0;  // 0, or 1 for the second pass of two-pass softmax / layer_norm
  std::string accumulator;
};

class RowKernelWriter {
 public:
  RowKernelWriter(const ReductionTask& analysis, const SchedulePoint& point)
      : RowKernelWriter(analysis, point, LayoutOf(analysis, point)) {}

  absl::StatusOr<std::string> Write();

 private:
  RowKernelWriter(const ReductionTask& analysis, const SchedulePoint& point, const Layout& layout)
      : analysis_(analysis),
        layout_(layout),
        view_(analysis.view),
        column_(ColumnTemplate(analysis)),
        threads_per_row_(layout.threads_per_row),
        rows_per_block_(layout.rows_per_block),
        width_(layout.width),
        cache_row_(layout.cache_row),
        online_softmax_(Parameter(point, "online_softmax", 1) == 1),
        welford_(Parameter(point, "welford", 1) == 1),
        index_type_(analysis.wide_index ? "long long" : "int"),
        chunks_per_thread_(layout.ChunksPerThread()) {}

  bool TwoStep(const Reduction& reduction) const {
    if (Moments(reduction.kind)) return !welford_;
    if (reduction.kind == ReductionKind::kSoftmax || reduction.kind == ReductionKind::kLogSoftmax) {
      return !online_softmax_;
    }
    return false;
  }
  std::string RowVariable(int reduction, absl::string_view what) const {
    return absl::StrCat("row", reduction, "_", what);
  }
  // The index of the row tensor's element in column chunk lane `lane`.
  Index ElementIndex(int lane) const {
    Index index;
    for (int d = 0; d < static_cast<int>(analysis_.row_shape.size()); ++d) {
      if (d == analysis_.axis) {
        index.push_back(analysis_.columns == 1 ? "0"
                        : lane == 0            ? "c0"
                                               : absl::StrCat("(c0 + ", lane, ")"));
      } else {
        index.push_back(analysis_.row_shape[d] == 1 ? "0" : absl::StrCat("o", d));
      }
    }
    return index;
  }
  // Whether `index` (of a row-shaped value) names an element of the current row.
  bool InCurrentRow(const Index& index) const {
    const Index row = ElementIndex(0);
    if (index.size() != row.size()) return false;
    for (int d = 0; d < static_cast<int>(row.size()); ++d) {
      if (d != analysis_.axis && index[d] != row[d]) return false;
    }
    return true;
  }
  // The index a value of one-per-row `shape` (keepdim, or without the reduced dim) is read at in
  // the current row.
  Index RowIndex(const std::vector<int64_t>& shape) const {
    const bool keepdim = shape.size() == analysis_.row_shape.size();
    Index index;
    for (int d = 0; d < static_cast<int>(shape.size()); ++d) {
      const int row_dim = keepdim || d < analysis_.axis ? d : d + 1;
      index.push_back(shape[d] == 1 || row_dim == analysis_.axis ? "0"
                                                                  : absl::StrCat("o", row_dim));
    }
    return index;
  }
  // Whether a chunk's width_ elements of `spec` are one aligned vector access.
  bool VectorAccess(const TensorSpec& spec) const {
    return width_ > 1 && ElementBytes(spec.dtype()) * width_ <= 16 &&
           AlignedAlongTheRow(analysis_, spec, width_);
  }
  ElementEmitter NewEmitter(const std::string& prefix);
  absl::StatusOr<std::vector<std::string>> Pass(int pass, const std::vector<Stage>& stages);
  absl::StatusOr<std::vector<std::string>> FinalPass();
  absl::StatusOr<std::vector<std::string>> RowOutputs();
  std::vector<std::string> CacheRowInputs();
  // A cached cluster's copy of chunk j of the next row (inside a chunk loop).
  std::string RefillChunk() const;
  // The kernel body of a cached cluster (appended to `lines`): persistent clusters that take
  // rows from a counter and copy the next row into shared memory while writing this one's
  // outputs.
  void PersistentRows(const std::vector<std::string>& passes,
                      const std::vector<std::string>& final_pass,
                      const std::vector<std::string>& row_outputs, std::vector<std::string>& lines);
  // The coordinates o<d> of row `row` in the row shape without the reduced dim.
  std::vector<std::string> RowCoordinates() const;
  // Whether every chunk of every thread lies in the row (its block's part): no bounds check.
  bool ChunksCoverExactly() const;
  // The first column of chunk j of this thread, and the check that it lies in the row (its
  // block's part), opening a block either way.
  std::string ChunkColumn() const;
  std::string ChunkGuard() const;
  bool PipelinedCache() const {
    return layout_.SharedCache() && chunks_per_thread_ <= kMaxPipelinedChunks;
  }
  std::string ChunkLoopHeader() const;
  // Element `vector_lane` of chunk j in input `position`'s row cache.
  std::string CachedElement(int position, absl::string_view vector_lane) const;

  const ReductionTask& analysis_;
  const Layout layout_;
  const GroupView& view_;
  const bool column_;
  const int64_t threads_per_row_, rows_per_block_, width_;
  const bool cache_row_, online_softmax_, welford_;
  const std::string index_type_;
  const int64_t chunks_per_thread_;
  int lane_ = 0;  // lane of the column chunk being emitted
  int pass_ = -1;  // the pass being emitted; FinalPass and RowOutputs are past every pass
  // Inputs kept in the row cache (registers, or shared memory with cluster_blocks), filled up
  // front by CacheRowInputs.
  std::set<int> cached_inputs_;
  std::vector<std::string> scratch_;  // shared-memory declarations
  int scratch_count_ = 0;
};

ElementEmitter RowKernelWriter::NewEmitter(const std::string& prefix) {
  return ElementEmitter(
      view_, index_type_, prefix,
      [this](absl::string_view value, const Index& index,
             ElementEmitter& self) -> absl::StatusOr<std::optional<Term>> {
        if (auto it = analysis_.reduction_of_value.find(value);
            it != analysis_.reduction_of_value.end()) {
          const int r = it->second;
          const Reduction& reduction = analysis_.reductions[r];
          const forge::v1::DType dtype = view_.DType(value);
          const std::string reg = *RegisterType(dtype);
          const std::string& acc = analysis_.acc_type;
          std::string expr;
          if (!ElementwiseInRow(reduction.kind)) {
            if (index != RowIndex(view_.Shape(value))) {
              return absl::UnimplementedError(absl::StrCat(
                  "reduction: the result of ", DescribeNode(*reduction.node),
                  " is broadcast against another row's elements"));
            }
            const bool var_mean_mean = reduction.kind == ReductionKind::kVar &&
                                       reduction.node->outputs_size() > 1 &&
                                       value == reduction.node->outputs(1);
            expr = RowVariable(r, var_mean_mean ? "mean" : "value");
          } else {
            // Its row statistics are this row's: an element of another row (a view that moves
            // elements across rows, e.g. a transpose of the result) cannot be computed here.
            if (!InCurrentRow(index)) {
              return absl::UnimplementedError(absl::StrCat(
                  "reduction: the result of ", DescribeNode(*reduction.node),
                  " is read at another row's element (through a view)"));
            }
            absl::StatusOr<Term> x = self.Emit(reduction.input, index);
            if (!x.ok()) return x.status();
            const std::string xv = absl::StrCat("((", acc, ")", x->expr, ")");
            if (reduction.kind == ReductionKind::kSoftmax) {
              expr = absl::StrCat("forge_exp_from(", xv, ", ", RowVariable(r, "max_log2e"),
                                  ") * ", RowVariable(r, "inv_sum"));
            } else if (reduction.kind == ReductionKind::kLogSoftmax) {
              expr = absl::StrCat(xv, " - ", RowVariable(r, "max"), " - ",
                                  RowVariable(r, "log_sum"));
            } else {
              expr = absl::StrCat("(", xv, " - ", RowVariable(r, "mean"), ") * ",
                                  RowVariable(r, "rstd"));
              for (const std::string* affine : {&reduction.weight, &reduction.bias}) {
                if (affine->empty()) continue;
                absl::StatusOr<Term> term =
                    self.Emit(*affine, ElementEmitter::Broadcast(index, view_.Shape(*affine)));
                if (!term.ok()) return term.status();
                expr = absl::StrCat("(", expr, affine == &reduction.weight ? " * " : " + ", "((",
                                    acc, ")", term->expr, "))");
              }
            }
          }
          const std::string variable = self.NewVariable();
          self.AddStatement(absl::StrCat("const ", reg, " ", variable, " = (", reg, ")(", expr, ");"));
          return Term{variable, dtype};
        }
        const int position = view_.InputPosition(value);
        if (position < 0) return std::optional<Term>();
        const TensorSpec& spec = view_.InputSpec(position);
        const std::string storage = *StorageType(spec.dtype());
        const std::string reg = *RegisterType(spec.dtype());
        // This chunk's element lane_ of a row-shaped or broadcast input (as layer norm's weight).
        const bool chunk_element =
            spec.shape_size() <= static_cast<int>(analysis_.row_shape.size()) &&
            index == ElementEmitter::Broadcast(ElementIndex(lane_), ShapeOf(spec));
        const bool row_element = chunk_element && ShapeOf(spec) == analysis_.row_shape;
        std::string loaded;
        if (row_element && layout_.SharedCache()) {
          // The chunk's vector, as CacheRowInputs copied it: consecutive lanes' vectors at
          // consecutive addresses (no bank conflicts); each thread reads only what it copied.
          cached_inputs_.insert(position);
          const std::string vector = absl::StrCat("cvec", position);
          if (lane_ == 0) {
            self.AddStatement(absl::StrCat("const ForgeVec<", storage, ", ", width_, "> ", vector,
                                           " = cached", position, "[j * ", threads_per_row_,
                                           " + lane];"));
          }
          loaded = LoadConversion(spec.dtype(), absl::StrCat(vector, ".v[", lane_, "]"));
        } else if (row_element && cache_row_) {
          cached_inputs_.insert(position);
          loaded = CachedElement(position, absl::StrCat(lane_));
        } else if (chunk_element && VectorAccess(spec)) {
          const std::string vector = absl::StrCat("vec", position);
          if (lane_ == 0) {
            self.AddStatement(absl::StrCat(
                "const ForgeVec<", storage, ", ", width_, "> ", vector,
                " = *reinterpret_cast<const ForgeVec<", storage, ", ", width_, ">*>(in", position,
                " + ",
                ElementOffset(ElementEmitter::Broadcast(ElementIndex(0), ShapeOf(spec)), spec,
                              self),
                ");"));
          }
          loaded = LoadConversion(spec.dtype(), absl::StrCat(vector, ".v[", lane_, "]"));
        } else {
          loaded = LoadConversion(spec.dtype(),
                                  absl::StrCat("in", position, "[", ElementOffset(index, spec, self), "]"));
        }
        const std::string variable = self.NewVariable();
        self.AddStatement(absl::StrCat("const ", reg, " ", variable, " = ", loaded, ";"));
        return Term{variable, spec.dtype()};
      });
}

bool RowKernelWriter::ChunksCoverExactly() const {
  if (chunks_per_thread_ * threads_per_row_ * width_ != layout_.segment) return false;
  return layout_.segment * layout_.cluster_blocks == analysis_.columns;
}

std::string RowKernelWriter::ChunkColumn() const {
  return absl::StrCat(layout_.cluster_blocks > 1 ? "segment_begin + " : "", "(j * ",
                      threads_per_row_, " + lane) * ", width_);
}

std::string RowKernelWriter::ChunkGuard() const {
  // Without a bounds check where every chunk is in the row, the loop body is one basic block and
  // the compiler issues the unrolled chunks' loads together.
  if (ChunksCoverExactly()) return "{";
  return layout_.cluster_blocks > 1 ? "if (c0 < segment_end) {"
                                    : absl::StrCat("if (c0 < ", analysis_.columns, ") {");
}

std::string RowKernelWriter::ChunkLoopHeader() const {
  const std::string body =
      absl::StrCat("    const int c0 = ", ChunkColumn(), ";\n    ", ChunkGuard());
  if (layout_.cluster_blocks > 1) {
    // A cached cluster's first pass reads chunk j once its copies have landed, while the later
    // chunks' copies are still in flight.
    const bool wait_per_chunk = pass_ == 0 && PipelinedCache();
    return absl::StrCat(
        "#pragma unroll ", wait_per_chunk ? "" : absl::StrCat(ReductionFamily::kClusterChunkUnroll),
        "\n  for (int j = 0; j < ", chunks_per_thread_, "; ++j) {\n",
        wait_per_chunk ? absl::StrCat("    forge_cp_async_wait_pending(", chunks_per_thread_ - 1,
                                      " - j);\n")
                       : "",
        body);
  }
  // cache_row indexes its register arrays by j: the loop must unroll fully to keep them there.
  return absl::StrCat(cache_row_ ? "#pragma unroll\n  " : "", "for (int j = 0; j < ",
                      chunks_per_thread_, "; ++j) {\n", body);
}

std::string RowKernelWriter::CachedElement(int position, absl::string_view vector_lane) const {
  return absl::StrCat("cached", position, "[j * ", width_, " + ", vector_lane, "]");
}

absl::StatusOr<std::vector<std::string>> RowKernelWriter::Pass(int pass,
                                                               const std::vector<Stage>& stages) {
  pass_ = pass;
  const std::string& acc = analysis_.acc_type;
  std::vector<std::string> lines;
  for (const Stage& stage : stages) {
    const Reduction& reduction = analysis_.reductions[stage.reduction];
    const bool softmax = reduction.kind == ReductionKind::kSoftmax ||
                         reduction.kind == ReductionKind::kLogSoftmax;
    std::string init;
    if (softmax && online_softmax_) {
      init = absl::StrCat("ForgeSoftmaxAcc<", acc, "> ", stage.accumulator, " = {-(", acc,
                          ")forge_inf(), (", acc, ")0};");
    } else if (Moments(reduction.kind) && welford_) {
      init = absl::StrCat("ForgeWelfordAcc<", acc, "> ", stage.accumulator, " = {0, 0, 0};");
    } else if ((softmax && stage.step == 0) || reduction.kind == ReductionKind::kMax) {
      init = absl::StrCat(acc, " ", stage.accumulator, " = -(", acc, ")forge_inf();");
    } else if (reduction.kind == ReductionKind::kMin) {
      init = absl::StrCat(acc, " ", stage.accumulator, " = (", acc, ")forge_inf();");
    } else {
      init = absl::StrCat(acc, " ", stage.accumulator, " = 0;");
    }
    lines.push_back(init);
  }
  ElementEmitter emitter = NewEmitter(absl::StrCat("p", pass, "_"));
  // An online softmax and Welford add the whole chunk at once, after every lane's element is
  // loaded: the function that adds it and the chunk's elements, by accumulator.
  std::map<std::string, std::pair<std::string, std::vector<std::string>>> chunk_elements;
  for (lane_ = 0; lane_ < width_; ++lane_) {
    for (const Stage& stage : stages) {
      const Reduction& reduction = analysis_.reductions[stage.reduction];
      absl::StatusOr<Term> x = emitter.Emit(reduction.input, ElementIndex(lane_));
      if (!x.ok()) return x.status();
      const std::string xv = absl::StrCat("((", acc, ")", x->expr, ")");
      const std::string& a = stage.accumulator;
      const bool softmax = reduction.kind == ReductionKind::kSoftmax ||
                           reduction.kind == ReductionKind::kLogSoftmax;
      std::string update;
      if ((softmax && online_softmax_) || (Moments(reduction.kind) && welford_)) {
        chunk_elements[a].first = softmax ? "forge_softmax_add" : "forge_welford_add";
        chunk_elements[a].second.push_back(xv);
        continue;
      } else if (softmax && stage.step == 0) {
        update = absl::StrCat(a, " = forge_max<", acc, ">(", a, ", ", xv, ");");
      } else if (softmax) {
        update = absl::StrCat(a, " += forge_exp_from(", xv, ", ",
                              RowVariable(stage.reduction, "max_log2e"), ");");
      } else if (Moments(reduction.kind) && stage.step == 1) {
        const std::string deviation = emitter.NewVariable();
        emitter.AddStatement(absl::StrCat("const ", acc, " ", deviation, " = ", xv, " - ",
                                          RowVariable(stage.reduction, "mean"), ";"));
        update = absl::StrCat(a, " += ", deviation, " * ", deviation, ";");
      } else if (reduction.kind == ReductionKind::kMax) {
        update = absl::StrCat(a, " = forge_max<", acc, ">(", a, ", ", xv, ");");
      } else if (reduction.kind == ReductionKind::kMin) {
        update = absl::StrCat(a, " = forge_min<", acc, ">(", a, ", ", xv, ");");
      } else {
        update = absl::StrCat(a, " += ", xv, ";");
      }
      emitter.AddStatement(update);
    }
  }
  for (const auto& [accumulator, add] : chunk_elements) {
    const auto& [function, elements] = add;
    const std::string chunk = emitter.NewVariable();
    emitter.AddStatement(absl::StrCat("const ", acc, " ", chunk, "[", elements.size(), "] = {",
                                      absl::StrJoin(elements, ", "), "};"));
    emitter.AddStatement(absl::StrCat(function, "(", accumulator, ", ", chunk, ");"));
  }
  lines.push_back(ChunkLoopHeader());
  for (const std::string& statement : emitter.statements()) lines.push_back("      " + statement);
  lines.push_back("    }\n  }");
  pass_ = -1;

  const std::string columns = absl::StrCat("((", acc, ")", analysis_.columns, ")");
  for (const Stage& stage : stages) {
    const Reduction& reduction = analysis_.reductions[stage.reduction];
    const bool softmax = reduction.kind == ReductionKind::kSoftmax ||
                         reduction.kind == ReductionKind::kLogSoftmax;
    std::string acc_type = acc, op = "ForgeSumOp";
    if (softmax && online_softmax_) {
      acc_type = absl::StrCat("ForgeSoftmaxAcc<", acc, ">");
      op = "ForgeSoftmaxOp";
    } else if (Moments(reduction.kind) && welford_) {
      acc_type = absl::StrCat("ForgeWelfordAcc<", acc, ">");
      op = "ForgeWelfordOp";
    } else if ((softmax && stage.step == 0) || reduction.kind == ReductionKind::kMax) {
      op = "ForgeMaxOp";
    } else if (reduction.kind == ReductionKind::kMin) {
      op = "ForgeMinOp";
    }
    const std::string scratch = absl::StrCat("scratch", scratch_count_++);
    const std::string& a = stage.accumulator;
    std::string scratch_row = absl::StrCat("static_cast<", acc_type, "*>(nullptr)");
    if (column_) {
      if (threads_per_row_ > 1) {
        scratch_.push_back(absl::StrCat("__shared__ ", acc_type, " ", scratch, "[",
                                        threads_per_row_ * rows_per_block_, "];"));
        scratch_row = scratch;
      }
      lines.push_back(absl::StrCat(a, " = forge_col_allreduce<", threads_per_row_, ", ",
                                   rows_per_block_, ">(", a, ", ", op, "(), ", scratch_row, ");"));
    } else {
      if (threads_per_row_ > 32) {
        scratch_.push_back(absl::StrCat("__shared__ ", acc_type, " ", scratch, "[",
                                        rows_per_block_, "][", threads_per_row_ / 32, "];"));
        scratch_row = absl::StrCat(scratch, "[row_in_block]");
      }
      lines.push_back(absl::StrCat(a, " = forge_row_allreduce<", threads_per_row_, ">(", a, ", ",
                                   op, "(), ", scratch_row, ");"));
      if (layout_.cluster_blocks > 1) {
        const std::string slot = absl::StrCat("cluster_slot", scratch_count_ - 1);
        scratch_.push_back(absl::StrCat("__shared__ ", acc_type, " ", slot, ";"));
        lines.push_back(absl::StrCat(a, " = forge_cluster_allreduce<", layout_.cluster_blocks,
                                     ">(", a, ", ", op, "(), &", slot, ");"));
      }
    }
    const int r = stage.reduction;
    auto define = [&](absl::string_view what, const std::string& value) {
      lines.push_back(absl::StrCat("const ", acc, " ", RowVariable(r, what), " = ", value, ";"));
    };
    const std::string eps = absl::StrFormat("((%s)%.17g)", acc, reduction.eps);
    switch (reduction.kind) {
      case ReductionKind::kSum:
      case ReductionKind::kMax:
      case ReductionKind::kMin: define("value", a); break;
      case ReductionKind::kMean: define("value", absl::StrCat(a, " / ", columns)); break;
      case ReductionKind::kSoftmax:
      case ReductionKind::kLogSoftmax: {
        if (online_softmax_ || stage.step == 0) {
          define("max", online_softmax_ ? absl::StrCat(a, ".max") : a);
          define("max_log2e", absl::StrCat(RowVariable(r, "max"), " * (", acc, ")kForgeLog2e"));
        }
        if (!online_softmax_ && stage.step == 0) break;
        const std::string sum = online_softmax_ ? absl::StrCat(a, ".sum") : a;
        if (reduction.kind == ReductionKind::kSoftmax) {
          define("inv_sum", absl::StrCat("(", acc, ")1 / ", sum));
        } else {
          define("log_sum", absl::StrCat("forge_log(", sum, ")"));
        }
        break;
      }
      case ReductionKind::kLayerNorm:
      case ReductionKind::kVar: {
        if (welford_ || stage.step == 0) {
          define("mean", welford_ ? absl::StrCat(a, ".mean") : absl::StrCat(a, " / ", columns));
        }
        if (!welford_ && stage.step == 0) break;
        const std::string m2 = welford_ ? absl::StrCat(a, ".m2") : a;
        if (reduction.kind == ReductionKind::kLayerNorm) {
          define("rstd", absl::StrCat("forge_rsqrt(", m2, " / ", columns, " + ", eps, ")"));
        } else {
          // ATen: length - correction <= 0 gives inf or NaN; so does this division.
          define("value", absl::StrFormat("%s / ((%s)%.17g)", m2, acc,
                                          static_cast<double>(analysis_.columns) -
                                              reduction.correction));
        }
        break;
      }
    }
  }
  return lines;
}

absl::StatusOr<std::vector<std::string>> RowKernelWriter::FinalPass() {
  const KernelTask& task = view_.task();
  ElementEmitter emitter = NewEmitter("e_");
  std::vector<std::vector<Term>> results(task.outputs_size());
  bool any = false;
  for (lane_ = 0; lane_ < width_; ++lane_) {
    for (int o = 0; o < task.outputs_size(); ++o) {
      if (ShapeOf(task.outputs(o)) != analysis_.row_shape) continue;
      any = true;
      absl::StatusOr<Term> term =
          emitter.Emit(task.group().outputs(o).value_name(), ElementIndex(lane_));
      if (!term.ok()) return term.status();
      results[o].push_back(*term);
    }
  }
  if (!any) return std::vector<std::string>();
  for (int o = 0; o < task.outputs_size(); ++o) {
    if (results[o].empty()) continue;
    const TensorSpec& spec = task.outputs(o);
    const std::string reg = *RegisterType(spec.dtype());
    auto converted = [&](const Term& term) { return absl::StrCat("((", reg, ")", term.expr, ")"); };
    auto stored = [&](const Term& term) { return StoreConversion(spec.dtype(), converted(term)); };
    if (VectorAccess(spec)) {
      std::vector<std::string> values;
      for (const Term& term : results[o]) values.push_back(converted(term));
      const std::string address =
          absl::StrCat("out", o, " + ", ElementOffset(ElementIndex(0), spec, emitter));
      for (const std::string& statement :
           VectorStore(spec.dtype(), values, emitter.NewVariable(), address, "active")) {
        emitter.AddStatement(statement);
      }
    } else {
      for (int v = 0; v < width_; ++v) {
        emitter.AddStatement(absl::StrCat("if (active) out", o, "[",
                                          ElementOffset(ElementIndex(v), spec, emitter),
                                          "] = ", stored(results[o][v]), ";"));
      }
    }
  }
  std::vector<std::string> lines = {ChunkLoopHeader()};
  for (const std::string& statement : emitter.statements()) lines.push_back("      " + statement);
  lines.push_back("    }");
  // A cached cluster copies the next row's chunk in once this chunk's outputs are stored (the
  // stores wait for this chunk's reads, the copies follow them).
  if (layout_.SharedCache()) lines.push_back(RefillChunk());
  lines.push_back("  }");
  return lines;
}

std::string RowKernelWriter::RefillChunk() const {
  return absl::StrCat("    if (next_row < ", analysis_.rows,
                      "LL) forge_fill_row_chunk(next_row, j);");
}

absl::StatusOr<std::vector<std::string>> RowKernelWriter::RowOutputs() {
  const KernelTask& task = view_.task();
  ElementEmitter emitter = NewEmitter("r_");
  for (int o = 0; o < task.outputs_size(); ++o) {
    const TensorSpec& spec = task.outputs(o);
    if (ShapeOf(spec) == analysis_.row_shape) continue;
    const Index index = RowIndex(ShapeOf(spec));
    absl::StatusOr<Term> term = emitter.Emit(task.group().outputs(o).value_name(), index);
    if (!term.ok()) return term.status();
    const std::string reg = *RegisterType(spec.dtype());
    emitter.AddStatement(absl::StrCat(
        "out", o, "[", ElementOffset(index, spec, emitter), "] = ",
        StoreConversion(spec.dtype(), absl::StrCat("((", reg, ")", term->expr, ")")), ";"));
  }
  if (emitter.statements().empty()) return std::vector<std::string>();
  std::vector<std::string> lines = {
      layout_.cluster_blocks > 1 ? "if (active && lane == 0 && cluster_rank == 0) {"
                          : "if (active && lane == 0) {"};
  for (const std::string& statement : emitter.statements()) lines.push_back("  " + statement);
  lines.push_back("}");
  return lines;
}

std::vector<std::string> RowKernelWriter::CacheRowInputs() {
  std::vector<std::string> lines;
  const SharedCache shared_cache = SharedCacheOf(analysis_, layout_);
  if (layout_.SharedCache()) {
    // Every copy of a row in flight at once, none through registers. Each thread copies and
    // later reads only its own vectors, so no barrier orders the copies and the reads.
    lines.push_back("extern __shared__ __align__(16) unsigned char forge_row_cache[];");
    std::vector<std::string> fill = RowCoordinates();
    fill.push_back(absl::StrCat("const int c0 = ", ChunkColumn(), ";"));
    fill.push_back(ChunkGuard());
    for (int position : cached_inputs_) {
      const TensorSpec& spec = view_.InputSpec(position);
      const std::string vector_type =
          absl::StrCat("ForgeVec<", *StorageType(spec.dtype()), ", ", width_, ">");
      const std::string array = absl::StrCat("cached", position);
      lines.push_back(absl::StrCat(vector_type, "* const ", array, " = reinterpret_cast<",
                                   vector_type, "*>(forge_row_cache + ",
                                   shared_cache.offsets.at(position), ");"));
      ElementEmitter emitter = NewEmitter(absl::StrCat("c", position, "_"));
      emitter.AddStatement(absl::StrCat("forge_cp_async<", width_ * ElementBytes(spec.dtype()),
                                        ">(&", array, "[j * ", threads_per_row_, " + lane], in",
                                        position, " + ",
                                        ElementOffset(ElementIndex(0), spec, emitter), ");"));
      for (const std::string& statement : emitter.statements()) fill.push_back("  " + statement);
    }
    fill.push_back("}");
    // One group per chunk, copied or not: the first pass counts groups to wait for chunk j.
    fill.push_back("forge_cp_async_commit();");
    lines.push_back("const auto forge_fill_row_chunk = [&](const long long row, const int j) {");
    for (const std::string& line : fill) lines.push_back("  " + line);
    lines.push_back("};");
    return lines;
  }
  for (int position : cached_inputs_) {
    const TensorSpec& spec = view_.InputSpec(position);
    const std::string storage = *StorageType(spec.dtype());
    const std::string reg = *RegisterType(spec.dtype());
    const std::string array = absl::StrCat("cached", position);
    lines.push_back(absl::StrCat(reg, " ", array, "[", chunks_per_thread_ * width_, "];"));
    ElementEmitter emitter = NewEmitter(absl::StrCat("c", position, "_"));
    if (VectorAccess(spec)) {
      const std::string vector = emitter.NewVariable();
      emitter.AddStatement(absl::StrCat("const ForgeVec<", storage, ", ", width_, "> ", vector,
                                        " = *reinterpret_cast<const ForgeVec<", storage, ", ",
                                        width_, ">*>(in", position, " + ",
                                        ElementOffset(ElementIndex(0), spec, emitter), ");"));
      for (int v = 0; v < width_; ++v) {
        emitter.AddStatement(absl::StrCat(CachedElement(position, absl::StrCat(v)), " = ",
                                          LoadConversion(spec.dtype(), absl::StrCat(vector, ".v[", v, "]")),
                                          ";"));
      }
    } else {
      for (int v = 0; v < width_; ++v) {
        emitter.AddStatement(absl::StrCat(
            CachedElement(position, absl::StrCat(v)), " = ",
            LoadConversion(spec.dtype(), absl::StrCat("in", position, "[",
                                                      ElementOffset(ElementIndex(v), spec, emitter),
                                                      "]")),
            ";"));
      }
    }
    lines.push_back(ChunkLoopHeader());
    for (const std::string& statement : emitter.statements()) lines.push_back("      " + statement);
    lines.push_back(ChunksCoverExactly()
                        ? "    }\n  }"
                        : absl::StrCat("    } else {\n#pragma unroll\n      for (int v = 0; v < ",
                                       width_, "; ++v) ", CachedElement(position, "v"),
                                       " = 0;\n    }\n  }"));
  }
  return lines;
}

void RowKernelWriter::PersistentRows(const std::vector<std::string>& passes,
                                     const std::vector<std::string>& final_pass,
                                     const std::vector<std::string>& row_outputs,
                                     std::vector<std::string>& lines) {
  auto take = [](absl::string_view slot) {
    return absl::StrCat("if (cluster_rank == 0 && threadIdx.x == 0) forge_row_slot[", slot,
                        "] = atomicAdd(&forge_rows_taken, 1u);");
  };
  const std::string rows = absl::StrCat(analysis_.rows, "LL");
  // Rank 0 takes the next row at the top of an iteration; the others read it after the
  // iteration's cluster reductions (whose barriers make it visible). Two slots: rank 0 writes a
  // slot again only after every block has passed the barriers that follow its reading it.
  lines.push_back("__shared__ long long forge_row_slot[2];");
  lines.push_back(take("0"));
  lines.push_back("forge_cluster_sync();");
  lines.push_back("long long row = *forge_cluster_map(&forge_row_slot[0], 0);");
  const std::vector<std::string> cache = CacheRowInputs();
  lines.insert(lines.end(), cache.begin(), cache.end());
  lines.push_back(absl::StrCat("if (row < ", rows, ") {\n    for (int j = 0; j < ",
                               chunks_per_thread_, "; ++j) forge_fill_row_chunk(row, j);\n  }"));
  lines.push_back(absl::StrCat("for (int iteration = 0; row < ", rows, "; ++iteration) {"));
  std::vector<std::string> iteration = RowCoordinates();
  iteration.push_back("const bool active = true;");
  if (!PipelinedCache()) iteration.push_back("forge_cp_async_wait_all();");
  iteration.push_back(take("(iteration + 1) & 1"));
  iteration.insert(iteration.end(), passes.begin(), passes.end());
  iteration.push_back(
      "const long long next_row = *forge_cluster_map(&forge_row_slot[(iteration + 1) & 1], 0);");
  iteration.insert(iteration.end(), final_pass.begin(), final_pass.end());
  if (final_pass.empty()) {  // no row-shaped output: the next row's copies go out here
    iteration.push_back(absl::StrCat("for (int j = 0; j < ", chunks_per_thread_, "; ++j) {\n",
                                     RefillChunk(), "\n  }"));
  }
  iteration.insert(iteration.end(), row_outputs.begin(), row_outputs.end());
  iteration.push_back("row = next_row;");
  for (const std::string& line : iteration) lines.push_back("  " + line);
  lines.push_back("}");
  lines.push_back("// No block leaves while another may still read its shared memory.");
  lines.push_back("forge_cluster_sync();");
  lines.push_back(absl::StrCat(
      "if (cluster_rank == 0 && threadIdx.x == 0 && atomicAdd(&forge_clusters_done, 1u) == "
      "gridDim.x / ",
      layout_.cluster_blocks,
      " - 1) {\n    forge_rows_taken = 0;\n    forge_clusters_done = 0;\n  }"));
}

std::vector<std::string> RowKernelWriter::RowCoordinates() const {
  // Row r is the r-th row-major position of the row shape without the reduced dim.
  std::vector<int64_t> others = analysis_.row_shape;
  others.erase(others.begin() + analysis_.axis);
  const Index coordinates = RowMajorCoordinates("row", others);
  std::vector<std::string> lines;
  for (int d = 0; d < static_cast<int>(others.size()); ++d) {
    if (others[d] == 1) continue;
    lines.push_back(absl::StrCat("const ", index_type_, " o", d < analysis_.axis ? d : d + 1,
                                 " = ", coordinates[d], ";"));
  }
  return lines;
}

absl::StatusOr<std::string> RowKernelWriter::Write() {
  const KernelTask& task = view_.task();
  // Stages by pass: a reduction's first stage runs one pass after the last stage of every
  // reduction its input reads; two-pass variants take the following pass too.
  std::vector<int> last_pass(analysis_.reductions.size(), 0);
  std::map<int, std::vector<Stage>> passes;
  for (size_t r = 0; r < analysis_.reductions.size(); ++r) {
    const Reduction& reduction = analysis_.reductions[r];
    int first = 0;
    for (int dependency : reduction.depends_on) first = std::max(first, last_pass[dependency] + 1);
    const int steps = TwoStep(reduction) ? 2 : 1;
    for (int step = 0; step < steps; ++step) {
      passes[first + step].push_back(
          Stage{static_cast<int>(r), step, absl::StrCat("acc", r, "_", step)});
    }
    last_pass[r] = first + steps - 1;
  }
  std::vector<std::string> body;
  for (const auto& [pass, stages] : passes) {
    absl::StatusOr<std::vector<std::string>> lines = Pass(pass, stages);
    if (!lines.ok()) return lines.status();
    body.push_back(absl::StrCat("// pass ", pass));
    body.insert(body.end(), lines->begin(), lines->end());
  }
  absl::StatusOr<std::vector<std::string>> final_pass = FinalPass();
  if (!final_pass.ok()) return final_pass.status();
  absl::StatusOr<std::vector<std::string>> row_outputs = RowOutputs();
  if (!row_outputs.ok()) return row_outputs.status();

  std::vector<std::string> parameters;
  for (int i = 0; i < task.inputs_size(); ++i) {
    parameters.push_back(absl::StrCat("const ", *StorageType(task.inputs(i).dtype()),
                                      "* __restrict__ in", i));
  }
  for (int o = 0; o < task.outputs_size(); ++o) {
    parameters.push_back(
        absl::StrCat(*StorageType(task.outputs(o).dtype()), "* __restrict__ out", o));
  }
  const int64_t block = layout_.BlockThreads();
  std::string source(KernelPrelude());
  absl::StrAppend(&source, kReductionPrelude);
  if (layout_.cluster_blocks > 1) {
    std::string cases;
    for (int pending = 0; pending < kMaxPipelinedChunks; ++pending) {
      absl::StrAppend(&cases, "    case ", pending, ": asm volatile(\"cp.async.wait_group ",
                      pending, ";\" ::: \"memory\"); break;\n");
    }
    absl::StrAppend(&source,
                    absl::StrReplaceAll(kClusterPrelude, {{"FORGE_WAIT_PENDING_CASES\n", cases}}));
  }
  absl::StrAppend(&source, "\n// Task ", task.digest(), ": ", analysis_.rows, " rows of ",
                  analysis_.columns, " (dim ", analysis_.axis, ", ", analysis_.inner,
                  " inner); ", column_ ? "col_reduce" : "row_reduce", ", ", threads_per_row_,
                  " threads per row, ", rows_per_block_, " rows per block, vector ", width_);
  if (layout_.cluster_blocks > 1) {
    absl::StrAppend(&source, ", ", layout_.cluster_blocks, " blocks per row (a cluster) of ",
                    layout_.segment, " columns each",
                    layout_.SharedCache() ? ", row cached in shared memory" : "");
  }
  if (layout_.max_registers > 0) {
    absl::StrAppend(&source, ", at most ", layout_.max_registers, " registers per thread");
  }
  absl::StrAppend(&source, ".\n");
  if (layout_.SharedCache()) {
    absl::StrAppend(&source,
                    "// Rows taken and clusters finished in this launch; the last cluster to "
                    "finish resets both\n// (launches of one module must not overlap: the judge "
                    "and the timer launch one at a time).\n__device__ unsigned int "
                    "forge_rows_taken;\n__device__ unsigned int forge_clusters_done;\n");
  }
  const std::string cluster_attribute =
      layout_.cluster_blocks > 1
          ? absl::StrCat("__cluster_dims__(", layout_.cluster_blocks, ", 1, 1) ")
          : "";
  const std::string min_blocks =
      layout_.max_registers > 0 ? absl::StrCat(", ", layout_.MinBlocksPerSm()) : "";
  absl::StrAppend(&source, "extern \"C\" __global__ void __launch_bounds__(", block, min_blocks,
                  ") ", cluster_attribute, ReductionFamily::kKernelName, "(",
                  absl::StrJoin(parameters, ", "), ") {\n");
  std::vector<std::string> lines = scratch_;
  if (column_) {
    // Consecutive threads take consecutive rows: adjacent inner positions, coalesced loads.
    lines.push_back(absl::StrCat("const int lane = threadIdx.x / ", rows_per_block_, ";"));
    lines.push_back(absl::StrCat("const int row_in_block = threadIdx.x % ", rows_per_block_, ";"));
  } else {
    lines.push_back(absl::StrCat("const int lane = threadIdx.x % ", threads_per_row_, ";"));
    lines.push_back(absl::StrCat("const int row_in_block = threadIdx.x / ", threads_per_row_, ";"));
  }
  if (layout_.cluster_blocks > 1) {
    // A launch without the cluster shape would leave blocks waiting on partners that are not
    // there: refuse it loudly.
    lines.push_back(
        absl::StrCat("if (forge_cluster_blocks() != ", layout_.cluster_blocks, ") __trap();"));
    lines.push_back(
        absl::StrCat("const int cluster_rank = blockIdx.x % ", layout_.cluster_blocks, ";"));
    lines.push_back(absl::StrCat("const int segment_begin = cluster_rank * ", layout_.segment, ";"));
    lines.push_back(absl::StrCat("const int segment_end = min(segment_begin + ", layout_.segment,
                                 ", ",
                                 analysis_.columns, ");"));
  }
  if (layout_.SharedCache()) {
    PersistentRows(body, *final_pass, *row_outputs, lines);
  } else {
    lines.push_back(layout_.cluster_blocks > 1
                        ? absl::StrCat("const long long row_wide = (long long)blockIdx.x / ",
                                       layout_.cluster_blocks, ";")
                        : absl::StrCat("const long long row_wide = (long long)blockIdx.x * ",
                                       rows_per_block_, " + row_in_block;"));
    lines.push_back("// Rows past the end recompute the last row (every thread must reach the");
    lines.push_back("// barriers of the cross-warp reduction) but store nothing.");
    lines.push_back(absl::StrCat("const bool active = row_wide < ", analysis_.rows, "LL;"));
    lines.push_back(absl::StrCat("const ", index_type_, " row = active ? (", index_type_,
                                 ")row_wide : (", index_type_, ")", analysis_.rows - 1, ";"));
    for (const std::vector<std::string>& part :
         {RowCoordinates(), CacheRowInputs(), body, *final_pass, *row_outputs}) {
      lines.insert(lines.end(), part.begin(), part.end());
    }
  }
  for (const std::string& line : lines) absl::StrAppend(&source, "  ", line, "\n");
  absl::StrAppend(&source, "}\n");
  return source;
}

// ---- cross_entropy: aten::cross_entropy_loss with class-index targets ----

// Blocks of one cross_entropy launch at most: blocks stride over the rows, so this caps the
// per-block partial sums the last block adds up (and the __device__ arrays that hold them).
constexpr int64_t kMaxCrossEntropyBlocks = 4096;

struct CrossEntropyTask {
  const Node* node = nullptr;
  int logits_position = 0, target_position = 0;
  TensorSpec logits, target, output;
  int64_t rows = 0, classes = 0;
  bool mean = true;  // reduction 1 (mean over the counted rows), else 2 (sum)
  int64_t ignore_index = -100;
  std::string acc_type;  // "float", or "double" for float64 logits
};

const Node* FindCrossEntropyNode(const KernelTask& task) {
  for (const Node& node : task.group().nodes()) {
    if (node.op() == "aten::cross_entropy_loss") return &node;
  }
  return nullptr;
}

absl::StatusOr<CrossEntropyTask> AnalyzeCrossEntropy(const KernelTask& task, const Node& node) {
  absl::StatusOr<GroupView> view = GroupView::Create(task);
  if (!view.ok()) return view.status();
  const std::string where = absl::StrCat("cross_entropy: ", DescribeNode(node));
  if (task.group().nodes_size() != 1) {
    return absl::UnimplementedError(absl::StrCat(
        where, " shares its task with ", task.group().nodes_size() - 1,
        " other node(s); the cross_entropy template computes the loss alone"));
  }
  CrossEntropyTask ce;
  ce.node = &node;
  if (const Argument* weight = FindArgument(node, "weight");
      weight != nullptr && !(weight->value_case() == Argument::kNone ||
                             (weight->value_case() == Argument::kOptionalTensor &&
                              !weight->optional_tensor().has_value_name()))) {
    return absl::UnimplementedError(
        absl::StrCat(where, " has class weights; only weight=None is supported"));
  }
  if (const Argument* reduction = FindArgument(node, "reduction"); reduction != nullptr) {
    if (reduction->value_case() != Argument::kIntValue ||
        (reduction->int_value() != 1 && reduction->int_value() != 2)) {
      return absl::UnimplementedError(absl::StrCat(
          where, " has reduction ",
          reduction->value_case() == Argument::kIntValue
              ? absl::StrCat(reduction->int_value())
              : std::string("of an unexpected kind"),
          "; only mean (1) and sum (2) are supported"));
    }
    ce.mean = reduction->int_value() == 1;
  }
  if (const Argument* ignore = FindArgument(node, "ignore_index"); ignore != nullptr) {
    if (ignore->value_case() != Argument::kIntValue) {
      return absl::InvalidArgumentError(absl::StrCat(where, " has a non-integer ignore_index"));
    }
    ce.ignore_index = ignore->int_value();
  }
  if (const Argument* smoothing = FindArgument(node, "label_smoothing");
      smoothing != nullptr && smoothing->value_case() == Argument::kFloatValue &&
      smoothing->float_value() != 0) {
    return absl::UnimplementedError(absl::StrCat(where, " has label_smoothing ",
                                                 smoothing->float_value(),
                                                 "; only 0 is supported"));
  }
  const std::string logits = TensorArgument(node, "self");
  const std::string target = TensorArgument(node, "target");
  ce.logits_position = view->InputPosition(logits);
  ce.target_position = view->InputPosition(target);
  if (ce.logits_position < 0 || ce.target_position < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": its logits and target must be task inputs"));
  }
  ce.logits = view->InputSpec(ce.logits_position);
  ce.target = view->InputSpec(ce.target_position);
  if (ce.logits.shape_size() != 2) {
    return absl::UnimplementedError(absl::StrCat(where, " has logits of rank ",
                                                 ce.logits.shape_size(),
                                                 "; only (N, C) logits are supported"));
  }
  const forge::v1::DType dtype = ce.logits.dtype();
  if (!IsFloatingDType(dtype) || !StorageType(dtype).ok()) {
    return absl::UnimplementedError(
        absl::StrCat(where, " has logits of dtype ", DTypeName(dtype)));
  }
  ce.rows = ce.logits.shape(0);
  ce.classes = ce.logits.shape(1);
  if (ce.target.dtype() != forge::v1::DTYPE_INT64 || ce.target.shape_size() != 1 ||
      ce.target.shape(0) != ce.rows) {
    return absl::UnimplementedError(absl::StrCat(
        where, " has a target that is not int64 of shape [", ce.rows,
        "]; only class-index targets are supported"));
  }
  if (ce.rows == 0 || ce.classes == 0) {
    return absl::UnimplementedError(absl::StrCat(where, " has empty logits"));
  }
  if (task.outputs_size() != 1 || task.outputs(0).shape_size() != 0 ||
      task.outputs(0).dtype() != dtype) {
    return absl::InvalidArgumentError(absl::StrCat(
        where, ": the task must have one 0-d output of the logits' dtype"));
  }
  ce.output = task.outputs(0);
  ce.acc_type = dtype == forge::v1::DTYPE_FLOAT64 ? "double" : "float";
  return ce;
}

TemplateSpace CrossEntropySpace() {
  return {ReductionFamily::kCrossEntropyTemplateName,
          {{"threads_per_row", {32, 64, 128, 256, 512, 1024}, 32},
           {"rows_per_block", {1, 2, 4, 8}, 1},
           {"vector_width", {1, 2, 4, 8}, 1}}};
}

Layout CrossEntropyLayout(const SchedulePoint& point) {
  Layout layout;
  layout.threads_per_row = Parameter(point, "threads_per_row", 32);
  layout.rows_per_block = Parameter(point, "rows_per_block", 1);
  layout.width = Parameter(point, "vector_width", 1);
  return layout;
}

int64_t CrossEntropyGridBlocks(const CrossEntropyTask& ce, const Layout& layout) {
  return std::min((ce.rows + layout.rows_per_block - 1) / layout.rows_per_block,
                  kMaxCrossEntropyBlocks);
}

absl::Status ValidateCrossEntropyPoint(const CrossEntropyTask& ce, const SchedulePoint& point) {
  if (absl::Status status = CheckPointInSpace(CrossEntropySpace(), point); !status.ok()) {
    return status;
  }
  const Layout layout = CrossEntropyLayout(point);
  if (absl::Status status =
          ValidateRowLayout(ce.rows, ce.classes, ElementBytes(ce.logits.dtype()), layout);
      !status.ok()) {
    return status;
  }
  if (layout.width > 1 && (ce.logits.strides(1) != 1 || ce.logits.strides(0) % layout.width != 0 ||
                           ce.logits.storage_offset() % layout.width != 0)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "vector_width ", layout.width, " needs logits rows of unit stride that start at multiples "
        "of ", layout.width, " elements"));
  }
  return absl::OkStatus();
}

// The loss of each counted row is max + log(sum exp(x - max)) - x[target] (online softmax over
// the row, threads_per_row threads, vector_width elements per load). Blocks stride over the rows;
// each writes its partial sum and count to a __device__ array, and the last block to finish (an
// integer atomic counter) adds them up in block order and resets the counter. The result depends
// only on the schedule point, not on which blocks finish first. The arrays and the counter are
// per loaded module: two launches of one module must not overlap (the judge and the timer launch
// one at a time on one stream).
constexpr char kCrossEntropyBody[] = R"(
constexpr int kBlockThreads = kThreadsPerRow * kRowsPerBlock;
constexpr int kWarpsPerRow = kThreadsPerRow / 32;
constexpr int kChunkColumns = kThreadsPerRow * kVectorWidth;
constexpr int kChunksPerThread = (kClasses + kChunkColumns - 1) / kChunkColumns;
constexpr bool kChunksCoverExactly = kClasses % kChunkColumns == 0;

__device__ ForgeCeAcc forge_ce_block_loss[kGridBlocks];
__device__ int forge_ce_block_count[kGridBlocks];
__device__ unsigned int forge_ce_blocks_done;  // 0 at module load; the last block resets it

extern "C" __global__ void __launch_bounds__(kBlockThreads)
forge_cross_entropy(FORGE_CE_PARAMETERS) {
  FORGE_CE_ALIASES
  __shared__ ForgeSoftmaxAcc<ForgeCeAcc> scratch[kRowsPerBlock][kWarpsPerRow];
  __shared__ ForgeCeAcc row_group_loss[kRowsPerBlock];
  __shared__ int row_group_count[kRowsPerBlock];
  __shared__ double warp_loss[kBlockThreads / 32];
  __shared__ long long warp_count[kBlockThreads / 32];
  __shared__ bool last_block;
  const int lane = threadIdx.x % kThreadsPerRow;
  const int row_in_block = threadIdx.x / kThreadsPerRow;
  ForgeCeAcc loss_sum = 0;  // this row group's rows, kept by its lane 0
  int count = 0;
  // `first` is the same for the whole block: every thread reaches the row reduction's barriers.
  for (long long first = (long long)blockIdx.x * kRowsPerBlock; first < kRows;
       first += (long long)kGridBlocks * kRowsPerBlock) {
    const long long row = first + row_in_block;
    const long long target_class =
        row < kRows ? target[kTargetOffset + row * kTargetStride] : kIgnoreIndex;
    const bool counted = target_class != kIgnoreIndex;
    const ForgeCeLogit* row_logits = logits + kLogitsOffset + row * kRowStride;
    ForgeSoftmaxAcc<ForgeCeAcc> acc = {-(ForgeCeAcc)forge_inf(), (ForgeCeAcc)0};
    if (counted) {
      // Where every chunk is in the row the loop body has no bounds check: the unrolled chunks'
      // loads issue together.
#pragma unroll 4
      for (int j = 0; j < kChunksPerThread; ++j) {
        const int c0 = (j * kThreadsPerRow + lane) * kVectorWidth;
        if (!kChunksCoverExactly && c0 >= kClasses) break;
        ForgeCeAcc x[kVectorWidth];
        if (kVectorWidth > 1) {
          const ForgeVec<ForgeCeLogit, kVectorWidth> chunk =
              *reinterpret_cast<const ForgeVec<ForgeCeLogit, kVectorWidth>*>(row_logits + c0);
#pragma unroll
          for (int v = 0; v < kVectorWidth; ++v) x[v] = forge_ce_load(chunk.v[v]);
        } else {
          x[0] = forge_ce_load(row_logits[(long long)c0 * kClassStride]);
        }
        forge_softmax_add(acc, x);
      }
    }
    acc = forge_row_allreduce<kThreadsPerRow>(acc, ForgeSoftmaxOp(), scratch[row_in_block]);
    if (lane == 0 && counted) {
      // ATen asserts on a target outside [0, C); here it makes the loss NaN.
      const ForgeCeAcc picked = target_class >= 0 && target_class < kClasses
                                    ? forge_ce_load(row_logits[target_class * kClassStride])
                                    : (ForgeCeAcc)forge_nan();
      loss_sum += acc.max + forge_log(acc.sum) - picked;
      ++count;
    }
  }
  if (lane == 0) {
    row_group_loss[row_in_block] = loss_sum;
    row_group_count[row_in_block] = count;
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    ForgeCeAcc block_loss = 0;
    int block_count = 0;
    for (int r = 0; r < kRowsPerBlock; ++r) {
      block_loss += row_group_loss[r];
      block_count += row_group_count[r];
    }
    forge_ce_block_loss[blockIdx.x] = block_loss;
    forge_ce_block_count[blockIdx.x] = block_count;
    __threadfence();  // the partials are visible before the counter says so
    last_block = atomicAdd(&forge_ce_blocks_done, 1u) == kGridBlocks - 1;
  }
  __syncthreads();
  if (!last_block) return;
  __threadfence();
  // Fixed order: thread t adds blocks t, t + kBlockThreads, ...; then warps, then thread 0.
  double total = 0;
  long long total_count = 0;
  for (int b = threadIdx.x; b < kGridBlocks; b += kBlockThreads) {
    total += (double)__ldcg(&forge_ce_block_loss[b]);
    total_count += __ldcg(&forge_ce_block_count[b]);
  }
#pragma unroll
  for (int mask = 16; mask > 0; mask >>= 1) {
    total += __shfl_xor_sync(0xffffffffu, total, mask);
    total_count += __shfl_xor_sync(0xffffffffu, total_count, mask);
  }
  if (threadIdx.x % 32 == 0) {
    warp_loss[threadIdx.x / 32] = total;
    warp_count[threadIdx.x / 32] = total_count;
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    double loss = 0;
    long long rows_counted = 0;
    for (int w = 0; w < kBlockThreads / 32; ++w) {
      loss += warp_loss[w];
      rows_counted += warp_count[w];
    }
    // Mean over no counted row is 0 / 0 = NaN, as ATen's.
    out[0] = forge_ce_store((ForgeCeAcc)(kMean ? loss / (double)rows_counted : loss));
    forge_ce_blocks_done = 0;
  }
}
)";

std::string CrossEntropySource(const KernelTask& task, const CrossEntropyTask& ce,
                               const Layout& layout) {
  const forge::v1::DType dtype = ce.logits.dtype();
  const std::string storage = *StorageType(dtype);
  std::vector<std::string> parameters;
  for (int i = 0; i < task.inputs_size(); ++i) {
    parameters.push_back(absl::StrCat("const ", *StorageType(task.inputs(i).dtype()),
                                      "* __restrict__ in", i));
  }
  parameters.push_back(absl::StrCat(storage, "* __restrict__ out0"));
  std::string source(KernelPrelude());
  absl::StrAppend(&source, kReductionPrelude);
  absl::StrAppend(
      &source, "\n// Task ", task.digest(), ": cross-entropy (", ce.mean ? "mean" : "sum",
      ", ignore_index ", ce.ignore_index, ") of ", ce.rows, " rows of ", ce.classes,
      " classes; ", layout.threads_per_row, " threads per row, ", layout.rows_per_block,
      " rows per block, vector ", layout.width, ".\n");
  absl::StrAppend(&source, "using ForgeCeLogit = ", storage, ";\nusing ForgeCeAcc = ", ce.acc_type,
                  ";\n");
  absl::StrAppend(&source, "__device__ __forceinline__ ForgeCeAcc forge_ce_load(ForgeCeLogit x) { "
                  "return (ForgeCeAcc)", LoadConversion(dtype, "x"), "; }\n");
  absl::StrAppend(&source, "__device__ __forceinline__ ", storage,
                  " forge_ce_store(ForgeCeAcc x) { return ",
                  StoreConversion(dtype, absl::StrCat("((", *RegisterType(dtype), ")x)")),
                  "; }\n");
  const std::vector<std::pair<std::string, int64_t>> constants = {
      {"kRows", ce.rows},
      {"kClasses", ce.classes},
      {"kLogitsOffset", ce.logits.storage_offset()},
      {"kRowStride", ce.logits.strides(0)},
      {"kClassStride", ce.logits.strides(1)},
      {"kTargetOffset", ce.target.storage_offset()},
      {"kTargetStride", ce.target.strides(0)},
      {"kIgnoreIndex", ce.ignore_index}};
  for (const auto& [name, value] : constants) {
    absl::StrAppend(&source, "constexpr long long ", name, " = ", value, "LL;\n");
  }
  absl::StrAppend(&source, "constexpr int kThreadsPerRow = ", layout.threads_per_row,
                  ";\nconstexpr int kRowsPerBlock = ", layout.rows_per_block,
                  ";\nconstexpr int kVectorWidth = ", layout.width,
                  ";\nconstexpr int kGridBlocks = ", CrossEntropyGridBlocks(ce, layout),
                  ";\nconstexpr bool kMean = ", ce.mean ? "true" : "false", ";\n");
  std::string body = kCrossEntropyBody;
  body = absl::StrReplaceAll(
      body, {{"FORGE_CE_PARAMETERS", absl::StrJoin(parameters, ", ")},
             {"FORGE_CE_ALIASES",
              absl::StrCat("const ForgeCeLogit* const logits = in", ce.logits_position,
                           ";\n  const long long* const target = in", ce.target_position,
                           ";\n  ", storage, "* const out = out0;")}});
  absl::StrAppend(&source, body);
  return source;
}

}  // namespace

absl::Status ReductionFamily::Applies(const KernelTask& task) const {
  if (const Node* node = FindCrossEntropyNode(task); node != nullptr) {
    return AnalyzeCrossEntropy(task, *node).status();
  }
  absl::StatusOr<ReductionTask> analysis = Analyze(task);
  if (!analysis.ok()) return analysis.status();
  SchedulePoint point = DefaultPoint(SpaceOf(*analysis));
  return RowKernelWriter(*analysis, point).Write().status();
}

absl::StatusOr<std::vector<TemplateSpace>> ReductionFamily::ScheduleSpace(
    const KernelTask& task) const {
  if (const Node* node = FindCrossEntropyNode(task); node != nullptr) {
    absl::StatusOr<CrossEntropyTask> ce = AnalyzeCrossEntropy(task, *node);
    if (!ce.ok()) return ce.status();
    TemplateSpace space = CrossEntropySpace();
    std::optional<SchedulePoint> best;
    double best_score = 0;
    for (const SchedulePoint& point : EnumeratePoints(space)) {
      if (!ValidateCrossEntropyPoint(*ce, point).ok()) continue;
      // About 32 chunks per thread: on the H200, 32768 x 4096 float32 ran 1.9x faster with one
      // warp a row and 8 rows a block (vector 4) than with 256 threads a row, whose per-row
      // target load and cross-warp barrier are not hidden by enough rows in flight.
      const double score =
          RowLayoutScore(ce->classes, /*chunks_per_thread=*/32, CrossEntropyLayout(point));
      if (!best.has_value() || score > best_score) {
        best = point;
        best_score = score;
      }
    }
    if (best.has_value()) {
      for (ScheduleParameter& parameter : space.parameters) {
        parameter.default_value = best->parameters.at(parameter.name);
      }
    }
    return std::vector<TemplateSpace>{space};
  }
  absl::StatusOr<ReductionTask> analysis = Analyze(task);
  if (!analysis.ok()) return analysis.status();
  TemplateSpace space = SpaceOf(*analysis);
  // Default: row_reduce, the valid point closest to "widest vectors, row in registers, about four
  // chunks per thread, 256 threads per block" (a row too long for that: in a cluster's shared
  // memory, 1024 threads per block); col_reduce, row in registers, 256 threads per
  // block, and the fewest reduce_threads that still give about two blocks per SM of an H100-class
  // GPU (264 blocks).
  std::optional<SchedulePoint> best;
  double best_score = 0;
  for (const SchedulePoint& point : EnumeratePoints(space)) {
    if (!ValidatePoint(*analysis, point).ok()) continue;
    const Layout layout = LayoutOf(*analysis, point);
    const double threads = static_cast<double>(layout.threads_per_row);
    const double block = static_cast<double>(layout.BlockThreads());
    // No register cap by default: that is for the search to try.
    double score = 50 * layout.cache_row + Parameter(point, "online_softmax", 0) +
                   Parameter(point, "welford", 0) - (layout.max_registers > 0 ? 1 : 0);
    if (ColumnTemplate(*analysis)) {
      const double blocks = std::ceil(static_cast<double>(analysis->rows) /
                                      static_cast<double>(layout.rows_per_block));
      score += -5 * std::abs(std::log2(block / 256)) -
               20 * std::max(0.0, std::log2(264 / blocks)) - 2 * std::log2(threads);
    } else if (layout.SharedCache()) {
      // Reading the row once, the persistent cached cluster ran the (4096, 393216) softmax in
      // 3.50 ms on the H200, streaming rows (read twice) in 4.75; with 512 threads per block
      // (1024: 3.76, 256: 3.88), as with few rows ((32, 393216): 45.9 us; 1024 threads: 52.6).
      score += 100 * std::log2(static_cast<double>(layout.width)) -
               5 * std::abs(std::log2(block / 512));
    } else {
      score += RowLayoutScore(analysis->columns, /*chunks_per_thread=*/4, layout);
      if (LongRows(*analysis)) {
        // Long rows too few to give every SM 512 threads are shared by the blocks of a cluster,
        // in larger blocks; otherwise a block a row. Layer norm over (64, 256, 256), 16 rows of
        // 4 M float32, on the H200: 8 blocks of 512 threads a row 0.329 ms, of 1024 0.392, 4 of
        // 1024 0.332; a block a row (ATen's way) 8.3 ms.
        const double threads_launched = static_cast<double>(analysis->rows) *
                                         static_cast<double>(layout.cluster_blocks) * block;
        score -= 20 * std::max(0.0, std::log2(static_cast<double>(kRowsToFillTheGpu) * 512 /
                                              threads_launched)) +
                 (layout.cluster_blocks > 1 ? 1 : 0);
      }
    }
    if (!best.has_value() || score > best_score) {
      best = point;
      best_score = score;
    }
  }
  if (best.has_value()) {
    for (ScheduleParameter& parameter : space.parameters) {
      parameter.default_value = best->parameters.at(parameter.name);
    }
  }
  return std::vector<TemplateSpace>{space};
}

absl::StatusOr<int64_t> ReductionFamily::RowLength(const KernelTask& task) {
  if (FindCrossEntropyNode(task) != nullptr) {
    return absl::InvalidArgumentError("reduction: a cross_entropy task has no row_reduce rows");
  }
  absl::StatusOr<ReductionTask> analysis = Analyze(task);
  if (!analysis.ok()) return analysis.status();
  return analysis->columns;
}

absl::Status ReductionFamily::Validate(const KernelTask& task, const SchedulePoint& point) const {
  if (const Node* node = FindCrossEntropyNode(task); node != nullptr) {
    absl::StatusOr<CrossEntropyTask> ce = AnalyzeCrossEntropy(task, *node);
    if (!ce.ok()) return ce.status();
    return ValidateCrossEntropyPoint(*ce, point);
  }
  absl::StatusOr<ReductionTask> analysis = Analyze(task);
  if (!analysis.ok()) return analysis.status();
  return ValidatePoint(*analysis, point);
}

absl::Status ReductionFamily::SupportsArch(const KernelTask& /*task*/, const SchedulePoint& point,
                                           absl::string_view target_arch) const {
  const int64_t cluster_blocks = Parameter(point, "cluster_blocks", 1);
  if (cluster_blocks <= 1) return absl::OkStatus();
  absl::StatusOr<int> capability = ComputeCapabilityOf(target_arch);
  if (!capability.ok()) return capability.status();
  if (*capability < 90) {
    return absl::FailedPreconditionError(absl::StrCat(
        "row_reduce with cluster_blocks ", cluster_blocks,
        " needs thread block clusters (sm_90 or newer), not ", target_arch));
  }
  return absl::OkStatus();
}

absl::StatusOr<GeneratedKernel> ReductionFamily::Generate(const KernelTask& task,
                                                          const SchedulePoint& point) const {
  GeneratedKernel kernel;
  kernel.template_name = point.template_name;
  kernel.parameters = point.parameters;
  kernel.generator_version = std::string(generator_version());
  if (const Node* node = FindCrossEntropyNode(task); node != nullptr) {
    absl::StatusOr<CrossEntropyTask> ce = AnalyzeCrossEntropy(task, *node);
    if (!ce.ok()) return ce.status();
    if (absl::Status status = ValidateCrossEntropyPoint(*ce, point); !status.ok()) return status;
    const Layout layout = CrossEntropyLayout(point);
    kernel.source = CrossEntropySource(task, *ce, layout);
    kernel.kernel_name = kCrossEntropyKernelName;
    kernel.launch.grid = {static_cast<uint32_t>(CrossEntropyGridBlocks(*ce, layout)), 1, 1};
    kernel.launch.block = {static_cast<uint32_t>(layout.BlockThreads()), 1, 1};
    return kernel;
  }
  absl::StatusOr<ReductionTask> analysis = Analyze(task);
  if (!analysis.ok()) return analysis.status();
  if (absl::Status status = ValidatePoint(*analysis, point); !status.ok()) return status;
  absl::StatusOr<std::string> source = RowKernelWriter(*analysis, point).Write();
  if (!source.ok()) return source.status();
  const Layout layout = LayoutOf(*analysis, point);
  const int64_t rows_per_block = layout.rows_per_block;
  kernel.source = *std::move(source);
  kernel.kernel_name = kKernelName;
  const int64_t row_groups = layout.SharedCache()
                               ? PersistentClusters(*analysis, layout)
                               : (analysis->rows + rows_per_block - 1) / rows_per_block;
  kernel.launch.grid = {static_cast<uint32_t>(row_groups * layout.cluster_blocks), 1, 1};
  kernel.launch.block = {static_cast<uint32_t>(layout.BlockThreads()), 1, 1};
  kernel.launch.dynamic_shared_bytes = static_cast<uint32_t>(SharedCacheOf(*analysis, layout).bytes);
  return kernel;
}

}  // namespace forge::codegen
