#include "compiler/graph/partition.h"

#include <algorithm>
#include <functional>
#include <queue>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "compiler/graph/attention_pattern.h"
#include "compiler/graph/cost.h"
#include "compiler/graph/op_classes.h"
#include "compiler/graph/task_digest.h"

namespace forge::graph {
namespace {

using ::forge::v1::Graph;
using ::forge::v1::KernelFamily;
using ::forge::v1::KernelTask;
using ::forge::v1::Node;

// Producer index of a value that a graph input defines.
constexpr int kGraphInput = -1;

using NodeSet = absl::flat_hash_set<int>;

struct Group {
  KernelFamily family;
  std::vector<int> nodes;  // topological positions
  bool merged_away = false;
};

// Indices (into `order`'s positions) sorted topologically by Kahn's algorithm, ties broken by the
// smallest key, so that a graph already in topological order keeps its order. Returns the
// positions it could not place (those on or behind a cycle) through `unplaced`.
std::vector<int> KahnOrder(const std::vector<std::vector<int>>& successors,
                           const std::vector<int>& keys, std::vector<int>* unplaced) {
  const int count = static_cast<int>(successors.size());
  std::vector<int> indegree(count, 0);
  for (const auto& next : successors) {
    for (int successor : next) ++indegree[successor];
  }
  auto later = [&keys](int a, int b) { return keys[a] > keys[b]; };
  std::priority_queue<int, std::vector<int>, decltype(later)> ready(later);
  for (int i = 0; i < count; ++i) {
    if (indegree[i] == 0) ready.push(i);
  }
  std::vector<int> order;
  while (!ready.empty()) {
    const int current = ready.top();
    ready.pop();
    order.push_back(current);
    for (int successor : successors[current]) {
      if (--indegree[successor] == 0) ready.push(successor);
    }
  }
  for (int i = 0; i < count; ++i) {
    if (indegree[i] > 0) unplaced->push_back(i);
  }
  return order;
}

KernelFamily AnchorFamily(OpClass op_class) {
  switch (op_class) {
    case OpClass::kReduction: return forge::v1::KERNEL_FAMILY_REDUCTION;
    case OpClass::kScan: return forge::v1::KERNEL_FAMILY_SCAN;
    case OpClass::kStencil: return forge::v1::KERNEL_FAMILY_STENCIL;
    case OpClass::kGemm: return forge::v1::KERNEL_FAMILY_GEMM;
    case OpClass::kConv: return forge::v1::KERNEL_FAMILY_CONV;
    case OpClass::kAttention: return forge::v1::KERNEL_FAMILY_ATTENTION;
    default: return forge::v1::KERNEL_FAMILY_UNSPECIFIED;
  }
}

class Partitioner {
 public:
  explicit Partitioner(const Graph& graph) : graph_(graph) {}

  absl::StatusOr<PartitionResult> Run() {
    if (absl::Status status = IndexGraph(); !status.ok()) return status;
    group_of_.assign(nodes_.size(), -1);
    GroupAttention();
    GroupGatedProducts();
    GroupAnchors();
    GroupPointwise();
    GroupOpaque();
    GroupViews();
    return BuildResult();
  }

 private:
  absl::Status IndexGraph();

  bool IsView(int node) const { return classes_[node] == OpClass::kView; }
  bool IsPointwise(int node) const {
    return classes_[node] == OpClass::kPointwise || classes_[node] == OpClass::kBatchNormEval;
  }

  // The non-view nodes that read `value`, directly or through views; `escapes` turns true when
  // the value or a view of it is a graph output.
  // (Iterative: the client chooses how long a chain of views is.)
  void ComputeReaders(const std::string& value, NodeSet* readers, bool* escapes) const {
    std::vector<const std::string*> pending = {&value};
    while (!pending.empty()) {
      const std::string& next = *pending.back();
      pending.pop_back();
      if (graph_outputs_.contains(next)) *escapes = true;
      auto it = readers_.find(next);
      if (it == readers_.end()) continue;
      for (int reader : it->second) {
        if (!IsView(reader)) {
          readers->insert(reader);
          continue;
        }
        for (const std::string& output : nodes_[reader]->outputs()) pending.push_back(&output);
      }
    }
  }

  // Whether `group` may take `more` nodes (kMaxFusedNodes, views not counted).
  bool HasRoom(int group, std::size_t more = 1) const {
    return groups_[group].nodes.size() + more <= static_cast<std::size_t>(kMaxFusedNodes);
  }

