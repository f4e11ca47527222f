#include "worker/judge/judge.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/status/status_macros.h"
#include "worker/judge/device_inputs.h"
#include "worker/judge/guard.h"

namespace forge::judge {
namespace {

using forge::v1::FailureReason;
using forge::v1::KernelTask;

constexpr double kSpeedupLimit = 10.0;
// Where adversarial draws' DrawKey indices begin (DrawKeyIndex).
constexpr int kAdversarialKeyBase = 1 << 20;

// Eager's values of output `o` for the device comparison: null without them, and where eager is
// not accurate enough to widen the tolerance (EagerAccurateEnough), as CompareOutput decides.
const gpu::DeviceBuffer* TrustedNative(const std::vector<gpu::DeviceBuffer>& native, int o,
                                       const EagerError& eager) {
  if (native.empty() || !EagerAccurateEnough(eager.rel_norm)) return nullptr;
  return &native[o];
}

absl::Status FillWithPoison(gpu::DeviceBuffer& buffer, const Poison& poison,
                            gpu::Stream& stream) {
  switch (poison.word_bytes) {
    case 4:
      return buffer.Fill32(poison.word, stream);
    case 2:
      return buffer.Fill16(static_cast<uint16_t>(poison.word), stream);
    default:
      return buffer.Fill8(static_cast<uint8_t>(poison.word), stream);
  }
}

// value(i) for every i in [0, count), computed in chunks on `pool`.
template <typename Value>
std::vector<double> MapElements(ThreadPool& pool, size_t count, const Value& value) {
  std::vector<double> values(count);
  pool.ForEachChunk(static_cast<int64_t>(count), [&](int64_t, int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) values[i] = value(i);
  });
  return values;
}

std::vector<double> Centered(absl::Span<const double> values, ThreadPool& pool) {
  const double mean = Mean(values, pool);
  return MapElements(pool, values.size(), [&](int64_t i) { return values[i] - mean; });
}

std::vector<double> Rounded(forge::v1::DType dtype, absl::Span<const double> values,
                            ThreadPool& pool) {
  return MapElements(pool, values.size(),
                     [&](int64_t i) { return RoundToDType(dtype, values[i]); });
}

std::vector<double> Difference(absl::Span<const double> a, absl::Span<const double> b,
                               ThreadPool& pool) {
  return MapElements(pool, a.size(), [&](int64_t i) {
    return static_cast<size_t>(i) < b.size() ? a[i] - b[i] : 0;
  });
}

// Copies `from` into `to` (as large) in chunks on `pool`: one thread does not fill page-locked
// memory as fast as the bus drains it.
void CopyBytes(absl::Span<const std::byte> from, absl::Span<std::byte> to, ThreadPool& pool) {
  pool.ForEachChunk(static_cast<int64_t>(from.size()), [&](int64_t, int64_t begin, int64_t end) {
    std::memcpy(to.data() + begin, from.data() + begin, end - begin);
  });
}

// Uploads `host` into `buffer` so that work enqueued on `stream` afterwards reads it: from pageable
// memory as a copy ordered on `stream` (a blocking cuMemcpyHtoD may return before the data lands,
// and the judge's stream does not wait for it); through a page-locked staging buffer, when
// `staging` has them, as a blocking copy, complete when it returns (the staging buffer is reused
// right after).
absl::Status Upload(absl::Span<const std::byte> host, gpu::DeviceBuffer& buffer,
                    HostStaging& staging, ThreadPool& pool, gpu::Stream& stream) {
  if (!staging.page_locked()) return buffer.CopyFromHostAsync(host.data(), host.size(), stream);
  HostStaging::Buffer staged = staging.Acquire(host.size());
  CopyBytes(host, staged.span(), pool);
  return buffer.CopyFromHost(staged.data(), staged.size());
}

// The first element of an input that differs on the device from its pristine host copy, read
// back through `staging`: a description of the change, or nothing when it is unchanged.
struct InputChange {
  int64_t index = 0;
  double after = 0;  // the element as the device holds it now
};
absl::StatusOr<std::optional<InputChange>> ChangedInput(const HostTensor& input,
                                                        const gpu::DeviceBuffer& buffer,
                                                        HostStaging& staging, ThreadPool& pool) {
  HostStaging::Buffer now = staging.Acquire(input.storage.size());
  FORGE_RETURN_IF_ERROR(buffer.CopyToHost(now.data(), now.size()));
  std::optional<int64_t> changed =
      FirstChangedElement(input.spec, input.storage, now.bytes(), pool);
  if (!changed) return std::optional<InputChange>();
  const int element_bytes = *ElementBytes(input.spec.dtype());
  return std::optional<InputChange>(InputChange{
      *changed, DecodeElement(input.spec.dtype(),
                              now.data() + StorageOffsetOf(input.spec, *changed) * element_bytes)});
}

bool IsReducedPrecisionFloat(forge::v1::DType dtype) {
  return dtype == forge::v1::DTYPE_FLOAT16 || dtype == forge::v1::DTYPE_BFLOAT16 ||
         dtype == forge::v1::DTYPE_FLOAT8_E4M3FN || dtype == forge::v1::DTYPE_FLOAT8_E5M2;
}

// Whether eager rounds anything below float32: an input, an output or an intermediate value.
bool HasReducedPrecisionFloat(const KernelTask& task) {
  for (const auto* specs : {&task.inputs(), &task.outputs()}) {
    for (const forge::v1::TensorSpec& spec : *specs) {
      if (IsReducedPrecisionFloat(spec.dtype())) return true;
    }
  }
  for (const forge::v1::Value& value : task.group().values()) {
    if (IsReducedPrecisionFloat(value.tensor().dtype())) return true;
  }
  return false;
}

// What the device's comparison found, when the host (reading its own copy of the references)
// could not place it.
std::string DescribeDeviceFailure(const OutputComparison& comparison) {
  return absl::StrFormat(
      "%d elements unwritten and %d outside the tolerance, relative-norm error %.3g, on the "
      "device",
      comparison.unwritten, comparison.mismatches, comparison.rel_norm_error);
}

// A modified input found by the device's byte comparison, where the host has no copy to place it.
std::string ModifiedOnDevice(const KernelTask& task, int input) {
  return absl::StrCat("the kernel modified input ", input, " (", DescribeSpec(task.inputs(input)),
                      "), as the device's byte comparison with its pristine copy found");
}

// What the device's comparison found, worded from its tallies alone (a draw made on the device
// has no host copy of its references): the counts, the first unwritten and the first mismatching
// element, the relative-norm error.
std::string DescribeDeviceTallies(const forge::v1::TensorSpec& spec,
                                  const OutputComparison& comparison,
                                  absl::Span<const ChunkTally> tallies) {
  int64_t first_unwritten = kNoElement;
  int64_t first_mismatch = kNoElement;
  for (const ChunkTally& tally : tallies) {
    first_unwritten = std::min<int64_t>(first_unwritten, tally.first_unwritten);
    first_mismatch = std::min<int64_t>(first_mismatch, tally.first_mismatch);
  }
  std::string where;
  if (first_unwritten != kNoElement) {
    absl::StrAppend(&where, "; first unwritten element ", first_unwritten, " ",
                    FormatIndex(Unravel(spec.shape(), first_unwritten)));
  }
  if (first_mismatch != kNoElement) {
    absl::StrAppend(&where, "; first element outside the tolerance ", first_mismatch, " ",
                    FormatIndex(Unravel(spec.shape(), first_mismatch)));
  }
  return absl::StrCat(DescribeDeviceFailure(comparison), where);
}

// The buffers of a launch in the order of its arguments: inputs, then outputs.
std::vector<gpu::DeviceBuffer*> LaunchBuffers(std::vector<gpu::DeviceBuffer>& inputs,
                                              std::vector<gpu::DeviceBuffer>& outputs) {
  std::vector<gpu::DeviceBuffer*> buffers;
  for (auto* group : {&inputs, &outputs}) {
    for (gpu::DeviceBuffer& buffer : *group) buffers.push_back(&buffer);
  }
  return buffers;
}

// Checks the guard zones ArmGuards wrote for `launch` around the launch's buffers: a description
// of the first that changed (an out-of-bounds write), or nothing. Synchronizes `stream`.
absl::StatusOr<std::optional<std::string>> ChangedGuard(const KernelTask& task, uint64_t seed,
                                                        int64_t launch,
                                                        std::vector<gpu::DeviceBuffer>& inputs,
                                                        std::vector<gpu::DeviceBuffer>& outputs,
                                                        gpu::Stream& stream) {
  FORGE_ASSIGN_OR_RETURN(std::optional<GuardBreach> breach,
                         CheckGuards(seed, launch, LaunchBuffers(inputs, outputs), stream));
  if (!breach) return std::optional<std::string>();
  const bool input = breach->buffer < task.inputs_size();
  const int index = input ? breach->buffer : breach->buffer - task.inputs_size();
  const std::string name =
      absl::StrCat(input ? "input " : "output ", index, " (",
                   DescribeSpec(input ? task.inputs(index) : task.outputs(index)), ")");
  return std::optional<std::string>(DescribeGuardChange(name, breach->offset));
}

FailureReason ReasonForCudaError(const absl::Status& status) {
  return status.code() == absl::StatusCode::kResourceExhausted
             ? forge::v1::FAILURE_REASON_RESOURCE_LIMIT
             : forge::v1::FAILURE_REASON_CRASH;
}

}  // namespace

absl::StatusOr<CandidateLaunch> LoadGeneratedKernel(const gpu::Device& device,
                                                    absl::string_view cubin,
                                                    const codegen::GeneratedKernel& kernel) {
  struct Loaded {
    gpu::Module module;
    gpu::Kernel kernel;
  };
  FORGE_ASSIGN_OR_RETURN(gpu::Module module, device.LoadModule(cubin));
  FORGE_ASSIGN_OR_RETURN(gpu::Kernel function, module.GetKernel(kernel.kernel_name));
  auto loaded = std::make_shared<Loaded>(Loaded{std::move(module), std::move(function)});
  gpu::LaunchShape shape;
  for (int i = 0; i < 3; ++i) {
    shape.grid[i] = kernel.launch.grid[i];
    shape.block[i] = kernel.launch.block[i];
  }
  shape.dynamic_shared_bytes = kernel.launch.dynamic_shared_bytes;
  return CandidateLaunch([loaded, shape](gpu::Stream& stream, absl::Span<const CUdeviceptr> args) {
    // The driver wants a pointer to each parameter's value.
    std::vector<void*> parameters(args.size());
    for (size_t i = 0; i < args.size(); ++i) parameters[i] = const_cast<CUdeviceptr*>(&args[i]);
    return loaded->kernel.Launch(shape, parameters, stream);
  });
}

