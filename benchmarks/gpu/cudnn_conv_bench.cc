// The cudnn_conv family on a real GPU: for each problem below, every schedule point (heuristic
// mode x engine index, in the task's layout and, for an NCHW task, channels-last inside with the
// conversions in the candidate's time: "nhwc" in the point column) is loaded through the worker's executor (worker/library/cudnn_conv.h),
// judged against the float64 ATen reference and timed with the worker's timer (L2 flushed,
// median of 50); the fastest correct point is compared with the unfused ATen chain the worker
// times as the baseline (aten::Baseline: conv, then each epilogue op, LibTorch's defaults, so
// cudnn.benchmark off). benchmarks/gpu/conv_eager.py times the same problems in PyTorch eager
// with cudnn.benchmark off and on. Prints a table; one JSON line per problem on stdout's tail.
//
//   cudnn_conv_bench            (run_cudnn_conv.sh runs it with conv_eager.py)
//
// "conv+BN+ReLU" is conv (no bias) + eval-mode batch norm + ReLU: the candidate folds the batch
// norm on the device in every run (its time included) and is judged against the unfolded ops;
// the baseline runs the unfolded chain. The 128-channel NCHW one is the suite's
// l2_conv_bn_relu_32x128x56x56_bf16.
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "aten/aten.h"
#include "compiler/codegen/cudnn_conv/cudnn_conv.h"
#include "compiler/codegen/testing/codegen_test_util.h"
#include "worker/gpu/device.h"
#include "worker/judge/judge.h"
#include "worker/library/cudnn_conv.h"
#include "worker/timer/timer.h"

