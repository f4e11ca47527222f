// The judge on one large elementwise task (y = 3x, float32), per candidate, on a GPU: the first
// candidate (draws and references computed), then later candidates of the task judged on the host
// from the draw cache and on the device from resident draws, each timed and re-checked once as
// the timer does. Prints one line per way with the median seconds of the repetitions:
//   forge_judge_device_bench [--elements=268435456] [--reps=3] [--reference=simple|aten]
//                            [--host-first]
// --reference=aten judges with the production reference, as the sandbox child does: the task's
// ATen group in float64 on GPU 0 over device memory, the draws made on the device (issue 21's
// first candidate), then later candidates on the resident draws. --host-first adds the first
// candidate through the host (host draws, the reference's inputs and outputs through host
// memory), as before the draws were made on the device.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"
#include "aten/aten.h"
#include "google/protobuf/text_format.h"
#include "worker/compile/compile_pool.h"
#include "worker/judge/device_inputs.h"
#include "worker/judge/judge.h"

namespace forge::judge {
namespace {

constexpr char kAffine[] = R"(
extern "C" __global__ void affine(const float* x, float* y, long long n) {
  long long i = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) y[i] = x[i] * 3.0f;
}
)";

// y = x + 2 * x as a one-node ATen group, for the production reference.
constexpr char kGroup[] = R"pb(
  values { name: "x" tensor { dtype: DTYPE_FLOAT32 shape: [ ELEMENTS ] } }
  values { name: "y" tensor { dtype: DTYPE_FLOAT32 shape: [ ELEMENTS ] } }
  inputs { kind: INPUT_KIND_USER_INPUT value_name: "x" }
  nodes {
    name: "y"
    op: "aten::add"
    overload: "Tensor"
    schema: "aten::add.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor"
    arguments { name: "self" tensor: "x" }
    arguments { name: "other" tensor: "x" }
    arguments { name: "alpha" keyword: true int_value: 2 }
    outputs: "y"
  }
  outputs { kind: OUTPUT_KIND_USER_OUTPUT value_name: "y" }
)pb";

double SecondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

