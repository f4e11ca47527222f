#include "compiler/codegen/flash_attention/flash_attention.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <iterator>
#include <limits>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/dtype/dtype.h"
#include "common/status/status_macros.h"
#include "compiler/codegen/attention_analysis/attention_analysis.h"
#include "compiler/codegen/cuda_expr.h"
#include "compiler/codegen/flash_attention/cuda_sources.h"
#include "compiler/codegen/kernel_abi.h"

namespace forge::codegen {
namespace {

using forge::v1::DType;
using forge::v1::KernelTask;
using forge::v1::TensorSpec;

constexpr int64_t kMaxVectorBytes = 16;
// Registers of data a thread may hold (queries and accumulators of its rows, K and V loads in
// flight): past this, ptxas spills (the index arithmetic and the softmax state need the rest).
constexpr int64_t kMaxDataRegisters = 160;
// The SMs the default split aims to fill twice over (an H100 / H200's 132).
constexpr int64_t kDefaultTargetBlocks = 2 * 132;
// Registers of an SM (sm_80 and sm_90 alike): a cap of max_registers per thread lets
// kRegistersPerSm / (max_registers x threads) blocks share an SM.
constexpr int64_t kRegistersPerSm = 64 * 1024;
// The cap the default asks for (four blocks of four warps per SM: the default grid of about four
// blocks per SM in one wave) where the point's data and row state leave room under it.
constexpr int64_t kDefaultMaxRegisters = 128;
// Registers of data and per-row state (each row's max, sum, unroll scores and about two of
// indexing) a point may hold under that cap: past this, ptxas spills (checked by compiling every
// capped rows / unroll / vector point of six test tasks for sm_90: 8 rows at unroll 1 with 72
// registers of data spilled; 139 points at or under this budget did not).
constexpr int64_t kMaxCappedStateRegisters = 104;
// The ring depths the default tries, deepest first (0, loads into registers, where none fits).
constexpr int64_t kDefaultStages[] = {4, 3, 2, 0};
constexpr double kLog2E = 1.4426950408889634;

absl::Status Unimplemented(absl::string_view why) {
  return absl::UnimplementedError(absl::StrCat("flash_attention: ", why));
}
absl::Status Invalid(absl::string_view why) {
  return absl::InvalidArgumentError(absl::StrCat("flash_attention: ", why));
}

int64_t CeilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }
int64_t PowerOfTwoAtLeast(int64_t n) {
  int64_t p = 1;
  while (p < n) p *= 2;
  return p;
}

// Element strides of an operand along (batch, head, row, last dim): a rank-3 operand has one
// head (stride 0).
std::vector<int64_t> Strides4(const std::vector<int64_t>& strides) {
  if (strides.size() == 3) return {strides[0], 0, strides[1], strides[2]};
  return strides;
}

// Where an operand's elements are: a task input and the element offset of the operand's first
// element from that input's first.
struct OperandSource {
  int input = -1;
  int64_t offset = 0;
};

// What the family needs to know about a task, checked once.
struct DecodeTask {
  AttentionAnalysis a;
  int64_t group = 1;       // query heads per K/V head
  int64_t group_rows = 1;  // group x Sq: the rows one (batch, K/V head) serves
  int64_t keys = 0;        // keys the kernel scans
  std::vector<int64_t> q, k, v, out, mask;  // strides along (batch, head, row or key, last)
  OperandSource q_source, k_source, v_source;
  int64_t q_offset = 0, k_offset = 0, v_offset = 0;  // storage offsets (alignment)
  int mask_input = -1;
  DType mask_dtype = forge::v1::DTYPE_UNSPECIFIED;
  double fill = 0;  // a hidden score, scaled as the kernel's scores (base 2)
  double add_scale = 0;
  bool empty_nan = false;
};

// Views that always alias their input ("self"), and those that do when their input is
// contiguous (a reshape of anything else copies).
constexpr absl::string_view kAliasingViews[] = {
    "aten::view",  "aten::_unsafe_view", "aten::transpose", "aten::permute", "aten::unsqueeze",
    "aten::squeeze", "aten::expand",     "aten::slice",     "aten::select",  "aten::t",
    "aten::alias", "aten::detach",       "aten::narrow",    "aten::split",   "aten::chunk",
    "aten::split_with_sizes", "aten::unbind"};
constexpr absl::string_view kContiguousReshapes[] = {"aten::reshape", "aten::flatten",
                                                     "aten::unflatten", "aten::view_as"};

// The operand as the kernel reads it: a task input, or a chain of aliasing views of one (a
// transpose of a projection, a slice of a KV cache), read with the strides and storage offset
// the export recorded for the viewed value. Anything the group computes is declined.
absl::StatusOr<OperandSource> SourceOf(const GroupView& view, const AttentionOperand& operand,
                                       absl::string_view what) {
  if (operand.strides.empty() || operand.strides.back() != 1) {
    return Unimplemented(absl::StrCat(what, "'s head dim is not contiguous"));
  }
  if (operand.input >= 0) return OperandSource{operand.input, 0};
  std::string name = operand.value;
  for (int depth = 0; depth < 32 && view.InputPosition(name) < 0; ++depth) {
    const forge::v1::Node* node = view.Producer(name);
    const auto is = [&](absl::string_view op) { return node->op() == op; };
    const std::string self = node == nullptr ? "" : TensorArgument(*node, "self");
    const forge::v1::Value* input = self.empty() ? nullptr : view.FindValue(self);
    const bool aliases =
        node != nullptr && !self.empty() &&
        (std::any_of(std::begin(kAliasingViews), std::end(kAliasingViews), is) ||
         (std::any_of(std::begin(kContiguousReshapes), std::end(kContiguousReshapes), is) &&
          ((input != nullptr && IsContiguous(input->tensor())) ||
           (view.InputPosition(self) >= 0 &&
            IsContiguous(view.InputSpec(view.InputPosition(self)))))));
    if (!aliases) {
      return Unimplemented(absl::StrCat(
          what, " (", operand.value, ") is computed in the group",
          node == nullptr ? "" : absl::StrCat(" by ", DescribeNode(*node)),
          ", not a task input or an aliasing view of one"));
    }
    name = self;
  }
  const int position = view.InputPosition(name);
  const forge::v1::Value* value = view.FindValue(operand.value);
  if (position < 0 || value == nullptr ||
      value->tensor().strides_size() != value->tensor().shape_size()) {
    return Unimplemented(absl::StrCat(what, " (", operand.value,
                                      ") is a view without recorded strides"));
  }
  const TensorSpec& source = view.InputSpec(position);
  const int64_t offset = value->tensor().storage_offset() - source.storage_offset();
  if (offset < 0 || offset + MaxOffset(value->tensor()) > MaxOffset(source)) {
    return Unimplemented(absl::StrCat(what, " (", operand.value, ") reaches outside ", name));
  }
  return OperandSource{position, offset};
}

// The mask's strides along the attention's (batch, head, row, key), broadcast dims 0.
absl::StatusOr<std::vector<int64_t>> MaskStrides(const AttentionAnalysis& a) {
  const std::vector<int64_t> target =
      a.query.shape.size() == 4
          ? std::vector<int64_t>{a.batch, a.heads, a.q_len, a.kv_len}
          : std::vector<int64_t>{a.batch, a.q_len, a.kv_len};
  const std::vector<int64_t>& shape = a.mask_operand.shape;
  if (shape.size() > target.size()) {
    return Unimplemented(absl::StrCat("a rank-", shape.size(), " mask over rank-", target.size(),
                                      " scores"));
  }
  std::vector<int64_t> strides(target.size(), 0);
  const size_t skip = target.size() - shape.size();
  for (size_t d = 0; d < shape.size(); ++d) {
    const int64_t want = target[skip + d];
    if (shape[d] != want && shape[d] != 1) {
      return Unimplemented(absl::StrCat("the mask's dim ", d, " (", shape[d],
                                        ") does not broadcast to the scores' ", want));
    }
    strides[skip + d] = shape[d] == 1 ? 0 : a.mask_operand.strides[d];
  }
  return Strides4(strides);
}

absl::StatusOr<DecodeTask> Analyze(const KernelTask& task) {
  absl::StatusOr<AttentionAnalysis> analysis = AnalyzeAttention(task);
  if (!analysis.ok()) {
    return absl::Status(analysis.status().code(),
                        absl::StrCat("flash_attention: ", analysis.status().message()));
  }
  DecodeTask t;
  t.a = *std::move(analysis);
  const AttentionAnalysis& a = t.a;
  const std::string what = DescribeAttention(a);
  if (a.q_len > FlashAttentionFamily::kMaxQueryLength) {
    return Unimplemented(absl::StrCat(what, ": ", a.q_len, " queries per head; the decode "
                                      "template takes at most ",
                                      FlashAttentionFamily::kMaxQueryLength));
  }
  if (a.dtype != forge::v1::DTYPE_FLOAT32 && a.dtype != forge::v1::DTYPE_FLOAT16 &&
      a.dtype != forge::v1::DTYPE_BFLOAT16) {
    return Unimplemented(absl::StrCat(what, ": runs float32, float16 and bfloat16 only"));
  }
  if (a.head_dim != a.value_dim || a.head_dim > FlashAttentionFamily::kMaxHeadDim ||
      a.head_dim <= 0) {
    return Unimplemented(absl::StrCat(what, ": needs one head dim for Q, K and V, at most ",
                                      FlashAttentionFamily::kMaxHeadDim));
  }
  if (a.kv_len <= a.q_len) {
    return Unimplemented(absl::StrCat(what, ": not decode (", a.kv_len, " keys for ", a.q_len,
                                      " queries; the template reads a KV cache longer than the "
                                      "queries, prefill kernels are not built)"));
  }
  FORGE_ASSIGN_OR_RETURN(const GroupView view, GroupView::Create(task));
  FORGE_ASSIGN_OR_RETURN(t.q_source, SourceOf(view, a.query, "Q"));
  FORGE_ASSIGN_OR_RETURN(t.k_source, SourceOf(view, a.key, "K"));
  FORGE_ASSIGN_OR_RETURN(t.v_source, SourceOf(view, a.value, "V"));
  if (!a.epilogue.empty()) {
    return Unimplemented(absl::StrCat(what, ": a fused epilogue (", a.epilogue.size(),
                                      " nodes after the attention) is not emitted yet"));
  }
  if (task.outputs_size() != 1 || task.group().outputs_size() != 1 ||
      task.group().outputs(0).value_name() != a.output) {
    return Unimplemented(absl::StrCat(what, ": the task's one output must be the attention's"));
  }
  const TensorSpec& out = task.outputs(0);
  if (out.dtype() != a.dtype || out.storage_offset() != 0 ||
      out.strides_size() != static_cast<int>(a.query.shape.size())) {
    return Unimplemented(absl::StrCat(what, ": the output must be of the inputs' dtype, with "
                                      "strides, at storage offset 0"));
  }
  t.group = a.kv_repeat();
  t.group_rows = t.group * a.q_len;
  t.q = Strides4(a.query.strides);
  t.k = Strides4(a.key.strides);
  t.v = Strides4(a.value.strides);
  t.out = Strides4(std::vector<int64_t>(out.strides().begin(), out.strides().end()));
  // Vectors must be aligned where each operand's first element lies in its buffer.
  t.q_offset = task.inputs(t.q_source.input).storage_offset() + t.q_source.offset;
  t.k_offset = task.inputs(t.k_source.input).storage_offset() + t.k_source.offset;
  t.v_offset = task.inputs(t.v_source.input).storage_offset() + t.v_source.offset;
  // A hidden score, as the kernel scores (scale times log2(e)): SDPA's is -inf; the explicit
  // pattern's is its fill, scaled too when it masks before it scales.
  const double fill = a.mask_before_scale ? a.mask_fill * a.scale : a.mask_fill;
  // A finite fill stays finite in base-2 units (finfo.min times log2(e) is past FLT_MAX): every
  // key of a row of such fills then weighs the same, as in the reference.
  t.fill = std::isinf(fill) ? fill
                            : std::clamp(fill * kLog2E,
                                         -static_cast<double>(std::numeric_limits<float>::max()),
                                         static_cast<double>(std::numeric_limits<float>::max()));
  t.add_scale = (a.mask_before_scale ? a.scale : 1.0) * kLog2E;
  t.empty_nan = a.spelling == AttentionSpelling::kExplicit;
  t.keys = a.kv_len;
  switch (a.mask) {
    case AttentionMask::kNone: break;
    case AttentionMask::kCausal:
      // Row i sees keys 0..i (top-left): with an infinite fill, the keys past the last row's
      // weigh nothing and are not read.
      if (std::isinf(t.fill) && t.fill < 0) t.keys = std::min(a.kv_len, a.q_len);
      break;
    case AttentionMask::kKeep:
    case AttentionMask::kMaskOut:
    case AttentionMask::kAdditive: {
      if (a.mask_operand.input < 0) {
        return Unimplemented(absl::StrCat(what, ": the mask (", a.mask_operand.value,
                                          ") is built in the group, not a task input"));
      }
      t.mask_input = a.mask_operand.input;
      t.mask_dtype = task.inputs(t.mask_input).dtype();
      const bool boolean = a.mask != AttentionMask::kAdditive;
      if (boolean != (t.mask_dtype == forge::v1::DTYPE_BOOL) ||
          (!boolean && t.mask_dtype != forge::v1::DTYPE_FLOAT32 &&
           t.mask_dtype != forge::v1::DTYPE_FLOAT16 &&
           t.mask_dtype != forge::v1::DTYPE_BFLOAT16)) {
        return Unimplemented(absl::StrCat(what, ": a ", DTypeName(t.mask_dtype), " mask"));
      }
      FORGE_ASSIGN_OR_RETURN(t.mask, MaskStrides(a));
      break;
    }
  }
  if (std::isnan(t.fill)) return Unimplemented(absl::StrCat(what, ": a NaN fill"));
  return t;
}

TemplateSpace Space() {
  return {FlashAttentionFamily::kDecodeTemplate,
          {{"split_keys", {32, 64, 128, 256, 512, 1024, 2048, 4096}, 256},
           {"warps", {1, 2, 4, 8}, 4},
           {"unroll", {1, 2, 4}, 2},
           {"vector_width", {1, 2, 4, 8}, 1},
           {"rows", {1, 2, 4, 8, 16}, 1},
           {"stages", {0, 2, 3, 4}, 0},
           {"max_registers", {0, kDefaultMaxRegisters}, 0}}};
}

// A point's kernel: what the source's constants and the launch follow from.
struct DecodeLayout {
  int64_t split_keys = 0, warps = 0, unroll = 0, vector = 0, rows = 0, stages = 0;
  int64_t max_registers = 0;   // 0: the compiler's choice
  int64_t min_blocks = 0;      // what __launch_bounds__ asks for under the cap (0: nothing)
  int64_t element_bytes = 0;
  int64_t lanes_per_key = 0;   // a power of two, at most 32
  int64_t vectors_per_lane = 0;
  int64_t splits = 0, chunks = 0, groups = 0;
  int64_t keys_per_step = 0;   // keys one step of the block reads
  int64_t data_registers = 0;
  int64_t state_registers = 0;  // data_registers and each row's state (softmax, indexing)
  int64_t ring_bytes = 0;      // the cp.async ring (stages > 0): stages steps of K and V
  int64_t shared_bytes = 0;
  int64_t workspace_bytes = 0;
};

DecodeLayout LayoutOf(const DecodeTask& t, const SchedulePoint& point) {
  const auto& params = point.parameters;
  DecodeLayout l;
  l.split_keys = params.at("split_keys");
  l.warps = params.at("warps");
  l.unroll = params.at("unroll");
  l.vector = params.at("vector_width");
  l.rows = params.at("rows");
  l.stages = params.at("stages");
  l.max_registers = params.at("max_registers");
  if (l.max_registers > 0) l.min_blocks = kRegistersPerSm / (l.max_registers * 32 * l.warps);
  l.element_bytes = ElementBytes(t.a.dtype);
  const int64_t vectors = CeilDiv(t.a.head_dim, l.vector);
  l.lanes_per_key = std::min<int64_t>(32, PowerOfTwoAtLeast(vectors));
  l.vectors_per_lane = CeilDiv(vectors, l.lanes_per_key);
  l.splits = CeilDiv(t.keys, l.split_keys);
  l.chunks = CeilDiv(t.group_rows, l.rows);
  l.groups = t.a.batch * t.a.kv_heads;
  l.keys_per_step = l.warps * (32 / l.lanes_per_key);
  const int64_t width = l.vectors_per_lane * l.vector;
  l.data_registers = 2 * l.rows * width +
                     2 * l.unroll * l.vectors_per_lane * CeilDiv(l.vector * l.element_bytes, 4);
  // Each thread's vectors of K and V for one step, per stage.
  l.ring_bytes = l.stages * l.unroll * l.vectors_per_lane * 2 * (32 * l.warps) * l.vector *
                 l.element_bytes;
  l.state_registers = l.data_registers + l.rows * (4 + l.unroll);
  l.shared_bytes = 4 * (l.warps * l.rows * (t.a.head_dim + 2)) + l.ring_bytes;
  if (l.splits > 1) {
    l.shared_bytes += 4 * (l.rows * l.splits + l.rows) + 4;
    l.workspace_bytes = 4 * l.groups * l.chunks * l.rows * l.splits * (t.a.head_dim + 2);
  }
  return l;
}

absl::Status ValidateLayout(const DecodeTask& t, const SchedulePoint& point) {
  FORGE_RETURN_IF_ERROR(CheckPointInSpace(Space(), point));
  const DecodeLayout l = LayoutOf(t, point);
  const AttentionAnalysis& a = t.a;
  if (l.vector * l.element_bytes > kMaxVectorBytes) {
    return Invalid(absl::StrCat("vector_width ", l.vector, " of ", l.element_bytes,
                                "-byte elements exceeds a 16-byte load"));
  }
  if (l.vector > 1) {
    const std::pair<std::string, int64_t> counts[] = {
        {"the head dim", a.head_dim},
        {"Q's batch stride", t.q[0]}, {"Q's head stride", t.q[1]}, {"Q's row stride", t.q[2]},
        {"K's batch stride", t.k[0]}, {"K's head stride", t.k[1]}, {"K's key stride", t.k[2]},
        {"V's batch stride", t.v[0]}, {"V's head stride", t.v[1]}, {"V's key stride", t.v[2]},
        {"Q's storage offset", t.q_offset}, {"K's storage offset", t.k_offset},
        {"V's storage offset", t.v_offset}};
    for (const auto& [what, count] : counts) {
      if (count % l.vector != 0) {
        return Invalid(absl::StrCat("vector_width ", l.vector, " does not divide ", what, " (",
                                    count, "): the vectors would be misaligned"));
      }
    }
  }
  const int64_t vector_bytes = l.vector * l.element_bytes;
  if (l.stages > 0 && vector_bytes != 4 && vector_bytes != 8 && vector_bytes != 16) {
    return Invalid(absl::StrCat("stages ", l.stages, " copies K and V with cp.async, which moves "
                                "4, 8 or 16 bytes: vector_width ", l.vector, " of ",
                                l.element_bytes, "-byte elements is ", vector_bytes, " bytes"));
  }
  if (l.rows > 1 && l.rows >= 2 * t.group_rows) {
    return Invalid(absl::StrCat("rows ", l.rows, " for ", t.group_rows,
                                " query rows per K/V head: fewer rows cover them"));
  }
  if (l.data_registers > kMaxDataRegisters) {
    return Invalid(absl::StrCat(l.rows, " rows of ", l.vectors_per_lane * l.vector,
                                " elements per lane and ", l.unroll,
                                " keys of K and V in flight take ", l.data_registers,
                                " registers of data, past ", kMaxDataRegisters,
                                " (the kernel would spill)"));
  }
  if (l.max_registers > 0 && l.state_registers > kMaxCappedStateRegisters) {
    return Invalid(absl::StrCat("max_registers ", l.max_registers, " with ", l.state_registers,
                                " registers of data and row state (past ",
                                kMaxCappedStateRegisters, "): the kernel would spill under the cap"));
  }
  if (l.split_keys > 32 && l.split_keys >= 2 * t.keys) {
    return Invalid(absl::StrCat("split_keys ", l.split_keys, " for ", t.keys,
                                " keys: a smaller split is the same kernel"));
  }
  if (l.split_keys < l.keys_per_step) {
    return Invalid(absl::StrCat("split_keys ", l.split_keys, " leaves warps idle: a step of ",
                                l.warps, " warps reads ", l.keys_per_step, " keys"));
  }
  if (l.shared_bytes > kMaxStaticSharedBytes) {
    return Invalid(absl::StrCat(
        l.shared_bytes, " bytes of shared memory (", l.warps, " warps x ", l.rows, " rows x D ",
        a.head_dim,
        l.ring_bytes > 0 ? absl::StrCat(", a ring of ", l.stages, " stages of ", l.unroll,
                                        " keys per lane group: ", l.ring_bytes, " bytes")
                         : "",
        l.splits > 1 ? absl::StrCat(", ", l.splits, " splits' weights") : "",
        ") exceed 48 KiB"));
  }
  if (l.workspace_bytes > FlashAttentionFamily::kMaxWorkspaceBytes) {
    return Invalid(absl::StrCat(l.splits, " splits' partials take ", l.workspace_bytes,
                                " bytes, past ", FlashAttentionFamily::kMaxWorkspaceBytes));
  }
  if (l.splits > kMaxGridBlocks || l.groups > kMaxGridYZ || l.chunks > kMaxGridYZ) {
    return Invalid(absl::StrCat("the grid (", l.splits, " x ", l.groups, " x ", l.chunks,
                                ") exceeds CUDA's limits"));
  }
  return absl::OkStatus();
}

// A float constant for the source: "-inf" and "inf" spelled through the bits.
std::string FloatLiteral(double value) {
  if (std::isinf(value)) return value < 0 ? "FORGE_FA_NEG_INF" : "(-FORGE_FA_NEG_INF)";
  return absl::StrFormat("%.9gf", value);
}

}  // namespace

