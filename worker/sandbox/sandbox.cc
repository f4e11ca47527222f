#include "worker/sandbox/sandbox.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status/status_macros.h"
#include "worker/sandbox/sandbox.pb.h"
#include "worker/sandbox/wire.h"

namespace forge::sandbox {
namespace {

// The child's end of the socket pair, as its fd number (sandbox_child_main.cc reads it).
constexpr int kChildSocketFd = 3;
// forge.v1.Failure.log keeps at most this much of the child's stderr.
constexpr off_t kLogTailBytes = 64 << 10;
// How long a child that reported a lost context may take to exit on its own.
constexpr absl::Duration kContextLostExitGrace = absl::Seconds(10);
// How long a child gets to exit after its socket closes when the sandbox goes away.
constexpr absl::Duration kShutdownGrace = absl::Seconds(2);

std::string DescribeWaitStatus(int status) {
  if (WIFEXITED(status)) return absl::StrCat("exited with status ", WEXITSTATUS(status));
  if (WIFSIGNALED(status)) {
    return absl::StrCat("was killed by signal ", WTERMSIG(status), " (",
                        strsignal(WTERMSIG(status)), ")");
  }
  return absl::StrCat("ended with wait status ", status);
}

forge::v1::Failure MakeFailure(absl::string_view candidate_digest, forge::v1::FailureStage stage,
                               forge::v1::FailureReason reason, std::string detail) {
  forge::v1::Failure failure;
  failure.set_candidate_digest(std::string(candidate_digest));
  failure.set_stage(stage);
  failure.set_reason(reason);
  failure.set_detail(std::move(detail));
  return failure;
}

forge::v1::Failure VerdictFailure(absl::string_view candidate_digest, forge::v1::FailureStage stage,
                                  const judge::JudgeVerdict& verdict) {
  forge::v1::Failure failure = MakeFailure(candidate_digest, stage, verdict.reason, verdict.detail);
  *failure.mutable_judge() = verdict.evidence;
  return failure;
}

}  // namespace

struct Sandbox::Child {
  Child(pid_t pid, int socket_fd, int log_fd) : pid(pid), socket_fd(socket_fd), log_fd(log_fd) {}
  ~Child() {
    if (socket_fd >= 0) close(socket_fd);
    close(log_fd);
  }
  Child(const Child&) = delete;
  Child& operator=(const Child&) = delete;

  const pid_t pid;
  int socket_fd;     // closed early to tell the child to exit
  const int log_fd;  // a memfd holding the child's stdout and stderr
};

struct Sandbox::Exchange {
  // The child's answer, unless the child was lost before it came.
  std::optional<wire::Response> response;
  // Set when the request cost the child: why, with the child's stderr in its log.
  std::optional<forge::v1::Failure> failure;
  // The reaped child's stderr, when the answer itself reported a lost context.
  std::string child_log;
};

namespace {

// What a judge or time request's exchange means for the candidate.
absl::StatusOr<SandboxOutcome> OutcomeOf(std::optional<wire::Response> response,
                                         std::optional<forge::v1::Failure> lost,
                                         const std::string& child_log,
                                         forge::v1::FailureStage stage,
                                         absl::string_view candidate_digest) {
  SandboxOutcome outcome;
  if (lost.has_value()) {
    outcome.failure = std::move(lost);
    return outcome;
  }
  switch (response->kind_case()) {
    case wire::Response::kVerdict:
      outcome.verdict = FromWire(response->verdict());
      if (!outcome.verdict->passed()) {
        // A verdict answers judging, also when a time request had to judge first.
        outcome.failure =
            VerdictFailure(candidate_digest, forge::v1::FAILURE_STAGE_JUDGE, *outcome.verdict);
      }
      break;
    case wire::Response::kTimed:
      outcome.timing = FromWire(response->timed().timing());
      outcome.verdict = FromWire(response->timed().recheck());
      outcome.library_algorithm = response->timed().library_algorithm();
      if (!outcome.verdict->passed()) {
        outcome.failure = VerdictFailure(candidate_digest, stage, *outcome.verdict);
      }
      break;
    case wire::Response::kUnsupported:
      // Found while loading the candidate to judge it, also when a time request had to judge.
      outcome.failure = MakeFailure(candidate_digest, forge::v1::FAILURE_STAGE_JUDGE,
                                    forge::v1::FAILURE_REASON_UNSUPPORTED, response->unsupported());
      break;
    case wire::Response::kError:
      if (!response->context_lost()) return FromWire(response->error());
      outcome.failure = MakeFailure(candidate_digest, stage, forge::v1::FAILURE_REASON_CRASH,
                                    response->error().message());
      break;
    default:
      return absl::InternalError(absl::StrCat("sandbox child answered request ", response->id(),
                                              " with an unexpected kind of response"));
  }
  if (outcome.failure.has_value() && response->context_lost()) {
    outcome.failure->set_log(child_log);
  }
  return outcome;
}

}  // namespace

absl::StatusOr<std::unique_ptr<Sandbox>> Sandbox::Create(SandboxOptions options) {
  struct stat info;
  if (stat(options.child_path.c_str(), &info) != 0 || !S_ISREG(info.st_mode) ||
      access(options.child_path.c_str(), X_OK) != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("sandbox child '", options.child_path, "' is not an executable file"));
  }
  std::unique_ptr<Sandbox> sandbox(new Sandbox(std::move(options)));
  absl::MutexLock lock(&sandbox->mutex_);
  // A failed start is recorded in stats() and answered to requests; the sandbox stays usable.
  sandbox->StartChildLocked().IgnoreError();
  return sandbox;
}