int Run(int64_t elements, int reps, bool aten_reference, bool host_first) {
  auto device = gpu::Device::Open(0);
  compile::CompilePoolOptions pool_options;
  pool_options.threads = 1;
  auto pool = compile::CompilePool::Create(pool_options);
  if (!device.ok() || !pool.ok()) {
    std::fprintf(stderr, "no GPU or NVRTC: %s %s\n", device.status().ToString().c_str(),
                 pool.status().ToString().c_str());
    return 1;
  }
  compile::CompileRequest request;
  request.source = kAffine;
  request.arch = (*device)->properties().arch();
  compile::CompileResult compiled = (*pool)->Compile(request);
  auto module = (*device)->LoadModule(compiled.cubin);
  auto kernel = module->GetKernel("affine");
  if (!compiled.ok() || !kernel.ok()) return 1;
  CandidateLaunch launch = [&](gpu::Stream& stream, absl::Span<const CUdeviceptr> args) {
    CUdeviceptr x = args[0], y = args[1];
    long long n = elements;
    void* parameters[] = {&x, &y, &n};
    gpu::LaunchShape shape;
    shape.grid[0] = static_cast<uint32_t>((elements + 255) / 256);
    shape.block[0] = 256;
    return kernel->Launch(shape, parameters, stream);
  };
  forge::v1::KernelTask task;
  task.set_digest(absl::StrCat("bench-affine-", elements));
  for (auto* specs : {task.add_inputs(), task.add_outputs()}) {
    specs->set_dtype(forge::v1::DTYPE_FLOAT32);
    specs->add_shape(elements);
  }
  ReferenceFn reference = [](const forge::v1::KernelTask&, absl::Span<const HostTensor> inputs)
      -> absl::StatusOr<std::vector<std::vector<double>>> {
    std::vector<double> y = inputs[0].ToDoubles();
    for (double& value : y) value = 3 * value;
    return std::vector<std::vector<double>>{y};
  };
  // The production reference through the host alone (--host-first).
  ReferenceFn host_reference = reference;
  if (aten_reference) {
    const std::string group = absl::StrReplaceAll(kGroup, {{"ELEMENTS", absl::StrCat(elements)}});
    if (!google::protobuf::TextFormat::ParseFromString(group, task.mutable_group())) return 1;
    reference = aten::Float64Reference(aten::CudaGroupRunner(0), aten::CudaDeviceReferenceRunner(0));
    host_reference = aten::Float64Reference(aten::CudaGroupRunner(0));
  }
  auto comparer = DeviceComparer::Create(**device);
  auto drawer = DeviceInputs::Create(**device);
  if (!comparer.ok() || !drawer.ok()) {
    std::fprintf(stderr, "device comparer or drawer: %s %s\n",
                 comparer.status().ToString().c_str(), drawer.status().ToString().c_str());
    return 1;
  }
  DrawCache cache(int64_t{64} << 30);
  DeviceDraws resident(**device, **comparer, int64_t{64} << 30, /*min_task_bytes=*/0, drawer->get());
  HostStaging staging(**device);

  std::printf(
      "| way | elements | seconds (median of %d) | draws on device | passed | draw | upload | "
      "candidate | reference | compare | re-check |\n",
      reps);
  std::printf("|---|---|---|---|---|---|---|---|---|---|---|\n");
  // Each way: its name, whether it is a task's first candidate (judged once), the reference and
  // whether the judge has the resident draws (as the sandbox child does).
  struct Way {
    const char* name;
    bool first;
    const ReferenceFn* reference;
    bool device_draws;
  };
  std::vector<Way> ways;
  if (host_first) {
    ways.push_back({"first candidate through the host (ATen float64 reference via host memory)",
                    true, &host_reference, true});
  }
  if (aten_reference) {
    // The first candidate finds no draw anywhere and makes them on the device; later ones find
    // them resident.
    ways.push_back({"first candidate (drawn on the device, ATen float64 reference on the GPU)",
                    true, &reference, true});
    ways.push_back({"device, resident draws", false, &reference, true});
  } else {
    ways.push_back({"first candidate", true, &reference, false});
    ways.push_back({"host, cached draws", false, &reference, false});
    ways.push_back({"device, resident draws", false, &reference, true});
  }
  for (const Way& way : ways) {
    std::vector<double> seconds;
    JudgeVerdict verdict;
    double recheck_seconds = 0;
    for (int rep = 0; rep < (way.first ? 1 : reps); ++rep) {
      JudgeOptions options;
      options.draw_cache = &cache;
      options.staging = &staging;
      options.device_draws = way.device_draws ? &resident : nullptr;
      const auto start = std::chrono::steady_clock::now();
      auto judged = Judge(**device, task, launch, *way.reference, options);
      if (!judged.ok()) {
        std::fprintf(stderr, "%s: %s\n", way.name, judged.status().ToString().c_str());
        return 1;
      }
      const auto judged_at = std::chrono::steady_clock::now();
      auto rechecked = (*judged)->RecheckTimedOutputs();
      recheck_seconds = SecondsSince(judged_at);
      seconds.push_back(SecondsSince(start));
      verdict = rechecked.ok() ? *rechecked : (*judged)->verdict();
    }
    std::sort(seconds.begin(), seconds.end());
    // The stages are the last repetition's.
    const JudgeVerdict::StageSeconds& stages = verdict.seconds;
    std::printf("| %s | %lld | %.3f | %d | %s | %.3f | %.3f | %.3f | %.3f | %.3f | %.3f |\n",
                way.name,
                static_cast<long long>(elements), seconds[seconds.size() / 2],
                verdict.draws_on_device, verdict.passed() ? "yes" : verdict.detail.c_str(),
                stages.draw, stages.upload, stages.candidate, stages.reference, stages.compare,
                recheck_seconds);
  }
  return 0;
}

}  // namespace
}  // namespace forge::judge

int main(int argc, char** argv) {
  int64_t elements = int64_t{1} << 28;
  int reps = 3;
  bool aten_reference = false;
  bool host_first = false;
  for (int i = 1; i < argc; ++i) {
    absl::string_view value = argv[i];
    bool parsed = value == "--host-first";
    host_first |= parsed;
    if (absl::ConsumePrefix(&value, "--elements=")) parsed = absl::SimpleAtoi(value, &elements);
    if (absl::ConsumePrefix(&value, "--reps=")) parsed = absl::SimpleAtoi(value, &reps);
    if (absl::ConsumePrefix(&value, "--reference=")) {
      parsed = value == "simple" || value == "aten";
      aten_reference = value == "aten";
    }
    if (!parsed || elements <= 0 || reps <= 0) {
      std::fprintf(stderr,
                   "usage: forge_judge_device_bench [--elements=N] [--reps=N] "
                   "[--reference=simple|aten] [--host-first]\n");
      return 2;
    }
  }
  return forge::judge::Run(elements, reps, aten_reference, host_first);
}
