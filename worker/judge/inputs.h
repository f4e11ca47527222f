// Random inputs for the judge's draws.
//
// Standard draw d uses distribution d mod 3: normal(0, 1); uniform(-2, 2); normal(0, s_i), where input i
// gets its own scale s_i = 2^((i mod 5) - 2) (0.25 to 4), so that inputs differ in magnitude and a
// kernel that reads one input in place of another, or drops a scale, shows. Later draws repeat the
// cycle with new seeds. Weights are inputs of the task like any other and are drawn the same way.
// Floating-point elements are never zero (redrawn until non-zero after rounding to the dtype).
//
// Every draw is a DrawRule (draw_element.h): element i is DrawElement(rule, i), a function of the
// rule and i alone, compiled for the host and for the GPU (device_inputs.h), so a draw made on the
// device holds the host's bytes, whatever the threads or blocks that made it.
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
//
// Adversarial draws (ChooseAdversarialDraws) follow the standard ones: a distribution per
// ops::AdversarialDraw that the task's ops ask for (their op-table entries), drawn for the inputs
// they read as data operands, each the subject of its own draw:
//   - large logits: normal(0, S), S = min(1000, the dtype's largest finite value / 64) (1000 for
//     float16 too: 65504 / 64 > 1000);
//   - large mean: normal(256, 1), where E[x^2] - E[x]^2 loses the variance and a float32 Welford
//     mean still keeps it within the tolerance;
//   - tiny variance: normal(0, 0.001), a variance below the norms' usual eps;
//   - cancellation: pairs in row-major order, x[2k] = 8 u, x[2k + 1] = -x[2k] + v with u, v from
//     normal(0, 1): each pair sums to v where its terms are 8 times larger, signs mixed;
//   - activation kinks: k or k + normal(0, 0.01) (half each) for k drawn from {0, 1, -1, 3, -3, 6};
//   - zeros and subnormals: +0, -0, a subnormal of the dtype (random sign and mantissa) or
//     normal(0, 1), a quarter each;
//   - integer edges: the range's ends low and high - 1 (three quarters), else uniform in it, for
//     index inputs of ops that read with them (not the scatters: repeated indices there leave the
//     result to the order of the writes).
// An input gets a distribution only when every op that reads it asks for it (a floating one as a
// data operand; looking through views): an input that also feeds an op the distribution would push
// outside what eager computes accurately (exp of a large logit, a division by a subnormal) keeps
// the standard draws. The draws' other inputs are drawn as standard draw `draw` is. Inputs read
// only through ops outside the op table, or an op's intermediate results, get none: the
// adversarial values reach the ops the task's inputs feed directly.
#ifndef FORGE_WORKER_JUDGE_INPUTS_H_
#define FORGE_WORKER_JUDGE_INPUTS_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "compiler/ops/op_table.h"
#include "forge/v1/task.pb.h"
#include "worker/judge/draw_element.h"
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

// InferInputDomains with `integer_ranges` (by input index, e.g. JudgeOptions::integer_ranges)
// in place of the inferred domains of those inputs; InvalidArgument for an index the task lacks.
absl::StatusOr<std::vector<InputDomain>> InputDomainsWith(
    const forge::v1::KernelTask& task, const std::map<int, IntegerRange>& integer_ranges);

// "normal(0, 1)", "uniform(-2, 2)", "normal(0, s_i) with a scale per input".
std::string DescribeDraw(int draw);
// The scale input `input_index` gets in `draw` (1 except in the per-input-scale draws).
double InputScale(int draw, int input_index);

// Input `input_index` of draw `draw`; the same arguments give the same tensor
// (DrawTensor(StandardDrawRule(...))).
absl::StatusOr<HostTensor> DrawInput(const forge::v1::TensorSpec& spec, const InputDomain& domain,
                                     int draw, int input_index, uint64_t seed,
                                     ThreadPool& pool = ThreadPool::Default());

// The element type a draw of `dtype` encodes into; Unimplemented for complex64 and unspecified.
absl::StatusOr<DrawDType> DrawDTypeOf(forge::v1::DType dtype);

// The rule of DrawInput's tensor (same arguments); InvalidArgument for an empty integer range.
absl::StatusOr<DrawRule> StandardDrawRule(const forge::v1::TensorSpec& spec,
                                          const InputDomain& domain, int draw, int input_index,
                                          uint64_t seed);

// The tensor of `spec` whose logical element i holds DrawElement(rule, i), laid out as `spec`
// says (storage between strided elements stays zero). Chunked on `pool`; the bytes never depend
// on its threads.
absl::StatusOr<HostTensor> DrawTensor(const forge::v1::TensorSpec& spec, const DrawRule& rule,
                                      ThreadPool& pool = ThreadPool::Default());

// An adversarial draw of a task: its distribution and the inputs drawn from it.
struct AdversarialDraw {
  ops::AdversarialDraw kind = ops::kLargeLogits;
  std::vector<int> inputs;  // ascending
  // Why, for the evidence: "input 0 (float32[32, 10]): self of aten::_softmax".
  std::string reason;
};

// The task's adversarial draws, at most one per ops::AdversarialDraw, in the order of its bits.
std::vector<AdversarialDraw> ChooseAdversarialDraws(const forge::v1::KernelTask& task,
                                                    absl::Span<const InputDomain> domains);

// The rule of DrawAdversarialInput's tensor (same arguments; the same refusal of a distribution
// that does not suit the input).
absl::StatusOr<DrawRule> AdversarialDrawRule(const forge::v1::TensorSpec& spec,
                                             const InputDomain& domain, ops::AdversarialDraw kind,
                                             int draw, int input_index, uint64_t seed);

// "large logits: normal(0, 1000)"; the names inputs.h's list uses.
std::string DescribeAdversarial(ops::AdversarialDraw kind);

// Input `input_index` drawn from the adversarial distribution `kind` for draw `draw`; the same
// arguments give the same tensor (DrawTensor(AdversarialDrawRule(...))). `kind` must suit the
// input: a floating distribution a floating input, kIntegerEdges one with an integer range.
absl::StatusOr<HostTensor> DrawAdversarialInput(const forge::v1::TensorSpec& spec,
                                                const InputDomain& domain,
                                                ops::AdversarialDraw kind, int draw,
                                                int input_index, uint64_t seed,
                                                ThreadPool& pool = ThreadPool::Default());

}  // namespace forge::judge

#endif  // FORGE_WORKER_JUDGE_INPUTS_H_
