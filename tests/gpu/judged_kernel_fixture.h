// The fixture of the GPU tests that judge and time one family's candidates (cutlass_gemm_gpu_test,
// gemv_gpu_test, flash_attention_gpu_test): the candidate's launch judged by the real judge
// against the production float64 ATen reference, then timed as the worker times it (outputs
// poisoned before every rep, L2 flushed) and the timed runs' outputs checked again;
// JudgedFamilyTest<Family> generates, compiles (NVRTC), loads and judges one NVRTC family's points
// and prints timed points' share of the copy bandwidth. Header-only: its tests link
// forge::judge, forge::timer, forge::aten_judge, forge::gpu_test_support and
// forge::codegen_test_util.
#ifndef FORGE_TESTS_GPU_JUDGED_KERNEL_FIXTURE_H_
#define FORGE_TESTS_GPU_JUDGED_KERNEL_FIXTURE_H_

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <iostream>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "absl/strings/str_cat.h"
#include "aten/aten.h"
#include "compiler/codegen/family.h"
#include "compiler/codegen/testing/codegen_test_util.h"
#include "forge/v1/task.pb.h"
#include "tests/support/gpu_test.h"
#include "worker/judge/judge.h"
#include "worker/timer/timer.h"

namespace forge::testing {

class JudgedKernelTest : public GpuTest {
 protected:
  // The default point of `family`'s first space for `task`, with `changes` applied.
  static codegen::SchedulePoint PointWith(const codegen::KernelFamily& family,
                                          const forge::v1::KernelTask& task,
                                          const std::map<std::string, int64_t>& changes) {
    auto spaces = family.ScheduleSpace(task);
    EXPECT_TRUE(spaces.ok()) << spaces.status();
    if (!spaces.ok()) return {};
    codegen::SchedulePoint point = codegen::DefaultPoint(spaces->front());
    for (const auto& [name, value] : changes) point.parameters[name] = value;
    return point;
  }

  // "split_k=1 warps=4 ": a point's parameters, for labels.
  static std::string DescribePoint(const codegen::SchedulePoint& point) {
    std::string text;
    for (const auto& [name, value] : point.parameters) absl::StrAppend(&text, name, "=", value, " ");
    return text;
  }

  // `family`'s NVRTC candidate of `task` at `point`: generated, compiled through the tests' pool
  // for this device, loaded as the worker loads it and judged (JudgeLaunch).
  void JudgeGenerated(const codegen::KernelFamily& family, const forge::v1::KernelTask& task,
                      const codegen::SchedulePoint& point) {
    auto kernel = family.Generate(task, point);
    ASSERT_TRUE(kernel.ok()) << kernel.status();
    compile::CompileResult compiled =
        codegen::testing::Pool()
            .Submit(codegen::testing::RequestFor(*kernel, device_->properties().arch()))
            .get();
    ASSERT_TRUE(compiled.ok()) << compiled.status << "\n" << compiled.log;
    auto launch = judge::LoadGeneratedKernel(*device_, compiled.cubin, *kernel);
    ASSERT_TRUE(launch.ok()) << launch.status();
    JudgeLaunch(task, *std::move(launch), DescribePoint(point));
  }

  // Judges `launch` of `task`, expects it to pass and keeps it for Time; `label` names it in
  // messages and in the printed errors.
  void JudgeLaunch(const forge::v1::KernelTask& task, judge::CandidateLaunch launch,
                   const std::string& label) {
    // TaskBuilder writes placeholder schemas ("aten::mm(...)"); the reference then finds each
    // operator by name and overload in this LibTorch alone.
    forge::v1::KernelTask judged_task = task;
    for (forge::v1::Node& node : *judged_task.mutable_group()->mutable_nodes()) node.clear_schema();
    auto judged = judge::Judge(*device_, judged_task, std::move(launch), aten::Float64Reference());
    ASSERT_TRUE(judged.ok()) << label << ": " << judged.status();
    judged_ = *std::move(judged);
    const judge::JudgeVerdict& verdict = judged_->verdict();
    EXPECT_TRUE(verdict.passed()) << label << ": " << verdict.detail;
    std::cout << label << ": max abs error " << verdict.evidence.max_abs_error()
              << ", rel norm error " << verdict.evidence.rel_norm_error() << "\n";
  }

