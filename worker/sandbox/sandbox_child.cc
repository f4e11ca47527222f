#include "worker/sandbox/sandbox_child.h"

#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <memory>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status/status_macros.h"
#include "google/protobuf/util/message_differencer.h"
#include "worker/gpu/device.h"
#include "worker/sandbox/sandbox.pb.h"
#include "worker/sandbox/wire.h"
#include "worker/timer/timer.h"

namespace forge::sandbox {
namespace {

using google::protobuf::util::MessageDifferencer;

class ChildServer {
 public:
  explicit ChildServer(const ChildOptions& options) : options_(options) {
    absl::StatusOr<std::unique_ptr<gpu::Device>> device = gpu::Device::Open(options.gpu_ordinal);
    if (device.ok()) {
      device_ = *std::move(device);
    } else {
      device_status_ = device.status();
    }
  }

  int Run() {
    wire::Hello hello;
    hello.set_pid(getpid());
    *hello.mutable_device_status() = ToWire(device_status_);
    if (device_ != nullptr) {
      hello.set_device_name(device_->properties().name);
      hello.set_arch(device_->properties().arch());
    }
    if (absl::Status sent = WriteMessage(options_.socket_fd, hello, absl::InfiniteFuture());
        !sent.ok()) {
      fprintf(stderr, "sandbox child: cannot say hello: %s\n", sent.ToString().c_str());
      return 1;
    }
    while (true) {
      wire::Request request;
      absl::Status received = ReadMessage(options_.socket_fd, absl::InfiniteFuture(), request);
      if (absl::IsOutOfRange(received)) return 0;  // the parent closed the socket
      if (!received.ok()) {
        fprintf(stderr, "sandbox child: %s\n", received.ToString().c_str());
        return 1;
      }
      wire::Response response = Serve(request);
      response.set_id(request.id());
      if (absl::Status sent = WriteMessage(options_.socket_fd, response, absl::InfiniteFuture());
          !sent.ok()) {
        fprintf(stderr, "sandbox child: cannot answer request %llu: %s\n",
                static_cast<unsigned long long>(request.id()), sent.ToString().c_str());
        return 1;
      }
      if (response.context_lost()) {
        fprintf(stderr, "sandbox child: the CUDA context is lost; exiting\n");
        return kContextLostExitStatus;
      }
    }
  }

 private:
  // The last candidate that passed the judge, with its buffers: a time request about the same
  // candidate and options times it without judging again.
  struct Judged {
    wire::Candidate candidate;
    wire::JudgeOptions options;
    std::unique_ptr<judge::JudgedCandidate> judged;
  };

  static wire::Response ErrorResponse(const absl::Status& status) {
    wire::Response response;
    *response.mutable_error() = ToWire(status);
    response.set_context_lost(gpu::IsStickyError(status));
    return response;
  }

  wire::Response Serve(const wire::Request& request) {
    switch (request.kind_case()) {
      case wire::Request::kPing: {
        wire::Response response;
        response.set_pong(true);
        return response;
      }
      case wire::Request::kJudge:
        return ServeJudge(request.judge());
      case wire::Request::kTime:
        return ServeTime(request.time());
      case wire::Request::kTestBehaviour:
        return ServeTestBehaviour(request.test_behaviour());
      case wire::Request::KIND_NOT_SET:
        break;
    }
    return ErrorResponse(absl::InvalidArgumentError(
        absl::StrCat("sandbox child: request ", request.id(), " names no kind")));
  }

  // Judges the candidate; keeps it as last_judged_ when it passes.
  absl::StatusOr<judge::JudgeVerdict> JudgeCandidate(const wire::Candidate& candidate,
                                                     const wire::JudgeOptions& options) {
    last_judged_.reset();  // free the previous candidate's buffers first
    FORGE_RETURN_IF_ERROR(device_status_);
    FORGE_ASSIGN_OR_RETURN(
        judge::CandidateLaunch launch,
        judge::LoadGeneratedKernel(*device_, candidate.cubin(), LaunchedKernelFromWire(candidate)));
    FORGE_ASSIGN_OR_RETURN(std::unique_ptr<judge::JudgedCandidate> judged,
                           judge::Judge(*device_, candidate.task(), std::move(launch),
                                        options_.reference, FromWire(options)));
    judge::JudgeVerdict verdict = judged->verdict();
    if (verdict.passed()) {
      last_judged_ =
          Judged{.candidate = candidate, .options = options, .judged = std::move(judged)};
    }
    return verdict;
  }

