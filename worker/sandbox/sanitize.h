// compute-sanitizer on a would-be best: runs a candidate once under each tool that applies to it
// (judge::ToolsFor: memcheck, racecheck, synccheck, initcheck for a generated kernel), each in a
// sandbox child of its own started under the tool, so that whatever the tool finds or breaks
// stays in that process. The tools run at once (the caller's GPU lane waits for all of them).
//
// Each child runs in its one-shot mode (forge-sandbox-child --sanitize-request=FILE
// --sanitize-answer=FILE): it loads the candidate as the sandbox does and launches it once on the
// judge's draw 0 (judge::LaunchOnDrawZero), nothing else on the GPU, then writes whether the
// launch succeeded. The command line is judge::SanitizerCommandLine's.
//
// Contract of Sanitize:
//   - an error a tool reports (its report's error records or its error exit status) fails the
//     candidate: SanitizeOutcome::failure, stage JUDGE, reason SANITIZER_REPORT, the tool's first
//     error record as the detail and the report (its last 64 KiB) as the log;
//   - a tool that could not check the candidate (its child did not finish before the deadline,
//     the tool or the child failed without reporting an error) leaves it unsanitized: no failure,
//     evidence state UNAVAILABLE with the reason; the coordinator then does not make it a best;
//   - a candidate no tool applies to (one run through ATen) is NOT_APPLICABLE;
//   - otherwise PASSED, with the tools that ran and the wall seconds;
//   - an error status only when the scratch files cannot be written or a process not started.
// Each child and the tool's own processes are one process group, killed together at the deadline.
#ifndef FORGE_WORKER_SANDBOX_SANITIZE_H_
#define FORGE_WORKER_SANDBOX_SANITIZE_H_

#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "forge/v1/task.pb.h"
#include "worker/judge/judge.h"
#include "worker/sandbox/sandbox.h"

namespace forge::sandbox {

struct SanitizeOptions {
  std::string tool_path;   // compute-sanitizer (judge::FindComputeSanitizer)
  std::string child_path;  // forge-sandbox-child
  int gpu_ordinal = 0;
  // For all the tools together, extended per GiB of the task's tensors as the sandbox's
  // deadlines are (RequestDeadline with these): racecheck slows shared-memory-heavy kernels by
  // orders of magnitude.
  absl::Duration timeout = absl::Minutes(3);
  absl::Duration timeout_per_gib = absl::Minutes(1);
  absl::Duration max_timeout = absl::Minutes(15);
  // Where the request, the answers and the reports go (a fresh folder inside it, removed
  // afterwards); empty: $TMPDIR, else /tmp.
  std::string scratch_dir;
};

struct SanitizeOutcome {
  forge::v1::SanitizerEvidence evidence;
  // Set when a tool reported an error: the candidate fails with it.
  std::optional<forge::v1::Failure> failure;
};

absl::StatusOr<SanitizeOutcome> Sanitize(const SanitizeOptions& options,
                                         const SandboxCandidate& candidate,
                                         const judge::JudgeOptions& judge_options);

}  // namespace forge::sandbox

#endif  // FORGE_WORKER_SANDBOX_SANITIZE_H_
