// What a worker does with one leased candidate, split where the daemon pipelines it:
//   Prepare (CPU, on the daemon's compile threads, many at once): generate the candidate's kernel
//     and compile it for the executor's GPU;
//   Execute (the GPU lane, one at a time per executor): judge and time it in the GPU's sandbox,
//     or predict it with the emulated backend.
// Together they turn a forge.v1.Candidate into the forge.v1.Result the worker reports. A bad
// candidate never makes either fail: generation and compile errors become Failures at
// FAILURE_STAGE_GENERATE / FAILURE_STAGE_COMPILE with the message.
#ifndef FORGE_WORKER_DAEMON_EXECUTOR_H_
#define FORGE_WORKER_DAEMON_EXECUTOR_H_

#include <array>
#include <limits>
#include <optional>
#include <string>
#include <utility>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "compiler/codegen/generated_kernel.h"
#include "forge/v1/service.pb.h"
#include "forge/v1/task.pb.h"
#include "worker/compile/compile_pool.h"

namespace forge::daemon {

// The stages a candidate passes through on a worker, for timers and metric labels.
enum class Stage { kGenerate, kCompile, kJudge, kTime, kPredict, kSanitize };
inline constexpr int kStageCount = 6;

// "generate", "compile", "judge", "time", "predict" or "sanitize".
absl::string_view StageName(Stage stage);

// Wall-clock seconds spent in each stage of one candidate.
class StageTimes {
 public:
  void Add(Stage stage, double seconds) {
    seconds_[static_cast<int>(stage)] += seconds;
    ran_[static_cast<int>(stage)] = true;
  }
  double seconds(Stage stage) const { return seconds_[static_cast<int>(stage)]; }
  bool ran(Stage stage) const { return ran_[static_cast<int>(stage)]; }
  // How the judge stage's time divides, when the executor knows: "draw=0.1,upload=0.2,...".
  void set_judge_breakdown(std::string breakdown) { judge_breakdown_ = std::move(breakdown); }
  const std::string& judge_breakdown() const { return judge_breakdown_; }

 private:
  std::array<double, kStageCount> seconds_{};
  std::array<bool, kStageCount> ran_{};
  std::string judge_breakdown_;
};

// A candidate after the CPU stages.
struct PreparedCandidate {
  std::string digest;
  // The leased task; the caller keeps it alive until Execute returns.
  const forge::v1::KernelTask* task = nullptr;
  codegen::GeneratedKernel kernel;
  // The compile of kernel.source for the executor's arch: unset when compile::CompileRequestFor
  // asks for none (the ATen fallback, a plain cuBLASLt call), or for a host-launched candidate on
  // an executor that does not build them (CompilesHostLaunched).
  std::optional<compile::CompileResult> compiled;
  // How the compile went (forge.v1.Result.compile): the compiler's seconds as the compile pool
  // measured them, 0 and CACHE_HIT when a cache answered, NOT_COMPILED when nothing was compiled.
  forge::v1::CompileReport compile;
  // Set when generation or compilation failed: the result to report (with `compile`); Execute is
  // not called.
  std::optional<forge::v1::Result> failure;
  // A measurement faster than this (microseconds) would become the task's best: a GPU executor
  // then runs compute-sanitizer on the candidate (LeaseResponse.sanitize_below_us; infinity when
  // the task has no time to beat yet).
  double sanitize_below_us = std::numeric_limits<double>::infinity();
};

class Executor {
 public:
  virtual ~Executor() = default;
  Executor(const Executor&) = delete;
  Executor& operator=(const Executor&) = delete;

  // The GPU this executor runs candidates on, as the worker registers it (arch is what
  // candidates are compiled for).
  const forge::v1::GpuInfo& gpu() const { return gpu_; }

  // Generates the candidate's kernel (search::GenerateCandidate) and compiles it for gpu().arch()
  // as compile::CompileRequestFor says. Thread-safe; adds the generate and compile seconds to `times`.
  PreparedCandidate Prepare(const forge::v1::KernelTask& task,
                            const forge::v1::Candidate& candidate, StageTimes* times) const;

  // The lane stage for a prepared candidate without a failure: its measurement, or why it
  // failed. An error status means the worker could not evaluate it for reasons not of the
  // candidate's making (its GPU's sandbox is unavailable): the candidate should be given back.
  // One call at a time per executor; adds the stage seconds to `times`.
  virtual absl::StatusOr<forge::v1::Result> Execute(PreparedCandidate prepared,
                                                    StageTimes* times) = 0;

  // Execute, with the prepared candidate's compile report in the result: what the daemon runs.
  absl::StatusOr<forge::v1::Result> ExecuteReporting(PreparedCandidate prepared,
                                                     StageTimes* times);

  // Prepare, then ExecuteReporting unless preparation failed.
  absl::StatusOr<forge::v1::Result> Evaluate(const forge::v1::KernelTask& task,
                                             const forge::v1::Candidate& candidate,
                                             StageTimes* times);

 protected:
  // `pool` compiles for every executor of the worker and must outlive this one.
  Executor(forge::v1::GpuInfo gpu, compile::CompilePool* pool)
      : gpu_(std::move(gpu)), pool_(pool) {}

  compile::CompilePool* pool() const { return pool_; }
  // Whether Prepare builds host-launched candidates' shared objects (nvcc) for Execute. The
  // emulated executor does not: nvcc takes ~45 s per CUTLASS configuration, which would make CI
  // and the no-GPU demo crawl; it predicts them from their cost hints.
  virtual bool CompilesHostLaunched() const { return true; }

 private:
  const forge::v1::GpuInfo gpu_;
  compile::CompilePool* const pool_;
};

// A Result holding a Failure of `candidate_digest`; `log` is cut to its last 64 KiB
// (forge.v1.Failure.log).
forge::v1::Result FailureResult(absl::string_view candidate_digest, forge::v1::FailureStage stage,
                                forge::v1::FailureReason reason, std::string detail,
                                absl::string_view log = "");

}  // namespace forge::daemon

#endif  // FORGE_WORKER_DAEMON_EXECUTOR_H_