  std::vector<std::string> UsedOutputs(int node) const {
    std::vector<std::string> used;
    for (const std::string& output : nodes_[node]->outputs()) {
      if (graph_outputs_.contains(output) || readers_.contains(output)) used.push_back(output);
    }
    return used;
  }

  // The non-view node whose result `value` is, looking through views; kGraphInput for a graph
  // input or a view of one.
  int RootProducer(const std::string& value) const {
    int producer = producer_.at(value);
    while (producer != kGraphInput && IsView(producer) && !args_[producer].empty()) {
      producer = producer_.at(args_[producer].front());
    }
    return producer;
  }

  // The shape of `node`'s `weight` argument (a convolution's), empty when it has none.
  std::vector<int64_t> WeightShape(const Node& node) const {
    const forge::v1::Argument* weight = ops::FindArgument(node, "weight");
    if (weight == nullptr || weight->value_case() != forge::v1::Argument::kTensor) return {};
    auto it = values_.find(weight->tensor());
    if (it == values_.end()) return {};
    const auto& shape = it->second->tensor().shape();
    return {shape.begin(), shape.end()};
  }

  NodeSet Members(int group) const {
    return NodeSet(groups_[group].nodes.begin(), groups_[group].nodes.end());
  }

  int NewGroup(KernelFamily family, int node) {
    groups_.push_back(Group{family, {}, false});
    AddToGroup(static_cast<int>(groups_.size()) - 1, node);
    return static_cast<int>(groups_.size()) - 1;
  }
  void AddToGroup(int group, int node) {
    groups_[group].nodes.push_back(node);
    group_of_[node] = group;
  }

  // Whether fusing `members` into one kernel would make it depend on itself: some path leaves
  // the set through a non-view node and comes back. Views are looked through: they join a group
  // later and never move data between groups.
  bool WouldCreateCycle(const NodeSet& members) const;

  void GroupAttention();
  // Every gated product (SwiGLU) as one GEMM group; a near miss leaves a note on its gate.
  void GroupGatedProducts();
  // The node that alone reads `node`'s one used output (through views), or -1 when the output
  // has other readers or is a graph output.
  int SoleReader(int node) const;
  // The value that `value` views, through views; itself when a non-view node or an input
  // defines it.
  std::string ViewRoot(const std::string& value) const;
  void GroupAnchors();
  void AbsorbPrologue(int group, int reduction);
  void AbsorbEpilogue(int group, int anchor);
  void GroupPointwise();
  void GroupOpaque();
  void GroupViews();
  absl::StatusOr<PartitionResult> BuildResult();

