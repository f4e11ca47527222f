#include "worker/sandbox/wire.h"

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "worker/timer/stats.h"

namespace forge::sandbox {
namespace {

// Milliseconds for poll() until `deadline`: -1 for none, 0 once it has passed.
int PollTimeoutMs(absl::Time deadline) {
  if (deadline == absl::InfiniteFuture()) return -1;
  const absl::Duration left = deadline - absl::Now();
  if (left <= absl::ZeroDuration()) return 0;
  return static_cast<int>(std::min<int64_t>(
      absl::ToInt64Milliseconds(absl::Ceil(left, absl::Milliseconds(1))), 1 << 30));
}

// Waits until `fd` is ready for `events` or the deadline passes.
absl::Status WaitReady(int fd, short events, absl::Time deadline, absl::string_view what) {
  pollfd entry{.fd = fd, .events = events, .revents = 0};
  while (true) {
    const int ready = poll(&entry, 1, PollTimeoutMs(deadline));
    if (ready > 0) return absl::OkStatus();
    if (ready == 0) {
      return absl::DeadlineExceededError(absl::StrCat(what, " on fd ", fd, ": deadline passed"));
    }
    if (errno != EINTR) {
      return absl::InternalError(
          absl::StrCat("poll(fd ", fd, ") for ", what, ": ", strerror(errno)));
    }
  }
}

absl::Status WriteAll(int fd, const char* data, size_t size, absl::Time deadline) {
  while (size > 0) {
    if (absl::Status ready = WaitReady(fd, POLLOUT, deadline, "writing a frame"); !ready.ok()) {
      return ready;
    }
    const ssize_t written = send(fd, data, size, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (written < 0) {
      if (errno == EINTR || errno == EAGAIN) continue;
      return absl::UnavailableError(absl::StrCat("send(fd ", fd, "): ", strerror(errno)));
    }
    data += written;
    size -= static_cast<size_t>(written);
  }
  return absl::OkStatus();
}

// Reads exactly `size` bytes. `started` says whether part of the frame came already, for the
// message when the peer closes.
absl::Status ReadAll(int fd, char* data, size_t size, absl::Time deadline, bool started) {
  while (size > 0) {
    if (absl::Status ready = WaitReady(fd, POLLIN, deadline, "reading a frame"); !ready.ok()) {
      return ready;
    }
    const ssize_t got = recv(fd, data, size, MSG_DONTWAIT);
    if (got == 0) {
      return absl::OutOfRangeError(
          absl::StrCat("fd ", fd, ": peer closed the stream", started ? " inside a frame" : ""));
    }
    if (got < 0) {
      if (errno == EINTR || errno == EAGAIN) continue;
      if (errno == ECONNRESET) {
        return absl::OutOfRangeError(absl::StrCat("fd ", fd, ": peer reset the stream"));
      }
      return absl::InternalError(absl::StrCat("recv(fd ", fd, "): ", strerror(errno)));
    }
    data += got;
    size -= static_cast<size_t>(got);
    started = true;
  }
  return absl::OkStatus();
}

// One row per codegen::Executor: its wire value and how the child runs it.
struct ExecutorRow {
  codegen::Executor executor;
  wire::Executor on_wire;
  CandidateKind kind;
};
constexpr ExecutorRow kExecutors[] = {
    {codegen::Executor::kGeneratedKernel, wire::EXECUTOR_GENERATED_KERNEL,
     CandidateKind::kGeneratedKernel},
    {codegen::Executor::kCublasLt, wire::EXECUTOR_CUBLASLT, CandidateKind::kCublasLt},
    {codegen::Executor::kAten, wire::EXECUTOR_ATEN, CandidateKind::kAtenFallback},
    {codegen::Executor::kHostLaunched, wire::EXECUTOR_HOST_LAUNCHED,
     CandidateKind::kHostLaunched},
    {codegen::Executor::kCudnn, wire::EXECUTOR_CUDNN, CandidateKind::kCudnn},
};

const ExecutorRow& RowOf(codegen::Executor executor) {
  for (const ExecutorRow& row : kExecutors) {
    if (row.executor == executor) return row;
  }
  return kExecutors[0];
}

}  // namespace

absl::Status WriteFrame(int fd, absl::string_view payload, absl::Time deadline) {
  if (payload.size() > kMaxFrameBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("frame of ", payload.size(), " bytes exceeds the limit of ", kMaxFrameBytes));
  }
  const uint32_t size = static_cast<uint32_t>(payload.size());
  const char prefix[4] = {static_cast<char>(size), static_cast<char>(size >> 8),
                          static_cast<char>(size >> 16), static_cast<char>(size >> 24)};
  if (absl::Status status = WriteAll(fd, prefix, sizeof(prefix), deadline); !status.ok()) {
    return status;
  }
  return WriteAll(fd, payload.data(), payload.size(), deadline);
}

absl::StatusOr<std::string> ReadFrame(int fd, absl::Time deadline) {
  unsigned char prefix[4];
  if (absl::Status status = ReadAll(fd, reinterpret_cast<char*>(prefix), sizeof(prefix), deadline,
                                    /*started=*/false);
      !status.ok()) {
    return status;
  }
  const uint32_t size = uint32_t{prefix[0]} | uint32_t{prefix[1]} << 8 | uint32_t{prefix[2]} << 16 |
                        uint32_t{prefix[3]} << 24;
  if (size > kMaxFrameBytes) {
    return absl::DataLossError(
        absl::StrCat("fd ", fd, ": frame length ", size, " exceeds the limit of ", kMaxFrameBytes));
  }
  std::string payload(size, '\0');
  if (absl::Status status = ReadAll(fd, payload.data(), size, deadline, /*started=*/true);
      !status.ok()) {
    return status;
  }
  return payload;
}

absl::Status WriteMessage(int fd, const google::protobuf::MessageLite& message,
                          absl::Time deadline) {
  std::string payload;
  if (!message.SerializeToString(&payload)) {
    return absl::InternalError(absl::StrCat("cannot serialize ", message.GetTypeName()));
  }
  return WriteFrame(fd, payload, deadline);
}

absl::Status ReadMessage(int fd, absl::Time deadline, google::protobuf::MessageLite& message) {
  absl::StatusOr<std::string> payload = ReadFrame(fd, deadline);
  if (!payload.ok()) return payload.status();
  if (!message.ParseFromString(*payload)) {
    return absl::DataLossError(absl::StrCat("fd ", fd, ": frame of ", payload->size(),
                                            " bytes is not a valid ", message.GetTypeName()));
  }
  return absl::OkStatus();
}

wire::Status ToWire(const absl::Status& status) {
  wire::Status result;
  result.set_code(static_cast<int32_t>(status.code()));
  result.set_message(std::string(status.message()));
  return result;
}

absl::Status FromWire(const wire::Status& status) {
  return absl::Status(static_cast<absl::StatusCode>(status.code()), status.message());
}

wire::JudgeOptions ToWire(const judge::JudgeOptions& options) {
  wire::JudgeOptions result;
  result.set_draws(options.draws);
  result.set_seed(options.seed);
  if (options.tolerances.has_value()) {
    wire::Tolerances& tolerances = *result.mutable_tolerances();
    tolerances.set_atol(options.tolerances->atol);
    tolerances.set_rtol(options.tolerances->rtol);
    tolerances.set_rel_norm(options.tolerances->rel_norm);
  }
  for (const auto& [input, range] : options.integer_ranges) {
    wire::IntegerRange& entry = (*result.mutable_integer_ranges())[input];
    entry.set_low(range.low);
    entry.set_high(range.high);
  }
  return result;
}

judge::JudgeOptions FromWire(const wire::JudgeOptions& options) {
  judge::JudgeOptions result;
  result.draws = options.draws();
  result.seed = options.seed();
  if (options.has_tolerances()) {
    result.tolerances = judge::Tolerances{.atol = options.tolerances().atol(),
                                          .rtol = options.tolerances().rtol(),
                                          .rel_norm = options.tolerances().rel_norm()};
  }
  for (const auto& [input, range] : options.integer_ranges()) {
    result.integer_ranges[input] = judge::IntegerRange{.low = range.low(), .high = range.high()};
  }
  return result;
}

wire::TimerOptions ToWire(const timer::TimerOptions& options) {
  wire::TimerOptions result;
  result.set_warmup(options.warmup);
  result.set_reps(options.reps);
  result.set_flush_l2(options.flush_l2);
  result.set_kernel_durations(options.kernel_durations);
  return result;
}

timer::TimerOptions FromWire(const wire::TimerOptions& options) {
  timer::TimerOptions result;
  result.warmup = options.warmup();
  result.reps = options.reps();
  result.flush_l2 = options.flush_l2();
  result.kernel_durations = options.kernel_durations();
  return result;
}

wire::Verdict ToWire(const judge::JudgeVerdict& verdict) {
  wire::Verdict result;
  *result.mutable_evidence() = verdict.evidence;
  result.set_reason(verdict.reason);
  result.set_detail(verdict.detail);
  result.set_context_lost(verdict.context_lost);
  result.set_draws_on_device(verdict.draws_on_device);
  wire::JudgeStageSeconds& seconds = *result.mutable_seconds();
  seconds.set_draw(verdict.seconds.draw);
  seconds.set_upload(verdict.seconds.upload);
  seconds.set_candidate(verdict.seconds.candidate);
  seconds.set_reference(verdict.seconds.reference);
  seconds.set_compare(verdict.seconds.compare);
  return result;
}

judge::JudgeVerdict FromWire(const wire::Verdict& verdict) {
  judge::JudgeVerdict result;
  result.evidence = verdict.evidence();
  result.reason = verdict.reason();
  result.detail = verdict.detail();
  result.context_lost = verdict.context_lost();
  result.draws_on_device = verdict.draws_on_device();
  result.seconds = {.draw = verdict.seconds().draw(),
                    .upload = verdict.seconds().upload(),
                    .candidate = verdict.seconds().candidate(),
                    .reference = verdict.seconds().reference(),
                    .compare = verdict.seconds().compare()};
  return result;
}

wire::Timing ToWire(const timer::Timing& timing) {
  wire::Timing result;
  result.mutable_rep_us()->Add(timing.rep_us.begin(), timing.rep_us.end());
  result.mutable_kernel_rep_us()->Add(timing.kernel_rep_us.begin(), timing.kernel_rep_us.end());
  *result.mutable_kernel_status() = ToWire(timing.kernel_status);
  result.set_kernels_per_rep(timing.kernels_per_rep);
  return result;
}

timer::Timing FromWire(const wire::Timing& timing) {
  timer::Timing result;
  result.rep_us.assign(timing.rep_us().begin(), timing.rep_us().end());
  result.summary = timer::Summarize(result.rep_us);
  result.kernel_rep_us.assign(timing.kernel_rep_us().begin(), timing.kernel_rep_us().end());
  if (!result.kernel_rep_us.empty()) result.kernel_summary = timer::Summarize(result.kernel_rep_us);
  result.kernel_status = FromWire(timing.kernel_status());
  result.kernels_per_rep = timing.kernels_per_rep();
  return result;
}

wire::Candidate CandidateToWire(const forge::v1::KernelTask& task,
                                const codegen::GeneratedKernel& kernel, absl::string_view cubin) {
  wire::Candidate result;
  *result.mutable_task() = task;
  result.set_kernel_name(kernel.kernel_name);
  result.mutable_grid()->Add(kernel.launch.grid.begin(), kernel.launch.grid.end());
  result.mutable_block()->Add(kernel.launch.block.begin(), kernel.launch.block.end());
  result.set_dynamic_shared_bytes(kernel.launch.dynamic_shared_bytes);
  result.set_cubin(std::string(cubin));
  result.set_template_name(kernel.template_name);
  result.mutable_parameters()->insert(kernel.parameters.begin(), kernel.parameters.end());
  result.set_executor(RowOf(kernel.hints.executor).on_wire);
  result.mutable_runtime_args()->Add(kernel.runtime_args.begin(), kernel.runtime_args.end());
  return result;
}

codegen::GeneratedKernel KernelFromWire(const wire::Candidate& candidate) {
  codegen::GeneratedKernel kernel;
  kernel.kernel_name = candidate.kernel_name();
  for (int i = 0; i < std::min(candidate.grid_size(), 3); ++i) {
    kernel.launch.grid[i] = candidate.grid(i);
  }
  for (int i = 0; i < std::min(candidate.block_size(), 3); ++i) {
    kernel.launch.block[i] = candidate.block(i);
  }
  kernel.launch.dynamic_shared_bytes = candidate.dynamic_shared_bytes();
  kernel.template_name = candidate.template_name();
  kernel.parameters.insert(candidate.parameters().begin(), candidate.parameters().end());
  for (const ExecutorRow& row : kExecutors) {
    if (row.on_wire == candidate.executor()) kernel.hints.executor = row.executor;
  }
  if (kernel.hints.executor == codegen::Executor::kHostLaunched) {
    kernel.compile_output = codegen::CompileOutput::kNvccSharedObject;
  }
  kernel.runtime_args.assign(candidate.runtime_args().begin(), candidate.runtime_args().end());
  return kernel;
}

CandidateKind KindOf(const codegen::GeneratedKernel& kernel) {
  return RowOf(kernel.hints.executor).kind;
}

}  // namespace forge::sandbox
