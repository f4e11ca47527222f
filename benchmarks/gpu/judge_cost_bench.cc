// The judge's cost per candidate on a GPU, and compute-sanitizer's on a would-be best (issue 20):
//   judge_cost_bench --kernels=FILE [--child=PATH] [--reps=5]
// One task, y = 2x + 1 over 1000 x 1003 float32 (tests/gpu/affine_task.h), its candidate the kernel
// `affine` of FILE (tests/gpu/kernels/sanitizer_bugs.cuh), its float64 reference computed on the
// host. Rows:
// the first candidate of the task (draws and references computed: no draw cache, or an empty
// one), a later candidate judged on the host from the draw cache, and one judged on the device
// from resident draws, each with the judged launches captured into a CUDA graph and without
// (JudgeOptions::capture_launches); then the sanitizer step (sandbox/sanitize.h: the child started
// under each tool, the tools at once) when --child is given and compute-sanitizer is found. The
// guard zones are always on (nothing switches them off). Prints a markdown table of wall seconds:
// median, min and max of --reps runs.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"
#include "tests/gpu/affine_task.h"
#include "worker/compile/compile_pool.h"
#include "worker/judge/device_compare.h"
#include "worker/judge/judge.h"
#include "worker/judge/sanitizer.h"
#include "worker/sandbox/sanitize.h"