  const Graph& graph_;
  std::vector<const Node*> nodes_;  // topological order
  std::vector<OpClass> classes_;
  std::vector<std::vector<std::string>> args_;  // tensor arguments per node
  absl::flat_hash_map<std::string, const forge::v1::Value*> values_;
  absl::flat_hash_map<std::string, const forge::v1::GraphInput*> graph_inputs_;
  absl::flat_hash_map<std::string, int> producer_;  // value -> node position or kGraphInput
  absl::flat_hash_map<std::string, std::vector<int>> readers_;  // value -> readers, each once
  absl::flat_hash_set<std::string> graph_outputs_;
  std::vector<int> group_of_;
  std::vector<Group> groups_;
  // Why a node is not fused as it looks it could be (explicit attention's near misses), for the
  // notes of the task it lands in.
  absl::flat_hash_map<int, std::vector<std::string>> node_notes_;
};

absl::Status Partitioner::IndexGraph() {
  for (const auto& value : graph_.values()) {
    if (!values_.emplace(value.name(), &value).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("duplicate value '", value.name(), "' in Graph.values"));
    }
  }
  // Which input or node defines each value, for error messages and the producer map.
  absl::flat_hash_map<std::string, std::string> definer;
  auto define = [&](const std::string& value, const std::string& by) -> absl::Status {
    if (!values_.contains(value)) {
      return absl::InvalidArgumentError(
          absl::StrCat(by, " defines value '", value, "', which has no entry in Graph.values"));
    }
    auto [it, inserted] = definer.emplace(value, by);
    if (!inserted) {
      return absl::InvalidArgumentError(absl::StrCat("duplicate value '", value, "': defined by ",
                                                     it->second, " and by ", by));
    }
    return absl::OkStatus();
  };
  absl::flat_hash_map<std::string, int> original_producer;
  for (const auto& input : graph_.inputs()) {
    if (absl::Status status = define(input.value_name(), "graph input"); !status.ok()) {
      return status;
    }
    graph_inputs_[input.value_name()] = &input;
    original_producer[input.value_name()] = kGraphInput;
  }
  absl::flat_hash_set<std::string> node_names;
  const int count = graph_.nodes_size();
  for (int i = 0; i < count; ++i) {
    const Node& node = graph_.nodes(i);
    if (!node_names.insert(node.name()).second) {
      return absl::InvalidArgumentError(absl::StrCat("duplicate node name '", node.name(), "'"));
    }
    for (const std::string& output : node.outputs()) {
      if (absl::Status status = define(output, absl::StrCat("node '", node.name(), "'"));
          !status.ok()) {
        return status;
      }
      original_producer[output] = i;
    }
  }
  std::vector<std::vector<int>> successors(count);
  std::vector<int> keys(count);
  for (int i = 0; i < count; ++i) {
    keys[i] = i;
    const Node& node = graph_.nodes(i);
    for (const std::string& arg : TensorArgumentNames(node)) {
      auto it = original_producer.find(arg);
      if (it == original_producer.end()) {
        return absl::InvalidArgumentError(absl::StrCat("node '", node.name(), "' (", node.op(),
                                                       ") reads undefined value '", arg, "'"));
      }
      if (it->second != kGraphInput) successors[it->second].push_back(i);
    }
  }
  for (const auto& output : graph_.outputs()) {
    if (!definer.contains(output.value_name())) {
      return absl::InvalidArgumentError(
          absl::StrCat("graph output names undefined value '", output.value_name(), "'"));
    }
    graph_outputs_.insert(output.value_name());
  }
  std::vector<int> unplaced;
  const std::vector<int> order = KahnOrder(successors, keys, &unplaced);
  if (!unplaced.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "dependency cycle: node '", graph_.nodes(unplaced.front()).name(),
        "' depends on its own output (", unplaced.size(), " nodes on or behind the cycle)"));
  }
  for (const int original : order) {
    const int position = static_cast<int>(nodes_.size());
    const Node& node = graph_.nodes(original);
    nodes_.push_back(&node);
    classes_.push_back(ClassifyNode(node));
    if (classes_.back() == OpClass::kConv && IsDepthwiseConv2d(node, WeightShape(node))) {
      classes_.back() = OpClass::kStencil;
    }
    args_.push_back(TensorArgumentNames(node));
    for (const std::string& output : node.outputs()) producer_[output] = position;
    for (const std::string& arg : args_.back()) {
      std::vector<int>& readers = readers_[arg];
      if (readers.empty() || readers.back() != position) readers.push_back(position);
    }
  }
  for (const auto& [name, input] : graph_inputs_) producer_[name] = kGraphInput;
  return absl::OkStatus();
}

bool Partitioner::WouldCreateCycle(const NodeSet& members) const {
  const int last = *std::max_element(members.begin(), members.end());
  // Nodes after the last member cannot lead back into the set (topological order).
  std::vector<int> through_views;
  std::vector<int> outside;
  auto push_readers = [&](int node, std::vector<int>& into) {
    for (const std::string& output : nodes_[node]->outputs()) {
      auto it = readers_.find(output);
      if (it == readers_.end()) continue;
      for (int reader : it->second) {
        if (reader <= last) into.push_back(reader);
      }
    }
  };
  for (int member : members) push_readers(member, through_views);
  NodeSet visited_views;
  while (!through_views.empty()) {
    const int node = through_views.back();
    through_views.pop_back();
    if (members.contains(node)) continue;
    if (!IsView(node)) {
      outside.push_back(node);
    } else if (visited_views.insert(node).second) {
      push_readers(node, through_views);
    }
  }
  NodeSet visited;
  while (!outside.empty()) {
    const int node = outside.back();
    outside.pop_back();
    if (members.contains(node)) return true;
    if (!visited.insert(node).second) continue;
    push_readers(node, outside);
  }
  return false;
}

