// The analysis of an ATTENTION task that attention families share (sdpa_library's ATen backend
// calls, flash_attention's generated decode kernels): the problem's sizes (batch, heads, KV heads,
// query and key lengths, head dims), dtype, scale, causality, the mask, the layouts of Q, K, V and
// the output, and what the partitioner fused around the attention.
//
// Two spellings reach it (compiler/graph/partition.h makes both ATTENTION tasks):
//   - kSdpa: an aten::scaled_dot_product_attention node, its arguments read as SDPA defines them
//     (attn_mask bool: True where kept, or added when floating; scale None: 1 / sqrt(D));
//   - kExplicit: the pattern of compiler/graph/attention_pattern.h (matmul, scale, mask, softmax,
//     matmul), found again in the task's group, so the analysis agrees with the partitioner.
// Q is [..., H, Sq, D], K [..., Hkv, Sk, D], V [..., Hkv, Sk, Dv] (rank 3: one head; rank 4:
// batch and heads), H a multiple of Hkv: grouped-query attention, folded from an SDPA
// enable_gqa or from the explicit pattern's K/V head repeats. An operand is a value of the group:
// a task input, or a view of one (its strides are the value's own, as the export recorded them),
// or a value the group computes (a RoPE would be one; input -1).
//
// Unimplemented names what is not attention the families can take: no SDPA node and no pattern,
// two attentions, ranks other than 3 and 4, mixed dtypes, dropout (training). Error messages
// have no family prefix: each family adds its own.
#ifndef FORGE_COMPILER_CODEGEN_ATTENTION_ANALYSIS_ATTENTION_ANALYSIS_H_
#define FORGE_COMPILER_CODEGEN_ATTENTION_ANALYSIS_ATTENTION_ANALYSIS_H_

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "compiler/graph/attention_pattern.h"
#include "forge/v1/task.pb.h"

namespace forge::codegen {

enum class AttentionSpelling { kSdpa, kExplicit };

// How the mask applies to the scores (after the scale: SDPA's order; an explicit pattern that
// masks before it scales says so in mask_before_scale).
enum class AttentionMask {
  kNone,
  kCausal,    // key j is masked for query i when j > i (top-left aligned); no tensor
  kKeep,      // bool tensor, True where the score is kept (SDPA's attn_mask, where(mask, S, f))
  kMaskOut,   // bool tensor, True where the score is masked out (masked_fill)
  kAdditive,  // floating tensor added to the scores
};

struct AttentionOperand {
  std::string value;  // the group value the attention reads
  int input = -1;     // its position among the task inputs; -1 when the group computes it
  std::vector<int64_t> shape;
  std::vector<int64_t> strides;  // row-major when the value records none
};

struct AttentionAnalysis {
  AttentionSpelling spelling = AttentionSpelling::kSdpa;
  const forge::v1::Node* anchor = nullptr;  // the SDPA node, or the output matmul
  graph::AttentionPattern pattern;          // kExplicit: the match
  int64_t batch = 1;
  int64_t heads = 1;
  int64_t kv_heads = 1;
  int64_t q_len = 0;
  int64_t kv_len = 0;
  int64_t head_dim = 0;
  int64_t value_dim = 0;
  forge::v1::DType dtype = forge::v1::DTYPE_UNSPECIFIED;
  double scale = 1.0;  // what the scores are multiplied by
  AttentionMask mask = AttentionMask::kNone;
  AttentionOperand mask_operand;  // kKeep, kMaskOut, kAdditive
  // kMaskOut / kKeep of the explicit pattern: the fill of masked scores (SDPA's is -inf).
  double mask_fill = -std::numeric_limits<double>::infinity();
  bool mask_before_scale = false;
  AttentionOperand query;
  AttentionOperand key;    // Hkv heads
  AttentionOperand value;  // Hkv heads
  // What the explicit pattern's matmuls read as K and V (the repeated tensors when GQA was
  // folded; else key / value); for kSdpa, key / value.
  std::string key_as_read;
  std::string value_as_read;
  std::string output;  // the attention's result (the group may compute more from it)
  // Group nodes after the attention that compute the task's outputs from it (the epilogue: a
  // transpose and copy back to [B, S, H*D], a residual, ...), in group order.
  std::vector<const forge::v1::Node*> epilogue;

  int64_t kv_repeat() const { return kv_heads == 0 ? 0 : heads / kv_heads; }
};

// Analyzes `task`'s group (see above). The analysis points into `task` (anchor, epilogue): keep
// the task alive while it is used.
absl::StatusOr<AttentionAnalysis> AnalyzeAttention(const forge::v1::KernelTask& task);

// "B2 H4/2 Sq7 Sk7 D8/8 float32 causal scale 0.3536": for notes and messages.
std::string DescribeAttention(const AttentionAnalysis& analysis);

}  // namespace forge::codegen

#endif  // FORGE_COMPILER_CODEGEN_ATTENTION_ANALYSIS_ATTENTION_ANALYSIS_H_