namespace forge::judge {
namespace {

using testing::kAffineColumns;
using testing::kAffineRows;

constexpr uint32_t kBlock = 256;

double SecondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// "| label | median | min | max |" of `reps` runs of `run` (which returns false on a failure).
bool PrintRow(const std::string& label, int reps, const std::function<bool()>& run) {
  std::vector<double> seconds;
  for (int rep = 0; rep < reps; ++rep) {
    const auto start = std::chrono::steady_clock::now();
    if (!run()) return false;
    seconds.push_back(SecondsSince(start));
  }
  std::sort(seconds.begin(), seconds.end());
  std::printf("| %s | %.4f | %.4f | %.4f |\n", label.c_str(), seconds[seconds.size() / 2],
              seconds.front(), seconds.back());
  std::fflush(stdout);
  return true;
}

int Run(const std::string& kernels_path, const std::string& child, int reps) {
  std::ifstream file(kernels_path);
  std::stringstream source;
  source << file.rdbuf();
  auto device = gpu::Device::Open(0);
  if (!device.ok()) {
    std::fprintf(stderr, "%s\n", device.status().ToString().c_str());
    return 1;
  }
  auto pool = compile::CompilePool::Create({.threads = 1});
  if (!pool.ok()) return 1;
  compile::CompileRequest request;
  request.source = source.str();
  request.arch = (*device)->properties().arch();
  const compile::CompileResult compiled = (*pool)->Compile(request);
  if (!compiled.ok()) {
    std::fprintf(stderr, "compile %s: %s\n%s\n", kernels_path.c_str(),
                 compiled.status.ToString().c_str(), compiled.log.c_str());
    return 1;
  }
  codegen::GeneratedKernel kernel;
  kernel.kernel_name = "affine";
  kernel.launch.grid = {
      static_cast<uint32_t>((kAffineRows * kAffineColumns + kBlock - 1) / kBlock), 1, 1};
  kernel.launch.block = {kBlock, 1, 1};
  kernel.hints.executor = codegen::Executor::kGeneratedKernel;
  auto launch = LoadGeneratedKernel(**device, compiled.cubin, kernel);
  if (!launch.ok()) return 1;
  auto comparer = DeviceComparer::Create(**device);
  if (!comparer.ok()) return 1;
  DeviceDraws resident(**device, **comparer, int64_t{1} << 30, /*min_task_bytes=*/0);
  const forge::v1::KernelTask task = testing::AffineTask("judge-cost-affine");
  const ReferenceFn reference(testing::AffineReference);
  DrawCache warm;

  auto judge = [&](JudgeOptions options) {
    auto judged = Judge(**device, task, *launch, reference, options);
    if (!judged.ok() || !(*judged)->verdict().passed()) {
      std::fprintf(stderr, "judge: %s\n",
                   judged.ok() ? (*judged)->verdict().detail.c_str()
                               : judged.status().ToString().c_str());
      return false;
    }
    return true;
  };
  std::printf("# The judge per candidate: y = 2x + 1, float32 [%lld, %lld], %s; %d reps\n\n",
              static_cast<long long>(kAffineRows), static_cast<long long>(kAffineColumns),
              (*device)->properties().name.c_str(), reps);
  std::printf("| way | median s | min s | max s |\n|---|---|---|---|\n");
  for (const bool capture : {true, false}) {
    const std::string suffix = capture ? ", launches captured" : ", uncaptured";
    JudgeOptions first;
    first.capture_launches = capture;
    if (!PrintRow("first candidate (draws and references computed)" + suffix, reps,
                  [&] { return judge(first); })) {
      return 1;
    }
    JudgeOptions cached = first;
    cached.draw_cache = &warm;
    if (!judge(cached)) return 1;  // fills the cache
    if (!PrintRow("later candidate, host path (draw cache)" + suffix, reps,
                  [&] { return judge(cached); })) {
      return 1;
    }
    JudgeOptions on_device = cached;
    on_device.device_draws = &resident;
    if (!judge(on_device)) return 1;  // makes the draws resident
    if (!PrintRow("later candidate, device path (resident draws)" + suffix, reps,
                  [&] { return judge(on_device); })) {
      return 1;
    }
  }
  absl::StatusOr<std::string> tool = FindComputeSanitizer("");
  if (child.empty() || !tool.ok()) {
    std::printf("\nsanitizer step not measured: %s\n",
                child.empty() ? "no --child" : tool.status().ToString().c_str());
    return 0;
  }
  sandbox::SandboxCandidate candidate{.digest = "affine", .task = task, .kernel = kernel,
                                      .cubin = compiled.cubin};
  std::string tools;
  const bool sanitized = PrintRow(
      "sanitizer step (memcheck, racecheck, synccheck, initcheck at once)", reps, [&] {
        auto outcome = sandbox::Sanitize({.tool_path = *tool, .child_path = child}, candidate,
                                         JudgeOptions());
        if (!outcome.ok() || outcome->failure.has_value() ||
            outcome->evidence.state() != forge::v1::SANITIZER_STATE_PASSED) {
          std::fprintf(stderr, "sanitizer: %s\n",
                       !outcome.ok() ? outcome.status().ToString().c_str()
                       : outcome->failure.has_value()
                           ? outcome->failure->detail().c_str()
                           : outcome->evidence.detail().c_str());
          return false;
        }
        return true;
      });
  return sanitized ? 0 : 1;
}

}  // namespace
}  // namespace forge::judge

int main(int argc, char** argv) {
  std::string kernels;
  std::string child;
  int reps = 5;
  for (int i = 1; i < argc; ++i) {
    absl::string_view value = argv[i];
    bool parsed = false;
    if (absl::ConsumePrefix(&value, "--kernels=")) {
      kernels = std::string(value);
      parsed = !kernels.empty();
    } else if (absl::ConsumePrefix(&value, "--child=")) {
      child = std::string(value);
      parsed = true;
    } else if (absl::ConsumePrefix(&value, "--reps=")) {
      parsed = absl::SimpleAtoi(value, &reps) && reps > 0;
    }
    if (!parsed) {
      std::fprintf(stderr, "usage: judge_cost_bench --kernels=FILE [--child=PATH] [--reps=N]\n");
      return 2;
    }
  }
  if (kernels.empty()) {
    std::fprintf(stderr, "usage: judge_cost_bench --kernels=FILE [--child=PATH] [--reps=N]\n");
    return 2;
  }
  return forge::judge::Run(kernels, child, reps);
}
