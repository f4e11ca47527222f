// The LibTorch boundary: everything Forge does through ATen, behind this one header, which has no
// LibTorch type in it (host tensors, device pointers, KernelTask, Status). Only aten/'s .cc files
// include LibTorch, and of those only reference.cc, baseline.cc and gpu_reference.cc.
//
// Four libraries implement it, and a binary links those whose parts it calls. forge::aten and
// forge::aten_judge need LibTorch's CPU libraries only; forge::aten_cuda and forge::aten_fallback
// need its CUDA libraries too, exist only where forge::libtorch_cuda does, and leave binaries that
// link them able to start without a GPU.
//   forge::aten           the reference interpreter: graph IR through ATen on the CPU, one
//                         dispatcher call per node, looked up by operator schema (RunGraph,
//                         RunTaskGroup).
//   forge::aten_judge     the judge's reference over a GroupRunner (Float64Reference).
//   forge::aten_cuda      the same interpreter on CUDA: the judge's group runner on a GPU
//                         (CudaGroupRunner) and the task's ATen baseline (Baseline).
//   forge::aten_fallback  the ATen fallback candidate in the sandbox child (LoadFallback).
// The LibTorch-facing helpers they share (operator lookup by schema, dtype mapping, host <->
// ATen tensors, the node loop) exist once, in interpreter.h, which only aten/ includes.
//
// The interpreter's outputs are the ground truth candidates are judged against, in the graph's own
// dtypes (native) or with all floating-point math in float64.
#ifndef FORGE_ATEN_ATEN_H_
#define FORGE_ATEN_ATEN_H_

#include <cuda.h>

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "forge/v1/graph.pb.h"
#include "forge/v1/task.pb.h"

// The judge's and the sandbox's types that two entry points below return or take. Declared, not
// included, so that this header's users (the compiler's tests among them) need neither library's
// headers; who calls those entry points includes worker/judge/judge.h, worker/gpu/device.h and
// worker/sandbox/sandbox_child.h.
namespace forge::judge {
class ReferenceFn;
}  // namespace forge::judge
namespace forge::gpu {
class Device;
}  // namespace forge::gpu
namespace forge::sandbox {
struct RunnableCandidate;
}  // namespace forge::sandbox

namespace forge::aten {

// ---- The reference interpreter (forge::aten) ----------------------------------------------------

// A dense tensor in host memory.
struct HostTensor {
  v1::DType dtype = v1::DTYPE_UNSPECIFIED;
  std::vector<std::int64_t> shape;
  // Element strides of the tensor's layout, one per dimension; empty means row-major. Inputs are
  // laid out this way before the graph runs (so views see the layout the model saw), outputs
  // report the layout ATen produced. `bytes` is row-major either way.
  std::vector<std::int64_t> strides;
  // The elements in row-major order, little-endian, no padding (Forge's TensorData convention).
  std::string bytes;
};

// How floating-point math runs.
enum class Precision {
  // In the graph's dtypes, as the model runs.
  kNative,
  // Floating tensors (inputs, weights, and every floating dtype= argument) become float64, so
  // the whole computation is float64; integer and bool tensors keep their dtypes.
  kFloat64,
};

// Where the bytes of parameters, buffers and constants come from, by SHA-256 hex digest. The
// interpreter verifies digest and size of whatever a source returns.
class BlobSource {
 public:
  virtual ~BlobSource() = default;
  // The blob's bytes; NotFound when the source does not hold it.
  virtual absl::StatusOr<std::string> Read(absl::string_view sha256_hex) const = 0;
};

// Blobs stored as files named by their digest in one directory (as the model exporter writes
// them).
class DirectoryBlobSource : public BlobSource {
 public:
  explicit DirectoryBlobSource(std::filesystem::path directory) : directory_(std::move(directory)) {}
  absl::StatusOr<std::string> Read(absl::string_view sha256_hex) const override;

 private:
  std::filesystem::path directory_;
};

// Blobs held in memory, keyed by digest (e.g. forge.export's blobs, or what a worker fetched).
class InMemoryBlobSource : public BlobSource {
 public:
  explicit InMemoryBlobSource(absl::flat_hash_map<std::string, std::string> blobs)
      : blobs_(std::move(blobs)) {}
  absl::StatusOr<std::string> Read(absl::string_view sha256_hex) const override;

