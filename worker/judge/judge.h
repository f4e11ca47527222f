// The judge: runs a candidate kernel on fresh random inputs and compares its outputs with the
// float64 reference of the task's ATen ops. What it guarantees (docs in compare.h and inputs.h):
//   - at least 3 independent draws from more than one distribution, weights included, no zeros;
//     then one adversarial draw per distribution the task's ops ask for (ChooseAdversarialDraws:
//     large logits, large means, tiny variances, cancelling sums, activation kinks, zeros and
//     subnormals, the ends of index ranges), each named in the evidence, run before the last
//     standard draw (which the timer then runs on); a candidate must pass every draw;
//   - every output filled with poison before every launch, a different one each launch
//     (ChoosePoison: NaNs with random payloads, large finite garbage), and every element must be
//     written;
//   - the candidate runs first and the reference second, on separate allocations per draw; its
//     launch is captured from the judge's stream into a CUDA graph (JudgeOptions::
//     capture_launches) and the outputs must not change before that graph runs: work enqueued
//     outside the stream fails however fast it is; then the outputs are read once ordered on the
//     launch stream and once after synchronizing every stream: a difference means the candidate
//     left work running outside its stream;
//   - inputs must come back unchanged (a kernel that writes its inputs corrupts the next launch);
//   - every input and output buffer sits between guard zones (guard.h) refilled with new contents
//     before every judged launch and read back after it and after the timed runs: a write just
//     outside a tensor fails with OUT_OF_BOUNDS_WRITE, naming the buffer and the first byte;
//   - per-dtype tolerances and a relative-norm bound, widened by twice eager's own error for tasks
//     with bfloat16/float16/float8 tensors when the reference can run natively (ReferenceFn) and
//     eager is accurate enough to judge by (EagerAccurateEnough, per output and draw); an
//     output whose reference is near constant, within itself or across draws, is flagged and the
//     candidate must reproduce its variation;
//   - the last draw runs in the buffers of the draw before, with its own inputs and its outputs
//     holding the draw before's answer (the one launch not poisoned: a kernel that relies on
//     stale contents fails where the answers differ); amid the timed reps the candidate runs
//     once, untimed, with draw 0's inputs written into the timed buffers (RunOnOtherContents),
//     and after timing the outputs of the last timed run are checked again, then the candidate
//     runs once more with draw 0's inputs there; both runs are checked against draw 0's
//     reference (JudgedCandidate): results remembered by buffer address fail, also those
//     replayed only while the candidate is timed;
//   - with a DrawCache, the inputs and references of a draw are computed for the first candidate
//     of a task and reused for the next ones (draw_cache.h); all the above still holds for each;
//     with DeviceDraws that can draw (device_inputs.h) and a reference over device memory
//     (ReferenceFn::device()), a large task's draws are made on the GPU instead: inputs drawn
//     there (the host's draw bit for bit), references and their facts computed there, compared
//     there, nothing of the tensors read back; the host path judges a draw where that declines;
//   - a speedup above 10x over eager or a time below the roofline floor calls for re-verification
//     (ReverificationReasons).
// The host-side passes over large tensors (comparisons, the input and stream checks) run in chunks
// on a ThreadPool, and transfers go through HostStaging buffers kept across draws (and candidates,
// with a staging the caller keeps): neither changes what is checked.
#ifndef FORGE_WORKER_JUDGE_JUDGE_H_
#define FORGE_WORKER_JUDGE_JUDGE_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "compiler/codegen/generated_kernel.h"
#include "forge/v1/task.pb.h"
#include "worker/gpu/device.h"
#include "worker/judge/compare.h"
#include "worker/judge/device_draws.h"
#include "worker/judge/draw_cache.h"
#include "worker/judge/host_staging.h"
#include "worker/judge/host_tensor.h"
#include "worker/judge/inputs.h"
#include "worker/judge/thread_pool.h"