  // The median microseconds of the judged candidate (0 after a failure, which the test reports),
  // its timed outputs re-checked.
  double TimeJudged() {
    EXPECT_NE(judged_, nullptr);
    if (judged_ == nullptr) return 0;
    auto timer = timer::Timer::Create(*device_);
    EXPECT_TRUE(timer.ok()) << timer.status();
    if (!timer.ok()) return 0;
    timer::TimerOptions options;
    options.before_each_rep = [&](gpu::Stream& stream) { return judged_->PoisonOutputs(stream); };
    auto timing = (*timer)->Time([&](gpu::Stream& stream) { return judged_->Launch(stream); },
                                 options);
    EXPECT_TRUE(timing.ok()) << timing.status();
    auto rechecked = judged_->RecheckTimedOutputs();
    EXPECT_TRUE(rechecked.ok()) << rechecked.status();
    if (rechecked.ok()) EXPECT_TRUE(rechecked->passed()) << rechecked->detail;
    return timing.ok() ? timing->summary.median : 0;
  }

  std::unique_ptr<judge::JudgedCandidate> judged_;
};

// JudgedKernelTest for one NVRTC family's candidates: ExpectAccepted(task, changes) judges the
// default point with `changes` (which must be valid) and keeps it for TimeJudged.
template <typename Family>
class JudgedFamilyTest : public JudgedKernelTest {
 protected:
  void SetUpDevice() override { ASSERT_TRUE(device_->MakeCurrent().ok()); }

  static codegen::SchedulePoint PointOf(const forge::v1::KernelTask& task,
                                        const std::map<std::string, int64_t>& changes) {
    return PointWith(Family(), task, changes);
  }

  void ExpectAccepted(const forge::v1::KernelTask& task,
                      const std::map<std::string, int64_t>& changes = {}) {
    const codegen::SchedulePoint point = PointOf(task, changes);
    const absl::Status valid = Family().Validate(task, point);
    ASSERT_TRUE(valid.ok()) << DescribePoint(point) << valid;
    JudgeGenerated(Family(), task, point);
  }

  // The measured device-to-device copy bandwidth (bytes read + written per second), printed.
  double CopyBandwidth() {
    auto timer = timer::Timer::Create(*device_);
    EXPECT_TRUE(timer.ok()) << timer.status();
    if (!timer.ok()) return 0;
    auto bandwidth = (*timer)->CopyBandwidth();
    EXPECT_TRUE(bandwidth.ok()) << bandwidth.status();
    if (!bandwidth.ok()) return 0;
    std::printf("copy bandwidth %.0f GB/s (read + written)\n", *bandwidth / 1e9);
    return *bandwidth;
  }

  // Judges and times `task` at the default point with each of `points`' changes, prints a row per
  // point ("| label | point | us | GB/s | % of copy |": `bytes` moved in the median time against
  // `bandwidth`) and the best share; expects at least one point judged correct and timed.
  void PrintShareOfCopy(const forge::v1::KernelTask& task, const std::string& label,
                        double bytes, double bandwidth,
                        const std::vector<std::map<std::string, int64_t>>& points) {
    double best = 0;
    for (const auto& changes : points) {
      ExpectAccepted(task, changes);
      const double us = TimeJudged();
      if (us <= 0 || bandwidth <= 0) continue;
      const double fraction = bytes / (us * 1e-6) / bandwidth;
      best = std::max(best, fraction);
      std::printf("| %s | %-60s | %8.2f us | %6.0f GB/s | %5.1f%% of copy |\n", label.c_str(),
                  DescribePoint(PointOf(task, changes)).c_str(), us, bytes / (us * 1e-6) / 1e9,
                  100 * fraction);
    }
    std::printf("%s: best %.1f%% of the copy bandwidth\n", label.c_str(), 100 * best);
    EXPECT_GT(best, 0) << label << ": no point was judged correct and timed";
  }
};

}  // namespace forge::testing

#endif  // FORGE_TESTS_GPU_JUDGED_KERNEL_FIXTURE_H_