 private:
  absl::flat_hash_map<std::string, std::string> blobs_;
};

// Runs share no state, so separate threads may run graphs at the same time.
//
// Runs a whole graph. `user_inputs` are the graph's INPUT_KIND_USER_INPUT tensors in input order;
// every other input is loaded from its inline bytes or from `blobs`. Returns the
// OUTPUT_KIND_USER_OUTPUT values in output order. Errors name the node, argument or input at
// fault.
absl::StatusOr<std::vector<HostTensor>> RunGraph(const v1::Graph& graph,
                                                 absl::Span<const HostTensor> user_inputs,
                                                 const BlobSource& blobs, Precision precision);

// Runs one kernel task's group: `inputs` are one per group input, in order. Returns every group
// output, in order.
absl::StatusOr<std::vector<HostTensor>> RunTaskGroup(const v1::KernelTask& task,
                                                     absl::Span<const HostTensor> inputs,
                                                     Precision precision);

// How a reference runs a task's group at a precision: RunTaskGroup, on the CPU, or a runner that
// uses a GPU (CudaGroupRunner).
using GroupRunner = std::function<absl::StatusOr<std::vector<HostTensor>>(
    const v1::KernelTask& task, absl::Span<const HostTensor> inputs, Precision precision)>;

// The judge's reference over device memory: a large task's first candidate draws its inputs on the
// GPU (worker/judge/device_inputs.h), and its references are computed from those buffers and stay
// there, compared on the device; nothing of gigabyte tensors crosses the bus. Made by
// CudaDeviceReferenceRunner (forge::aten_cuda); given to the judge by Float64Reference below.
struct DeviceOutputStatistics {
  bool near_constant = false;      // the judge's IsNearConstant over the values
  bool agrees_with_first = false;  // AgreeWithin(values, first draw's); false without one
  double rms = 0;                  // RootMeanSquare of the values below the overflow threshold
  double eager_max_abs = 0;        // EagerError::Add(native, values); zero without native
  double eager_rel_norm = 0;
};
struct DeviceReferenceRunner {
  // Runs the task's group at `precision` over `inputs` (the device address of each group input,
  // laid out as the task's input spec says; never written: inputs an op may write are copied
  // first) and writes each group output, converted to double and row-major, to `outputs[o]`
  // (one double per element). Returns when the values are there.
  std::function<absl::Status(const v1::KernelTask& task, absl::Span<const CUdeviceptr> inputs,
                             Precision precision, absl::Span<const CUdeviceptr> outputs)>
      run;
  // The statistics of `count` doubles at `values` under the element tolerance atol + rtol * |v|,
  // with eager's doubles at `native` and the first draw's at `first` (0: none).
  std::function<absl::StatusOr<DeviceOutputStatistics>(
      CUdeviceptr values, CUdeviceptr native, CUdeviceptr first, int64_t count, double atol,
      double rtol, double overflow)>
      statistics;
};

// ---- The judge's reference (forge::aten_judge) --------------------------------------------------

// The judge's reference in production: a ReferenceFn (worker/judge/judge.h) over `run_group` in
// Precision::kFloat64, with the same run in Precision::kNative as its native reference (eager's
// own rounding, which widens the judge's tolerance for reduced-precision tasks). Inputs keep the
// values the candidate got (rounded to their dtypes) and their strides.
judge::ReferenceFn Float64Reference(GroupRunner run_group = RunTaskGroup);
// The same, with the reference over device memory (ReferenceFn::device()) that `device` runs: the
// judge computes a large task's references on the GPU from inputs it drew there.
judge::ReferenceFn Float64Reference(GroupRunner run_group, DeviceReferenceRunner device);

// ---- On CUDA (forge::aten_cuda) -----------------------------------------------------------------

// The judge's group runner on the GPU. The CPU runs a large task's float64 reference in tens of
// seconds (65 s for a 32768 x 4096 cross-entropy, every draw of the first candidate of the task);
// the same ATen ops in float64 on an H200 take milliseconds. Same interpreter, same ops, same
// float64 math: only the device differs (reductions may sum in another order, which float64 makes
// negligible against the judge's tolerances).
//
// A GroupRunner on CUDA device `gpu_ordinal`, falling back to the CPU (RunTaskGroup) when the GPU
// run fails (out of memory, an op without a float64 CUDA kernel); the fallback is logged on stderr
// once per task. After each run the memory ATen cached goes back to the driver: the judge
// allocates its own buffers with the driver API, outside ATen's cache.
GroupRunner CudaGroupRunner(int gpu_ordinal);

// The reference over device memory on CUDA device `gpu_ordinal` (DeviceReferenceRunner), in the
// primary context the judge's driver-API buffers live in. Errors (no such device, out of memory,
// an op without a CUDA kernel) come back as they are: the judge then computes on the host. ATen's
// cached memory goes back to the driver after each call. The statistics run in slices of 2^26
// elements, so their temporaries stay within 1.5 GiB whatever the output's size; sums add in
// ATen's order, not the host's (float64: differences far below every tolerance).
DeviceReferenceRunner CudaDeviceReferenceRunner(int gpu_ordinal);

// The ATen baseline of a kernel task: what PyTorch eager does for the task's group, on the GPU, so
// that a candidate's speedup is measured against it with the same timer and the same protocol.
//
// The group runs node by node through the dispatcher (the reference interpreter's code, on CUDA
// instead of the CPU) in the graph's own dtypes, on the stream the caller gives: every kernel and
// every allocation of a launch is ordered there. Like eager PyTorch, ATen allocates each launch's
// intermediates and outputs itself, from its caching allocator: after the first (warm-up) launch
// the blocks come from its cache, so timed launches pay no cudaMalloc; the cache keeps the memory
// after the baseline is gone. Host dispatch costs on the order of eager PyTorch's per node are
// part of a launch; the timer's kernel-only durations leave them out.
class Baseline {
 public:
  // Checks the task first, without a GPU: every node's operator exists with the schema the graph
  // recorded and has a CUDA kernel in this LibTorch (NotFound / FailedPrecondition naming the
  // node), and `inputs` (one per group input, in order) match the task's input specs
  // (InvalidArgument). Then uploads the inputs to GPU `device_ordinal`, keeping their strides
  // (Unavailable without a GPU).
  static absl::StatusOr<std::unique_ptr<Baseline>> Create(const v1::KernelTask& task,
                                                          absl::Span<const HostTensor> inputs,
                                                          int device_ordinal = 0);
  // The same checks, over inputs already on GPU `device_ordinal`: `inputs` holds each group
  // input's device address, its storage laid out as the task's spec says. Nothing is copied (but
  // for a group with an op that may write its arguments, which gets device copies): the memory
  // must stay allocated, and unchanged, while the baseline runs.
  static absl::StatusOr<std::unique_ptr<Baseline>> OnDevice(const v1::KernelTask& task,
                                                            absl::Span<const CUdeviceptr> inputs,
                                                            int device_ordinal = 0);
  ~Baseline();
  Baseline(const Baseline&) = delete;
  Baseline& operator=(const Baseline&) = delete;

