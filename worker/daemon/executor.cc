#include "worker/daemon/executor.h"

#include <chrono>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "compiler/search/candidate.h"

namespace forge::daemon {
namespace {

constexpr std::size_t kMaxFailureLogBytes = 64 * 1024;  // task.proto: Failure.log

double SecondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// A point the template cannot express is the candidate's own problem; anything else (another
// build's generator, a digest or task that does not match) is a fault of Forge's bookkeeping.
forge::v1::FailureReason GenerationFailureReason(const absl::Status& status) {
  if (absl::IsInvalidArgument(status) || absl::IsUnimplemented(status)) {
    return forge::v1::FAILURE_REASON_UNSUPPORTED;
  }
  return forge::v1::FAILURE_REASON_INTERNAL;
}

// The compile report of a compile the pool answered: a cache hit compiled nothing here.
forge::v1::CompileReport ReportOf(const compile::CompileResult& compiled) {
  forge::v1::CompileReport report;
  if (compiled.cache_hit()) {
    report.set_origin(forge::v1::COMPILE_ORIGIN_CACHE_HIT);
    return report;
  }
  report.set_origin(compiled.source == compile::CompileSource::kJoinedInFlight
                        ? forge::v1::COMPILE_ORIGIN_JOINED
                        : forge::v1::COMPILE_ORIGIN_COMPILED);
  report.set_seconds(compiled.compile_seconds);
  return report;
}

}  // namespace

absl::string_view StageName(Stage stage) {
  switch (stage) {
    case Stage::kGenerate: return "generate";
    case Stage::kCompile: return "compile";
    case Stage::kJudge: return "judge";
    case Stage::kTime: return "time";
    case Stage::kPredict: return "predict";
    case Stage::kSanitize: return "sanitize";
  }
  return "unknown";
}

forge::v1::Result FailureResult(absl::string_view candidate_digest, forge::v1::FailureStage stage,
                                forge::v1::FailureReason reason, std::string detail,
                                absl::string_view log) {
  forge::v1::Result result;
  forge::v1::Failure* failure = result.mutable_failure();
  failure->set_candidate_digest(std::string(candidate_digest));
  failure->set_stage(stage);
  failure->set_reason(reason);
  failure->set_detail(std::move(detail));
  if (log.size() > kMaxFailureLogBytes) log = log.substr(log.size() - kMaxFailureLogBytes);
  failure->set_log(std::string(log));
  return result;
}

PreparedCandidate Executor::Prepare(const forge::v1::KernelTask& task,
                                    const forge::v1::Candidate& candidate,
                                    StageTimes* times) const {
  PreparedCandidate prepared;
  prepared.digest = candidate.digest();
  prepared.task = &task;
  prepared.compile.set_origin(forge::v1::COMPILE_ORIGIN_NOT_COMPILED);
  if (candidate.target_arch() != gpu_.arch()) {
    prepared.failure = FailureResult(
        candidate.digest(), forge::v1::FAILURE_STAGE_GENERATE, forge::v1::FAILURE_REASON_INTERNAL,
        absl::StrCat("candidate targets '", candidate.target_arch(), "' but GPU ", gpu_.index(),
                     " (", gpu_.name(), ") is ", gpu_.arch()));
    *prepared.failure->mutable_compile() = prepared.compile;
    return prepared;
  }

  auto start = std::chrono::steady_clock::now();
  absl::StatusOr<codegen::GeneratedKernel> kernel = search::GenerateCandidate(task, candidate);
  times->Add(Stage::kGenerate, SecondsSince(start));
  if (!kernel.ok()) {
    prepared.failure = FailureResult(
        candidate.digest(), forge::v1::FAILURE_STAGE_GENERATE,
        GenerationFailureReason(kernel.status()),
        absl::StrCat("generate ", candidate.template_name(), ": ", kernel.status().ToString()));
    *prepared.failure->mutable_compile() = prepared.compile;
    return prepared;
  }
  prepared.kernel = *std::move(kernel);
  const bool host_launched =
      prepared.kernel.compile_output == codegen::CompileOutput::kNvccSharedObject;
  std::optional<compile::CompileRequest> request =
      compile::CompileRequestFor(prepared.kernel, gpu_.arch());
  if (!request.has_value() || (host_launched && !CompilesHostLaunched())) return prepared;

  start = std::chrono::steady_clock::now();
  compile::CompileResult compiled = pool_->Compile(*std::move(request));
  times->Add(Stage::kCompile, SecondsSince(start));
  prepared.compile = ReportOf(compiled);
  if (!compiled.ok()) {
    prepared.failure = FailureResult(
        candidate.digest(), forge::v1::FAILURE_STAGE_COMPILE,
        absl::IsInternal(compiled.status) ? forge::v1::FAILURE_REASON_INTERNAL
                                          : forge::v1::FAILURE_REASON_COMPILE_ERROR,
        absl::StrCat("compile ",
                     prepared.kernel.kernel_name.empty() ? prepared.kernel.template_name
                                                         : prepared.kernel.kernel_name,
                     " for ", gpu_.arch(), ": ", compiled.status.message()),
        compiled.log);
    *prepared.failure->mutable_compile() = prepared.compile;
    return prepared;
  }
  prepared.compiled = std::move(compiled);
  return prepared;
}

absl::StatusOr<forge::v1::Result> Executor::Evaluate(const forge::v1::KernelTask& task,
                                                     const forge::v1::Candidate& candidate,
                                                     StageTimes* times) {
  PreparedCandidate prepared = Prepare(task, candidate, times);
  if (prepared.failure.has_value()) return *std::move(prepared.failure);
  return ExecuteReporting(std::move(prepared), times);
}

absl::StatusOr<forge::v1::Result> Executor::ExecuteReporting(PreparedCandidate prepared,
                                                             StageTimes* times) {
  forge::v1::CompileReport compile = prepared.compile;
  absl::StatusOr<forge::v1::Result> result = Execute(std::move(prepared), times);
  if (result.ok()) *result->mutable_compile() = std::move(compile);
  return result;
}

}  // namespace forge::daemon
