// The wire between the sandbox and its child: length-prefixed protobuf frames over a stream socket,
// and conversions between the wire messages (sandbox.proto) and the judge's and timer's types.
#ifndef FORGE_WORKER_SANDBOX_WIRE_H_
#define FORGE_WORKER_SANDBOX_WIRE_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "compiler/codegen/generated_kernel.h"
#include "worker/judge/judge.h"
#include "worker/sandbox/sandbox.pb.h"
#include "worker/timer/timer.h"

namespace forge::sandbox {

// Cubins and tasks stay far below this; a larger length prefix means a corrupt stream.
inline constexpr uint32_t kMaxFrameBytes = 512u << 20;

// Writes one frame to `fd` (a stream socket; a closed peer is an error, not SIGPIPE), waiting at
// most until `deadline`. DeadlineExceeded when the peer does not read in time.
absl::Status WriteFrame(int fd, absl::string_view payload, absl::Time deadline);

// Reads one frame from `fd`, waiting at most until `deadline` (absl::InfiniteFuture() to block).
// OutOfRange when the peer closed the stream (before or inside a frame), DeadlineExceeded when
// no whole frame came in time, DataLoss for a length prefix above kMaxFrameBytes.
absl::StatusOr<std::string> ReadFrame(int fd, absl::Time deadline);

// Serializes and writes / reads and parses one message.
absl::Status WriteMessage(int fd, const google::protobuf::MessageLite& message,
                          absl::Time deadline);
absl::Status ReadMessage(int fd, absl::Time deadline, google::protobuf::MessageLite& message);

wire::Status ToWire(const absl::Status& status);
absl::Status FromWire(const wire::Status& status);

wire::JudgeOptions ToWire(const judge::JudgeOptions& options);
judge::JudgeOptions FromWire(const wire::JudgeOptions& options);

// TimerOptions::before_each_rep and between_reps do not travel: the child sets its own (the
// judge's poisoning, its run on other inputs).
wire::TimerOptions ToWire(const timer::TimerOptions& options);
timer::TimerOptions FromWire(const wire::TimerOptions& options);

wire::Verdict ToWire(const judge::JudgeVerdict& verdict);
judge::JudgeVerdict FromWire(const wire::Verdict& verdict);

// The summaries are recomputed from the reps on arrival.
wire::Timing ToWire(const timer::Timing& timing);
timer::Timing FromWire(const wire::Timing& timing);

// A candidate for the child: the task, what of the family's GeneratedKernel the child uses (the
// kernel's name and launch, its template and parameters, its executor and runtime arguments; not
// its source) and the compiled bytes (a cubin, or a host-launched candidate's shared object).
wire::Candidate CandidateToWire(const forge::v1::KernelTask& task,
                                const codegen::GeneratedKernel& kernel, absl::string_view cubin);
// The GeneratedKernel as far as it travels: source, generator_version and every cost hint but
// the executor stay empty.
codegen::GeneratedKernel KernelFromWire(const wire::Candidate& candidate);

// How the child runs a candidate, told by its plan's executor (CostHints::executor).
enum class CandidateKind {
  kGeneratedKernel,  // an NVRTC-compiled kernel: the cubin, launched as kernel_name with launch
  kCublasLt,         // the gemm_library family: cuBLASLt, then the cubin's epilogue kernel if any
  kAtenFallback,     // the ATen fallback family: the task's group through ATen on the GPU
  kHostLaunched,     // nvcc's shared object (in cubin), through host_launch_abi.h's entry points
  kCudnn,            // the cudnn_conv family: a cuDNN fused graph, nothing compiled
};
CandidateKind KindOf(const codegen::GeneratedKernel& kernel);

}  // namespace forge::sandbox

#endif  // FORGE_WORKER_SANDBOX_WIRE_H_