  static wire::Response VerdictResponse(const judge::JudgeVerdict& verdict) {
    wire::Response response;
    *response.mutable_verdict() = ToWire(verdict);
    response.set_context_lost(verdict.context_lost);
    return response;
  }

  wire::Response ServeJudge(const wire::JudgeRequest& request) {
    absl::StatusOr<judge::JudgeVerdict> verdict =
        JudgeCandidate(request.candidate(), request.options());
    if (!verdict.ok()) return ErrorResponse(verdict.status());
    return VerdictResponse(*verdict);
  }

  wire::Response ServeTime(const wire::TimeRequest& request) {
    const bool judged_already =
        last_judged_.has_value() &&
        MessageDifferencer::Equals(last_judged_->candidate, request.candidate()) &&
        MessageDifferencer::Equals(last_judged_->options, request.judge_options());
    if (!judged_already) {
      absl::StatusOr<judge::JudgeVerdict> verdict =
          JudgeCandidate(request.candidate(), request.judge_options());
      if (!verdict.ok()) return ErrorResponse(verdict.status());
      if (!verdict->passed()) return VerdictResponse(*verdict);
    }
    if (timer_ == nullptr) {
      absl::StatusOr<std::unique_ptr<timer::Timer>> timer = timer::Timer::Create(*device_);
      if (!timer.ok()) return ErrorResponse(timer.status());
      timer_ = *std::move(timer);
    }
    judge::JudgedCandidate& judged = *last_judged_->judged;
    timer::TimerOptions timer_options = FromWire(request.timer_options());
    timer_options.before_each_rep = [&judged](gpu::Stream& stream) {
      return judged.PoisonOutputs(stream);
    };
    absl::StatusOr<timer::Timing> timing = timer_->Time(
        [&judged](gpu::Stream& stream) { return judged.Launch(stream); }, timer_options);
    if (!timing.ok()) return ErrorResponse(timing.status());
    absl::StatusOr<judge::JudgeVerdict> recheck = judged.RecheckTimedOutputs();
    if (!recheck.ok()) return ErrorResponse(recheck.status());

    wire::Response response;
    *response.mutable_timed()->mutable_timing() = ToWire(*timing);
    *response.mutable_timed()->mutable_recheck() = ToWire(*recheck);
    response.set_context_lost(recheck->context_lost);
    return response;
  }

  wire::Response ServeTestBehaviour(const wire::TestBehaviourRequest& request) {
    if (!options_.allow_test_behaviours) {
      return ErrorResponse(absl::PermissionDeniedError(
          "sandbox child: test behaviours are off (start it with --allow-test-behaviours)"));
    }
    switch (request.behaviour()) {
      case wire::TestBehaviourRequest::SLEEP_FOREVER:
        fprintf(stderr, "sandbox child: sleeping forever, as asked\n");
        while (true) pause();
      case wire::TestBehaviourRequest::CRASH_WITH_SIGSEGV:
        fprintf(stderr, "sandbox child: crashing with SIGSEGV, as asked\n");
        signal(SIGSEGV, SIG_DFL);
        raise(SIGSEGV);
        break;
      case wire::TestBehaviourRequest::EXIT_WITHOUT_ANSWER:
        fprintf(stderr, "sandbox child: exiting with status 3 without an answer, as asked\n");
        _exit(3);
      default:
        break;
    }
    return ErrorResponse(absl::InvalidArgumentError(
        absl::StrCat("sandbox child: unknown test behaviour ", request.behaviour())));
  }

  const ChildOptions options_;
  absl::Status device_status_;
  std::unique_ptr<gpu::Device> device_;
  std::unique_ptr<timer::Timer> timer_;
  std::optional<Judged> last_judged_;  // after device_ and timer_: released before them
};

}  // namespace

int RunSandboxChild(const ChildOptions& options) { return ChildServer(options).Run(); }

}  // namespace forge::sandbox