// Explicit attention (attention_pattern.h): each match is one ATTENTION group anchored at its
// output matmul, which takes its epilogue like any anchor. Runs before the other anchors, which
// would otherwise split it into GEMM, softmax and GEMM groups.
void Partitioner::GroupAttention() {
  const AttentionMatches matches = FindExplicitAttention(graph_);
  if (matches.patterns.empty() && matches.near_misses.empty()) return;
  absl::flat_hash_map<const Node*, int> position;
  for (int i = 0; i < static_cast<int>(nodes_.size()); ++i) position[nodes_[i]] = i;
  auto at = [&](int graph_index) { return position.at(&graph_.nodes(graph_index)); };
  for (const AttentionMatches::NearMiss& miss : matches.near_misses) {
    node_notes_[at(miss.softmax)].push_back(miss.reason);
  }
  for (const AttentionPattern& pattern : matches.patterns) {
    NodeSet members;
    for (int node : pattern.nodes) members.insert(at(node));
    if (members.size() > static_cast<std::size_t>(kMaxFusedNodes) || WouldCreateCycle(members)) {
      node_notes_[at(pattern.softmax)].push_back(
          "not attention: one task of the pattern would depend on itself or be too long");
      continue;
    }
    const int anchor = at(pattern.output_matmul);
    const int group = NewGroup(forge::v1::KERNEL_FAMILY_ATTENTION, anchor);
    for (int node : members) {
      if (node != anchor) AddToGroup(group, node);
    }
    AbsorbEpilogue(group, anchor);
  }
}

int Partitioner::SoleReader(int node) const {
  const std::vector<std::string> used = UsedOutputs(node);
  if (used.size() != 1) return -1;
  NodeSet readers;
  bool escapes = false;
  ComputeReaders(used.front(), &readers, &escapes);
  return escapes || readers.size() != 1 ? -1 : *readers.begin();
}

std::string Partitioner::ViewRoot(const std::string& value) const {
  std::string root = value;
  for (int producer = producer_.at(root);
       producer != kGraphInput && IsView(producer) && !args_[producer].empty();
       producer = producer_.at(root)) {
    root = args_[producer].front();
  }
  return root;
}

// Rows of a product whose output is `tensor`: every dim but the last.
int64_t ProductRows(const forge::v1::TensorSpec& tensor) {
  int64_t rows = 1;
  for (int d = 0; d + 1 < tensor.shape_size(); ++d) rows *= tensor.shape(d);
  return rows;
}

// The most rows the gemv family takes (compiler/codegen/gemv/gemv.h's kMaxRows; the graph layer
// does not depend on codegen).
constexpr int64_t kMaxDecodeRows = 16;

