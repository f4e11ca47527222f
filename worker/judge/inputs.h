// Random inputs for the judge's draws.
//
// Draw d uses distribution d mod 3: normal(0, 1); uniform(-2, 2); normal(0, s_i), where input i
// gets its own scale s_i = 2^((i mod 5) - 2) (0.25 to 4), so that inputs differ in magnitude and a
// kernel that reads one input in place of another, or drops a scale, shows. Later draws repeat the
// cycle with new seeds. Weights are inputs of the task like any other and are drawn the same way.
// Floating-point elements are never zero (redrawn until non-zero after rounding to the dtype).
//
// Some inputs have a domain, inferred from how the task's ops use them (InferInputDomains; each op's
// entry in the op table, compiler/ops/op_table.h, names its rule):
//   - class and index inputs get integers in their valid range: the target of nll_loss and
//     cross_entropy_loss in [0, C) with C the class dim of `self`; the indices of embedding in
//     [0, rows of the weight); the index of gather, scatter, index_select in [0, size of `dim` of
//     `self`); the k-th index of aten::index in [0, size of dim k of `self`);
//   - the running variance of batch norm and the operand of sqrt, rsqrt and the logs are positive:
//     |x| + 0.1 s for x from the draw's distribution.
// Any other integer input gets [0, 16), and bool inputs 0 or 1, unless the caller knows better and
// says so (JudgeOptions::integer_ranges, e.g. from the example inputs' range).
#ifndef FORGE_WORKER_JUDGE_INPUTS_H_
#define FORGE_WORKER_JUDGE_INPUTS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "forge/v1/task.pb.h"
#include "worker/judge/host_tensor.h"
#include "worker/judge/thread_pool.h"

namespace forge::judge {

// Integers in [low, high).
struct IntegerRange {
  int64_t low = 0;
  int64_t high = 16;
};

struct InputDomain {
  enum class Kind { kAny, kPositive, kIntegerRange };
  Kind kind = Kind::kAny;
  IntegerRange range;  // for kIntegerRange
  // Why this domain, for the evidence: "target of aten::nll_loss_forward: classes [0, 10)".
  std::string reason;
};

// One domain per task input, in KernelTask.inputs order.
std::vector<InputDomain> InferInputDomains(const forge::v1::KernelTask& task);

// "normal(0, 1)", "uniform(-2, 2)", "normal(0, s_i) with a scale per input".
std::string DescribeDraw(int draw);
// The scale input `input_index` gets in `draw` (1 except in the per-input-scale draws).
double InputScale(int draw, int input_index);

// Input `input_index` of draw `draw`; the same arguments give the same tensor. Drawn on `pool` in
// ThreadPool's fixed chunks, each from its own generator seeded by the arguments and the chunk
// index (chunk 0 by the arguments alone): the values never depend on the number of threads. A
// 1.6-billion-element input takes seconds instead of a minute.
absl::StatusOr<HostTensor> DrawInput(const forge::v1::TensorSpec& spec, const InputDomain& domain,
                                     int draw, int input_index, uint64_t seed,
                                     ThreadPool& pool = ThreadPool::Default());

}  // namespace forge::judge

#endif  // FORGE_WORKER_JUDGE_INPUTS_H_