Sandbox::Sandbox(SandboxOptions options)
    : options_(std::move(options)), backoff_(options_.min_restart_backoff) {}

Sandbox::~Sandbox() {
  absl::MutexLock lock(&mutex_);
  if (child_ != nullptr) ReapChildLocked(kShutdownGrace);
}

absl::Status Sandbox::EnsureChildLocked() {
  if (child_ != nullptr) return absl::OkStatus();
  const absl::Time now = absl::Now();
  if (now < next_start_allowed_) {
    return absl::UnavailableError(absl::StrCat(
        "sandbox child ", options_.child_path, " failed to start ",
        stats_.consecutive_start_failures, " times in a row; next attempt in ",
        absl::FormatDuration(absl::Ceil(next_start_allowed_ - now, absl::Milliseconds(1))),
        "; last failure: ", last_start_error_.message()));
  }
  return StartChildLocked();
}

absl::Status Sandbox::StartChildLocked() {
  int sockets[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sockets) != 0) {
    return absl::InternalError(absl::StrCat("socketpair for the sandbox child: ", strerror(errno)));
  }
  const int log_fd = memfd_create("forge-sandbox-child-log", MFD_CLOEXEC);
  const int null_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (log_fd < 0 || null_fd < 0) {
    const int error = errno;
    for (int fd : {sockets[0], sockets[1], log_fd, null_fd}) {
      if (fd >= 0) close(fd);
    }
    return absl::InternalError(absl::StrCat("sandbox child log or /dev/null: ", strerror(error)));
  }
  std::vector<std::string> args = {options_.child_path,
                                   absl::StrCat("--socket-fd=", kChildSocketFd),
                                   absl::StrCat("--gpu=", options_.gpu_ordinal)};
  if (options_.allow_test_behaviours) args.push_back("--allow-test-behaviours");
  std::vector<char*> argv;
  for (std::string& arg : args) argv.push_back(arg.data());
  argv.push_back(nullptr);

  const pid_t pid = fork();
  if (pid == 0) {
    // Only async-signal-safe calls until exec. dup2 onto the same fd would keep FD_CLOEXEC.
    if (sockets[1] == kChildSocketFd) {
      fcntl(kChildSocketFd, F_SETFD, 0);
    } else {
      dup2(sockets[1], kChildSocketFd);
    }
    dup2(null_fd, STDIN_FILENO);
    dup2(log_fd, STDOUT_FILENO);
    dup2(log_fd, STDERR_FILENO);
    execv(argv[0], argv.data());
    _exit(127);
  }
  const int fork_error = errno;
  close(sockets[1]);
  close(null_fd);
  if (pid < 0) {
    close(sockets[0]);
    close(log_fd);
    return absl::InternalError(absl::StrCat("fork for the sandbox child: ", strerror(fork_error)));
  }
  child_ = std::make_unique<Child>(pid, sockets[0], log_fd);

  wire::Hello hello;
  absl::Status said_hello =
      ReadMessage(child_->socket_fd, absl::Now() + options_.start_timeout, hello);
  if (!said_hello.ok()) {
    const bool silent = absl::IsDeadlineExceeded(said_hello);
    Ending ending = ReapChildLocked(absl::ZeroDuration());
    last_start_error_ = absl::UnavailableError(absl::StrCat(
        "sandbox child ", options_.child_path, " (pid ", pid, ") ",
        silent ? absl::StrCat("said no hello within ", absl::FormatDuration(options_.start_timeout),
                              " and was killed")
               : absl::StrCat(ending.how, " before its hello"),
        ending.log_tail.empty() ? "" : "; stderr: ", ending.log_tail));
    ++stats_.start_failures;
    ++stats_.consecutive_start_failures;
    next_start_allowed_ = absl::Now() + backoff_;
    backoff_ = std::min(backoff_ * 2, options_.max_restart_backoff);
    return last_start_error_;
  }
  ++stats_.child_starts;
  if (replacing_lost_child_) ++stats_.restarts;
  replacing_lost_child_ = false;
  stats_.consecutive_start_failures = 0;
  backoff_ = options_.min_restart_backoff;
  stats_.child_pid = pid;
  stats_.device_name = hello.device_name();
  stats_.device_arch = hello.arch();
  stats_.device_status = FromWire(hello.device_status());
  return absl::OkStatus();
}