// Gated products: act(A W_gate) * (A W_up), the gate and up projections of a Llama / Mistral
// MLP (SwiGLU: act = silu), found from their mul. Both projections are linear (no bias), mm or
// matmul reading the same A; the gate's product is read only by the activation, the activation and
// the up product only by the mul, each link direct (no view between). The group is the four nodes
// (views of A that only it reads join it later), and takes no epilogue: the gated kernel
// (cutlass_gemm's sm90_gated) writes the mul's result and nothing else, so an add or cast after it
// stays a task of its own. Only bfloat16 and float16 form the group (the gated kernel's dtypes): a
// float32 MLP keeps its two GEMM tasks, whose cuBLASLt and 3xTF32 candidates it needs; and only
// more than kMaxDecodeRows rows (a decode step's projections stay gemv's). A bfloat16 / float16 near miss (a bias, different inputs, a
// second reader) keeps them too, and the gate's task says why. Runs before the other anchors,
// which would take the activation and the mul as epilogues of two separate tasks.
void Partitioner::GroupGatedProducts() {
  // A projection: linear, mm or matmul by a 2-d weight (no batched product).
  auto is_projection = [&](int node) {
    if (node < 0 || classes_[node] != OpClass::kGemm || args_[node].size() < 2) return false;
    const std::string& op = nodes_[node]->op();
    return (op == "aten::linear" || op == "aten::mm" || op == "aten::matmul") &&
           values_.at(args_[node][1])->tensor().shape_size() == 2;
  };
  for (int mul = 0; mul < static_cast<int>(nodes_.size()); ++mul) {
    if (nodes_[mul]->op() != "aten::mul" || args_[mul].size() != 2 ||
        args_[mul][0] == args_[mul][1]) {
      continue;
    }
    int act = -1, gate = -1, up = -1;
    // Direct producers, no views between (the gated kernel's analysis reads the values as the
    // projections and the silu write them).
    for (int side = 0; side < 2 && act < 0; ++side) {
      const int candidate_act = producer_.at(args_[mul][side]);
      const int candidate_up = producer_.at(args_[mul][1 - side]);
      if (candidate_act == kGraphInput || nodes_[candidate_act]->op() != "aten::silu" ||
          args_[candidate_act].size() != 1 || !is_projection(candidate_up)) {
        continue;
      }
      const int candidate_gate = producer_.at(args_[candidate_act][0]);
      if (!is_projection(candidate_gate) || candidate_gate == candidate_up) continue;
      act = candidate_act;
      gate = candidate_gate;
      up = candidate_up;
    }
    if (act < 0) continue;
    const std::vector<int> members = {gate, act, up, mul};
    if (std::any_of(members.begin(), members.end(), [&](int node) { return group_of_[node] >= 0; })) {
      continue;  // explicit attention's
    }
    // Only the gated kernel's dtypes: a float32 MLP keeps its two GEMM tasks without a note
    // (every float32 Llama-style model has one; nothing is missed).
    const forge::v1::DType dtype = values_.at(nodes_[mul]->outputs(0))->tensor().dtype();
    if (dtype != forge::v1::DTYPE_BFLOAT16 && dtype != forge::v1::DTYPE_FLOAT16) continue;
    // Nor decode's few rows: there the time is reading the weights once, which the gemv family
    // does per projection near the bandwidth limit (M <= 16, gemv.h's kMaxRows), while the gated
    // kernel repacks both weights every launch (twice the traffic) and gemv declines a gated task.
    if (ProductRows(values_.at(nodes_[mul]->outputs(0))->tensor()) <= kMaxDecodeRows) continue;
    std::string obstacle;
    if (SoleReader(gate) != act || SoleReader(act) != mul || SoleReader(up) != mul) {
      obstacle = "the projections or the silu are read elsewhere too";
    } else if (ViewRoot(args_[gate][0]) != ViewRoot(args_[up][0])) {
      obstacle = "the gate and up projections read different inputs";
    } else if (args_[gate].size() != 2 || args_[up].size() != 2) {
      obstacle = "a projection has a bias";
    } else if (WouldCreateCycle(NodeSet(members.begin(), members.end()))) {
      obstacle = "one task would depend on itself";
    }
    if (!obstacle.empty()) {
      node_notes_[gate].push_back(absl::StrCat("not a gated product (SwiGLU): ", obstacle,
                                               "; the projections stay separate GEMM tasks"));
      continue;
    }
    const int group = NewGroup(forge::v1::KERNEL_FAMILY_GEMM, gate);
    for (int node : {act, up, mul}) AddToGroup(group, node);
  }
}

void Partitioner::GroupAnchors() {
  for (int node = 0; node < static_cast<int>(nodes_.size()); ++node) {
    if (group_of_[node] >= 0) continue;  // explicit attention's
    const KernelFamily family = AnchorFamily(classes_[node]);
    if (family == forge::v1::KERNEL_FAMILY_UNSPECIFIED) continue;
    const int group = NewGroup(family, node);
    if (classes_[node] == OpClass::kReduction || classes_[node] == OpClass::kScan ||
        classes_[node] == OpClass::kStencil) {
      AbsorbPrologue(group, node);
    }
    AbsorbEpilogue(group, node);
  }
}

void Partitioner::AbsorbPrologue(int group, int reduction) {
  std::vector<int> pending = {reduction};
  while (!pending.empty()) {
    const int consumer = pending.back();
    pending.pop_back();
    for (const std::string& arg : args_[consumer]) {
      const int producer = RootProducer(arg);
      if (producer == kGraphInput || group_of_[producer] >= 0 || !IsPointwise(producer)) continue;
      if (!HasRoom(group)) return;
      bool only_feeds_group = true;
      for (const std::string& output : UsedOutputs(producer)) {
        NodeSet readers;
        bool escapes = false;
        ComputeReaders(output, &readers, &escapes);
        only_feeds_group = only_feeds_group && !escapes &&
            std::all_of(readers.begin(), readers.end(),
                        [&](int reader) { return group_of_[reader] == group; });
      }
      if (!only_feeds_group) continue;
      NodeSet members = Members(group);
      members.insert(producer);
      if (WouldCreateCycle(members)) continue;
      AddToGroup(group, producer);
      pending.push_back(producer);
    }
  }
}