namespace forge::judge {

// One run of the task's ops on the CPU: given the inputs the candidate got, one row-major vector
// per task output, in KernelTask.outputs order.
using ReferenceRun = std::function<absl::StatusOr<std::vector<std::vector<double>>>(
    const forge::v1::KernelTask& task, absl::Span<const HostTensor> inputs)>;

// The judge's reference over device memory: a large task's first candidate draws its inputs on the
// GPU (device_inputs.h) and computes its references there, from those buffers, into buffers that
// stay there (DeviceDraws); nothing of its tensors crosses the bus. Production's is
// aten::CudaDeviceReferenceRunner's, through aten::Float64Reference.
struct DeviceReference {
  // Runs the task's ops over `inputs` (device addresses laid out as the task's input specs, never
  // written) in float64 (`float64`) or in the task's own dtypes (eager's), and writes each task
  // output's values as doubles, row-major, to `outputs[o]`. Returns when they are there.
  std::function<absl::Status(const forge::v1::KernelTask& task,
                             absl::Span<const CUdeviceptr> inputs, bool float64,
                             absl::Span<const CUdeviceptr> outputs)>
      run;
  // ReferenceFacts of `count` float64 reference values at `values` under `tolerances`, with eager's
  // values at `native` and draw 0's at `first_draw` (0: none), computed where they lie; rms below
  // `overflow` (OverflowThreshold of the output's dtype).
  std::function<absl::StatusOr<ReferenceFacts>(CUdeviceptr values, CUdeviceptr native,
                                               CUdeviceptr first_draw, int64_t count,
                                               const Tolerances& tolerances, double overflow)>
      facts;
};

// The judge's reference: the task's ops in float64 (aten::Float64Reference, the ATen interpreter,
// in production; a hand-written function in tests), and optionally the same ops in the task's own
// dtypes, as eager runs them. With the latter, tasks with bfloat16/float16/float8 tensors get
// their tolerance widened by twice eager's own error (see CompareOutput), so that a candidate as
// accurate as eager passes where rounded intermediates cancel.
class ReferenceFn {
 public:
  ReferenceFn() = default;
  // The float64 reference alone: tolerances are never widened. Implicit, so that a lambda is a
  // ReferenceFn.
  template <typename Float64,
            typename = std::enable_if_t<!std::is_same_v<std::decay_t<Float64>, ReferenceFn> &&
                                        std::is_constructible_v<ReferenceRun, Float64>>>
  ReferenceFn(Float64&& float64) : float64_(std::forward<Float64>(float64)), id_(NewId()) {}
  ReferenceFn(ReferenceRun float64, ReferenceRun native)
      : float64_(std::move(float64)), native_(std::move(native)), id_(NewId()) {}
  // With the same ops over device memory too (both must compute the same references).
  ReferenceFn(ReferenceRun float64, ReferenceRun native, DeviceReference device)
      : float64_(std::move(float64)),
        native_(std::move(native)),
        device_(std::make_shared<const DeviceReference>(std::move(device))),
        id_(NewId()) {}

  // The float64 reference.
  absl::StatusOr<std::vector<std::vector<double>>> operator()(
      const forge::v1::KernelTask& task, absl::Span<const HostTensor> inputs) const {
    return float64_(task, inputs);
  }
  // The native-precision reference; empty when the reference has none.
  const ReferenceRun& native() const { return native_; }
  // The reference over device memory; null when it has none (the judge then draws and computes
  // every reference on the host).
  const DeviceReference* device() const { return device_.get(); }
  // The same for a reference and its copies, different for every other: a DrawCache keeps apart
  // the references of different ReferenceFns, which need not agree on a task.
  uint64_t id() const { return id_; }

 private:
  static uint64_t NewId();

