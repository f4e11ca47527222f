#include "worker/sandbox/sanitize.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status/status_macros.h"
#include "worker/judge/sanitizer.h"
#include "worker/sandbox/sandbox.pb.h"
#include "worker/sandbox/wire.h"

namespace forge::sandbox {
namespace {

// forge.v1.Failure.log keeps at most this much of a report.
constexpr size_t kLogTailBytes = 64 << 10;

std::string ReadFile(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  std::stringstream text;
  text << file.rdbuf();
  return text.str();
}

std::string Tail(std::string text, size_t bytes) {
  return text.size() <= bytes ? text : text.substr(text.size() - bytes);
}

std::string DescribeExit(int status) {
  if (WIFEXITED(status)) return absl::StrCat("exited with status ", WEXITSTATUS(status));
  if (WIFSIGNALED(status)) return absl::StrCat("was killed by signal ", WTERMSIG(status));
  return absl::StrCat("ended with wait status ", status);
}

// One tool's run: its process (the leader of its group) and files.
struct ToolRun {
  judge::SanitizerTool tool;
  std::string log;     // the tool's report (--log-file)
  std::string output;  // the tool's and the child's stdout and stderr
  std::string answer;  // the child's wire::Status
  pid_t pid = -1;
  int wait_status = 0;
  bool timed_out = false;
};

// Starts `argv` in a process group of its own with stdout and stderr to `output`.
absl::StatusOr<pid_t> Start(const std::vector<std::string>& argv, const std::string& output) {
  const int out_fd = open(output.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  const int null_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (out_fd < 0 || null_fd < 0) {
    const int error = errno;
    if (out_fd >= 0) close(out_fd);
    if (null_fd >= 0) close(null_fd);
    return absl::InternalError(absl::StrCat("sanitizer output ", output, ": ", strerror(error)));
  }
  std::vector<std::string> args = argv;
  std::vector<char*> pointers;
  for (std::string& arg : args) pointers.push_back(arg.data());
  pointers.push_back(nullptr);
  const pid_t pid = fork();
  if (pid == 0) {
    // Only async-signal-safe calls until exec.
    setpgid(0, 0);
    dup2(null_fd, STDIN_FILENO);
    dup2(out_fd, STDOUT_FILENO);
    dup2(out_fd, STDERR_FILENO);
    execv(pointers[0], pointers.data());
    _exit(127);
  }
  const int fork_error = errno;
  close(out_fd);
  close(null_fd);
  if (pid < 0) return absl::InternalError(absl::StrCat("fork: ", strerror(fork_error)));
  setpgid(pid, pid);  // also here, so that a kill at the deadline never misses the group
  return pid;
}

// Waits for every run until `deadline`; kills the groups of those still running then.
void WaitAll(std::vector<ToolRun>& runs, absl::Time deadline) {
  int running = static_cast<int>(runs.size());
  while (running > 0) {
    for (ToolRun& run : runs) {
      if (run.pid < 0) continue;
      const pid_t reaped = waitpid(run.pid, &run.wait_status, WNOHANG);
      if (reaped == run.pid || (reaped < 0 && errno != EINTR)) {
        kill(-run.pid, SIGKILL);  // what the tool left behind in its group
        run.pid = -1;
        --running;
      }
    }
    if (running == 0) break;
    if (absl::Now() >= deadline) {
      for (ToolRun& run : runs) {
        if (run.pid < 0) continue;
        kill(-run.pid, SIGKILL);
        while (waitpid(run.pid, &run.wait_status, 0) < 0 && errno == EINTR) {
        }
        run.timed_out = true;
        run.pid = -1;
      }
      break;
    }
    absl::SleepFor(absl::Milliseconds(20));
  }
}

// A fresh folder for one candidate's files.
absl::StatusOr<std::string> ScratchFolder(const std::string& parent) {
  std::string base = parent;
  if (base.empty()) {
    const char* tmp = std::getenv("TMPDIR");
    base = tmp != nullptr && *tmp != '\0' ? tmp : "/tmp";
  }
  std::string pattern = absl::StrCat(base, "/forge-sanitize-XXXXXX");
  if (mkdtemp(pattern.data()) == nullptr) {
    return absl::InternalError(absl::StrCat("mkdtemp in ", base, ": ", strerror(errno)));
  }
  return pattern;
}

}  // namespace

absl::StatusOr<SanitizeOutcome> Sanitize(const SanitizeOptions& options,
                                         const SandboxCandidate& candidate,
                                         const judge::JudgeOptions& judge_options) {
  SanitizeOutcome outcome;
  const std::vector<judge::SanitizerTool> tools = judge::ToolsFor(candidate.kernel.hints.executor);
  if (tools.empty()) {
    outcome.evidence.set_state(forge::v1::SANITIZER_STATE_NOT_APPLICABLE);
    outcome.evidence.set_detail("the candidate runs through ATen: PyTorch's own kernels");
    return outcome;
  }
  const absl::Time start = absl::Now();
  FORGE_ASSIGN_OR_RETURN(const std::string folder, ScratchFolder(options.scratch_dir));
  struct RemoveFolder {
    ~RemoveFolder() {
      std::error_code ignored;
      std::filesystem::remove_all(path, ignored);
    }
    std::string path;
  } remove_folder{folder};

  wire::JudgeRequest request;
  *request.mutable_candidate() = CandidateToWire(candidate.task, candidate.kernel, candidate.cubin);
  *request.mutable_options() = ToWire(judge_options);
  const std::string request_path = absl::StrCat(folder, "/request");
  {
    std::ofstream file(request_path, std::ios::binary);
    if (!request.SerializeToOstream(&file) || !file.flush()) {
      return absl::InternalError(absl::StrCat("cannot write ", request_path));
    }
  }

  SandboxOptions deadline_options;
  deadline_options.timeout_per_gib = options.timeout_per_gib;
  deadline_options.max_timeout = options.max_timeout;
  const absl::Duration timeout = RequestDeadline(deadline_options, candidate.task, options.timeout);
  std::vector<ToolRun> runs;
  for (judge::SanitizerTool tool : tools) {
    const std::string name(judge::SanitizerToolName(tool));
    ToolRun run{.tool = tool,
                .log = absl::StrCat(folder, "/", name, ".log"),
                .output = absl::StrCat(folder, "/", name, ".out"),
                .answer = absl::StrCat(folder, "/", name, ".answer")};
    const std::vector<std::string> target = {
        options.child_path, absl::StrCat("--gpu=", options.gpu_ordinal),
        absl::StrCat("--sanitize-request=", request_path),
        absl::StrCat("--sanitize-answer=", run.answer)};
    absl::StatusOr<pid_t> pid =
        Start(judge::SanitizerCommandLine(options.tool_path, tool, run.log, target), run.output);
    if (!pid.ok()) {
      WaitAll(runs, absl::Now());  // kills those already started
      return pid.status();
    }
    run.pid = *pid;
    runs.push_back(std::move(run));
  }
  WaitAll(runs, start + timeout);

  std::vector<std::string> tool_names;
  std::vector<std::string> unchecked;  // why a tool could not check the candidate
  std::vector<std::string> warnings;
  for (const ToolRun& run : runs) {
    const std::string name(judge::SanitizerToolName(run.tool));
    tool_names.push_back(name);
    const std::string report_text = ReadFile(run.log);
    const judge::SanitizerReport report = judge::ParseSanitizerReport(report_text);
    const bool error_exit =
        !run.timed_out && WIFEXITED(run.wait_status) &&
        WEXITSTATUS(run.wait_status) == judge::kSanitizerErrorExitCode;
    if (report.errors > 0 || error_exit) {
      if (!outcome.failure.has_value()) {
        forge::v1::Failure failure;
        failure.set_candidate_digest(candidate.digest);
        failure.set_stage(forge::v1::FAILURE_STAGE_JUDGE);
        failure.set_reason(forge::v1::FAILURE_REASON_SANITIZER_REPORT);
        std::string detail = absl::StrCat("compute-sanitizer ", name, ": ");
        if (report.errors_found.empty()) {
          absl::StrAppend(&detail, "reported ", std::max(report.errors, 1), " error(s)");
        } else {
          absl::StrAppend(&detail, report.errors_found.front());
          if (report.errors > 1) absl::StrAppend(&detail, " (", report.errors, " errors)");
        }
        failure.set_detail(std::move(detail));
        failure.set_log(Tail(report_text.empty() ? ReadFile(run.output) : report_text,
                             kLogTailBytes));
        outcome.failure = std::move(failure);
      }
      continue;
    }
    if (report.warnings > 0) {
      warnings.push_back(absl::StrCat(name, ": ", report.warnings, " warning(s)"));
    }
    if (run.timed_out) {
      unchecked.push_back(absl::StrCat(name, " did not finish within ",
                                       absl::FormatDuration(timeout)));
      continue;
    }
    // An OK status serializes to no bytes: the answer is the file's existence, then its parse.
    wire::Status answer;
    std::error_code missing;
    const bool answered = std::filesystem::exists(run.answer, missing) &&
                          answer.ParseFromString(ReadFile(run.answer));
    const absl::Status launched =
        answered ? FromWire(answer) : absl::UnknownError("the child wrote no answer");
    if (!WIFEXITED(run.wait_status) || WEXITSTATUS(run.wait_status) != 0 || !launched.ok()) {
      unchecked.push_back(absl::StrCat(name, " ", DescribeExit(run.wait_status), " (",
                                       launched.ToString(), "): ",
                                       Tail(ReadFile(run.output), 2048)));
    }
  }
  for (const std::string& name : tool_names) outcome.evidence.add_tools(name);
  outcome.evidence.set_seconds(absl::ToDoubleSeconds(absl::Now() - start));
  if (outcome.failure.has_value()) return outcome;
  if (!unchecked.empty()) {
    outcome.evidence.set_state(forge::v1::SANITIZER_STATE_UNAVAILABLE);
    outcome.evidence.set_detail(absl::StrCat("not sanitized: ", absl::StrJoin(unchecked, "; ")));
    return outcome;
  }
  outcome.evidence.set_state(forge::v1::SANITIZER_STATE_PASSED);
  outcome.evidence.set_detail(absl::StrJoin(warnings, "; "));
  return outcome;
}

}  // namespace forge::sandbox