Sandbox::Ending Sandbox::ReapChildLocked(absl::Duration grace) {
  close(child_->socket_fd);
  child_->socket_fd = -1;
  const pid_t pid = child_->pid;
  int status = 0;
  pid_t reaped = 0;
  const absl::Time give_up = absl::Now() + grace;
  while ((reaped = waitpid(pid, &status, WNOHANG)) == 0 && absl::Now() < give_up) {
    absl::SleepFor(absl::Milliseconds(5));
  }
  if (reaped == 0) {
    kill(pid, SIGKILL);
    while ((reaped = waitpid(pid, &status, 0)) < 0 && errno == EINTR) {
    }
  }
  Ending ending;
  ending.how = reaped == pid ? DescribeWaitStatus(status)
                             : absl::StrCat("could not be reaped: ", strerror(errno));
  struct stat info;
  if (fstat(child_->log_fd, &info) == 0 && info.st_size > 0) {
    const off_t start = std::max<off_t>(0, info.st_size - kLogTailBytes);
    ending.log_tail.resize(static_cast<size_t>(info.st_size - start));
    const ssize_t got =
        pread(child_->log_fd, ending.log_tail.data(), ending.log_tail.size(), start);
    ending.log_tail.resize(got > 0 ? static_cast<size_t>(got) : 0);
  }
  child_.reset();
  stats_.child_pid = 0;
  return ending;
}

absl::StatusOr<Sandbox::Exchange> Sandbox::ExchangeLocked(wire::Request& request,
                                                          absl::Duration timeout,
                                                          forge::v1::FailureStage stage,
                                                          absl::string_view candidate_digest) {
  FORGE_RETURN_IF_ERROR(EnsureChildLocked());
  ++stats_.requests;
  request.set_id(next_request_id_++);
  const pid_t pid = child_->pid;
  const absl::Time deadline = absl::Now() + timeout;

  Exchange exchange;
  wire::Response response;
  absl::Status answered = WriteMessage(child_->socket_fd, request, deadline);
  if (answered.ok()) answered = ReadMessage(child_->socket_fd, deadline, response);
  if (answered.ok() && response.id() != request.id()) {
    answered = absl::DataLossError(
        absl::StrCat("answer to request ", response.id(), " while waiting for ", request.id()));
  }

  if (answered.ok() && !response.context_lost()) {
    exchange.response = std::move(response);
    return exchange;
  }
  replacing_lost_child_ = true;
  if (answered.ok()) {
    // The child answered, then exits: its CUDA context is unusable.
    ++stats_.crashes;
    exchange.child_log = ReapChildLocked(kContextLostExitGrace).log_tail;
    exchange.response = std::move(response);
  } else if (absl::IsDeadlineExceeded(answered)) {
    ++stats_.timeouts;
    Ending ending = ReapChildLocked(absl::ZeroDuration());
    exchange.failure = MakeFailure(candidate_digest, stage, forge::v1::FAILURE_REASON_TIMEOUT,
                                   absl::StrCat("no answer within ", absl::FormatDuration(timeout),
                                                ": sandbox child (pid ", pid, ") killed"));
    exchange.failure->set_log(std::move(ending.log_tail));
  } else {
    ++stats_.crashes;
    Ending ending = ReapChildLocked(kContextLostExitGrace);
    exchange.failure = MakeFailure(candidate_digest, forge::v1::FAILURE_STAGE_SANDBOX,
                                   forge::v1::FAILURE_REASON_CRASH,
                                   absl::StrCat("sandbox child (pid ", pid, ") ", ending.how,
                                                " before answering (", answered.message(), ")"));
    exchange.failure->set_log(std::move(ending.log_tail));
  }
  // A replacement that fails to start is retried, with backoff, by the next request.
  StartChildLocked().IgnoreError();
  return exchange;
}