  ReferenceRun float64_;
  ReferenceRun native_;
  std::shared_ptr<const DeviceReference> device_;
  uint64_t id_ = 0;
};

// Enqueues one run of the candidate on `stream`. `args` holds the device address of each task
// input, then of each task output (the generated-kernel ABI).
using CandidateLaunch =
    std::function<absl::Status(gpu::Stream& stream, absl::Span<const CUdeviceptr> args)>;

// The launch of a compiled generated kernel: loads `cubin`, finds `kernel.kernel_name` and launches
// it with `kernel.launch`. The module stays loaded while the returned function lives.
absl::StatusOr<CandidateLaunch> LoadGeneratedKernel(const gpu::Device& device,
                                                    absl::string_view cubin,
                                                    const codegen::GeneratedKernel& kernel);

struct JudgeOptions {
  int draws = 3;  // at least 3
  uint64_t seed = 0x5EED5EEDull;
  // Per-element and norm tolerances for every output; unset: DefaultTolerances(output dtype).
  std::optional<Tolerances> tolerances;
  // Valid ranges of integer inputs by input index, overriding InferInputDomains (e.g. the range of
  // the example inputs).
  std::map<int, IntegerRange> integer_ranges;
  // Where the draws' inputs and references are looked up before they are computed, and stored
  // after; null: computed for this call alone. Draws with another seed, other integer ranges or
  // another reference are other draws (a re-verification with a fresh seed computes its own).
  DrawCache* draw_cache = nullptr;
  // Host buffers the transfers go through, kept across candidates (page-locked when made for the
  // device); null: pageable buffers kept for this call and its JudgedCandidate. Must outlive the
  // JudgedCandidate.
  HostStaging* staging = nullptr;
  // The threads of the host-side passes; null: ThreadPool::Default(). Must outlive the
  // JudgedCandidate.
  ThreadPool* threads = nullptr;
  // The draws resident on the GPU and its comparison kernels: with a draw_cache, draws whose
  // references are cached are judged on the device, except outputs whose references call for the
  // variation checks (near constant within the output or across draws), which the host judges.
  // Null: every pass runs on the host. Must outlive the JudgedCandidate.
  DeviceDraws* device_draws = nullptr;
  // Whether each judged launch is captured from the judge's stream into a CUDA graph before it
  // runs: work the candidate enqueues outside that stream then runs (or is left unjoined) while
  // nothing of the stream's has run, and is caught every time, not only when it is still running
  // as the outputs are read. Off for candidates that cannot be captured at all (the ATen
  // fallback, which allocates and synchronizes through LibTorch); a launch whose capture fails
  // runs uncaptured, with a note in the evidence.
  bool capture_launches = true;
};

struct JudgeVerdict {
  forge::v1::JudgeEvidence evidence;
  // Why it failed (WRONG_RESULT, UNWRITTEN_OUTPUT, OUT_OF_BOUNDS_WRITE, CRASH, RESOURCE_LIMIT);
  // unspecified if passed.
  forge::v1::FailureReason reason = forge::v1::FAILURE_REASON_UNSPECIFIED;
  // The first failure, one line, e.g. "draw 1 (uniform(-2, 2)), output 0 (float32[1000, 1003]):
  // element 1003 [1, 0] never written (still holds the NaN poison); ...".
  std::string detail;
  // A CUDA error that leaves the context unusable ended the run: the process must restart.
  bool context_lost = false;
  // How many of the draws were judged on the device (JudgeOptions::device_draws), the failed one
  // included.
  int draws_on_device = 0;
  // Wall seconds in the judge's stages, summed over the draws: where a slow judge spends its time.
  struct StageSeconds {
    double draw = 0;       // drawing the inputs, or finding them cached
    double upload = 0;     // the candidate's input and output buffers (uploads, device copies)
    double candidate = 0;  // its launch, the stream-order and input checks
    double reference = 0;  // the references, when not cached
    double compare = 0;    // the comparison with them
  };
  StageSeconds seconds;

  bool passed() const { return evidence.passed(); }
};

// A judged candidate. When it passed, it keeps the last draw's device buffers and reference so the
// timer can run it again and the judge can re-check what the timed runs wrote.
class JudgedCandidate {
 public:
  const JudgeVerdict& verdict() const { return verdict_; }

  // Runs the candidate on the last draw's buffers: the timer's launch. Requires a passed verdict.
  absl::Status Launch(gpu::Stream& stream);
  // Fills the outputs with poison again, a new one each call (ChoosePoison): the timer's hook
  // before each rep, so that the re-check also proves every element was written by the timed
  // runs.
  absl::Status PoisonOutputs(gpu::Stream& stream);
  // Compares what the outputs hold now (after the timed runs) with the reference, and checks the
  // inputs are unchanged and every buffer's guard zones intact (OUT_OF_BOUNDS_WRITE); then writes
  // draw 0's inputs into the same buffers, runs the candidate once more (outputs poisoned anew) and
  // checks that run against draw 0's reference, so that a kernel that remembers results by buffer
  // address fails. The returned verdict extends verdict() with the outcome, and with that of
  // RunOnOtherContents when the timer ran it. Afterwards the buffers hold draw 0's inputs: Launch
  // times those.
  absl::StatusOr<JudgeVerdict> RecheckTimedOutputs();
  // The timer's untimed run in the middle of the timed reps (TimerOptions::between_reps), once
  // the reps before it have finished: checks that they wrote nothing out of bounds, writes draw
  // 0's inputs into the timed buffers, runs the candidate once (outputs poisoned) and checks it
  // against draw 0's reference, then writes the timed draw's inputs back (guards armed anew,
  // outputs poisoned), so the reps after it time what the reps before it timed. A kernel that
  // replays results remembered by buffer address while it is timed gives the timed draw's answer
  // there and fails; RecheckTimedOutputs reports it. Errors are the judge's or a CUDA error of
  // the candidate's run (as a timed launch's would be). Nothing when there are no other contents
  // (a task whose draws all share draw 0's inputs).
  absl::Status RunOnOtherContents();