absl::Status FlashAttentionFamily::Applies(const KernelTask& task) const {
  return Analyze(task).status();
}

absl::StatusOr<std::vector<TemplateSpace>> FlashAttentionFamily::ScheduleSpace(
    const KernelTask& task) const {
  FORGE_ASSIGN_OR_RETURN(const DecodeTask t, Analyze(task));
  TemplateSpace space = Space();
  auto parameter = [&](absl::string_view name) -> ScheduleParameter& {
    return *std::find_if(space.parameters.begin(), space.parameters.end(),
                         [&](const ScheduleParameter& p) { return p.name == name; });
  };
  // Default: the group's rows in one block (K and V read once) up to 8, the widest valid vector,
  // the deepest cp.async ring that fits (kDefaultStages first: more bytes in flight per SM, which
  // is what a decode kernel's bandwidth is bound by), then the longest split that still gives
  // kDefaultTargetBlocks blocks (two per SM), fewer rows and loads in flight until the point fits.
  const int64_t rows = std::min<int64_t>(8, PowerOfTwoAtLeast(t.group_rows));
  const std::vector<int64_t>& splits = parameter("split_keys").values;
  for (int64_t r = rows; r >= 1; r /= 2) {
    for (int64_t unroll : {int64_t{2}, int64_t{1}}) {
      for (int64_t width : {8, 4, 2, 1}) {
        for (int64_t stages : kDefaultStages) {
          SchedulePoint point = DefaultPoint(space);
          point.parameters["rows"] = r;
          point.parameters["unroll"] = unroll;
          point.parameters["vector_width"] = width;
          point.parameters["stages"] = stages;
          point.parameters["max_registers"] =
              LayoutOf(t, point).state_registers <= kMaxCappedStateRegisters
                  ? kDefaultMaxRegisters
                  : 0;
          // The longest valid split that reaches the target, else the shortest valid one.
          std::optional<int64_t> chosen;
          for (auto it = splits.rbegin(); it != splits.rend(); ++it) {
            point.parameters["split_keys"] = *it;
            if (!ValidateLayout(t, point).ok()) continue;
            chosen = *it;
            const DecodeLayout l = LayoutOf(t, point);
            if (l.splits * l.groups * l.chunks >= kDefaultTargetBlocks) break;
          }
          if (!chosen.has_value()) continue;
          point.parameters["split_keys"] = *chosen;
          for (auto& [name, value] : point.parameters) parameter(name).default_value = value;
          return std::vector<TemplateSpace>{space};
        }
      }
    }
  }
  return std::vector<TemplateSpace>{space};
}

