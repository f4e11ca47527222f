// The sandbox child's main loop (the forge-sandbox-child executable runs it): owns one GPU's CUDA
// context, says hello, then judges and times candidates on request until the parent closes the
// socket or a CUDA error leaves the context unusable.
//
// Every kind of candidate runs here (wire.h's CandidateKind): generated kernels from their cubin,
// gemm_library calls through cuBLASLt (worker/library), host-launched candidates from their shared
// object (worker/library/host_launched.h; a workspace per candidate, an object that cannot run the
// task's runtime arguments is unsupported), cudnn_conv graphs through cuDNN
// (worker/library/cudnn_conv.h, where the child is built with cuDNN; a graph or engine cuDNN
// refuses is unsupported), and the ATen fallback through LibTorch's CUDA kernels (aten/'s
// Baseline, loaded by ChildOptions::load_aten_fallback where the child is built with them).
#ifndef FORGE_WORKER_SANDBOX_SANDBOX_CHILD_H_
#define FORGE_WORKER_SANDBOX_SANDBOX_CHILD_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "forge/v1/task.pb.h"
#include "worker/gpu/device.h"
#include "worker/judge/judge.h"
#include "worker/timer/timer.h"

namespace forge::sandbox {

// The child's exit status after it reported a lost CUDA context.
inline constexpr int kContextLostExitStatus = 86;

// A candidate loaded in the child: how the judge launches it and, where timing it differs from
// launching it again on the judged buffers, how it is timed.
struct RunnableCandidate {
  // The judge's launch (the generated-kernel ABI: inputs, then outputs).
  judge::CandidateLaunch launch;
  // The timed launch; empty: the judged candidate's launch on its last draw's buffers.
  timer::LaunchFn timed_launch;
  // Runs after timing, before the re-check: puts what the last timed run produced into the judged
  // candidate's output buffers. Empty when the timed launch writes them itself.
  timer::LaunchFn before_recheck;
  // Why the candidate could not run after all, learnt while judging it (an op this LibTorch has
  // no CUDA kernel for); consulted after a failing verdict. Empty, or returning "": nothing learnt.
  std::function<std::string()> unsupported_reason;
  // A gemm_library candidate: the cuBLASLt algorithm its algo index selects
  // (library::CublasLtGemm::AlgorithmDescription), reported with its timing; empty otherwise.
  std::string library_algorithm;
};

// Loads an ATen fallback candidate of `task` (aten::LoadFallback, aten/aten.h).
using AtenFallbackLoader = std::function<absl::StatusOr<RunnableCandidate>(
    const gpu::Device& device, const forge::v1::KernelTask& task)>;

struct ChildOptions {
  int socket_fd = -1;  // the child's end of the parent's socket pair
  int gpu_ordinal = 0;
  judge::ReferenceFn reference;
  // Bound of the draw cache the child judges every candidate with (judge/draw_cache.h): a task's
  // inputs and references are computed for its first candidate and reused for the next ones.
  // 0: no cache.
  int64_t draw_cache_bytes = judge::DrawCache::kDefaultCapacityBytes;
  // Bound of the draws kept resident on the GPU (judge/device_draws.h), with which a task's
  // candidates after its first are judged on the device. Unset: a quarter of the GPU's free memory
  // when the child starts; 0: none (every pass of the judge runs on the host). Needs the draw cache.
  std::optional<int64_t> device_draws_bytes;
  // Unset where the child is built without LibTorch's CUDA libraries: ATen fallback candidates
  // then fail with FailedPrecondition.
  AtenFallbackLoader load_aten_fallback;
  // Honour TestBehaviourRequest (sleep forever, crash, exit): only the sandbox's tests set it.
  bool allow_test_behaviours = false;
};

// Serves requests until the parent closes the socket (returns 0), the socket fails (returns 1) or
// the CUDA context is lost (returns kContextLostExitStatus once the answer is sent). Without a
// usable GPU it still serves pings and test behaviours, and answers judge and time requests with
// the driver's Unavailable error (after FailedPrecondition for a kind of candidate this child
// cannot run at all).
int RunSandboxChild(const ChildOptions& options);

// The child's one-shot mode, which compute-sanitizer runs (sanitize.h): reads a wire JudgeRequest
// from `request_path`, loads its candidate as RunSandboxChild would, launches it once on the
// judge's draw 0 with nothing else on the GPU (judge::LaunchOnDrawZero) and writes the outcome,
// a wire Status, to `answer_path`: OK, the candidate's CUDA error, or why it could not be loaded.
// Returns 0 once the answer is written, 1 when the request cannot be read or the answer written.
// `options` should hold no draw cache and no device draws (nothing but the candidate runs).
int RunSanitizeTarget(const ChildOptions& options, const std::string& request_path,
                      const std::string& answer_path);

}  // namespace forge::sandbox

#endif  // FORGE_WORKER_SANDBOX_SANDBOX_CHILD_H_
