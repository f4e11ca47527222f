#include "worker/sandbox/sandbox_child.h"

#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <variant>

#include "absl/strings/str_cat.h"
#include "common/status/status_macros.h"
#include "compiler/codegen/family.h"
#include "compiler/codegen/gemm_library/gemm_library.h"
#include "compiler/codegen/sdpa_library/sdpa_library.h"
#include "google/protobuf/util/message_differencer.h"
#include "worker/gpu/device.h"
#include "worker/judge/device_draws.h"
#include "worker/judge/host_staging.h"
#include "worker/judge/single_launch.h"
#include "worker/library/cublaslt_gemm.h"
#include "worker/library/host_launched.h"
#if FORGE_SANDBOX_CHILD_WITH_CUDNN
#include "worker/library/cudnn_conv.h"
#endif
#include "worker/sandbox/sandbox.pb.h"
#include "worker/sandbox/wire.h"
#include "worker/timer/timer.h"

namespace forge::sandbox {
namespace {

using google::protobuf::util::MessageDifferencer;

class ChildServer {
 public:
  explicit ChildServer(const ChildOptions& options) : options_(options) {
    if (options.draw_cache_bytes > 0) {
      draw_cache_ = std::make_unique<judge::DrawCache>(options.draw_cache_bytes);
    }
    absl::StatusOr<std::unique_ptr<gpu::Device>> device = gpu::Device::Open(options.gpu_ordinal);
    if (device.ok()) {
      device_ = *std::move(device);
      staging_ = std::make_unique<judge::HostStaging>(*device_);
      if (draw_cache_ != nullptr) CreateDeviceDraws();
    } else {
      device_status_ = device.status();
    }
  }

  // The one-shot mode's launch (RunSanitizeTarget).
  absl::Status LaunchOnce(const wire::JudgeRequest& request) {
    const wire::Candidate& candidate = request.candidate();
    const codegen::GeneratedKernel kernel = KernelFromWire(candidate);
    const CandidateKind kind = KindOf(kernel);
    FORGE_RETURN_IF_ERROR(CheckBuiltToRun(kind));
    FORGE_RETURN_IF_ERROR(device_status_);
    FORGE_ASSIGN_OR_RETURN(auto loaded, Load(candidate, kernel, kind));
    if (const Unsupported* unsupported = std::get_if<Unsupported>(&loaded)) {
      return absl::FailedPreconditionError(unsupported->reason);
    }
    return judge::LaunchOnDrawZero(*device_, candidate.task(),
                                   std::get<RunnableCandidate>(loaded).launch,
                                   FromWire(request.options()));
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
    RunnableCandidate runnable;
    std::unique_ptr<judge::JudgedCandidate> judged;
  };

  // Why a candidate cannot run on this GPU or with this LibTorch: a failure of the candidate.
  struct Unsupported {
    std::string reason;
  };
  // What judging a candidate came to.
  using Judgement = std::variant<judge::JudgeVerdict, Unsupported>;

  static bool Passed(const Judgement& judgement) {
    const judge::JudgeVerdict* verdict = std::get_if<judge::JudgeVerdict>(&judgement);
    return verdict != nullptr && verdict->passed();
  }

  // A candidate timed by launching it again on the judged buffers.
  static RunnableCandidate Relaunchable(judge::CandidateLaunch launch) {
    RunnableCandidate runnable;
    runnable.launch = std::move(launch);
    return runnable;
  }

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

  // Fails for a kind of candidate this child cannot run on any GPU.
  absl::Status CheckBuiltToRun(CandidateKind kind) const {
    if (kind == CandidateKind::kAtenFallback && !options_.load_aten_fallback) {
      return absl::FailedPreconditionError(
          "this forge-sandbox-child was built without LibTorch's CUDA libraries (CMake target "
          "forge::libtorch_cuda), which ATen fallback candidates run on");
    }
    return absl::OkStatus();
  }

  absl::StatusOr<library::CublasLtGemm*> Gemm() {
    if (gemm_ == nullptr) {
      FORGE_ASSIGN_OR_RETURN(gemm_, library::CublasLtGemm::Create(*device_));
    }
    return gemm_.get();
  }