absl::Status FlashAttentionFamily::Validate(const KernelTask& task,
                                            const SchedulePoint& point) const {
  FORGE_ASSIGN_OR_RETURN(const DecodeTask t, Analyze(task));
  return ValidateLayout(t, point);
}

absl::StatusOr<LaunchPlan> FlashAttentionFamily::Plan(const KernelTask& task,
                                                      const SchedulePoint& point) const {
  FORGE_ASSIGN_OR_RETURN(const DecodeTask t, Analyze(task));
  FORGE_RETURN_IF_ERROR(ValidateLayout(t, point));
  const DecodeLayout l = LayoutOf(t, point);
  LaunchPlan plan;
  plan.kernel_name = kDecodeKernel;
  plan.launch.grid = {static_cast<uint32_t>(l.splits), static_cast<uint32_t>(l.groups),
                      static_cast<uint32_t>(l.chunks)};
  plan.launch.block = {static_cast<uint32_t>(32 * l.warps), 1, 1};
  plan.template_name = kDecodeTemplate;
  plan.parameters = point.parameters;
  plan.generator_version = std::string(generator_version());
  // K and V are the streamed tensors: each lane keeps unroll keys' vectors of both in flight,
  // times the ring's stages (the loop keeps that many steps requested).
  plan.hints.vector_width = l.vector;
  plan.hints.max_registers = l.max_registers;
  plan.hints.unrolled_elements = l.vector * l.vectors_per_lane * l.unroll;
  plan.hints.bytes_in_flight_per_thread =
      static_cast<double>(2 * l.unroll * l.vectors_per_lane * l.vector * l.element_bytes *
                          std::max<int64_t>(1, l.stages));
  return plan;
}