// Splits a draw's wall time into the judge's stages: Lap(stage) adds the time since the last lap.
class StageClock {
 public:
  void Lap(double& stage) {
    const absl::Time now = absl::Now();
    stage += absl::ToDoubleSeconds(now - last_);
    last_ = now;
  }

 private:
  absl::Time last_ = absl::Now();
};

// Runs the draws of one Judge() call.
class JudgeRunner {
 public:
  JudgeRunner(const gpu::Device& device, const KernelTask& task, CandidateLaunch launch,
              const ReferenceFn& reference, const JudgeOptions& options)
      : device_(device),
        task_(task),
        reference_(reference),
        options_(options),
        pool_(options.threads != nullptr ? *options.threads : ThreadPool::Default()) {
    result_ = std::unique_ptr<JudgedCandidate>(new JudgedCandidate());
    result_->device_ = &device;
    result_->task_ = task;
    result_->launch_ = std::move(launch);
    result_->tolerances_override_ = options.tolerances;
    result_->threads_ = &pool_;
    if (options.staging == nullptr) result_->own_staging_ = std::make_unique<HostStaging>();
    result_->staging_ =
        options.staging != nullptr ? options.staging : result_->own_staging_.get();
    staging_ = result_->staging_;
  }

  absl::StatusOr<std::unique_ptr<JudgedCandidate>> Run() {
    FORGE_RETURN_IF_ERROR(Validate());
    FORGE_ASSIGN_OR_RETURN(domains_, InputDomainsWith(task_, options_.integer_ranges));
    forge::v1::JudgeEvidence& evidence = result_->verdict_.evidence;
    evidence.set_passed(true);
    const Tolerances first = ToleranceFor(0);
    evidence.set_atol(first.atol);
    evidence.set_rtol(first.rtol);
    for (size_t i = 0; i < domains_.size(); ++i) {
      if (domains_[i].kind != InputDomain::Kind::kAny) {
        evidence.add_notes(absl::StrCat("input ", i, ": ", domains_[i].reason));
      } else if (!IsFloatingPoint(task_.inputs(i).dtype())) {
        evidence.add_notes(absl::StrCat("input ", i, " (", DescribeSpec(task_.inputs(i)),
                                        "): integers in [0, 16), its use not recognized"));
      }
    }
    adversarial_ = ChooseAdversarialDraws(task_, domains_);
    for (size_t j = 0; j < adversarial_.size(); ++j) {
      const int draw = options_.draws + static_cast<int>(j);
      evidence.add_notes(absl::StrCat("draw ", draw, ": ", DrawName(draw), " for ",
                                      adversarial_[j].reason));
    }
    widen_by_eager_ = reference_.native() != nullptr && HasReducedPrecisionFloat(task_);
    eager_errors_.assign(task_.outputs_size(), EagerError{});
    reference_rms_.assign(task_.outputs_size(), 0.0);
    FORGE_ASSIGN_OR_RETURN(gpu::Stream stream, device_.CreateStream());
    stream_.emplace(std::move(stream));
    // The standard draws, with the adversarial ones before the last standard draw: the last draw
    // run stays for the timer, which times standard inputs.
    std::vector<int> order;
    for (int draw = 0; draw + 1 < options_.draws; ++draw) order.push_back(draw);
    for (size_t j = 0; j < adversarial_.size(); ++j) {
      order.push_back(options_.draws + static_cast<int>(j));
    }
    order.push_back(options_.draws - 1);
    for (size_t run = 0; run < order.size(); ++run) {
      evidence.set_draws(static_cast<int>(run) + 1);
      // The last draw writes its inputs into the buffers of the draw before: a kernel that
      // remembers its results by address replays the earlier draw's and fails.
      reuse_buffers_ = run > 0 && run + 1 == order.size();
      if (reuse_buffers_) {
        evidence.add_notes(absl::StrCat("draw ", order[run], " ran in the buffers of draw ",
                                        order[run - 1], ", with its own inputs and draw ",
                                        order[run - 1], "'s answer in the outputs"));
      }
      FORGE_RETURN_IF_ERROR(RunDraw(order[run]));
      if (!evidence.passed()) break;
    }
    for (int o = 0; o < task_.outputs_size(); ++o) {
      if (std::string note = eager_errors_[o].Note(); !note.empty()) {
        evidence.add_notes(absl::StrCat(OutputName(o), ": ", note));
      }
      if (reference_rms_[o] > 1) {
        evidence.add_notes(absl::StrFormat(
            "%s: atol scaled by the reference's root mean square, up to %.3g (to %.3g)",
            OutputName(o), reference_rms_[o],
            ScaledToReference(ToleranceFor(o), reference_rms_[o]).atol));
      }
    }
    return std::move(result_);
  }

 private:
  absl::Status Validate() const {
    if (options_.draws < 3) {
      return absl::InvalidArgumentError(
          absl::StrCat("the judge needs at least 3 draws, JudgeOptions.draws is ", options_.draws));
    }
    if (task_.outputs_size() == 0) {
      return absl::InvalidArgumentError(absl::StrCat("task ", task_.digest(), " has no outputs"));
    }
    for (const auto* specs : {&task_.inputs(), &task_.outputs()}) {
      for (const forge::v1::TensorSpec& spec : *specs) {
        if (!ElementBytes(spec.dtype()).ok() || spec.dtype() == forge::v1::DTYPE_COMPLEX64) {
          return absl::UnimplementedError(absl::StrCat(
              "the judge does not handle tensors of ", DescribeSpec(spec), " (task ",
              task_.digest(), ")"));
        }
      }
    }
    return absl::OkStatus();
  }

  Tolerances ToleranceFor(int output) const {
    return options_.tolerances ? *options_.tolerances
                               : DefaultTolerances(task_.outputs(output).dtype());
  }

  void Fail(int draw, FailureReason reason, const std::string& detail) {
    JudgeVerdict& verdict = result_->verdict_;
    verdict.evidence.set_passed(false);
    verdict.evidence.set_failed_draw(draw);
    verdict.reason = reason;
    verdict.detail = absl::StrCat("draw ", draw, " (", DrawName(draw), "): ", detail);
    verdict.evidence.add_notes(verdict.detail);
  }

  void FailWithCudaError(int draw, const absl::Status& status) {
    Fail(draw, ReasonForCudaError(status), std::string(status.message()));
    result_->verdict_.context_lost = gpu::IsStickyError(status);
  }

  std::string OutputName(int output) const {
    return absl::StrCat("output ", output, " (", DescribeSpec(task_.outputs(output)), ")");
  }

