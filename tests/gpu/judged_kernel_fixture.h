// The fixture of the GPU tests that judge and time one family's candidates (cutlass_gemm_gpu_test,
// gemv_gpu_test): the candidate's launch judged by the real judge against the production float64
// ATen reference, then timed as the worker times it (outputs poisoned before every rep, L2
// flushed) and the timed runs' outputs checked again. Header-only: its tests link forge::judge,
// forge::timer, forge::aten_judge and forge::gpu_test_support.
#ifndef FORGE_TESTS_GPU_JUDGED_KERNEL_FIXTURE_H_
#define FORGE_TESTS_GPU_JUDGED_KERNEL_FIXTURE_H_

#include <iostream>
#include <memory>
#include <string>
#include <utility>

#include "gtest/gtest.h"
#include "aten/aten.h"
#include "forge/v1/task.pb.h"
#include "tests/support/gpu_test.h"
#include "worker/judge/judge.h"
#include "worker/timer/timer.h"

namespace forge::testing {

class JudgedKernelTest : public GpuTest {
 protected:
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

}  // namespace forge::testing

#endif  // FORGE_TESTS_GPU_JUDGED_KERNEL_FIXTURE_H_
