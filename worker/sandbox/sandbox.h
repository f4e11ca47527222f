// The sandbox: candidate kernels run in a child process (forge-sandbox-child), one per GPU, which
// owns the CUDA context. A kernel that hangs, faults or traps takes the child down with it, never
// the worker: the sandbox kills a child that does not answer before the request's deadline,
// records the candidate as failed (TIMEOUT, or CRASH with the CUDA error or the signal), starts a
// fresh child and keeps serving.
//
// Requests travel as length-prefixed protobuf frames over a socket pair (sandbox.proto). One
// request runs at a time; the methods block until the answer, the deadline or the child's death.
// A child that keeps dying before it says hello is restarted with exponential backoff, and
// requests in between fail at once with Unavailable.
#ifndef FORGE_WORKER_SANDBOX_SANDBOX_H_
#define FORGE_WORKER_SANDBOX_SANDBOX_H_

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "compiler/codegen/generated_kernel.h"
#include "forge/v1/task.pb.h"
#include "worker/judge/judge.h"
#include "worker/timer/timer.h"

namespace forge::sandbox {

namespace wire {
class Request;
class Response;
}  // namespace wire

struct SandboxOptions {
  // The forge-sandbox-child executable.
  std::string child_path;
  int gpu_ordinal = 0;
  // From the child's start to its hello (loading LibTorch and creating the CUDA context).
  absl::Duration start_timeout = absl::Seconds(60);
  // Deadlines of a whole judge request (reference included) and of a whole time request, each
  // extended by judge_timeout_per_gib per GiB of the task's inputs and outputs, up to
  // max_timeout: a task's first candidate draws its inputs and computes its references, which for
  // a 2 GiB task took 30-60 s on the H200's host (2026-11-30), and a hang should still end.
  absl::Duration judge_timeout = absl::Seconds(60);
  absl::Duration time_timeout = absl::Seconds(120);
  absl::Duration timeout_per_gib = absl::Seconds(40);
  absl::Duration max_timeout = absl::Minutes(10);
  absl::Duration ping_timeout = absl::Seconds(5);
  // Wait after a failed start, doubled after each further failure in a row, up to the maximum.
  absl::Duration min_restart_backoff = absl::Milliseconds(100);
  absl::Duration max_restart_backoff = absl::Seconds(30);
  // Starts the child with --allow-test-behaviours, so that RunTestBehaviour works (tests only).
  bool allow_test_behaviours = false;
};

// The deadline of a request for a candidate of `task`: `base` (options.judge_timeout or
// time_timeout) extended by options.timeout_per_gib per GiB of the task's inputs and outputs, at
// most options.max_timeout (and never below `base`).
absl::Duration RequestDeadline(const SandboxOptions& options, const forge::v1::KernelTask& task,
                               absl::Duration base);

// A candidate of any family, ready to run. `kernel` is what the family generated; its executor
// (kernel.hints.executor) says how the child runs it:
//  - a generated kernel (pointwise, reduction, ...): `cubin` is NVRTC's compile of kernel.source,
//    launched as kernel.kernel_name with kernel.launch;
//  - a gemm_library call ("cublaslt", "cublaslt_then_pointwise"): the child describes the
//    cuBLASLt call from the task and kernel.template_name + kernel.parameters, and, for
//    "cublaslt_then_pointwise", loads the epilogue kernel (kernel.kernel_name) from `cubin`,
//    NVRTC's compile of kernel.source; "cublaslt" has no kernel_name and an empty `cubin`;
//  - the ATen fallback ("aten_calls"): the task's group through ATen on the GPU; empty `cubin`.
//    Its timing is the task's eager baseline;
//  - a host-launched candidate (kernel.compile_output kNvccSharedObject): `cubin` holds the
//    shared object nvcc built from kernel.source, called through host_launch_abi.h with
//    kernel.runtime_args and a workspace of the size it asks for.
// So: compile kernel.source when kernel.kernel_name is not empty, as NVRTC's cubin, or when the
// candidate is host-launched, as nvcc's shared object (daemon/executor.h's CompileRequestFor).
struct SandboxCandidate {
  std::string digest;  // the candidate digest, for Failure.candidate_digest
  forge::v1::KernelTask task;
  codegen::GeneratedKernel kernel;  // the child uses all but its source and generator_version
  std::string cubin;
};

// The outcome of a request about one candidate: `failure` unset means it passed.
struct SandboxOutcome {
  // The judge's verdict when it reached one (for Time: the re-check of the timed outputs, or the
  // judge's failing verdict when the candidate was judged first and failed).
  std::optional<judge::JudgeVerdict> verdict;
  std::optional<timer::Timing> timing;  // Time only, when timing finished
  // Time only, for a gemm_library candidate: the cuBLASLt algorithm it ran
  // (forge.v1.Measurement.library_algorithm).
  std::string library_algorithm;
  // Why the candidate failed: a failing verdict (stage JUDGE or TIME, the judge's reason), a
  // candidate that cannot run on this GPU (stage JUDGE, UNSUPPORTED: a cuBLASLt algo index past
  // the heuristic list, an op without a CUDA kernel in this LibTorch), a deadline passed (reason
  // TIMEOUT), a CUDA error that killed the context (CRASH, detail naming the error), or a child
  // that died mid-request (stage SANDBOX, CRASH, detail naming the signal or exit status; log
  // holds the tail of the child's stderr).
  std::optional<forge::v1::Failure> failure;