  // Loads a gemm_library candidate, or says why this GPU cannot run it.
  absl::StatusOr<std::variant<RunnableCandidate, Unsupported>> LoadCublasLt(
      const wire::Candidate& candidate, const codegen::GeneratedKernel& kernel) {
    absl::StatusOr<codegen::GemmLibraryCandidate> library = codegen::DescribeGemmLibrary(
        candidate.task(), codegen::SchedulePoint{kernel.template_name, kernel.parameters});
    if (!library.ok()) {
      return Annotate(library.status(), absl::StrCat("gemm_library point of task ",
                                                     candidate.task().digest()));
    }
    FORGE_ASSIGN_OR_RETURN(library::CublasLtGemm* gemm, Gemm());
    FORGE_ASSIGN_OR_RETURN(const int algorithms, gemm->AlgorithmCount(library->gemm));
    if (library->gemm.algo >= algorithms) {
      return Unsupported{absl::StrCat("cuBLASLt offers ", algorithms, " algorithms on ",
                                      device_->properties().name, " for ",
                                      codegen::DescribeCall(library->gemm), "; algo ",
                                      library->gemm.algo, " is past the end")};
    }
    if (library->epilogue.has_value() && candidate.cubin().empty()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "the ", kernel.template_name, " candidate of task ", candidate.task().digest(),
          " comes without the cubin of its epilogue kernel ", kernel.kernel_name));
    }
    FORGE_ASSIGN_OR_RETURN(
        judge::CandidateLaunch launch,
        library::LoadGemmLibraryCandidate(*device_, *gemm, *library, candidate.cubin()));
    RunnableCandidate runnable = Relaunchable(std::move(launch));
    FORGE_ASSIGN_OR_RETURN(runnable.library_algorithm, gemm->AlgorithmDescription(library->gemm));
    return runnable;
  }

  // Loads a cudnn_conv candidate (its graph and engine built, cached per process), or says why
  // cuDNN cannot run it on this GPU.
  absl::StatusOr<std::variant<RunnableCandidate, Unsupported>> LoadCudnn(
      const wire::Candidate& candidate, const codegen::GeneratedKernel& kernel) {
#if FORGE_SANDBOX_CHILD_WITH_CUDNN
    if (cudnn_ == nullptr) {
      FORGE_ASSIGN_OR_RETURN(cudnn_, library::CudnnConv::Create(*device_));
    }
    absl::StatusOr<library::CudnnConvLaunch> loaded = library::LoadCudnnConvCandidate(
        *cudnn_, candidate.task(), codegen::SchedulePoint{kernel.template_name, kernel.parameters});
    if (absl::IsOutOfRange(loaded.status())) {
      return Unsupported{std::string(loaded.status().message())};
    }
    if (!loaded.ok()) {
      return Annotate(loaded.status(),
                      absl::StrCat("cudnn_conv point of task ", candidate.task().digest()));
    }
    RunnableCandidate runnable = Relaunchable(std::move(loaded->launch));
    runnable.library_algorithm = std::move(loaded->engine_name);
    return runnable;
#else
    (void)candidate;
    (void)kernel;
    return absl::FailedPreconditionError(
        "this forge-sandbox-child was built without cuDNN and the cuDNN frontend headers "
        "(cmake/ForgeCudnn.cmake), which cudnn_conv candidates run on");
#endif
  }

  // Loads a host-launched candidate's shared object, or says why it cannot run the task.
  absl::StatusOr<std::variant<RunnableCandidate, Unsupported>> LoadHostLaunched(
      const wire::Candidate& candidate, const codegen::GeneratedKernel& kernel) {
    FORGE_ASSIGN_OR_RETURN(std::unique_ptr<library::HostLaunchedObject> object,
                           library::HostLaunchedObject::Load(candidate.cubin()));
    absl::StatusOr<judge::CandidateLaunch> launch =
        library::LoadHostLaunchedCandidate(*device_, std::move(object), kernel.runtime_args);
    if (absl::IsOutOfRange(launch.status())) {
      return Unsupported{std::string(launch.status().message())};
    }
    FORGE_RETURN_IF_ERROR(launch.status());
    return Relaunchable(*std::move(launch));
  }

  // Loads the candidate, or says why this GPU cannot run it.
  absl::StatusOr<std::variant<RunnableCandidate, Unsupported>> Load(
      const wire::Candidate& candidate, const codegen::GeneratedKernel& kernel,
      CandidateKind kind) {
    switch (kind) {
      case CandidateKind::kGeneratedKernel: {
        FORGE_ASSIGN_OR_RETURN(judge::CandidateLaunch launch,
                               judge::LoadGeneratedKernel(*device_, candidate.cubin(), kernel));
        return Relaunchable(std::move(launch));
      }
      case CandidateKind::kCublasLt:
        return LoadCublasLt(candidate, kernel);
      case CandidateKind::kHostLaunched:
        return LoadHostLaunched(candidate, kernel);
      case CandidateKind::kCudnn:
        return LoadCudnn(candidate, kernel);
      case CandidateKind::kAtenFallback: {
        // The ATen fallback, or an SDPA backend's candidate: its rewritten group (one SDPA call,
        // that backend) through ATen; the judge still compares against the task's own ops.
        FORGE_ASSIGN_OR_RETURN(
            const forge::v1::KernelTask executed,
            codegen::AtenExecutedTask(candidate.task(), codegen::SchedulePoint{
                                                            kernel.template_name,
                                                            kernel.parameters}));
        FORGE_ASSIGN_OR_RETURN(RunnableCandidate runnable,
                               options_.load_aten_fallback(*device_, executed));
        return runnable;
      }
    }
    return absl::InternalError("sandbox child: unknown kind of candidate");
  }