absl::Duration RequestDeadline(const SandboxOptions& options, const forge::v1::KernelTask& task,
                               absl::Duration base) {
  const absl::Duration extended =
      base + options.timeout_per_gib *
                 (static_cast<double>(judge::TaskStorageBytes(task)) / (int64_t{1} << 30));
  return std::max(base, std::min(extended, options.max_timeout));
}

absl::StatusOr<SandboxOutcome> Sandbox::Judge(const SandboxCandidate& candidate,
                                              const judge::JudgeOptions& options) {
  wire::Request request;
  *request.mutable_judge()->mutable_candidate() =
      CandidateToWire(candidate.task, candidate.kernel, candidate.cubin);
  *request.mutable_judge()->mutable_options() = ToWire(options);
  absl::MutexLock lock(&mutex_);
  FORGE_ASSIGN_OR_RETURN(Exchange exchange,
                         ExchangeLocked(request,
                                        RequestDeadline(options_, candidate.task,
                                                        options_.judge_timeout),
                                        forge::v1::FAILURE_STAGE_JUDGE, candidate.digest));
  return OutcomeOf(std::move(exchange.response), std::move(exchange.failure), exchange.child_log,
                   forge::v1::FAILURE_STAGE_JUDGE, candidate.digest);
}

absl::StatusOr<SandboxOutcome> Sandbox::Time(const SandboxCandidate& candidate,
                                             const judge::JudgeOptions& judge_options,
                                             const timer::TimerOptions& timer_options) {
  if (timer_options.before_each_rep || timer_options.between_reps) {
    return absl::InvalidArgumentError(
        "Sandbox::Time: before_each_rep and between_reps must be empty (the child poisons the "
        "outputs and runs the candidate on other inputs there)");
  }
  wire::Request request;
  *request.mutable_time()->mutable_candidate() =
      CandidateToWire(candidate.task, candidate.kernel, candidate.cubin);
  *request.mutable_time()->mutable_judge_options() = ToWire(judge_options);
  *request.mutable_time()->mutable_timer_options() = ToWire(timer_options);
  absl::MutexLock lock(&mutex_);
  FORGE_ASSIGN_OR_RETURN(Exchange exchange,
                         ExchangeLocked(request,
                                        RequestDeadline(options_, candidate.task,
                                                        options_.time_timeout),
                                        forge::v1::FAILURE_STAGE_TIME, candidate.digest));
  return OutcomeOf(std::move(exchange.response), std::move(exchange.failure), exchange.child_log,
                   forge::v1::FAILURE_STAGE_TIME, candidate.digest);
}

absl::Status Sandbox::Ping() {
  wire::Request request;
  request.set_ping(true);
  absl::MutexLock lock(&mutex_);
  FORGE_ASSIGN_OR_RETURN(Exchange exchange,
                         ExchangeLocked(request, options_.ping_timeout,
                                        forge::v1::FAILURE_STAGE_SANDBOX, /*candidate_digest=*/""));
  if (exchange.failure.has_value()) {
    return absl::UnavailableError(absl::StrCat("sandbox ping: ", exchange.failure->detail()));
  }
  if (!exchange.response->pong()) {
    return absl::InternalError("sandbox child answered a ping without a pong");
  }
  return absl::OkStatus();
}

absl::StatusOr<SandboxOutcome> Sandbox::RunTestBehaviour(TestBehaviour behaviour,
                                                         absl::Duration timeout) {
  wire::Request request;
  switch (behaviour) {
    case TestBehaviour::kSleepForever:
      request.mutable_test_behaviour()->set_behaviour(wire::TestBehaviourRequest::SLEEP_FOREVER);
      break;
    case TestBehaviour::kCrashWithSigsegv:
      request.mutable_test_behaviour()->set_behaviour(
          wire::TestBehaviourRequest::CRASH_WITH_SIGSEGV);
      break;
    case TestBehaviour::kExitWithoutAnswer:
      request.mutable_test_behaviour()->set_behaviour(
          wire::TestBehaviourRequest::EXIT_WITHOUT_ANSWER);
      break;
  }
  absl::MutexLock lock(&mutex_);
  FORGE_ASSIGN_OR_RETURN(
      Exchange exchange,
      ExchangeLocked(request, timeout, forge::v1::FAILURE_STAGE_SANDBOX, "test-behaviour"));
  return OutcomeOf(std::move(exchange.response), std::move(exchange.failure), exchange.child_log,
                   forge::v1::FAILURE_STAGE_SANDBOX, "test-behaviour");
}

SandboxStats Sandbox::stats() const {
  absl::MutexLock lock(&mutex_);
  return stats_;
}

}  // namespace forge::sandbox