  absl::Status RunDraw(int draw) {
    launch_ = next_launch_++;
    draw_poisons_.clear();
    JudgedCandidate& run = *result_;
    gpu::Stream& stream = *stream_;
    JudgeVerdict::StageSeconds& seconds = result_->verdict_.seconds;
    StageClock clock;
    // The draw's host inputs (and references) from the cache, or drawn here; fresh device
    // allocations for every draw, uploaded from the pristine host copy.
    std::optional<DrawKey> key;
    CachedDraw cached;
    if (options_.draw_cache != nullptr) {
      key = MakeDrawKey(task_, domains_, reference_.id(), widen_by_eager_, options_.seed,
                        DrawKeyIndex(draw));
      // A large task's draws live on the device: made there by its first candidate, found there
      // by the next ones. Where that path declines, the host path below judges the draw, with a
      // launch of its own.
      if (DrawsOnDevice()) {
        FORGE_ASSIGN_OR_RETURN(const bool judged, RunDrawMadeOnDevice(draw, *key));
        if (judged) return absl::OkStatus();
        // The host's variation checks across draws compare with draw 0's references on the host.
        if (draw > 0) FORGE_RETURN_IF_ERROR(HostFirstReferences());
        launch_ = next_launch_++;
        draw_poisons_.clear();
      }
      // A draw resident on the device is read from there, and checked there (DeviceDraws::Get).
      const bool resident =
          options_.device_draws != nullptr && options_.device_draws->Contains(*key);
      if (std::optional<CachedDraw> found = options_.draw_cache->Find(*key, !resident)) {
        cached = *found;
      }
    }
    if (cached.inputs == nullptr) {
      FORGE_ASSIGN_OR_RETURN(cached.inputs, DrawInputs(draw));
      if (key) options_.draw_cache->Insert(*key, cached);
    }
    clock.Lap(seconds.draw);
    if (std::shared_ptr<const DeviceDraw> resident = ResidentDraw(draw, key, cached)) {
      clock.Lap(seconds.upload);
      return RunDrawOnDevice(draw, cached, std::move(resident));
    }
    const std::vector<HostTensor>& inputs = *cached.inputs;
    std::vector<gpu::DeviceBuffer> input_buffers;
    std::vector<gpu::DeviceBuffer> output_buffers;
    std::vector<CUdeviceptr> args;
    for (size_t i = 0; i < inputs.size(); ++i) {
      const HostTensor& input = inputs[i];
      FORGE_ASSIGN_OR_RETURN(gpu::DeviceBuffer buffer,
                             ReusedOrAllocated(run.input_buffers_, i, input.storage.size()));
      FORGE_RETURN_IF_ERROR(Upload(input.storage, buffer, *staging_, pool_, stream));
      args.push_back(buffer.address());
      input_buffers.push_back(std::move(buffer));
    }
    // Where the outputs are read back to: staging buffers, whose contents are undefined until the
    // copies below fill them.
    std::vector<HostStaging::Buffer> outputs;
    for (int o = 0; o < task_.outputs_size(); ++o) {
      FORGE_ASSIGN_OR_RETURN(gpu::DeviceBuffer buffer, AllocatePoisonedOutput(o, stream));
      args.push_back(buffer.address());
      outputs.push_back(staging_->Acquire(buffer.size_bytes()));
      output_buffers.push_back(std::move(buffer));
    }
    FORGE_RETURN_IF_ERROR(
        ArmGuards(options_.seed, launch_, LaunchBuffers(input_buffers, output_buffers), stream));
    // With the device comparer, the stream-order and input checks compare fingerprints on the
    // device (two passes over each buffer) instead of reading every buffer back once more; the
    // host reads back only where they differ, and words the failure.
    DeviceComparer* comparer =
        options_.device_draws != nullptr ? &options_.device_draws->comparer() : nullptr;
    std::vector<uint64_t> uploaded;  // the inputs' fingerprints as uploaded
    if (comparer != nullptr) {
      FORGE_ASSIGN_OR_RETURN(uploaded, Fingerprints(*comparer, input_buffers));
    }
    clock.Lap(seconds.upload);

    // The candidate first; its outputs read in the order of its stream.
    FORGE_ASSIGN_OR_RETURN(const bool launched, LaunchCandidate(draw, args, output_buffers));
    if (!launched) return absl::OkStatus();
    for (int o = 0; o < task_.outputs_size(); ++o) {
      if (absl::Status copied =
              output_buffers[o].CopyToHostAsync(outputs[o].data(), outputs[o].size(), stream);
          !copied.ok()) {
        FailWithCudaError(draw, copied);
        return absl::OkStatus();
      }
    }
    // A CUDA error of a fingerprint pass after the launch is the candidate's.
    auto fingerprints_after_launch = [&](const std::vector<gpu::DeviceBuffer>& buffers) {
      absl::StatusOr<std::vector<uint64_t>> taken = Fingerprints(*comparer, buffers);
      if (!taken.ok()) FailWithCudaError(draw, taken.status());
      return taken;
    };
    std::vector<uint64_t> in_stream_order;  // the outputs' fingerprints, in stream order
    if (comparer != nullptr) {
      absl::StatusOr<std::vector<uint64_t>> taken = fingerprints_after_launch(output_buffers);
      if (!taken.ok()) return absl::OkStatus();
      in_stream_order = *std::move(taken);
    }
    if (!SynchronizeAll(draw)) return absl::OkStatus();
    if (!GuardsIntact(draw, input_buffers, output_buffers)) return absl::OkStatus();
    // With every stream idle, the outputs must read as they did in stream order.
    std::vector<uint64_t> settled_outputs;
    std::vector<uint64_t> inputs_now;
    if (comparer != nullptr) {
      absl::StatusOr<std::vector<uint64_t>> outputs_taken =
          fingerprints_after_launch(output_buffers);
      if (!outputs_taken.ok()) return absl::OkStatus();
      absl::StatusOr<std::vector<uint64_t>> inputs_taken = fingerprints_after_launch(input_buffers);
      if (!inputs_taken.ok()) return absl::OkStatus();
      settled_outputs = *std::move(outputs_taken);
      inputs_now = *std::move(inputs_taken);
    }
    for (int o = 0; o < task_.outputs_size(); ++o) {
      if (comparer != nullptr && settled_outputs[o] == in_stream_order[o]) continue;
      FORGE_ASSIGN_OR_RETURN(const bool settled,
                             SettledAsInStreamOrder(draw, o, outputs[o], output_buffers[o]));
      if (!settled) return absl::OkStatus();
      if (comparer != nullptr) {  // the bytes changed, though not where the host looked
        FailChangedAfterItsStream(draw, o);
        return absl::OkStatus();
      }
    }
    if (comparer == nullptr || inputs_now != uploaded) {
      FORGE_ASSIGN_OR_RETURN(std::optional<std::string> modified,
                             ModifiedInput(inputs, input_buffers));
      if (!modified && comparer != nullptr) {
        const size_t i =
            std::mismatch(inputs_now.begin(), inputs_now.end(), uploaded.begin()).first -
            inputs_now.begin();
        modified =
            absl::StrCat("the kernel modified input ", i, " (", DescribeSpec(task_.inputs(i)), ")");
      }
      if (modified) {
        Fail(draw, forge::v1::FAILURE_REASON_WRONG_RESULT, *modified);
        return absl::OkStatus();
      }
    }

    clock.Lap(seconds.candidate);

    // The reference second (or what it computed for an earlier candidate).
    if (cached.references == nullptr) {
      FORGE_ASSIGN_OR_RETURN(cached.references, References(inputs));
      if (key) options_.draw_cache->Insert(*key, cached);
    }
    NoteReferences(draw, cached.references);
    clock.Lap(seconds.reference);
    for (int o = 0; o < task_.outputs_size(); ++o) {
      FORGE_RETURN_IF_ERROR(CompareDraw(draw, o, outputs[o].bytes(), cached.references));
      if (!result_->verdict_.evidence.passed()) return absl::OkStatus();
    }
    clock.Lap(seconds.compare);
    if (draw == 0) first_outputs_ = std::move(outputs);

    // The last passing draw stays for the timer and the re-check; draw 0's inputs for the
    // re-check's run with fresh contents.
    if (draw == 0) {
      run.fresh_ = {cached.inputs, cached.references, nullptr, {}};
    }
    run.inputs_ = std::move(cached.inputs);
    run.references_ = std::move(cached.references);
    run.input_buffers_ = std::move(input_buffers);
    run.output_buffers_ = std::move(output_buffers);
    run.args_ = std::move(args);
    run.poisons_ = draw_poisons_;
    run.seed_ = options_.seed;
    run.guard_launch_ = launch_;
    run.next_launch_ = next_launch_;
    run.device_draw_ = nullptr;
    run.device_facts_.clear();
    return absl::OkStatus();
  }

  // The draw's resident device copy when the draw is judged on the device: device draws given,
  // its references computed for an earlier candidate, every output compared on the device, and
  // no output whose references call for the host's variation checks. Null otherwise (also when
  // the draw does not fit on the device).
  std::shared_ptr<const DeviceDraw> ResidentDraw(int draw, const std::optional<DrawKey>& key,
                                                 const CachedDraw& cached) {
    if (options_.device_draws == nullptr || !key || cached.references == nullptr) return nullptr;
    if (draw > 0 && first_references_ == nullptr) return nullptr;
    if (!options_.device_draws->WorthIt(TaskStorageBytes(task_))) return nullptr;
    const std::shared_ptr<const DrawReferences>& first =
        draw == 0 ? cached.references : first_references_;
    for (int o = 0; o < task_.outputs_size(); ++o) {
      if (!DeviceComparer::Handles(task_.outputs(o))) return nullptr;
      const ReferenceFacts facts =
          cached.references->Facts(o, task_.outputs(o).dtype(), ToleranceFor(o), first, pool_);
      if (facts.near_constant || facts.agrees_with_first_draw) return nullptr;
    }
    absl::StatusOr<std::shared_ptr<const DeviceDraw>> resident =
        options_.device_draws->Get(*key, cached, *stream_);
    return resident.ok() ? *std::move(resident) : nullptr;
  }

  // RunDraw on the device: the inputs copied from the resident pristine copies, the stream-order
  // and input checks as byte comparisons there, the outputs tallied there against the resident
  // references. The host looks again only where those found something, and words the failure.
  absl::Status RunDrawOnDevice(int draw, CachedDraw& cached,
                               std::shared_ptr<const DeviceDraw> resident) {
    StageClock clock;
    FORGE_ASSIGN_OR_RETURN(std::optional<DeviceRun> run,
                           RunCandidateOnDevice(draw, *resident, cached.inputs.get(), clock));
    if (!run) return absl::OkStatus();
    NoteReferences(draw, cached.references);
    std::vector<ReferenceFacts> facts;
    for (int o = 0; o < task_.outputs_size(); ++o) {
      facts.push_back(cached.references->Facts(o, task_.outputs(o).dtype(), ToleranceFor(o),
                                               first_references_, pool_));
    }
    clock.Lap(result_->verdict_.seconds.candidate);
    FORGE_RETURN_IF_ERROR(CompareOnDevice(draw, *resident, *run, facts, cached.references));
    clock.Lap(result_->verdict_.seconds.compare);
    if (!result_->verdict_.evidence.passed()) return absl::OkStatus();
    KeepDeviceRun(draw, std::move(cached.inputs), std::move(cached.references), std::move(*run),
                  std::move(resident), {});
    return absl::OkStatus();
  }

  // Whether the task's draws are made on the device when no candidate made them before: device
  // draws with an input drawer, a reference over device memory, a task large enough, every output
  // compared there and every input laid out as the drawer can write it.
  bool DrawsOnDevice() const {
    if (options_.device_draws == nullptr || options_.device_draws->inputs() == nullptr ||
        reference_.device() == nullptr || options_.draw_cache == nullptr ||
        !options_.device_draws->WorthIt(TaskStorageBytes(task_))) {
      return false;
    }
    for (int o = 0; o < task_.outputs_size(); ++o) {
      if (!DeviceComparer::Handles(task_.outputs(o))) return false;
    }
    for (int i = 0; i < task_.inputs_size(); ++i) {
      if (!DrawLayoutOf(task_.inputs(i)).ok()) return false;
    }
    return true;
  }