void Partitioner::AbsorbEpilogue(int group, int anchor) {
  int last = anchor;
  while (true) {
    const std::vector<std::string> used = UsedOutputs(last);
    if (used.size() != 1) return;
    NodeSet readers;
    bool escapes = false;
    ComputeReaders(used.front(), &readers, &escapes);
    if (escapes || readers.size() != 1) return;
    const int consumer = *readers.begin();
    if (!IsPointwise(consumer) || group_of_[consumer] >= 0 || !HasRoom(group)) return;
    NodeSet members = Members(group);
    members.insert(consumer);
    if (WouldCreateCycle(members)) return;
    AddToGroup(group, consumer);
    last = consumer;
  }
}

void Partitioner::GroupPointwise() {
  for (int node = 0; node < static_cast<int>(nodes_.size()); ++node) {
    if (!IsPointwise(node) || group_of_[node] >= 0) continue;
    std::vector<int> candidates;
    for (const std::string& arg : args_[node]) {
      const int producer = RootProducer(arg);
      if (producer == kGraphInput) continue;
      const int group = group_of_[producer];
      if (group >= 0 && groups_[group].family == forge::v1::KERNEL_FAMILY_POINTWISE &&
          std::find(candidates.begin(), candidates.end(), group) == candidates.end()) {
        candidates.push_back(group);
      }
    }
    // First try to merge every producing pointwise group; then each alone.
    NodeSet all = {node};
    for (int group : candidates) all.merge(Members(group));
    if (candidates.size() > 1 && all.size() <= static_cast<std::size_t>(kMaxFusedNodes) &&
        !WouldCreateCycle(all)) {
      const int target = candidates.front();
      for (std::size_t i = 1; i < candidates.size(); ++i) {
        Group& source = groups_[candidates[i]];
        for (int member : source.nodes) AddToGroup(target, member);
        source.nodes.clear();
        source.merged_away = true;
      }
      AddToGroup(target, node);
      continue;
    }
    bool placed = false;
    for (int group : candidates) {
      if (!HasRoom(group)) continue;
      NodeSet members = Members(group);
      members.insert(node);
      if (!WouldCreateCycle(members)) {
        AddToGroup(group, node);
        placed = true;
        break;
      }
    }
    if (!placed) NewGroup(forge::v1::KERNEL_FAMILY_POINTWISE, node);
  }
}

void Partitioner::GroupOpaque() {
  for (int node = 0; node < static_cast<int>(nodes_.size()); ++node) {
    if (classes_[node] == OpClass::kOpaque) NewGroup(forge::v1::KERNEL_FAMILY_ATEN, node);
  }
}

void Partitioner::GroupViews() {
  for (int node = 0; node < static_cast<int>(nodes_.size()); ++node) {
    if (!IsView(node)) continue;
    NodeSet readers;
    bool escapes = false;
    for (const std::string& output : nodes_[node]->outputs()) {
      ComputeReaders(output, &readers, &escapes);
    }
    absl::flat_hash_set<int> reading_groups;
    for (int reader : readers) reading_groups.insert(group_of_[reader]);
    if (!escapes && reading_groups.size() == 1) {
      AddToGroup(*reading_groups.begin(), node);
      continue;
    }
    const int producer = args_[node].empty() ? kGraphInput : producer_.at(args_[node].front());
    if (producer != kGraphInput) {
      AddToGroup(group_of_[producer], node);
    } else {
      NewGroup(forge::v1::KERNEL_FAMILY_ATEN, node);
    }
  }
}