absl::StatusOr<std::string> FlashAttentionFamily::Emit(const KernelTask& task,
                                                       const LaunchPlan& plan) const {
  FORGE_ASSIGN_OR_RETURN(const DecodeTask t, Analyze(task));
  const SchedulePoint point{plan.template_name, plan.parameters};
  FORGE_RETURN_IF_ERROR(ValidateLayout(t, point));
  const DecodeLayout l = LayoutOf(t, point);
  const AttentionAnalysis& a = t.a;
  int mask_kind = 0;
  switch (a.mask) {
    case AttentionMask::kNone: mask_kind = 0; break;
    case AttentionMask::kCausal: mask_kind = 1; break;
    case AttentionMask::kKeep: mask_kind = 2; break;
    case AttentionMask::kMaskOut: mask_kind = 3; break;
    case AttentionMask::kAdditive: mask_kind = 4; break;
  }
  const bool has_mask = t.mask_input >= 0;
  auto ll = [](int64_t value) { return absl::StrCat(value, "LL"); };
  std::vector<std::pair<std::string, std::string>> defines = {
      {"T", *StorageType(a.dtype)},
      {"B", ll(a.batch)},
      {"HKV", absl::StrCat(a.kv_heads)},
      {"G", absl::StrCat(t.group)},
      {"SQ", absl::StrCat(a.q_len)},
      {"D", absl::StrCat(a.head_dim)},
      {"KEYS", ll(t.keys)},
      {"Q_OFF", ll(t.q_source.offset)}, {"K_OFF", ll(t.k_source.offset)},
      {"V_OFF", ll(t.v_source.offset)},
      {"Q_SB", ll(t.q[0])}, {"Q_SH", ll(t.q[1])}, {"Q_SI", ll(t.q[2])},
      {"K_SB", ll(t.k[0])}, {"K_SH", ll(t.k[1])}, {"K_SJ", ll(t.k[2])},
      {"V_SB", ll(t.v[0])}, {"V_SH", ll(t.v[1])}, {"V_SJ", ll(t.v[2])},
      {"O_SB", ll(t.out[0])}, {"O_SH", ll(t.out[1])}, {"O_SI", ll(t.out[2])},
      {"O_SD", ll(t.out[3])},
      {"MASK", absl::StrCat(mask_kind)},
      {"QSCALE", FloatLiteral(a.scale * kLog2E)},
      {"FILL", FloatLiteral(t.fill)},
      {"ADD_SCALE", FloatLiteral(t.add_scale)},
      {"EMPTY_NAN", t.empty_nan ? "1" : "0"},
      {"VEC", absl::StrCat(l.vector)},
      {"LPK", absl::StrCat(l.lanes_per_key)},
      {"NV", absl::StrCat(l.vectors_per_lane)},
      {"UNROLL", absl::StrCat(l.unroll)},
      {"WARPS", absl::StrCat(l.warps)},
      {"ROWS", absl::StrCat(l.rows)},
      {"CHUNKS", absl::StrCat(l.chunks)},
      {"SPLIT_KEYS", ll(l.split_keys)},
      {"SPLITS", absl::StrCat(l.splits)},
      {"STAGES", absl::StrCat(l.stages)}};
  if (has_mask) {
    defines.push_back({"M_T", *StorageType(t.mask_dtype)});
    defines.push_back({"M_SB", ll(t.mask[0])});
    defines.push_back({"M_SH", ll(t.mask[1])});
    defines.push_back({"M_SI", ll(t.mask[2])});
    defines.push_back({"M_SJ", ll(t.mask[3])});
  }
  std::string source(KernelPrelude());
  absl::StrAppend(&source, "\n// Task ", task.digest(), ": ", DescribeAttention(a), "; ",
                  kDecodeTemplate, ", ", l.splits, " splits of ", l.split_keys, " keys, ",
                  l.warps, " warps, unroll ", l.unroll, ", vector ", l.vector, ", ", l.rows,
                  " rows per block, ", l.stages, " stages.\n");
  for (const auto& [name, value] : defines) {
    absl::StrAppend(&source, "#define FORGE_FA_", name, " ", value, "\n");
  }
  absl::StrAppend(&source, flash_attention::kSplitKvDecodeBody);
  absl::StrAppend(&source, "\nextern \"C\" __global__ void __launch_bounds__(", 32 * l.warps,
                  ", ", std::max<int64_t>(1, l.min_blocks), ") ", kDecodeKernel, "(",
                  KernelParameterList(task), ") {\n",
                  "  forge_fa_run(in", t.q_source.input, ", in", t.k_source.input, ", in",
                  t.v_source.input,
                  ", ", has_mask ? absl::StrCat("in", t.mask_input) : "(const float*)nullptr",
                  ", out0);\n}\n");
  return source;
}

}  // namespace forge::codegen