  // RunDraw for a draw that lives on the device alone: found resident (an earlier candidate made
  // it), or made now: the inputs drawn there (bit for bit the host's draw), the candidate run and
  // checked there, then the references computed there from the pristine inputs, their facts
  // taken there, and the comparison made there. Nothing of the tensors crosses the bus. False
  // when the host path must judge the draw instead: the draw was uploaded from the host, the
  // device could not draw or compute it (no room, an op without a float64 CUDA kernel), draw 0
  // was judged on the host, or an output's references call for the host's variation checks.
  absl::StatusOr<bool> RunDrawMadeOnDevice(int draw, const DrawKey& key) {
    if (draw > 0 && first_device_draw_ == nullptr) return false;
    DeviceDraws& draws = *options_.device_draws;
    gpu::Stream& stream = *stream_;
    JudgeVerdict::StageSeconds& seconds = result_->verdict_.seconds;
    StageClock clock;
    absl::StatusOr<std::shared_ptr<const DeviceDraw>> found = draws.Find(key, stream);
    if (!found.ok() && !absl::IsNotFound(found.status())) return found.status();
    std::shared_ptr<const DeviceDraw> resident = found.ok() ? *std::move(found) : nullptr;
    if (resident != nullptr && !resident->made_on_device()) return false;
    std::shared_ptr<DeviceDraw> made;
    if (resident == nullptr) {
      absl::StatusOr<std::shared_ptr<DeviceDraw>> drawn = DrawInputsOnDevice(draw);
      if (!drawn.ok()) return false;
      made = *std::move(drawn);
    }
    clock.Lap(seconds.draw);
    FORGE_ASSIGN_OR_RETURN(
        std::optional<DeviceRun> run,
        RunCandidateOnDevice(draw, resident != nullptr ? *resident : *made, nullptr, clock));
    if (!run) return true;  // the candidate failed: recorded
    clock.Lap(seconds.candidate);
    // The reference second. Where the host path takes over from here on, the candidate runs
    // again there, in fresh poisoned buffers (this run's are dropped, never reused), and the draw
    // is not counted as judged on the device.
    auto decline = [this] {
      --result_->verdict_.draws_on_device;
      return false;
    };
    if (made != nullptr) {
      if (!ReferencesOnDevice(draw, *made)) return decline();
      if (absl::Status kept = draws.Insert(key, made, stream);
          !kept.ok() && !absl::IsResourceExhausted(kept)) {
        return kept;
      }
      resident = std::move(made);
    }
    std::vector<ReferenceFacts> facts;
    for (int o = 0; o < task_.outputs_size(); ++o) {
      absl::StatusOr<ReferenceFacts> output_facts = DeviceFacts(draw, *resident, o);
      if (!output_facts.ok()) return decline();
      // The variation checks run on the host, over references it has.
      if (output_facts->near_constant || output_facts->agrees_with_first_draw) return decline();
      facts.push_back(*output_facts);
    }
    clock.Lap(seconds.reference);
    if (draw == 0) first_device_draw_ = resident;
    NoteNativeUnavailable(resident->native_unavailable);
    FORGE_RETURN_IF_ERROR(CompareOnDevice(draw, *resident, *run, facts, nullptr));
    clock.Lap(seconds.compare);
    if (!result_->verdict_.evidence.passed()) return true;
    KeepDeviceRun(draw, nullptr, nullptr, std::move(*run), std::move(resident), std::move(facts));
    return true;
  }

  // Draw 0's references on the host, for a later draw the host judges after draw 0 was made on
  // the device (which left the host none): its inputs drawn again on the host (the same bits) and
  // its references computed there. Draw 0's outputs are read from their device copies
  // (FirstOutput).
  absl::Status HostFirstReferences() {
    if (first_references_ != nullptr) return absl::OkStatus();
    FORGE_ASSIGN_OR_RETURN(std::shared_ptr<const std::vector<HostTensor>> inputs, DrawInputs(0));
    FORGE_ASSIGN_OR_RETURN(first_references_, References(*inputs));
    return absl::OkStatus();
  }

  // The draw's pristine inputs drawn on the device (DeviceInputs, the host's DrawRules), without
  // references yet.
  absl::StatusOr<std::shared_ptr<DeviceDraw>> DrawInputsOnDevice(int draw) {
    FORGE_ASSIGN_OR_RETURN(const std::vector<DrawRule> rules, DrawRules(draw));
    auto made = std::make_shared<DeviceDraw>();
    for (int i = 0; i < task_.inputs_size(); ++i) {
      FORGE_ASSIGN_OR_RETURN(const size_t bytes, StorageBytes(task_.inputs(i)));
      FORGE_ASSIGN_OR_RETURN(gpu::DeviceBuffer buffer, device_.Allocate(bytes));
      FORGE_RETURN_IF_ERROR(
          options_.device_draws->inputs()->Draw(task_.inputs(i), rules[i], buffer, *stream_));
      made->inputs.push_back(std::move(buffer));
    }
    FORGE_RETURN_IF_ERROR(stream_->Synchronize());
    return made;
  }

  // The references of a draw made on the device, computed there from its pristine inputs into
  // buffers of its own (float64, and eager's values when the tolerance is widened by them), with
  // each output's facts. False when the float64 reference or the facts cannot be computed there
  // (the host path then computes them); eager's failing only leaves the tolerance as it is
  // (native_unavailable).
  bool ReferencesOnDevice(int draw, DeviceDraw& made) {
    const DeviceReference& reference = *reference_.device();
    std::vector<CUdeviceptr> inputs;
    for (const gpu::DeviceBuffer& input : made.inputs) inputs.push_back(input.address());
    auto allocate = [&](std::vector<gpu::DeviceBuffer>& buffers) {
      for (int o = 0; o < task_.outputs_size(); ++o) {
        absl::StatusOr<gpu::DeviceBuffer> buffer =
            device_.Allocate(ElementCount(task_.outputs(o)) * sizeof(double));
        if (!buffer.ok()) return false;
        buffers.push_back(*std::move(buffer));
      }
      return true;
    };
    auto addresses = [](const std::vector<gpu::DeviceBuffer>& buffers) {
      std::vector<CUdeviceptr> addresses;
      for (const gpu::DeviceBuffer& buffer : buffers) addresses.push_back(buffer.address());
      return addresses;
    };
    if (!allocate(made.float64) ||
        !reference.run(task_, inputs, /*float64=*/true, addresses(made.float64)).ok()) {
      return false;
    }
    if (widen_by_eager_) {
      absl::Status native =
          allocate(made.native)
              ? reference.run(task_, inputs, /*float64=*/false, addresses(made.native))
              : absl::ResourceExhaustedError("no device memory for eager's values");
      if (!native.ok()) {
        made.native.clear();
        made.native_unavailable = std::string(native.message());
      }
    }
    for (int o = 0; o < task_.outputs_size(); ++o) {
      absl::StatusOr<ReferenceFacts> facts = ComputeDeviceFacts(draw, made, o);
      if (!facts.ok()) return false;
      made.facts.push_back(*facts);
      made.facts_tolerances.push_back(ToleranceFor(o));
    }
    return true;
  }

  // The facts of output `o` of a draw made on the device, computed there (against draw 0's
  // float64 values for a later draw).
  absl::StatusOr<ReferenceFacts> ComputeDeviceFacts(int draw, const DeviceDraw& made, int o) {
    const CUdeviceptr first =
        draw > 0 && first_device_draw_ != nullptr ? first_device_draw_->float64[o].address() : 0;
    return reference_.device()->facts(
        made.float64[o].address(), made.native.empty() ? 0 : made.native[o].address(), first,
        ElementCount(task_.outputs(o)), ToleranceFor(o),
        OverflowThreshold(task_.outputs(o).dtype()));
  }

  // The facts of output `o` of a resident draw made on the device: those it keeps when they were
  // taken under this judge's tolerance, else computed again.
  absl::StatusOr<ReferenceFacts> DeviceFacts(int draw, const DeviceDraw& resident, int o) {
    const Tolerances tolerances = ToleranceFor(o);
    const Tolerances& kept = resident.facts_tolerances[o];
    if (kept.atol == tolerances.atol && kept.rtol == tolerances.rtol &&
        kept.rel_norm == tolerances.rel_norm) {
      return resident.facts[o];
    }
    return ComputeDeviceFacts(draw, resident, o);
  }

  // A candidate's buffers for one draw judged on the device.
  struct DeviceRun {
    std::vector<gpu::DeviceBuffer> input_buffers;
    std::vector<gpu::DeviceBuffer> output_buffers;
    std::vector<gpu::DeviceBuffer> stream_ordered;  // the outputs as copied in stream order
    std::vector<CUdeviceptr> args;
  };

  // The candidate's run on a resident draw: its inputs copied from the pristine ones, outputs
  // poisoned, guards armed, the launch, then the stream-order, guard and input checks as byte
  // comparisons on the device. Nothing when the candidate failed (recorded); the host words an
  // input change from `host_inputs` where it has them.
  absl::StatusOr<std::optional<DeviceRun>> RunCandidateOnDevice(
      int draw, const DeviceDraw& resident, const std::vector<HostTensor>* host_inputs,
      StageClock& clock) {
    ++result_->verdict_.draws_on_device;
    JudgedCandidate& candidate = *result_;
    gpu::Stream& stream = *stream_;
    DeviceComparer& comparer = options_.device_draws->comparer();
    JudgeVerdict::StageSeconds& seconds = result_->verdict_.seconds;
    DeviceRun run;
    for (size_t i = 0; i < resident.inputs.size(); ++i) {
      const gpu::DeviceBuffer& pristine = resident.inputs[i];
      FORGE_ASSIGN_OR_RETURN(gpu::DeviceBuffer buffer,
                             ReusedOrAllocated(candidate.input_buffers_, i, pristine.size_bytes()));
      FORGE_RETURN_IF_ERROR(buffer.CopyFromDeviceAsync(pristine, stream));
      run.args.push_back(buffer.address());
      run.input_buffers.push_back(std::move(buffer));
    }
    for (int o = 0; o < task_.outputs_size(); ++o) {
      FORGE_ASSIGN_OR_RETURN(gpu::DeviceBuffer buffer, AllocatePoisonedOutput(o, stream));
      FORGE_ASSIGN_OR_RETURN(gpu::DeviceBuffer copy, device_.Allocate(buffer.size_bytes()));
      run.args.push_back(buffer.address());
      run.output_buffers.push_back(std::move(buffer));
      run.stream_ordered.push_back(std::move(copy));
    }
    FORGE_RETURN_IF_ERROR(ArmGuards(options_.seed, launch_,
                                    LaunchBuffers(run.input_buffers, run.output_buffers), stream));
    clock.Lap(seconds.upload);

    FORGE_ASSIGN_OR_RETURN(const bool launched,
                           LaunchCandidate(draw, run.args, run.output_buffers));
    if (!launched) return std::nullopt;
    for (int o = 0; o < task_.outputs_size(); ++o) {
      if (absl::Status copied =
              run.stream_ordered[o].CopyFromDeviceAsync(run.output_buffers[o], stream);
          !copied.ok()) {
        FailWithCudaError(draw, copied);
        return std::nullopt;
      }
    }
    if (!SynchronizeAll(draw)) return std::nullopt;
    if (!GuardsIntact(draw, run.input_buffers, run.output_buffers)) return std::nullopt;
    // A CUDA error of the checks below comes from a context the candidate broke.
    auto failed_on_device = [&](const absl::Status& status) {
      if (status.ok()) return false;
      FailWithCudaError(draw, status);
      return true;
    };
    for (int o = 0; o < task_.outputs_size(); ++o) {
      absl::StatusOr<bool> same = comparer.Equal(run.stream_ordered[o], run.output_buffers[o],
                                                 run.output_buffers[o].size_bytes(), stream);
      if (failed_on_device(same.status())) return std::nullopt;
      if (*same) continue;
      HostStaging::Buffer in_order = staging_->Acquire(run.stream_ordered[o].size_bytes());
      FORGE_RETURN_IF_ERROR(run.stream_ordered[o].CopyToHost(in_order.data(), in_order.size()));
      FORGE_ASSIGN_OR_RETURN(const bool settled,
                             SettledAsInStreamOrder(draw, o, in_order, run.output_buffers[o]));
      if (settled) FailChangedAfterItsStream(draw, o);  // not where the host looked
      return std::nullopt;
    }
    for (size_t i = 0; i < run.input_buffers.size(); ++i) {
      absl::StatusOr<bool> same = comparer.Equal(resident.inputs[i], run.input_buffers[i],
                                                 run.input_buffers[i].size_bytes(), stream);
      if (failed_on_device(same.status())) return std::nullopt;
      if (*same) continue;
      std::optional<std::string> modified;
      if (host_inputs != nullptr) {
        FORGE_ASSIGN_OR_RETURN(modified, ModifiedInput(*host_inputs, run.input_buffers));
      }
      Fail(draw, forge::v1::FAILURE_REASON_WRONG_RESULT,
           modified ? *modified : ModifiedOnDevice(task_, static_cast<int>(i)));
      return std::nullopt;
    }
    return run;
  }