 private:
  friend class JudgeRunner;
  JudgedCandidate() = default;

  struct Failure {
    forge::v1::FailureReason reason;
    std::string detail;
  };
  // The input and output checks of the buffers against inputs_ and references_ (on the device
  // first when device_draw_ is set): the first failure, or nothing.
  absl::StatusOr<std::optional<Failure>> CheckBuffers();
  // A draw's inputs and references, with its copy resident on the device (null when it was
  // judged on the host).
  struct Contents {
    std::shared_ptr<const std::vector<HostTensor>> inputs;
    std::shared_ptr<const DrawReferences> references;
    std::shared_ptr<const DeviceDraw> device_draw;
    // Per output, the facts the judge compared under, for a draw made on the device (which has no
    // host references to take them from); empty otherwise.
    std::vector<ReferenceFacts> device_facts;
  };
  // Whether fresh_ holds other inputs than the buffers now stand for.
  bool HasOtherContents() const;
  // Writes `contents`' inputs into the buffers (which then stand for it: inputs_, references_,
  // device_draw_), poisons the outputs and arms the guards for a new launch, on a stream of its
  // own, synchronized; with `run`, runs the candidate once before synchronizing.
  absl::Status WriteContents(const Contents& contents, bool run);
  // What the buffers stand for now.
  Contents Current() const { return {inputs_, references_, device_draw_, device_facts_}; }

  JudgeVerdict verdict_;
  const gpu::Device* device_ = nullptr;
  forge::v1::KernelTask task_;
  CandidateLaunch launch_;
  std::optional<Tolerances> tolerances_override_;
  ThreadPool* threads_ = nullptr;
  // JudgeOptions::staging, or own_staging_ when the caller gave none.
  HostStaging* staging_ = nullptr;
  std::unique_ptr<HostStaging> own_staging_;
  // The last draw's inputs and references, shared with the draw cache (and kept here when it
  // evicts them).
  std::shared_ptr<const std::vector<HostTensor>> inputs_;
  std::shared_ptr<const DrawReferences> references_;
  std::vector<gpu::DeviceBuffer> input_buffers_;
  std::vector<gpu::DeviceBuffer> output_buffers_;
  std::vector<CUdeviceptr> args_;
  // The last draw's resident copy when it was judged on the device: the re-check runs there too.
  std::shared_ptr<const DeviceDraw> device_draw_;
  // Its facts when it was made on the device (Contents::device_facts).
  std::vector<ReferenceFacts> device_facts_;
  DeviceDraws* device_draws_ = nullptr;
  // The poison each output holds before the launch the re-check looks at (the last draw's, then
  // the last PoisonOutputs'), and where ChoosePoison's launches continue.
  std::vector<Poison> poisons_;
  uint64_t seed_ = 0;
  // The launch whose guard contents (ArmGuards) the buffers' guard zones hold: the last draw's,
  // then the run with fresh contents'. The timed runs leave them as they are: the re-check sees
  // any of them writing out of bounds.
  int64_t guard_launch_ = 0;
  int64_t next_launch_ = 0;
  // Draw 0's contents, for the runs with other contents (RunOnOtherContents and
  // RecheckTimedOutputs').
  Contents fresh_;
  // What RunOnOtherContents found: whether it ran, and the failure it found.
  bool ran_on_other_contents_ = false;
  std::optional<Failure> other_contents_failure_;
};

// Judges `launch` as an implementation of `task`. A candidate that fails (wrong values, unwritten
// elements, modified inputs, a CUDA error of its own) gives a verdict that says so; an error
// status means the judge itself could not work (allocation, a reference failure, inputs outside
// an op's domain, an unsupported dtype).
absl::StatusOr<std::unique_ptr<JudgedCandidate>> Judge(const gpu::Device& device,
                                                       const forge::v1::KernelTask& task,
                                                       CandidateLaunch launch,
                                                       const ReferenceFn& reference,
                                                       const JudgeOptions& options = {});

// Why a timed result needs to be judged again (with a fresh seed) before it is believed: a
// speedup above 10x over eager, or a time below the roofline floor. Empty when neither holds;
// a non-positive eager time or floor is not checked.
std::vector<std::string> ReverificationReasons(double candidate_median_us, double eager_median_us,
                                               double roofline_floor_us);

}  // namespace forge::judge

#endif  // FORGE_WORKER_JUDGE_JUDGE_H_