namespace forge {
namespace {

using codegen::CudnnConvFamily;
using codegen::testing::ConvEpilogueTask;
using codegen::testing::ConvShape;
using forge::v1::KernelTask;

struct Problem {
  std::string name;
  forge::v1::DType dtype;
  ConvShape shape;
  std::vector<std::string> epilogue;
  bool channels_last;
};

std::vector<Problem> Problems() {
  constexpr auto kBF16 = forge::v1::DTYPE_BFLOAT16;
  constexpr auto kF16 = forge::v1::DTYPE_FLOAT16;
  constexpr auto kF32 = forge::v1::DTYPE_FLOAT32;
  const ConvShape c3 = {.n = 32, .c = 64, .h = 56, .w = 56, .k = 64, .r = 3, .s = 3, .padding = 1};
  return {
      {"conv3x3+bias+relu", kBF16, c3, {"relu"}, false},
      {"conv3x3+bias+relu NHWC", kBF16, c3, {"relu"}, true},
      {"conv+BN+ReLU NHWC", kF16, c3, {"batch_norm", "relu"}, true},
      {"conv+BN+ReLU 128", kBF16,
       {.n = 32, .c = 128, .h = 56, .w = 56, .k = 128, .r = 3, .s = 3, .padding = 1},
       {"batch_norm", "relu"}, false},
      {"resnet 1x1 256->64 +relu NHWC", kBF16,
       {.n = 32, .c = 256, .h = 56, .w = 56, .k = 64, .r = 1, .s = 1}, {"relu"}, true},
      {"resnet 3x3 128 s2 +relu NHWC", kBF16,
       {.n = 32, .c = 128, .h = 56, .w = 56, .k = 128, .r = 3, .s = 3, .stride = 2, .padding = 1},
       {"relu"}, true},
      {"resnet 1x1 64->256 +residual+relu NHWC", kBF16,
       {.n = 32, .c = 64, .h = 56, .w = 56, .k = 256, .r = 1, .s = 1}, {"residual", "relu"}, true},
      {"resnet stem 7x7 s2 +relu NHWC", kF16,
       {.n = 32, .c = 3, .h = 224, .w = 224, .k = 64, .r = 7, .s = 7, .stride = 2, .padding = 3},
       {"relu"}, true},
      {"conv3x3+bias+relu float32", kF32,
       {.n = 16, .c = 64, .h = 56, .w = 56, .k = 64, .r = 3, .s = 3, .padding = 1}, {"relu"}, false},
  };
}

// Small exact values of the dtype, for the baseline's inputs (timing only).
aten::HostTensor HostInput(const forge::v1::TensorSpec& spec) {
  aten::HostTensor tensor;
  tensor.dtype = spec.dtype();
  tensor.shape.assign(spec.shape().begin(), spec.shape().end());
  tensor.strides.assign(spec.strides().begin(), spec.strides().end());
  // Row-major elements whatever the strides (aten::HostTensor's convention).
  int64_t storage = 1;
  for (int64_t d : tensor.shape) storage *= d;
  if (spec.dtype() == forge::v1::DTYPE_FLOAT32) {
    std::vector<float> values(storage);
    for (int64_t i = 0; i < storage; ++i) values[i] = static_cast<float>(i % 7 - 3) * 0.125f;
    tensor.bytes.resize(storage * 4);
    std::memcpy(tensor.bytes.data(), values.data(), tensor.bytes.size());
  } else {
    // float16 0.5, -0.5, 0.25, -0.25; bfloat16 the same values.
    const bool half = spec.dtype() == forge::v1::DTYPE_FLOAT16;
    const uint16_t patterns[4] = {half ? uint16_t{0x3800} : uint16_t{0x3F00},
                                  half ? uint16_t{0xB800} : uint16_t{0xBF00},
                                  half ? uint16_t{0x3400} : uint16_t{0x3E80},
                                  half ? uint16_t{0xB400} : uint16_t{0xBE80}};
    std::vector<uint16_t> values(storage);
    for (int64_t i = 0; i < storage; ++i) values[i] = patterns[i % 4];
    tensor.bytes.resize(storage * 2);
    std::memcpy(tensor.bytes.data(), values.data(), tensor.bytes.size());
  }
  return tensor;
}

struct Row {
  std::string problem;
  double best_us = std::numeric_limits<double>::infinity();
  std::string best_point;
  std::string best_engine;
  int points_run = 0;
  int points_refused = 0;
  double aten_us = 0;
  std::string error;
};

absl::Status RunProblem(const gpu::Device& device, library::CudnnConv& conv, timer::Timer& clock,
                        const Problem& problem, Row& row) {
  // A conv followed by batch norm has no bias of its own (as in the models).
  const bool bias = problem.epilogue.empty() || problem.epilogue[0] != "batch_norm";
  KernelTask task = ConvEpilogueTask(problem.dtype, problem.shape, bias, problem.epilogue,
                                     problem.channels_last);
  for (forge::v1::Node& node : *task.mutable_group()->mutable_nodes()) node.clear_schema();
  timer::TimerOptions options;
  options.reps = 50;
  // Every point of both templates (the task's layout, and channels-last inside for an NCHW task).
  for (const codegen::SchedulePoint& point : codegen::testing::ValidPoints(CudnnConvFamily(), task)) {
    const std::string label =
        absl::StrCat(point.template_name == CudnnConvFamily::kChannelsLastTemplate ? "nhwc " : "",
                     "h", point.parameters.at("heuristic"), " e", point.parameters.at("engine"));
    absl::StatusOr<library::CudnnConvLaunch> launch =
        library::LoadCudnnConvCandidate(conv, task, point);
    if (absl::IsOutOfRange(launch.status())) {
      ++row.points_refused;
      continue;
    }
    if (!launch.ok()) return launch.status();
    auto judged = judge::Judge(device, task, launch->launch, aten::Float64Reference());
    if (!judged.ok()) return judged.status();
    if (!(*judged)->verdict().passed()) {
      std::cerr << problem.name << " " << label << " (" << launch->engine_name
                << ") failed the judge: " << (*judged)->verdict().detail << "\n";
      continue;
    }
    auto timing = clock.Time([&](gpu::Stream& stream) { return (*judged)->Launch(stream); },
                             options);
    if (!timing.ok()) return timing.status();
    ++row.points_run;
    std::cerr << absl::StrFormat("  %-40s %-12s %-60s %9.1f us\n", problem.name, label,
                                 launch->engine_name, timing->summary.median);
    if (timing->summary.median < row.best_us) {
      row.best_us = timing->summary.median;
      row.best_point = label;
      row.best_engine = launch->engine_name;
    }
  }
  std::vector<aten::HostTensor> inputs;
  for (const forge::v1::TensorSpec& spec : task.inputs()) inputs.push_back(HostInput(spec));
  auto baseline = aten::Baseline::Create(task, inputs);
  if (!baseline.ok()) return baseline.status();
  auto timing = clock.Time(
      [&](gpu::Stream& stream) { return (*baseline)->Launch(stream.handle()); }, options);
  if (!timing.ok()) return timing.status();
  row.aten_us = timing->summary.median;
  return absl::OkStatus();
}

int Main() {
  auto device = gpu::Device::Open(0);
  if (!device.ok()) {
    std::cerr << "cudnn_conv_bench: " << device.status() << "\n";
    return 1;
  }
  if (auto status = (*device)->MakeCurrent(); !status.ok()) {
    std::cerr << "cudnn_conv_bench: " << status << "\n";
    return 1;
  }
  auto conv = library::CudnnConv::Create(**device);
  auto clock = timer::Timer::Create(**device);
  if (!conv.ok() || !clock.ok()) {
    std::cerr << "cudnn_conv_bench: " << conv.status() << " " << clock.status() << "\n";
    return 1;
  }
  std::vector<Row> rows;
  for (const Problem& problem : Problems()) {
    Row& row = rows.emplace_back();
    row.problem = problem.name;
    if (absl::Status status = RunProblem(**device, **conv, **clock, problem, row); !status.ok()) {
      row.error = std::string(status.message());
    }
  }
  std::cout << absl::StrFormat("%-42s %12s %12s %8s  %-12s %s\n", "problem", "cudnn graph us",
                               "ATen chain us", "speedup", "point", "engine (run/refused)");
  for (const Row& row : rows) {
    if (!row.error.empty()) {
      std::cout << absl::StrFormat("%-42s error: %s\n", row.problem, row.error);
      continue;
    }
    std::cout << absl::StrFormat("%-42s %12.1f %12.1f %7.2fx  %-12s %s (%d/%d)\n", row.problem,
                                 row.best_us, row.aten_us, row.aten_us / row.best_us,
                                 row.best_point, row.best_engine, row.points_run,
                                 row.points_refused);
  }
  for (const Row& row : rows) {
    std::cout << absl::StrFormat(
        "{\"problem\": \"%s\", \"cudnn_graph_us\": %.2f, \"aten_chain_us\": %.2f, "
        "\"point\": \"%s\", \"engine\": \"%s\", \"points_run\": %d, \"points_refused\": %d, "
        "\"error\": \"%s\"}\n",
        row.problem, row.points_run > 0 ? row.best_us : -1.0, row.aten_us, row.best_point,
        row.best_engine, row.points_run, row.points_refused, row.error);
  }
  return 0;
}

}  // namespace
}  // namespace forge

int main() { return forge::Main(); }