  // Compares the outputs of `run` with the resident references, on the device, under `facts`
  // (one per output). What the device finds wrong the host words: from `references`, its own
  // copy, when it has one; else from the device's tallies.
  absl::Status CompareOnDevice(int draw, const DeviceDraw& resident, DeviceRun& run,
                               const std::vector<ReferenceFacts>& facts,
                               const std::shared_ptr<const DrawReferences>& references) {
    DeviceComparer& comparer = options_.device_draws->comparer();
    for (int o = 0; o < task_.outputs_size(); ++o) {
      const Tolerances tolerances = ToleranceFor(o);
      absl::StatusOr<std::vector<ChunkTally>> tallies = comparer.CompareChunks(
          task_.outputs(o), run.output_buffers[o], resident.float64[o],
          TrustedNative(resident.native, o, facts[o].eager),
          ScaledToReference(tolerances, facts[o].rms), *stream_, draw_poisons_[o]);
      if (!tallies.ok()) {
        FailWithCudaError(draw, tallies.status());
        return absl::OkStatus();
      }
      const double rel_norm_bound =
          resident.native.empty() ? tolerances.rel_norm
                                  : WidenedRelNormBound(tolerances, facts[o].eager.rel_norm);
      const OutputComparison comparison =
          SummarizeTallies(*tallies, ElementCount(task_.outputs(o)), rel_norm_bound);
      if (comparison.passed) {
        eager_errors_[o].Merge(facts[o].eager);
        reference_rms_[o] = std::max(reference_rms_[o], facts[o].rms);
        FORGE_RETURN_IF_ERROR(RecordComparison(draw, o, comparison));
        continue;
      }
      if (references == nullptr) {
        Fail(draw,
             comparison.unwritten > 0 ? forge::v1::FAILURE_REASON_UNWRITTEN_OUTPUT
                                      : forge::v1::FAILURE_REASON_WRONG_RESULT,
             absl::StrCat(OutputName(o), ": ",
                          DescribeDeviceTallies(task_.outputs(o), comparison, *tallies)));
        return absl::OkStatus();
      }
      HostStaging::Buffer output = staging_->Acquire(run.output_buffers[o].size_bytes());
      FORGE_RETURN_IF_ERROR(run.output_buffers[o].CopyToHost(output.data(), output.size()));
      FORGE_RETURN_IF_ERROR(CompareDraw(draw, o, output.bytes(), references));
      if (result_->verdict_.evidence.passed()) {  // the device's references are the checked ones
        Fail(draw,
             comparison.unwritten > 0 ? forge::v1::FAILURE_REASON_UNWRITTEN_OUTPUT
                                      : forge::v1::FAILURE_REASON_WRONG_RESULT,
             absl::StrCat(OutputName(o), ": ", DescribeDeviceFailure(comparison)));
      }
      return absl::OkStatus();
    }
    return absl::OkStatus();
  }

  // Keeps a draw judged on the device for the timer and the re-check (the last one that passed),
  // and draw 0's for the re-check's run with fresh contents.
  void KeepDeviceRun(int draw, std::shared_ptr<const std::vector<HostTensor>> inputs,
                     std::shared_ptr<const DrawReferences> references, DeviceRun run,
                     std::shared_ptr<const DeviceDraw> resident,
                     std::vector<ReferenceFacts> device_facts) {
    JudgedCandidate& candidate = *result_;
    if (draw == 0) {
      first_output_copies_ = std::move(run.stream_ordered);
      candidate.fresh_ = {inputs, references, resident, device_facts};
    }
    candidate.device_facts_ = std::move(device_facts);
    candidate.inputs_ = std::move(inputs);
    candidate.references_ = std::move(references);
    candidate.input_buffers_ = std::move(run.input_buffers);
    candidate.output_buffers_ = std::move(run.output_buffers);
    candidate.args_ = std::move(run.args);
    candidate.poisons_ = draw_poisons_;
    candidate.seed_ = options_.seed;
    candidate.guard_launch_ = launch_;
    candidate.next_launch_ = next_launch_;
    candidate.device_draw_ = std::move(resident);
    candidate.device_draws_ = options_.device_draws;
  }

  // Buffer `index` of the draw before (`previous`, the candidate's) when this draw reuses its
  // buffers and it has that size (then `*reused` is set when given); a new allocation otherwise.
  absl::StatusOr<gpu::DeviceBuffer> ReusedOrAllocated(std::vector<gpu::DeviceBuffer>& previous,
                                                      size_t index, size_t bytes,
                                                      bool* reused = nullptr) {
    if (reuse_buffers_ && index < previous.size() && previous[index].size_bytes() == bytes) {
      if (reused != nullptr) *reused = true;
      return std::move(previous[index]);
    }
    return device_.AllocateGuarded(bytes, kGuardBytes);
  }

  // Output `o` of this draw's launch, filled with the launch's poison (ChoosePoison, kept in
  // draw_poisons_ for the comparisons), or, when it is the previous draw's buffer, holding that
  // draw's correct answer: a kernel that leaves elements as it found them fails where the answers
  // differ.
  absl::StatusOr<gpu::DeviceBuffer> AllocatePoisonedOutput(int o, gpu::Stream& stream) {
    FORGE_ASSIGN_OR_RETURN(const size_t bytes, StorageBytes(task_.outputs(o)));
    bool reused = false;
    FORGE_ASSIGN_OR_RETURN(gpu::DeviceBuffer buffer,
                           ReusedOrAllocated(result_->output_buffers_, o, bytes, &reused));
    const Poison poison = ChoosePoison(task_.outputs(o).dtype(), options_.seed + o, launch_);
    if (!reused) FORGE_RETURN_IF_ERROR(FillWithPoison(buffer, poison, stream));
    draw_poisons_.push_back(poison);
    return buffer;
  }

  // Fails the draw: output `o` changed after its launch stream finished, as the device's
  // fingerprints or byte comparison found, though not where the host looked.
  void FailChangedAfterItsStream(int draw, int o) {
    Fail(draw, forge::v1::FAILURE_REASON_WRONG_RESULT,
         absl::StrCat(OutputName(o), " changed after its launch stream finished: the candidate ran "
                      "work outside the stream it was given"));
  }

  // One DeviceComparer::Fingerprint per buffer, on the judge's stream (synchronized).
  absl::StatusOr<std::vector<uint64_t>> Fingerprints(
      DeviceComparer& comparer, const std::vector<gpu::DeviceBuffer>& buffers) {
    std::vector<uint64_t> fingerprints;
    for (const gpu::DeviceBuffer& buffer : buffers) {
      FORGE_ASSIGN_OR_RETURN(const uint64_t fingerprint, comparer.Fingerprint(buffer, *stream_));
      fingerprints.push_back(fingerprint);
    }
    return fingerprints;
  }

  // What the outputs hold, to see whether they changed: a fingerprint each on the device
  // (DeviceComparer::Fingerprint) where the judge has its device comparer, their bytes read back
  // otherwise. Synchronizes the judge's stream.
  struct OutputContents {
    std::vector<uint64_t> fingerprints;
    std::vector<HostStaging::Buffer> bytes;
  };
  absl::StatusOr<OutputContents> ReadContents(const std::vector<gpu::DeviceBuffer>& outputs) {
    FORGE_RETURN_IF_ERROR(stream_->Synchronize());
    OutputContents contents;
    if (options_.device_draws != nullptr) {
      FORGE_ASSIGN_OR_RETURN(contents.fingerprints,
                             Fingerprints(options_.device_draws->comparer(), outputs));
      return contents;
    }
    for (const gpu::DeviceBuffer& output : outputs) {
      HostStaging::Buffer copy = staging_->Acquire(output.size_bytes());
      FORGE_RETURN_IF_ERROR(output.CopyToHost(copy.data(), copy.size()));
      contents.bytes.push_back(std::move(copy));
    }
    return contents;
  }

  // The first output whose contents differ between `before` and `after` (ReadContents), named;
  // nothing when none does.
  std::optional<std::string> ChangedOutput(const OutputContents& before,
                                           const OutputContents& after) {
    for (int o = 0; o < task_.outputs_size(); ++o) {
      if (!before.fingerprints.empty()) {
        if (before.fingerprints[o] != after.fingerprints[o]) return OutputName(o);
        continue;
      }
      if (std::optional<int64_t> changed = FirstChangedElement(
              task_.outputs(o), before.bytes[o].bytes(), after.bytes[o].bytes(), pool_)) {
        return absl::StrCat(OutputName(o), " (first at element ", *changed, ")");
      }
    }
    return std::nullopt;
  }

