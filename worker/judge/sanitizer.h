// compute-sanitizer on a task's would-be best: the host side, no GPU needed. Which tools a kind of
// candidate runs under, the tool's command line, where the tool is found, and what its report
// says.
//
// Contract:
//   - ToolsFor: generated kernels run under memcheck, racecheck, synccheck and initcheck (every
//     buffer such a kernel reads is the judge's, uploaded or left unwritten on purpose, so an
//     uninitialized read is the kernel's); host-launched objects under memcheck, racecheck and
//     synccheck (a workspace is theirs to initialise as their library does); cuBLASLt calls and
//     cuDNN graphs under memcheck and synccheck; ATen-executed candidates under none (PyTorch's own
//     kernels: SANITIZER_STATE_NOT_APPLICABLE).
//   - SanitizerCommandLine: `tool_path --tool T --error-exitcode 87 --launch-timeout 120
//     --print-limit 16 --report-api-errors no --log-file LOG target...`: the target's own CUDA API
//     errors are its business (the child reports a failed launch itself); any error the tool finds
//     in device code makes the tool exit with kSanitizerErrorExitCode.
//   - ParseSanitizerReport reads the documented text format (each line prefixed "========= ";
//     a record's first line unindented, its details indented; "ERROR SUMMARY: N errors" and
//     racecheck's "RACECHECK SUMMARY: N hazards displayed (E errors, W warnings)"): the counts and
//     each error record as one line. Racecheck warnings are counted, not errors.
//   - FindComputeSanitizer: the configured path (which must be an executable file), else
//     compute-sanitizer on $PATH, else in $CUDA_HOME/bin, else /usr/local/cuda/bin.
#ifndef FORGE_WORKER_JUDGE_SANITIZER_H_
#define FORGE_WORKER_JUDGE_SANITIZER_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "compiler/codegen/generated_kernel.h"

namespace forge::judge {

enum class SanitizerTool { kMemcheck, kRacecheck, kSynccheck, kInitcheck };

// "memcheck", "racecheck", "synccheck", "initcheck": the tool's --tool name.
absl::string_view SanitizerToolName(SanitizerTool tool);

// The tools a candidate run by `executor` is checked with (see above); empty for ATen.
std::vector<SanitizerTool> ToolsFor(codegen::Executor executor);

// compute-sanitizer's exit status when a tool found an error (--error-exitcode).
inline constexpr int kSanitizerErrorExitCode = 87;

// The argv that runs `target` (its argv) under `tool` with the report written to `log_path`.
std::vector<std::string> SanitizerCommandLine(absl::string_view tool_path, SanitizerTool tool,
                                              absl::string_view log_path,
                                              absl::Span<const std::string> target);

// What one tool's report says.
struct SanitizerReport {
  int errors = 0;
  int warnings = 0;  // racecheck's warnings (hazards it judges possibly benign)
  // Each error record in one line, in report order: its first line, then its "at", "by thread",
  // "Address" and "and is ..." details, e.g. "Invalid __global__ read of size 4 bytes at
  // read_past_end+0x90 by thread (31,0,0) in block (3917,0,0) Address 0x7f12c0f4c300 is out of
  // bounds and is 1 bytes after the nearest allocation at 0x7f12c0000000 of size 4012000 bytes".
  std::vector<std::string> errors_found;
  // Whether a summary line was found: a report without one is cut short (the tool or its target
  // died).
  bool has_summary = false;
};

SanitizerReport ParseSanitizerReport(absl::string_view text);

// The compute-sanitizer to run (see above): NotFound naming where it looked.
absl::StatusOr<std::string> FindComputeSanitizer(absl::string_view configured,
                                                 absl::string_view path_env,
                                                 absl::string_view cuda_home_env);
// The same with $PATH and $CUDA_HOME of this process.
absl::StatusOr<std::string> FindComputeSanitizer(absl::string_view configured);

}  // namespace forge::judge

#endif  // FORGE_WORKER_JUDGE_SANITIZER_H_
