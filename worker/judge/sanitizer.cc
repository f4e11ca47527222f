#include "worker/judge/sanitizer.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace forge::judge {
namespace {

// The tool's default line prefix (--prefix).
constexpr absl::string_view kPrefix = "=========";

bool IsExecutableFile(const std::string& path) {
  struct stat info;
  return stat(path.c_str(), &info) == 0 && S_ISREG(info.st_mode) && access(path.c_str(), X_OK) == 0;
}

// The first integer in `text` after `label`, or -1.
int CountAfter(absl::string_view text, absl::string_view label) {
  const size_t at = text.find(label);
  if (at == absl::string_view::npos) return -1;
  absl::string_view rest = absl::StripLeadingAsciiWhitespace(text.substr(at + label.size()));
  size_t digits = 0;
  while (digits < rest.size() && absl::ascii_isdigit(static_cast<unsigned char>(rest[digits]))) {
    ++digits;
  }
  int count = -1;
  if (digits == 0 || !absl::SimpleAtoi(rest.substr(0, digits), &count)) return -1;
  return count;
}

// Whether a detail line of a record belongs in its one-line form: where and who, not the host
// backtrace.
bool IsKeptDetail(absl::string_view detail) {
  for (absl::string_view start : {"at ", "by thread", "Address", "and ", "Access", "Uninitialized",
                                  "Write", "Read", "Barrier", "Warp"}) {
    if (absl::StartsWith(detail, start)) return true;
  }
  return false;
}

}  // namespace

absl::string_view SanitizerToolName(SanitizerTool tool) {
  switch (tool) {
    case SanitizerTool::kMemcheck:
      return "memcheck";
    case SanitizerTool::kRacecheck:
      return "racecheck";
    case SanitizerTool::kSynccheck:
      return "synccheck";
    case SanitizerTool::kInitcheck:
      return "initcheck";
  }
  return "memcheck";
}

std::vector<SanitizerTool> ToolsFor(codegen::Executor executor) {
  switch (executor) {
    case codegen::Executor::kGeneratedKernel:
      return {SanitizerTool::kMemcheck, SanitizerTool::kRacecheck, SanitizerTool::kSynccheck,
              SanitizerTool::kInitcheck};
    case codegen::Executor::kHostLaunched:
      return {SanitizerTool::kMemcheck, SanitizerTool::kRacecheck, SanitizerTool::kSynccheck};
    case codegen::Executor::kCublasLt:
      return {SanitizerTool::kMemcheck, SanitizerTool::kSynccheck};
    case codegen::Executor::kCudnn:
      // Memcheck only: on the H200 (2026-12-02) synccheck reported one error, without a message
      // the report parser could attribute, on 8 of ResNet-18's judged-correct cuDNN graph_nhwc
      // candidates (other shapes of the same graph passed), so every such convolution stayed ATen.
      // Until the report is read on a GPU (cuDNN's engine kernels or the candidate's own
      // transposes), synccheck is not run on cuDNN candidates. docs/ARCHITECTURE.md says so.
      return {SanitizerTool::kMemcheck};
    case codegen::Executor::kAten:
      return {};
  }
  return {};
}

std::vector<std::string> SanitizerCommandLine(absl::string_view tool_path, SanitizerTool tool,
                                              absl::string_view log_path,
                                              absl::Span<const std::string> target) {
  std::vector<std::string> argv = {std::string(tool_path),
                                   "--tool",
                                   std::string(SanitizerToolName(tool)),
                                   "--error-exitcode",
                                   absl::StrCat(kSanitizerErrorExitCode),
                                   "--launch-timeout",
                                   "120",
                                   "--print-limit",
                                   "16",
                                   "--report-api-errors",
                                   "no",
                                   "--log-file",
                                   std::string(log_path)};
  argv.insert(argv.end(), target.begin(), target.end());
  return argv;
}

SanitizerReport ParseSanitizerReport(absl::string_view text) {
  SanitizerReport report;
  int summary_errors = -1;
  // The error record being read (one line so far), or empty.
  std::string record;
  bool record_is_warning = false;
  auto finish_record = [&] {
    if (!record.empty() && !record_is_warning) report.errors_found.push_back(record);
    record.clear();
    record_is_warning = false;
  };
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    line = absl::StripTrailingAsciiWhitespace(line);
    if (!absl::ConsumePrefix(&line, kPrefix)) continue;  // the target's own output
    const bool detail = absl::StartsWith(line, "  ");    // "=========     at ..."
    line = absl::StripLeadingAsciiWhitespace(line);
    if (line.empty()) {
      finish_record();
      continue;
    }
    if (detail) {
      if (!record.empty() && IsKeptDetail(line)) absl::StrAppend(&record, " ", line);
      continue;
    }
    finish_record();
    if (absl::StartsWith(line, "ERROR SUMMARY:")) {
      report.has_summary = true;
      summary_errors = std::max(summary_errors, CountAfter(line, "ERROR SUMMARY:"));
      continue;
    }
    if (absl::StartsWith(line, "RACECHECK SUMMARY:")) {
      report.has_summary = true;
      summary_errors = std::max(summary_errors, CountAfter(line, "("));
      report.warnings = std::max(report.warnings, CountAfter(line, "errors,"));
      report.warnings = std::max(report.warnings, CountAfter(line, "error,"));
      continue;
    }
    if (absl::StartsWith(line, "COMPUTE-SANITIZER") || absl::StartsWith(line, "LEAK SUMMARY") ||
        absl::StartsWith(line, "Target application returned")) {
      continue;
    }
    // A record: "Invalid __global__ read ...", "Error: Race reported between ...",
    // "Warning: Race reported ...", "Uninitialized __global__ memory read ...",
    // "Barrier error detected ...", "Program hit CUDA_ERROR_... on CUDA API call to ...".
    record = std::string(line);
    record_is_warning = absl::StartsWith(line, "Warning:");
  }
  finish_record();
  report.errors = std::max(summary_errors, static_cast<int>(report.errors_found.size()));
  return report;
}

absl::StatusOr<std::string> FindComputeSanitizer(absl::string_view configured,
                                                 absl::string_view path_env,
                                                 absl::string_view cuda_home_env) {
  if (!configured.empty()) {
    const std::string path(configured);
    if (!IsExecutableFile(path)) {
      return absl::NotFoundError(
          absl::StrCat("compute-sanitizer '", path, "' is not an executable file"));
    }
    return path;
  }
  std::vector<std::string> tried;
  for (absl::string_view dir : absl::StrSplit(path_env, ':', absl::SkipEmpty())) {
    tried.push_back(absl::StrCat(dir, "/compute-sanitizer"));
  }
  if (!cuda_home_env.empty()) tried.push_back(absl::StrCat(cuda_home_env, "/bin/compute-sanitizer"));
  tried.push_back("/usr/local/cuda/bin/compute-sanitizer");
  for (const std::string& path : tried) {
    if (IsExecutableFile(path)) return path;
  }
  return absl::NotFoundError(absl::StrCat("no compute-sanitizer on $PATH, in $CUDA_HOME/bin (",
                                          cuda_home_env.empty() ? "unset" : cuda_home_env,
                                          ") or in /usr/local/cuda/bin"));
}

absl::StatusOr<std::string> FindComputeSanitizer(absl::string_view configured) {
  const char* path = std::getenv("PATH");
  const char* cuda_home = std::getenv("CUDA_HOME");
  return FindComputeSanitizer(configured, path == nullptr ? "" : path,
                              cuda_home == nullptr ? "" : cuda_home);
}

}  // namespace forge::judge