  // Enqueues the candidate's launch on the judge's stream. With JudgeOptions::capture_launches
  // the launch is captured into a CUDA graph first, so that none of what it enqueued on the
  // stream has run when the capture ends; the device is synchronized then, and the outputs must
  // hold what they held before the launch: work the candidate put on a stream of its own (which
  // ran during the capture) fails, however fast it is, and so does work forked from the stream
  // and never joined back (the capture ends unjoined). Then the graph runs on the stream. A launch
  // that fails or invalidates its capture is launched again uncaptured (noted once): a launch
  // error is then the candidate's. True when launched; false when the draw failed (recorded).
  absl::StatusOr<bool> LaunchCandidate(int draw, absl::Span<const CUdeviceptr> args,
                                       const std::vector<gpu::DeviceBuffer>& outputs) {
    gpu::Stream& stream = *stream_;
    auto launch_uncaptured = [&] {
      if (absl::Status launched = result_->launch_(stream, args); !launched.ok()) {
        FailWithCudaError(draw, launched);
        return false;
      }
      return true;
    };
    if (!options_.capture_launches) return launch_uncaptured();
    FORGE_ASSIGN_OR_RETURN(const OutputContents before, ReadContents(outputs));
    FORGE_RETURN_IF_ERROR(stream.BeginCapture());
    const absl::Status launched = result_->launch_(stream, args);
    absl::StatusOr<gpu::Graph> graph = stream.EndCapture();
    // Only work outside the stream can have run since: a CUDA error now is the candidate's.
    absl::Status synced = device_.Synchronize();
    absl::StatusOr<OutputContents> after =
        synced.ok() ? ReadContents(outputs) : absl::StatusOr<OutputContents>(synced);
    if (!after.ok()) {
      FailWithCudaError(draw, after.status());
      return false;
    }
    if (std::optional<std::string> changed = ChangedOutput(before, *after)) {
      Fail(draw, forge::v1::FAILURE_REASON_WRONG_RESULT,
           absl::StrCat(*changed,
                        " changed while its launch was held in a graph captured from "
                        "the judge's stream: the candidate ran work outside the stream it was "
                        "given"));
      return false;
    }
    if (launched.ok() && absl::IsFailedPrecondition(graph.status())) {
      Fail(draw, forge::v1::FAILURE_REASON_WRONG_RESULT,
           absl::StrCat("the candidate forked work from the stream it was given into another "
                        "and never joined it back: ",
                        graph.status().message()));
      return false;
    }
    if (!launched.ok() || !graph.ok()) {
      if (!noted_uncaptured_) {
        noted_uncaptured_ = true;
        result_->verdict_.evidence.add_notes(absl::StrCat(
            "the launch could not be captured into a graph (",
            (!launched.ok() ? launched : graph.status()).message(),
            "): it ran uncaptured, and work outside its stream is found only while it still "
            "runs when the outputs are read"));
      }
      return launch_uncaptured();
    }
    if (absl::Status ran = graph->Launch(stream); !ran.ok()) {
      FailWithCudaError(draw, ran);
      return false;
    }
    return true;
  }

  // Whether the guard zones of the draw's buffers hold what ArmGuards wrote before the launch;
  // fails the draw when not (OUT_OF_BOUNDS_WRITE), or on a CUDA error of the read-back (the
  // candidate broke the context).
  bool GuardsIntact(int draw, std::vector<gpu::DeviceBuffer>& inputs,
                    std::vector<gpu::DeviceBuffer>& outputs) {
    absl::StatusOr<std::optional<std::string>> changed =
        ChangedGuard(task_, options_.seed, launch_, inputs, outputs, *stream_);
    if (!changed.ok()) {
      FailWithCudaError(draw, changed.status());
      return false;
    }
    if (!*changed) return true;
    Fail(draw, forge::v1::FAILURE_REASON_OUT_OF_BOUNDS_WRITE, **changed);
    return false;
  }

  // Waits for the launch stream and then every stream of the device; false when that failed
  // (a CUDA error of the candidate's, recorded).
  bool SynchronizeAll(int draw) {
    for (absl::Status synced : {stream_->Synchronize(), device_.Synchronize()}) {
      if (!synced.ok()) {
        FailWithCudaError(draw, synced);
        return false;
      }
    }
    return true;
  }

  // Whether output `o`, read back once in stream order into `in_order`, reads the same now that
  // every stream is idle; fails the draw when it does not.
  absl::StatusOr<bool> SettledAsInStreamOrder(int draw, int o,
                                              const HostStaging::Buffer& in_order,
                                              const gpu::DeviceBuffer& output) {
    HostStaging::Buffer settled = staging_->Acquire(in_order.size());
    FORGE_RETURN_IF_ERROR(output.CopyToHost(settled.data(), settled.size()));
    std::optional<int64_t> changed =
        FirstChangedElement(task_.outputs(o), in_order.bytes(), settled.bytes(), pool_);
    if (!changed) return true;
    Fail(draw, forge::v1::FAILURE_REASON_WRONG_RESULT,
         absl::StrCat(OutputName(o), " changed after its launch stream finished (first at "
                      "element ", *changed, " ",
                      FormatIndex(Unravel(task_.outputs(o).shape(), *changed)),
                      "): the candidate ran work outside the stream it was given"));
    return false;
  }

  // Keeps draw 0's references, and notes a native reference that could not run.
  void NoteReferences(int draw, const std::shared_ptr<const DrawReferences>& references) {
    if (draw == 0) first_references_ = references;
    NoteNativeUnavailable(references->native_unavailable);
  }

  // Why eager's values could not be computed (empty: they were, or were not asked for): the
  // tolerance is not widened, and the evidence says so.
  void NoteNativeUnavailable(const std::string& why) {
    if (why.empty()) return;
    widen_by_eager_ = false;
    result_->verdict_.evidence.add_notes(
        absl::StrCat("native-precision reference unavailable, tolerance not widened: ", why));
  }

  absl::StatusOr<std::optional<std::string>> ModifiedInput(
      const std::vector<HostTensor>& inputs, const std::vector<gpu::DeviceBuffer>& buffers) {
    for (size_t i = 0; i < inputs.size(); ++i) {
      FORGE_ASSIGN_OR_RETURN(std::optional<InputChange> change,
                             ChangedInput(inputs[i], buffers[i], *staging_, pool_));
      if (change) {
        return std::optional<std::string>(absl::StrFormat(
            "the kernel modified input %d (%s): element %d %s was %.9g, is %.9g", i,
            DescribeSpec(inputs[i].spec), change->index,
            FormatIndex(Unravel(inputs[i].spec.shape(), change->index)),
            inputs[i].Get(change->index), change->after));
      }
    }
    return std::optional<std::string>();
  }

  // How each input of the draw is drawn (inputs.h): the same rules on the host and the device.
  absl::StatusOr<std::vector<DrawRule>> DrawRules(int draw) const {
    std::vector<DrawRule> rules;
    const AdversarialDraw* adversarial = Adversarial(draw);
    for (int i = 0; i < task_.inputs_size(); ++i) {
      const bool chosen =
          adversarial != nullptr && std::find(adversarial->inputs.begin(),
                                              adversarial->inputs.end(), i) !=
                                        adversarial->inputs.end();
      FORGE_ASSIGN_OR_RETURN(
          DrawRule rule,
          chosen ? AdversarialDrawRule(task_.inputs(i), domains_[i], adversarial->kind, draw, i,
                                       options_.seed)
                 : StandardDrawRule(task_.inputs(i), domains_[i], draw, i, options_.seed));
      rules.push_back(rule);
    }
    return rules;
  }

  absl::StatusOr<std::shared_ptr<const std::vector<HostTensor>>> DrawInputs(int draw) const {
    FORGE_ASSIGN_OR_RETURN(const std::vector<DrawRule> rules, DrawRules(draw));
    auto inputs = std::make_shared<std::vector<HostTensor>>();
    for (int i = 0; i < task_.inputs_size(); ++i) {
      FORGE_ASSIGN_OR_RETURN(HostTensor input, DrawTensor(task_.inputs(i), rules[i], pool_));
      inputs->push_back(std::move(input));
    }
    return inputs;
  }

  // The adversarial draw `draw` is; null for a standard draw.
  const AdversarialDraw* Adversarial(int draw) const {
    const int j = draw - options_.draws;
    return j >= 0 && j < static_cast<int>(adversarial_.size()) ? &adversarial_[j] : nullptr;
  }

  // "uniform(-2, 2)", "adversarial: large logits: normal(0, 1000)".
  std::string DrawName(int draw) const {
    const AdversarialDraw* adversarial = Adversarial(draw);
    return adversarial == nullptr
               ? DescribeDraw(draw)
               : absl::StrCat("adversarial: ", DescribeAdversarial(adversarial->kind));
  }

  // The draw's index in its DrawKey: adversarial draws apart from the standard draws of any
  // JudgeOptions::draws, by their distribution.
  int DrawKeyIndex(int draw) const {
    const AdversarialDraw* adversarial = Adversarial(draw);
    return adversarial == nullptr ? draw
                                  : kAdversarialKeyBase + static_cast<int>(adversarial->kind);
  }

  // The float64 reference of the draw and, when the tolerance is widened by eager's error, the
  // native one.
  absl::StatusOr<std::shared_ptr<const DrawReferences>> References(
      const std::vector<HostTensor>& inputs) const {
    auto references = std::make_shared<DrawReferences>();
    FORGE_ASSIGN_OR_RETURN(references->float64, Float64Reference(inputs));
    if (widen_by_eager_) {
      absl::StatusOr<std::vector<std::vector<double>>> natives = NativeReference(inputs);
      if (natives.ok()) {
        references->native = *std::move(natives);
      } else {
        references->native_unavailable = std::string(natives.status().message());
      }
    }
    return references;
  }

  absl::StatusOr<std::vector<std::vector<double>>> Float64Reference(
      const std::vector<HostTensor>& inputs) const {
    absl::StatusOr<std::vector<std::vector<double>>> references = reference_(task_, inputs);
    if (!references.ok()) {
      return Annotate(references.status(), absl::StrCat("reference of task ", task_.digest()));
    }
    if (static_cast<int>(references->size()) != task_.outputs_size()) {
      return absl::InternalError(absl::StrCat("the reference of task ", task_.digest(), " gave ",
                                              references->size(), " outputs, the task has ",
                                              task_.outputs_size()));
    }
    for (int o = 0; o < task_.outputs_size(); ++o) {
      if (static_cast<int64_t>((*references)[o].size()) != ElementCount(task_.outputs(o))) {
        return absl::InternalError(absl::StrCat(
            "the reference of task ", task_.digest(), " gave ", (*references)[o].size(),
            " elements for ", OutputName(o)));
      }
    }
    return references;
  }