  bool passed() const { return !failure.has_value(); }
};

// What RunTestBehaviour asks the child to do for real.
enum class TestBehaviour {
  kSleepForever,      // never answer: the deadline must kill it
  kCrashWithSigsegv,  // die by SIGSEGV mid-request
  kExitWithoutAnswer  // exit(3) mid-request: end of stream without an answer
};

struct SandboxStats {
  int64_t requests = 0;
  int64_t child_starts = 0;    // successful starts (hello received)
  int64_t start_failures = 0;  // children that died or stayed silent before hello
  int64_t restarts = 0;        // starts that replaced a child lost to a failure
  int64_t timeouts = 0;        // children killed at a deadline
  int64_t crashes = 0;         // children lost otherwise: context lost, signal, exit, end of stream
  int consecutive_start_failures = 0;
  pid_t child_pid = 0;  // 0 when no child is running
  // The child's GPU, from its hello; device_status is the reason when it has none.
  std::string device_name;
  std::string device_arch;  // NVRTC's name, "sm_90": what candidates must be compiled for
  absl::Status device_status = absl::UnavailableError("no sandbox child has started yet");
};

class Sandbox {
 public:
  // Starts the child. InvalidArgument when `child_path` is not an executable file; a child that
  // then fails to start is not an error here (see stats() and the requests' Unavailable).
  static absl::StatusOr<std::unique_ptr<Sandbox>> Create(SandboxOptions options);
  // Closes the child's socket, gives it a moment to exit, then kills it.
  ~Sandbox();
  Sandbox(const Sandbox&) = delete;
  Sandbox& operator=(const Sandbox&) = delete;

  // Judges the candidate in the child. An error status means no verdict could be had for reasons
  // other than the candidate: Unavailable without a GPU or a child, FailedPrecondition for an ATen
  // fallback when the child was built without LibTorch's CUDA libraries, the family's error for a
  // gemm_library point it rejects, InvalidArgument for a "cublaslt_then_pointwise" without its
  // cubin, the judge's own errors (reference failure, unsupported dtype), a cubin the driver
  // rejects.
  absl::StatusOr<SandboxOutcome> Judge(const SandboxCandidate& candidate,
                                       const judge::JudgeOptions& options = {});

  // Times the candidate in the child with the timer's protocol (judging it first unless it was
  // the child's last judged candidate) and re-checks the timed runs' outputs. The timer's
  // before_each_rep and between_reps must be empty: the child poisons the outputs there, and runs
  // the candidate once on other inputs amid the reps. An ATen fallback is timed
  // as eager PyTorch runs: its group's ATen calls on inputs already on the device, outputs from
  // LibTorch's caching allocator; what the last timed run wrote is then copied into the judge's
  // output buffers for the re-check.
  absl::StatusOr<SandboxOutcome> Time(const SandboxCandidate& candidate,
                                      const judge::JudgeOptions& judge_options = {},
                                      const timer::TimerOptions& timer_options = {});

  // A round trip to the child, starting one if none runs.
  absl::Status Ping();

  // Has the child misbehave for real (tests of the sandbox itself; needs allow_test_behaviours).
  // The outcome's failure says what the sandbox made of it.
  absl::StatusOr<SandboxOutcome> RunTestBehaviour(TestBehaviour behaviour, absl::Duration timeout);

  SandboxStats stats() const;

 private:
  struct Child;
  // What became of one request: the response, or the failure that ended the child.
  struct Exchange;

  explicit Sandbox(SandboxOptions options);

  // Starts a child unless one runs or the backoff after failed starts has not passed.
  absl::Status EnsureChildLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  absl::Status StartChildLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  // Sends `request` and waits for its response until `timeout`; on a deadline, an end of stream
  // or a lost context, the child is reaped and a replacement started.
  absl::StatusOr<Exchange> ExchangeLocked(wire::Request& request, absl::Duration timeout,
                                          forge::v1::FailureStage stage,
                                          absl::string_view candidate_digest)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  // Closes the socket, waits up to `grace` for the child to exit, then kills it. Says how it
  // ended ("exited with status 3", "killed by signal 11 (Segmentation fault)") and what it wrote
  // to stderr (the last 64 KiB).
  struct Ending {
    std::string how;
    std::string log_tail;
  };
  Ending ReapChildLocked(absl::Duration grace) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);

  const SandboxOptions options_;
  mutable absl::Mutex mutex_;
  std::unique_ptr<Child> child_ ABSL_GUARDED_BY(mutex_);
  uint64_t next_request_id_ ABSL_GUARDED_BY(mutex_) = 1;
  absl::Time next_start_allowed_ ABSL_GUARDED_BY(mutex_) = absl::InfinitePast();
  absl::Duration backoff_ ABSL_GUARDED_BY(mutex_);
  absl::Status last_start_error_ ABSL_GUARDED_BY(mutex_);
  // A child was lost to a failure and its replacement has not started yet.
  bool replacing_lost_child_ ABSL_GUARDED_BY(mutex_) = false;
  SandboxStats stats_ ABSL_GUARDED_BY(mutex_);
};

}  // namespace forge::sandbox

#endif  // FORGE_WORKER_SANDBOX_SANDBOX_H_