  // The judge's device path: its comparison kernels and the resident draws. Without them (a
  // compile or load failure, said on stderr) every pass of the judge runs on the host.
  void CreateDeviceDraws() {
    int64_t capacity = options_.device_draws_bytes.value_or(0);
    if (!options_.device_draws_bytes) {
      absl::StatusOr<int64_t> free_bytes = device_->FreeMemoryBytes();
      capacity = free_bytes.ok() ? *free_bytes / 4 : 0;
    }
    if (capacity <= 0) return;
    absl::StatusOr<std::unique_ptr<judge::DeviceComparer>> comparer =
        judge::DeviceComparer::Create(*device_);
    if (!comparer.ok()) {
      fprintf(stderr, "sandbox child: the judge runs on the host alone: %s\n",
              comparer.status().ToString().c_str());
      return;
    }
    comparer_ = *std::move(comparer);
    // Without the draw kernel a large task's draws come from the host, uploaded.
    absl::StatusOr<std::unique_ptr<judge::DeviceInputs>> inputs =
        judge::DeviceInputs::Create(*device_);
    if (inputs.ok()) {
      device_inputs_ = *std::move(inputs);
    } else {
      fprintf(stderr, "sandbox child: the judge draws on the host alone: %s\n",
              inputs.status().ToString().c_str());
    }
    device_draws_ = std::make_unique<judge::DeviceDraws>(
        *device_, *comparer_, capacity, judge::DeviceDraws::kDefaultMinTaskBytes,
        device_inputs_.get());
  }

  // Judges the candidate; keeps it as last_judged_ when it passes.
  absl::StatusOr<Judgement> JudgeCandidate(const wire::Candidate& candidate,
                                           const wire::JudgeOptions& options) {
    last_judged_.reset();  // free the previous candidate's buffers first
    const codegen::GeneratedKernel kernel = KernelFromWire(candidate);
    const CandidateKind kind = KindOf(kernel);
    FORGE_RETURN_IF_ERROR(CheckBuiltToRun(kind));
    FORGE_RETURN_IF_ERROR(device_status_);
    FORGE_ASSIGN_OR_RETURN(auto loaded, Load(candidate, kernel, kind));
    if (Unsupported* unsupported = std::get_if<Unsupported>(&loaded)) {
      return std::move(*unsupported);
    }
    RunnableCandidate& runnable = std::get<RunnableCandidate>(loaded);
    judge::JudgeOptions judge_options = FromWire(options);
    judge_options.draw_cache = draw_cache_.get();
    judge_options.staging = staging_.get();
    judge_options.device_draws = device_draws_.get();
    // LibTorch allocates and synchronizes inside the fallback's launch: it cannot be captured.
    judge_options.capture_launches = kind != CandidateKind::kAtenFallback;
    FORGE_ASSIGN_OR_RETURN(std::unique_ptr<judge::JudgedCandidate> judged,
                           judge::Judge(*device_, candidate.task(), runnable.launch,
                                        options_.reference, judge_options));
    judge::JudgeVerdict verdict = judged->verdict();
    if (!verdict.passed() && !verdict.context_lost && runnable.unsupported_reason) {
      if (std::string reason = runnable.unsupported_reason(); !reason.empty()) {
        return Unsupported{std::move(reason)};
      }
    }
    if (verdict.passed()) {
      last_judged_ = Judged{.candidate = candidate,
                            .options = options,
                            .runnable = std::move(runnable),
                            .judged = std::move(judged)};
    }
    return verdict;
  }

  static wire::Response JudgementResponse(const Judgement& judgement) {
    wire::Response response;
    if (const Unsupported* unsupported = std::get_if<Unsupported>(&judgement)) {
      response.set_unsupported(unsupported->reason);
      return response;
    }
    const judge::JudgeVerdict& verdict = std::get<judge::JudgeVerdict>(judgement);
    *response.mutable_verdict() = ToWire(verdict);
    response.set_context_lost(verdict.context_lost);
    return response;
  }

