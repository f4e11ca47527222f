// Attention written out by hand, found in a graph: the partitioner makes one ATTENTION task of
// it, and the attention analysis (compiler/codegen/attention_analysis) reads the same match off
// that task's group, so recognition and analysis cannot disagree.
//
// The pattern, anchored at a softmax over the last dim:
//
//   S = matmul(Q, transpose(K, -2, -1))        matmul or bmm; K's transpose is of its last two dims
//   S = S * c  |  S / c                        optional scale: a constant (number, or a 0-d full)
//   S = masked_fill(S, M, f)                   optional mask: bool M, True where masked out;
//     | where(M, S, f)                         bool M, True where kept;
//     | S + A                                  float A, added (an additive mask)
//   P = softmax(S, -1)                         softmax, _softmax or _safe_softmax
//   P = clone(P) | dropout(P, p, train=False)  optional identities (dropout in eval, as exported)
//   O = matmul(P, V)
//
// The scale and the mask may come in either order; a mask before a scale needs c > 0 (a -inf
// fill must stay -inf). Every intermediate (S's and P's values) must be read by the next step
// alone and must not be a graph output: otherwise the scores are needed and the pattern is left
// as it is. Grouped-query attention on K and V is folded into head indexing: repeat_interleave(X,
// r, dim=1) or reshape(expand(X[:, :, None], (b, h, r, s, d))) (the clone and _unsafe_view an
// export makes of it) on both K and V with the same r becomes kv_repeat = r and K, V are read
// before it. A mask is proven causal when it is built in the graph from a tensor of ones (or a
// true fill) by triu / tril and logical or bitwise not, over the scores' last two dims, and masks
// exactly the keys after the query's position (SDPA's is_causal, top-left aligned).
//
// A softmax whose input is a matmul through at most a scale and a mask, but that fails a rule,
// is a near miss: it stays as the partitioner made it before, and the reason goes into the
// task's notes ("not attention: ...").
#ifndef FORGE_COMPILER_GRAPH_ATTENTION_PATTERN_H_
#define FORGE_COMPILER_GRAPH_ATTENTION_PATTERN_H_

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "forge/v1/graph.pb.h"

namespace forge::graph {

enum class AttentionMaskKind {
  kNone,
  kMaskedFill,  // masked_fill(S, mask, fill): mask True where masked out
  kWhere,       // where(mask, S, fill): mask True where kept
  kAdditive,    // S + mask
};

struct AttentionPattern {
  // Indices into the graph's nodes of every non-view node of the pattern (the chain, the
  // GQA repeats, the mask's and the scale's builders), ascending. Views between them are not
  // listed: they follow their reader.
  std::vector<int> nodes;
  int scores_matmul = -1;
  int softmax = -1;
  int output_matmul = -1;
  // The values the pattern reads: Q as the first matmul reads it, K before its transpose and
  // V, both before the GQA repeat when it is folded.
  std::string query;
  std::string key;
  std::string value;
  std::string output;
  // Each K/V head serves kv_repeat consecutive query heads (1: no GQA folded).
  std::int64_t kv_repeat = 1;
  // Scores are multiplied by scale (a division by c is a scale of 1 / c); has_scale false: 1.
  bool has_scale = false;
  double scale = 1.0;
  bool scale_before_mask = true;
  AttentionMaskKind mask_kind = AttentionMaskKind::kNone;
  std::string mask;  // the mask's value (kNone: empty)
  double mask_fill = -std::numeric_limits<double>::infinity();  // masked_fill / where
  // The mask provably masks exactly the keys after each query (top-left aligned).
  bool causal = false;
};

struct AttentionMatches {
  std::vector<AttentionPattern> patterns;
  // Near misses: the softmax node's index and why it is not attention.
  struct NearMiss {
    int softmax = -1;
    std::string reason;
  };
  std::vector<NearMiss> near_misses;
};

// Every explicit attention in `graph` (a model or a task's group), in the order of their
// softmax nodes, and the near misses. Patterns never share a node.
AttentionMatches FindExplicitAttention(const forge::v1::Graph& graph);

}  // namespace forge::graph

#endif  // FORGE_COMPILER_GRAPH_ATTENTION_PATTERN_H_