  // Eager's outputs for the widened tolerance. A native run that fails (e.g. an op ATen's CPU
  // lacks in float8) only leaves the tolerance as it is (RunDraw).
  absl::StatusOr<std::vector<std::vector<double>>> NativeReference(
      const std::vector<HostTensor>& inputs) const {
    absl::StatusOr<std::vector<std::vector<double>>> natives = reference_.native()(task_, inputs);
    if (!natives.ok()) return natives.status();
    if (static_cast<int>(natives->size()) != task_.outputs_size()) {
      return absl::InternalError(absl::StrCat("it gave ", natives->size(),
                                              " outputs, the task has ", task_.outputs_size()));
    }
    for (int o = 0; o < task_.outputs_size(); ++o) {
      if (static_cast<int64_t>((*natives)[o].size()) != ElementCount(task_.outputs(o))) {
        return absl::InternalError(
            absl::StrCat("it gave ", (*natives)[o].size(), " elements for ", OutputName(o)));
      }
    }
    return natives;
  }

  // Compares output `o` of the draw, read back into `output`, with its references.
  absl::Status CompareDraw(int draw, int o, absl::Span<const std::byte> output,
                           const std::shared_ptr<const DrawReferences>& references) {
    const forge::v1::TensorSpec& spec = task_.outputs(o);
    const Tolerances tolerances = ToleranceFor(o);
    const std::vector<double>& reference = references->float64[o];
    const absl::Span<const double> native_reference =
        references->native.empty() ? absl::Span<const double>()
                                   : absl::Span<const double>(references->native[o]);
    const ReferenceFacts facts =
        references->Facts(o, spec.dtype(), tolerances, first_references_, pool_);
    eager_errors_[o].Merge(facts.eager);
    reference_rms_[o] = std::max(reference_rms_[o], facts.rms);
    FORGE_RETURN_IF_ERROR(RecordComparison(
        draw, o,
        CompareOutput(spec, output, reference, ScaledToReference(tolerances, facts.rms),
                      native_reference, pool_, draw_poisons_[o])));
    if (!result_->verdict_.evidence.passed()) return absl::OkStatus();

    // The candidate's values as doubles only where a variation is checked (rarely).
    forge::v1::JudgeEvidence& evidence = result_->verdict_.evidence;
    const forge::v1::DType dtype = spec.dtype();
    if (facts.near_constant) {
      std::vector<double> rounded_reference = Rounded(dtype, reference, pool_);
      VariationComparison variation =
          CompareVariation(Centered(DecodeElements(spec, output, pool_), pool_),
                           Centered(reference, pool_), Centered(rounded_reference, pool_), pool_);
      if (draw == 0) {
        evidence.add_notes(absl::StrCat(
            OutputName(o), ": reference near constant within the output",
            variation.representable ? "; the candidate must reproduce its variation"
                                    : "; its variation vanishes at the output's precision"));
      }
      if (!variation.passed) {
        Fail(draw, forge::v1::FAILURE_REASON_WRONG_RESULT,
             absl::StrFormat("%s: the reference is near constant and the candidate misses its "
                             "variation (error %.3g of the variation's norm; a constant output "
                             "has 1)",
                             OutputName(o), variation.relative_error));
        return absl::OkStatus();
      }
    }

    if (draw == 0 || !facts.agrees_with_first_draw) return absl::OkStatus();
    const std::vector<double>& first_reference = first_references_->float64[o];
    FORGE_ASSIGN_OR_RETURN(absl::Span<const std::byte> first_output, FirstOutput(o));
    VariationComparison variation = CompareVariation(
        Difference(DecodeElements(spec, output, pool_), DecodeElements(spec, first_output, pool_),
                   pool_),
        Difference(reference, first_reference, pool_),
        Difference(Rounded(dtype, reference, pool_), Rounded(dtype, first_reference, pool_),
                   pool_),
        pool_);
    if (!flagged_across_draws_.contains(o)) {
      flagged_across_draws_.insert(o);
      evidence.add_notes(absl::StrCat(
          OutputName(o), ": reference near constant across draws",
          variation.representable ? "; the candidate must change with it"
                                  : "; its change vanishes at the output's precision"));
    }
    if (!variation.passed) {
      Fail(draw, forge::v1::FAILURE_REASON_WRONG_RESULT,
           absl::StrFormat("%s: the reference barely changes between draws and the candidate "
                           "does not follow it (error %.3g of the change's norm; an output that "
                           "ignores its inputs has 1)",
                           OutputName(o), variation.relative_error));
    }
    return absl::OkStatus();
  }

  // Adds output `o`'s comparison in draw `draw` to the evidence, and fails the draw when it did
  // not pass.
  absl::Status RecordComparison(int draw, int o, const OutputComparison& comparison) {
    forge::v1::JudgeEvidence& evidence = result_->verdict_.evidence;
    if (comparison.element_count > 0 && comparison.nan_reference == comparison.element_count) {
      return absl::FailedPreconditionError(absl::StrCat(
          "the reference of task ", task_.digest(), " is NaN everywhere in ", OutputName(o),
          " for draw ", draw, " (", DrawName(draw), "): the drawn inputs are outside an op's "
          "domain"));
    }
    evidence.set_max_abs_error(std::max(evidence.max_abs_error(), comparison.max_abs_error));
    evidence.set_max_rel_error(std::max(evidence.max_rel_error(), comparison.max_rel_error));
    evidence.set_rel_norm_error(std::max(evidence.rel_norm_error(), comparison.rel_norm_error));
    if (!comparison.passed) {
      Fail(draw,
           comparison.unwritten > 0 ? forge::v1::FAILURE_REASON_UNWRITTEN_OUTPUT
                                    : forge::v1::FAILURE_REASON_WRONG_RESULT,
           absl::StrCat(OutputName(o), ": ", comparison.failure));
      return absl::OkStatus();
    }
    if (comparison.nan_reference > 0 && draw == 0) {
      evidence.add_notes(absl::StrCat(OutputName(o), ": reference NaN at ",
                                      comparison.nan_reference, " elements"));
    }
    return absl::OkStatus();
  }

  // Draw 0's output `o` as read back; read now from its device copy when draw 0 was judged on the
  // device.
  absl::StatusOr<absl::Span<const std::byte>> FirstOutput(int o) {
    if (first_outputs_.empty()) {
      for (const gpu::DeviceBuffer& copy : first_output_copies_) {
        HostStaging::Buffer output = staging_->Acquire(copy.size_bytes());
        FORGE_RETURN_IF_ERROR(copy.CopyToHost(output.data(), output.size()));
        first_outputs_.push_back(std::move(output));
      }
    }
    return first_outputs_[o].bytes();
  }

  const gpu::Device& device_;
  const KernelTask& task_;
  const ReferenceFn& reference_;
  const JudgeOptions& options_;
  ThreadPool& pool_;
  // Declared before first_outputs_, which is destroyed first: it may own the staging.
  std::unique_ptr<JudgedCandidate> result_;
  HostStaging* staging_ = nullptr;  // result_'s
  std::vector<InputDomain> domains_;
  std::vector<AdversarialDraw> adversarial_;  // draws options_.draws on
  // The launch of the draw being run (counted from 0 in the order run), the next one's, and the
  // poison each output of the draw was filled with.
  int64_t launch_ = 0;
  int64_t next_launch_ = 0;
  // Whether the draw being run reuses the buffers of the draw before (ReusedOrAllocated).
  bool reuse_buffers_ = false;
  // Whether the evidence says that a launch could not be captured (LaunchCandidate).
  bool noted_uncaptured_ = false;
  std::vector<Poison> draw_poisons_;
  std::optional<gpu::Stream> stream_;
  // Draw 0's outputs as read back, to see how later draws differ from it; when draw 0 was judged
  // on the device, its outputs' device copies until they are needed here.
  std::vector<HostStaging::Buffer> first_outputs_;
  std::vector<gpu::DeviceBuffer> first_output_copies_;
  std::shared_ptr<const DrawReferences> first_references_;
  // Draw 0 when it was made on the device (RunDrawMadeOnDevice): later draws' facts are taken
  // against its float64 references there.
  std::shared_ptr<const DeviceDraw> first_device_draw_;
  absl::flat_hash_set<int> flagged_across_draws_;
  // Whether eager's own error widens the tolerance (a native reference and reduced precision).
  bool widen_by_eager_ = false;
  std::vector<EagerError> eager_errors_;  // by output, over draws
  std::vector<double> reference_rms_;     // by output, the largest over draws
};

uint64_t ReferenceFn::NewId() {
  static std::atomic<uint64_t> next_id{1};
  return next_id.fetch_add(1, std::memory_order_relaxed);
}

absl::StatusOr<std::unique_ptr<JudgedCandidate>> Judge(const gpu::Device& device,
                                                       const KernelTask& task,
                                                       CandidateLaunch launch,
                                                       const ReferenceFn& reference,
                                                       const JudgeOptions& options) {
  return JudgeRunner(device, task, std::move(launch), reference, options).Run();
}

absl::Status JudgedCandidate::Launch(gpu::Stream& stream) {
  if (!verdict_.passed()) {
    return absl::FailedPreconditionError("only a candidate that passed the judge is timed");
  }
  return launch_(stream, args_);
}