absl::StatusOr<PartitionResult> Partitioner::BuildResult() {
  std::vector<int> live;
  for (int group = 0; group < static_cast<int>(groups_.size()); ++group) {
    if (groups_[group].merged_away) continue;
    std::sort(groups_[group].nodes.begin(), groups_[group].nodes.end());
    live.push_back(group);
  }
  // Position of each group in `live`, its dependencies, and its boundary values.
  absl::flat_hash_map<int, int> live_index;
  for (int i = 0; i < static_cast<int>(live.size()); ++i) live_index[live[i]] = i;
  std::vector<std::vector<std::string>> inputs(live.size());
  std::vector<std::vector<std::string>> outputs(live.size());
  std::vector<std::vector<int>> successors(live.size());
  std::vector<int> keys(live.size());
  for (int i = 0; i < static_cast<int>(live.size()); ++i) {
    const Group& group = groups_[live[i]];
    keys[i] = group.nodes.front();
    absl::flat_hash_set<std::string> seen;
    for (int node : group.nodes) {
      for (const std::string& arg : args_[node]) {
        const int producer = producer_.at(arg);
        if (producer != kGraphInput && group_of_[producer] == live[i]) continue;
        if (!seen.insert(arg).second) continue;
        inputs[i].push_back(arg);
        if (producer != kGraphInput) successors[live_index.at(group_of_[producer])].push_back(i);
      }
      for (const std::string& output : nodes_[node]->outputs()) {
        auto readers = readers_.find(output);
        const bool read_outside = readers != readers_.end() &&
            std::any_of(readers->second.begin(), readers->second.end(),
                        [&](int reader) { return group_of_[reader] != live[i]; });
        if (read_outside || graph_outputs_.contains(output)) outputs[i].push_back(output);
      }
    }
  }
  std::vector<int> unplaced;
  const std::vector<int> order = KahnOrder(successors, keys, &unplaced);
  if (!unplaced.empty()) {
    return absl::InternalError(absl::StrCat(
        "partition produced groups that depend on each other in a cycle, at node '",
        nodes_[groups_[live[unplaced.front()]].nodes.front()]->name(), "'"));
  }

  PartitionResult result;
  absl::flat_hash_map<std::string, int> task_of_digest;
  for (const int i : order) {
    const Group& group = groups_[live[i]];
    Graph sub;
    for (const std::string& input : inputs[i]) {
      auto* graph_input = sub.add_inputs();
      auto model_input = graph_inputs_.find(input);
      graph_input->set_kind(model_input == graph_inputs_.end() ? forge::v1::INPUT_KIND_USER_INPUT
                                                               : model_input->second->kind());
      graph_input->set_value_name(input);
      *sub.add_values() = *values_.at(input);
    }
    TaskInstance instance;
    for (int node : group.nodes) {
      *sub.add_nodes() = *nodes_[node];
      for (const std::string& output : nodes_[node]->outputs()) *sub.add_values() = *values_.at(output);
      instance.node_names.push_back(nodes_[node]->name());
    }
    for (const std::string& output : outputs[i]) {
      auto* graph_output = sub.add_outputs();
      graph_output->set_kind(forge::v1::OUTPUT_KIND_USER_OUTPUT);
      graph_output->set_value_name(output);
    }
    instance.task_digest = TaskDigest(sub);
    instance.input_values = inputs[i];
    instance.output_values = outputs[i];
    auto [it, inserted] = task_of_digest.emplace(instance.task_digest, result.tasks.size());
    instance.task_index = it->second;
    if (inserted) {
      absl::StatusOr<TaskCost> cost = ComputeTaskCost(sub);
      if (!cost.ok()) return cost.status();
      KernelTask& task = result.tasks.emplace_back();
      task.set_digest(instance.task_digest);
      task.set_family(group.family);
      for (const std::string& input : inputs[i]) *task.add_inputs() = values_.at(input)->tensor();
      for (const std::string& output : outputs[i]) {
        *task.add_outputs() = values_.at(output)->tensor();
      }
      task.set_flops(cost->flops);
      task.set_min_bytes(cost->min_bytes);
      for (int node : group.nodes) {
        auto notes = node_notes_.find(node);
        if (notes == node_notes_.end()) continue;
        for (const std::string& note : notes->second) {
          task.add_notes(absl::StrCat(nodes_[node]->name(), ": ", note));
        }
      }
      if (group.family == forge::v1::KERNEL_FAMILY_ATEN) {
        for (const forge::v1::Node& node : sub.nodes()) {
          task.add_notes(absl::StrCat(node.op(), ".", node.overload(), ": ", AtenReason(node),
                                      "; it runs as an ATen call"));
        }
      }
      *task.mutable_group() = std::move(sub);
    }
    KernelTask& task = result.tasks[instance.task_index];
    task.set_occurrences(task.occurrences() + 1);
    result.instances.push_back(std::move(instance));
  }
  return result;
}

}  // namespace

absl::StatusOr<PartitionResult> Partition(const Graph& graph) {
  return Partitioner(graph).Run();
}

}  // namespace forge::graph