  // Enqueues one run of the group on `stream`, a stream of the device's primary context (the
  // Timer's, for instance), and returns. The outputs live until the next launch.
  absl::Status Launch(CUstream stream);

  // The last launch's outputs, one per group output, in host memory; waits for the device.
  absl::StatusOr<std::vector<HostTensor>> Outputs() const;

  // Enqueues on `stream` copies of the last launch's outputs into device memory at `outputs`
  // (one address per task output, laid out as the task's spec says). InternalError when an output
  // differs from its spec in dtype or shape.
  absl::Status CopyOutputsTo(absl::Span<const CUdeviceptr> outputs, CUstream stream) const;

 private:
  struct State;  // the LibTorch side
  // The checks of the task's operators and the GPU both factories make; the State without inputs.
  static absl::StatusOr<std::unique_ptr<State>> Prepare(const v1::KernelTask& task,
                                                        int device_ordinal);
  explicit Baseline(std::unique_ptr<State> state);
  std::unique_ptr<State> state_;
};

// ---- The ATen fallback candidate (forge::aten_fallback) -----------------------------------------

// The ATen fallback's candidates in the sandbox child: the task's group run node by node through
// LibTorch's CUDA kernels (Baseline), judged and timed like any candidate. Its timing is the
// task's eager baseline.
//
// The judge's launch runs a fresh Baseline over the judge's input buffers in place (nothing goes
// through the host) on the judge's stream, and enqueues there copies of the outputs into the
// judge's output buffers, in their layouts. The timed launch is the Baseline of the last judge
// launch alone (the last draw's input buffers, which the judge keeps for the timer; its outputs
// from the caching allocator), as eager PyTorch runs; after timing, what the last timed run
// produced is copied into the judge's output buffers, which the child then re-checks.
//
// The ATen fallback candidate of `task` on `device` (a sandbox::AtenFallbackLoader). The task's
// ops are checked at the first launch: an op without a CUDA kernel in this LibTorch, or not found
// with the recorded schema, makes the candidate unsupported
// (RunnableCandidate::unsupported_reason).
absl::StatusOr<sandbox::RunnableCandidate> LoadFallback(const gpu::Device& device,
                                                        const v1::KernelTask& task);

}  // namespace forge::aten

#endif  // FORGE_ATEN_ATEN_H_