absl::Status JudgedCandidate::PoisonOutputs(gpu::Stream& stream) {
  const int64_t launch = next_launch_++;
  for (int o = 0; o < static_cast<int>(output_buffers_.size()); ++o) {
    poisons_[o] = ChoosePoison(task_.outputs(o).dtype(), seed_ + o, launch);
    FORGE_RETURN_IF_ERROR(FillWithPoison(output_buffers_[o], poisons_[o], stream));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::optional<JudgedCandidate::Failure>> JudgedCandidate::CheckBuffers() {
  // With the draw resident on the device, the checks run there first; the host looks where they
  // found something.
  std::optional<gpu::Stream> stream;
  if (device_draw_ != nullptr) {
    FORGE_ASSIGN_OR_RETURN(gpu::Stream created, device_->CreateStream());
    stream.emplace(std::move(created));
  }
  {
    FORGE_ASSIGN_OR_RETURN(gpu::Stream guard_stream, device_->CreateStream());
    FORGE_ASSIGN_OR_RETURN(std::optional<std::string> changed,
                           ChangedGuard(task_, seed_, guard_launch_, input_buffers_,
                                        output_buffers_, guard_stream));
    if (changed) return Failure{forge::v1::FAILURE_REASON_OUT_OF_BOUNDS_WRITE, *changed};
  }
  // What the device finds wrong stays wrong when the host cannot place it: the device's copies
  // are the checked ones. A draw made on the device has no host copy at all (inputs_ and
  // references_ null): its checks run there alone.
  for (size_t i = 0; i < input_buffers_.size(); ++i) {
    bool changed_on_device = false;
    if (stream) {
      FORGE_ASSIGN_OR_RETURN(const bool same,
                             device_draws_->comparer().Equal(device_draw_->inputs[i],
                                                             input_buffers_[i],
                                                             input_buffers_[i].size_bytes(),
                                                             *stream));
      if (same) continue;
      changed_on_device = true;
    }
    if (inputs_ == nullptr) {
      return Failure{forge::v1::FAILURE_REASON_WRONG_RESULT,
                     ModifiedOnDevice(task_, static_cast<int>(i))};
    }
    FORGE_ASSIGN_OR_RETURN(std::optional<InputChange> change,
                           ChangedInput((*inputs_)[i], input_buffers_[i], *staging_, *threads_));
    if (change || changed_on_device) {
      return Failure{forge::v1::FAILURE_REASON_WRONG_RESULT,
                     absl::StrCat("the kernel modified input ", i, " (",
                                  DescribeSpec(task_.inputs(i)), ")",
                                  change ? absl::StrCat(" at element ", change->index) : "")};
    }
  }
  for (int o = 0; o < task_.outputs_size(); ++o) {
    const Tolerances base_tolerances =
        tolerances_override_.value_or(DefaultTolerances(task_.outputs(o).dtype()));
    const ReferenceFacts facts =
        references_ != nullptr
            ? references_->Facts(o, task_.outputs(o).dtype(), base_tolerances, nullptr, *threads_)
            : device_facts_[o];
    const Tolerances tolerances = ScaledToReference(base_tolerances, facts.rms);
    const bool has_native =
        references_ != nullptr ? !references_->native.empty() : !device_draw_->native.empty();
    std::optional<OutputComparison> device_comparison;
    if (stream) {
      FORGE_ASSIGN_OR_RETURN(
          const std::vector<ChunkTally> tallies,
          device_draws_->comparer().CompareChunks(
              task_.outputs(o), output_buffers_[o], device_draw_->float64[o],
              TrustedNative(device_draw_->native, o, facts.eager), tolerances, *stream,
              poisons_[o]));
      const double rel_norm_bound =
          has_native ? WidenedRelNormBound(tolerances, facts.eager.rel_norm) : tolerances.rel_norm;
      device_comparison = SummarizeTallies(tallies, ElementCount(task_.outputs(o)), rel_norm_bound);
      if (device_comparison->passed) continue;
      if (references_ == nullptr) {
        return Failure{device_comparison->unwritten > 0
                           ? forge::v1::FAILURE_REASON_UNWRITTEN_OUTPUT
                           : forge::v1::FAILURE_REASON_WRONG_RESULT,
                       absl::StrCat("output ", o, " (", DescribeSpec(task_.outputs(o)), "): ",
                                    DescribeDeviceTallies(task_.outputs(o), *device_comparison,
                                                          tallies))};
      }
    }
    const absl::Span<const double> native =
        references_->native.empty() ? absl::Span<const double>()
                                    : absl::Span<const double>(references_->native[o]);
    HostStaging::Buffer output = staging_->Acquire(output_buffers_[o].size_bytes());
    FORGE_RETURN_IF_ERROR(output_buffers_[o].CopyToHost(output.data(), output.size()));
    OutputComparison comparison = CompareOutput(task_.outputs(o), output.bytes(),
                                                references_->float64[o], tolerances, native,
                                                *threads_, poisons_[o]);
    if (comparison.passed && device_comparison) {
      comparison = *device_comparison;
      comparison.failure = DescribeDeviceFailure(comparison);
    }
    if (!comparison.passed) {
      return Failure{comparison.unwritten > 0 ? forge::v1::FAILURE_REASON_UNWRITTEN_OUTPUT
                                              : forge::v1::FAILURE_REASON_WRONG_RESULT,
                     absl::StrCat("output ", o, " (", DescribeSpec(task_.outputs(o)), "): ",
                                  comparison.failure)};
    }
  }
  return std::optional<Failure>();
}

bool JudgedCandidate::HasOtherContents() const {
  // A draw made on the device is known by its resident copy alone.
  if (fresh_.inputs == nullptr && fresh_.device_draw != nullptr) {
    return fresh_.device_draw != device_draw_;
  }
  return fresh_.inputs != nullptr && fresh_.references != nullptr && fresh_.inputs != inputs_;
}

absl::Status JudgedCandidate::WriteContents(const Contents& contents, bool run) {
  FORGE_ASSIGN_OR_RETURN(gpu::Stream stream, device_->CreateStream());
  for (size_t i = 0; i < input_buffers_.size(); ++i) {
    FORGE_RETURN_IF_ERROR(
        contents.device_draw != nullptr
            ? input_buffers_[i].CopyFromDeviceAsync(contents.device_draw->inputs[i], stream)
            : Upload((*contents.inputs)[i].storage, input_buffers_[i], *staging_, *threads_,
                     stream));
  }
  inputs_ = contents.inputs;
  references_ = contents.references;
  device_draw_ = contents.device_draw;
  device_facts_ = contents.device_facts;
  guard_launch_ = next_launch_;  // PoisonOutputs' launch
  FORGE_RETURN_IF_ERROR(PoisonOutputs(stream));
  FORGE_RETURN_IF_ERROR(
      ArmGuards(seed_, guard_launch_, LaunchBuffers(input_buffers_, output_buffers_), stream));
  if (run) FORGE_RETURN_IF_ERROR(launch_(stream, args_));
  FORGE_RETURN_IF_ERROR(stream.Synchronize());
  return device_->Synchronize();
}

absl::Status JudgedCandidate::RunOnOtherContents() {
  if (!verdict_.passed() || !HasOtherContents() || other_contents_failure_) {
    return absl::OkStatus();
  }
  FORGE_RETURN_IF_ERROR(device_->Synchronize());
  ran_on_other_contents_ = true;
  {
    // The guards are armed anew below: first what the reps so far did to them.
    FORGE_ASSIGN_OR_RETURN(gpu::Stream guard_stream, device_->CreateStream());
    FORGE_ASSIGN_OR_RETURN(
        std::optional<std::string> changed,
        ChangedGuard(task_, seed_, guard_launch_, input_buffers_, output_buffers_, guard_stream));
    if (changed) {
      other_contents_failure_ = Failure{forge::v1::FAILURE_REASON_OUT_OF_BOUNDS_WRITE, *changed};
      return absl::OkStatus();
    }
  }
  const Contents timed = Current();
  FORGE_RETURN_IF_ERROR(WriteContents(fresh_, /*run=*/true));
  FORGE_ASSIGN_OR_RETURN(other_contents_failure_, CheckBuffers());
  return WriteContents(timed, /*run=*/false);
}

absl::StatusOr<JudgeVerdict> JudgedCandidate::RecheckTimedOutputs() {
  if (!verdict_.passed()) {
    return absl::FailedPreconditionError("only a candidate that passed the judge is re-checked");
  }
  JudgeVerdict verdict = verdict_;
  auto fail = [&verdict](FailureReason reason, const std::string& detail) {
    verdict.evidence.set_passed(false);
    verdict.reason = reason;
    verdict.detail = absl::StrCat("timed runs: ", detail);
    verdict.evidence.add_notes(verdict.detail);
    return verdict;
  };
  auto fail_with_cuda_error = [&](const absl::Status& status) {
    verdict.context_lost = gpu::IsStickyError(status);
    return fail(ReasonForCudaError(status), std::string(status.message()));
  };
  if (absl::Status synced = device_->Synchronize(); !synced.ok()) {
    return fail_with_cuda_error(synced);
  }
  if (other_contents_failure_) {
    return fail(other_contents_failure_->reason,
                absl::StrCat("the untimed run amid the timed reps, with draw 0's inputs written "
                             "into the timed buffers: ",
                             other_contents_failure_->detail));
  }
  if (ran_on_other_contents_) {
    verdict.evidence.add_notes(
        "amid the timed reps, an untimed run with draw 0's inputs in the timed buffers checked");
  }
  FORGE_ASSIGN_OR_RETURN(std::optional<Failure> failure, CheckBuffers());
  if (failure) return fail(failure->reason, failure->detail);
  verdict.evidence.add_notes("outputs of the timed runs re-checked");
  if (!HasOtherContents()) return verdict;
  // Once more with draw 0's inputs written into the timed buffers: a kernel that remembers its
  // results by address (or keeps them from the last run) replays the timed draw's and fails.
  if (absl::Status ran = WriteContents(fresh_, /*run=*/true); !ran.ok()) {
    return fail_with_cuda_error(ran);
  }
  FORGE_ASSIGN_OR_RETURN(failure, CheckBuffers());
  if (failure) {
    return fail(failure->reason,
                absl::StrCat("run again with draw 0's inputs in the timed buffers: ",
                             failure->detail));
  }
  verdict.evidence.add_notes("run again with draw 0's inputs in the timed buffers and checked");
  return verdict;
}

std::vector<std::string> ReverificationReasons(double candidate_median_us, double eager_median_us,
                                               double roofline_floor_us) {
  std::vector<std::string> reasons;
  if (eager_median_us > 0 && candidate_median_us * kSpeedupLimit < eager_median_us) {
    reasons.push_back(absl::StrFormat(
        "speedup %.1fx over eager (%.3g us vs %.3g us) exceeds %.0fx",
        eager_median_us / candidate_median_us, candidate_median_us, eager_median_us,
        kSpeedupLimit));
  }
  if (roofline_floor_us > 0 && candidate_median_us < roofline_floor_us) {
    reasons.push_back(absl::StrFormat("time %.3g us is below the roofline floor %.3g us",
                                      candidate_median_us, roofline_floor_us));
  }
  return reasons;
}

}  // namespace forge::judge
