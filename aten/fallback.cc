// The ATen fallback candidate in the sandbox child (LoadFallback): a Baseline per judge launch.
// No LibTorch here: Baseline brings it.
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/types/span.h"
#include "aten/aten.h"
#include "common/status/status_macros.h"
#include "compiler/codegen/aten_fallback/aten_fallback.h"
#include "worker/gpu/device.h"
#include "worker/sandbox/sandbox_child.h"

namespace forge::aten {
namespace {

// What the launches of one candidate share.
struct FallbackState {
  const gpu::Device* device = nullptr;
  forge::v1::KernelTask task;
  // The group on the last judge launch's inputs, and that launch's output buffers.
  std::unique_ptr<Baseline> baseline;
  std::vector<CUdeviceptr> output_buffers;
  // Why Baseline cannot run the task's group; empty while nothing says so.
  std::string unsupported;
};

absl::Status JudgeLaunch(FallbackState& state, gpu::Stream& stream,
                         absl::Span<const CUdeviceptr> args) {
  const forge::v1::KernelTask& task = state.task;
  // The judge's uploads and poisoning are ordered on its stream; the device copies OnDevice makes
  // of a group's inputs when it writes them are not.
  FORGE_RETURN_IF_ERROR(stream.Synchronize());
  state.baseline.reset();  // the previous draw's outputs go back to the cache first
  state.output_buffers.clear();
  // The group reads the judge's input buffers where they are, on the judge's stream.
  absl::StatusOr<std::unique_ptr<Baseline>> created =
      Baseline::OnDevice(task, args.first(task.inputs_size()), state.device->properties().ordinal);
  if (!created.ok()) {
    // An op missing from the dispatcher, recorded with another schema, or without a CUDA kernel.
    if (absl::IsNotFound(created.status()) || absl::IsFailedPrecondition(created.status())) {
      state.unsupported = std::string(created.status().message());
    }
    return created.status();
  }
  state.baseline = *std::move(created);
  FORGE_RETURN_IF_ERROR(state.baseline->Launch(stream.handle()));
  state.output_buffers.assign(args.begin() + task.inputs_size(), args.end());
  return state.baseline->CopyOutputsTo(state.output_buffers, stream.handle());
}

absl::Status FailWithoutJudgedLaunch(const FallbackState& state) {
  return absl::FailedPreconditionError(absl::StrCat("the ATen fallback of task ",
                                                    state.task.digest(),
                                                    " has not been through the judge"));
}

}  // namespace

absl::StatusOr<sandbox::RunnableCandidate> LoadFallback(const gpu::Device& device,
                                                        const v1::KernelTask& task) {
  FORGE_RETURN_IF_ERROR(codegen::PlanAtenFallback(task).status());
  auto state = std::make_shared<FallbackState>();
  state->device = &device;
  state->task = task;
  sandbox::RunnableCandidate runnable;
  runnable.launch = [state](gpu::Stream& stream, absl::Span<const CUdeviceptr> args) {
    return JudgeLaunch(*state, stream, args);
  };
  runnable.timed_launch = [state](gpu::Stream& stream) {
    if (state->baseline == nullptr) return FailWithoutJudgedLaunch(*state);
    return state->baseline->Launch(stream.handle());
  };
  runnable.before_recheck = [state](gpu::Stream& stream) {
    if (state->baseline == nullptr) return FailWithoutJudgedLaunch(*state);
    return state->baseline->CopyOutputsTo(state->output_buffers, stream.handle());
  };
  runnable.unsupported_reason = [state] { return state->unsupported; };
  return runnable;
}

}  // namespace forge::aten