  wire::Response ServeJudge(const wire::JudgeRequest& request) {
    absl::StatusOr<Judgement> judgement = JudgeCandidate(request.candidate(), request.options());
    if (!judgement.ok()) return ErrorResponse(judgement.status());
    return JudgementResponse(*judgement);
  }

  wire::Response ServeTime(const wire::TimeRequest& request) {
    const bool judged_already =
        last_judged_.has_value() &&
        MessageDifferencer::Equals(last_judged_->candidate, request.candidate()) &&
        MessageDifferencer::Equals(last_judged_->options, request.judge_options());
    if (!judged_already) {
      absl::StatusOr<Judgement> judgement =
          JudgeCandidate(request.candidate(), request.judge_options());
      if (!judgement.ok()) return ErrorResponse(judgement.status());
      if (!Passed(*judgement)) return JudgementResponse(*judgement);
    }
    if (timer_ == nullptr) {
      absl::StatusOr<std::unique_ptr<timer::Timer>> timer = timer::Timer::Create(*device_);
      if (!timer.ok()) return ErrorResponse(timer.status());
      timer_ = *std::move(timer);
    }
    judge::JudgedCandidate& judged = *last_judged_->judged;
    const RunnableCandidate& runnable = last_judged_->runnable;
    timer::TimerOptions timer_options = FromWire(request.timer_options());
    timer_options.before_each_rep = [&judged](gpu::Stream& stream) {
      return judged.PoisonOutputs(stream);
    };
    timer_options.between_reps = [&judged] { return judged.RunOnOtherContents(); };
    const timer::LaunchFn relaunch = [&judged](gpu::Stream& stream) {
      return judged.Launch(stream);
    };
    absl::StatusOr<timer::Timing> timing =
        timer_->Time(runnable.timed_launch ? runnable.timed_launch : relaunch, timer_options);
    if (!timing.ok()) return ErrorResponse(timing.status());
    if (runnable.before_recheck) {
      if (absl::Status copied = runnable.before_recheck(timer_->stream()); !copied.ok()) {
        return ErrorResponse(copied);
      }
    }
    absl::StatusOr<judge::JudgeVerdict> recheck = judged.RecheckTimedOutputs();
    if (!recheck.ok()) return ErrorResponse(recheck.status());

    wire::Response response;
    *response.mutable_timed()->mutable_timing() = ToWire(*timing);
    *response.mutable_timed()->mutable_recheck() = ToWire(*recheck);
    response.mutable_timed()->set_library_algorithm(runnable.library_algorithm);
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
  // Shared by the candidates of every kind; null without one (ChildOptions::draw_cache_bytes).
  std::unique_ptr<judge::DrawCache> draw_cache_;
  absl::Status device_status_;
  std::unique_ptr<gpu::Device> device_;
  std::unique_ptr<timer::Timer> timer_;
  std::unique_ptr<library::CublasLtGemm> gemm_;  // created by the first cuBLASLt candidate
#if FORGE_SANDBOX_CHILD_WITH_CUDNN
  std::unique_ptr<library::CudnnConv> cudnn_;  // created by the first cudnn_conv candidate
#endif
  // Page-locked host buffers the judge reuses across draws and candidates (after device_).
  std::unique_ptr<judge::HostStaging> staging_;
  // The judge's device path (after device_); null where it could not be made or is turned off.
  std::unique_ptr<judge::DeviceComparer> comparer_;
  std::unique_ptr<judge::DeviceInputs> device_inputs_;  // before device_draws_, which uses it
  std::unique_ptr<judge::DeviceDraws> device_draws_;
  // After device_, timer_, gemm_, staging_ and the device draws (which its launches and checks
  // use): released first.
  std::optional<Judged> last_judged_;
};

}  // namespace

int RunSandboxChild(const ChildOptions& options) { return ChildServer(options).Run(); }

int RunSanitizeTarget(const ChildOptions& options, const std::string& request_path,
                      const std::string& answer_path) {
  wire::JudgeRequest request;
  {
    std::ifstream file(request_path, std::ios::binary);
    if (!request.ParseFromIstream(&file)) {
      fprintf(stderr, "sandbox child: cannot read the request %s\n", request_path.c_str());
      return 1;
    }
  }
  const absl::Status launched = ChildServer(options).LaunchOnce(request);
  if (!launched.ok()) {
    fprintf(stderr, "sandbox child: the launch under the sanitizer: %s\n",
            launched.ToString().c_str());
  }
  std::ofstream file(answer_path, std::ios::binary | std::ios::trunc);
  if (!ToWire(launched).SerializeToOstream(&file) || !file.flush()) {
    fprintf(stderr, "sandbox child: cannot write the answer %s\n", answer_path.c_str());
    return 1;
  }
  return 0;
}

}  // namespace forge::sandbox
