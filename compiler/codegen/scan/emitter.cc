#include "compiler/codegen/scan/emitter.h"

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "compiler/codegen/cuda_expr.h"
#include "compiler/codegen/kernel_abi.h"
#include "compiler/codegen/scan/cuda_sources.h"
#include "compiler/codegen/scan/layout.h"

namespace forge::codegen::scan {
namespace {

using forge::v1::DType;
using forge::v1::KernelTask;
using forge::v1::TensorSpec;

// Writes the element functions of one task and point.
class ElementFunctions {
 public:
  ElementFunctions(const KernelTask& task, const ScanTask& analysis, const Layout& layout)
      : task_(task),
        analysis_(analysis),
        layout_(layout),
        index_type_(analysis.wide_index ? "long long" : "int") {}

  const std::string& index_type() const { return index_type_; }

  // forge_scan_load: x[v] = the scanned element at (row, col + v), as ForgeScanOp::Acc.
  absl::StatusOr<std::string> Load() {
    vectors_.clear();
    ElementEmitter emitter(analysis_.view, index_type_, "l", InputResolver());
    std::vector<std::string> assignments;
    for (lane_ = 0; lane_ < layout_.width; ++lane_) {
      absl::StatusOr<Term> term = emitter.Emit(analysis_.input, ElementIndex(lane_));
      if (!term.ok()) return term.status();
      assignments.push_back(absl::StrCat("x[", lane_, "] = ForgeScanOp::make((ForgeScanOp::Value)(",
                                         term->expr, "), (long long)", Column(lane_), ");"));
    }
    return Function("forge_scan_load", "ForgeScanAcc (&x)[kVectorWidth]", emitter.statements(),
                    assignments);
  }

  // forge_scan_store: every task output at (row, col + v), from y[v], the scanned elements.
  absl::StatusOr<std::string> Store() {
    vectors_.clear();
    ElementEmitter emitter(analysis_.view, index_type_, "s",
                           [this](absl::string_view value, const Index& index,
                                  ElementEmitter& self) -> absl::StatusOr<std::optional<Term>> {
                             if (value == analysis_.values || value == analysis_.indices) {
                               return ScanResult(value, index);
                             }
                             return LoadInput(value, index, self);
                           });
    for (int o = 0; o < task_.outputs_size(); ++o) {
      const TensorSpec& spec = task_.outputs(o);
      const std::string& name = task_.group().outputs(o).value_name();
      std::vector<Term> lanes;
      std::vector<Index> indices;
      for (lane_ = 0; lane_ < layout_.width; ++lane_) {
        absl::StatusOr<Term> term = emitter.Emit(name, ElementIndex(lane_));
        if (!term.ok()) return term.status();
        lanes.push_back(*std::move(term));
        indices.push_back(ElementIndex(lane_));
      }
      StoreOutputLanes(emitter, o, spec, lanes, indices,
                       VectorAlongTheRow(analysis_, spec, layout_.width));
    }
    return Function("forge_scan_store", "const ForgeScanAcc (&y)[kVectorWidth]",
                    emitter.statements(), {});
  }

 private:
  std::string Column(int64_t lane) const {
    return lane == 0 ? std::string("col") : absl::StrCat("(col + ", lane, ")");
  }

  // The scanned tensor's element at (row, col + lane): `row` numbers the positions of every
  // other dim in row-major order.
  Index ElementIndex(int64_t lane) const {
    Index index = RowMajorCoordinates("row", ShapeWithout(analysis_.shape, analysis_.axis));
    index.insert(index.begin() + analysis_.axis, Column(lane));
    return index;
  }

  ElementEmitter::Resolver InputResolver() {
    return [this](absl::string_view value, const Index& index,
                  ElementEmitter& self) -> absl::StatusOr<std::optional<Term>> {
      return LoadInput(value, index, self);
    };
  }

  // A group input's element: one lane of a vector load when the element is this lane's of a
  // vectorizable tensor, else a scalar load.
  absl::StatusOr<std::optional<Term>> LoadInput(absl::string_view value, const Index& index,
                                                ElementEmitter& self) {
    const int position = analysis_.view.InputPosition(value);
    if (position < 0) return std::optional<Term>();
    const TensorSpec& spec = analysis_.view.InputSpec(position);
    if (index == ElementIndex(lane_) && VectorAlongTheRow(analysis_, spec, layout_.width)) {
      const VectorLane vector{layout_.width, lane_, ElementIndex(0), &vectors_};
      return LoadInputElement(self, position, spec, index, &vector);
    }
    return LoadInputElement(self, position, spec, index, nullptr);
  }

  // The scan's result (values or indices) at the element being stored.
  absl::StatusOr<std::optional<Term>> ScanResult(absl::string_view value, const Index& index) {
    if (index != ElementIndex(lane_)) {
      return absl::UnimplementedError(absl::StrCat(
          "scan: the epilogue reads '", value, "' at [", absl::StrJoin(index, ", "),
          "], another element than the one it writes; only elementwise epilogues fuse"));
    }
    if (value == analysis_.indices) {
      return Term{absl::StrCat("y[", lane_, "].i"), forge::v1::DTYPE_INT64};
    }
    const std::string element = analysis_.op->with_indices ? absl::StrCat("y[", lane_, "].v")
                                                           : absl::StrCat("y[", lane_, "]");
    return Term{absl::StrCat("((", *RegisterType(analysis_.value_dtype), ")", element, ")"),
                analysis_.value_dtype};
  }

  std::string Function(absl::string_view name, absl::string_view elements,
                       const std::vector<std::string>& statements,
                       const std::vector<std::string>& tail) const {
    std::string text = absl::StrCat("__device__ __forceinline__ void ", name, "(",
                                    KernelParameterList(task_), ", const ", index_type_,
                                    " row, const ", index_type_, " col, ", elements, ") {\n");
    for (const std::string& line : statements) absl::StrAppend(&text, "  ", line, "\n");
    for (const std::string& line : tail) absl::StrAppend(&text, "  ", line, "\n");
    absl::StrAppend(&text, "}\n");
    return text;
  }

  const KernelTask& task_;
  const ScanTask& analysis_;
  const Layout& layout_;
  const std::string index_type_;
  int64_t lane_ = 0;                    // the lane of the vector being emitted
  std::map<int, std::string> vectors_;  // input position -> its vector load's variable
};

}  // namespace

absl::StatusOr<std::string> EmitScanKernel(const KernelTask& task, const ScanTask& analysis,
                                           const SchedulePoint& point) {
  const Layout layout = LayoutOf(point);
  ElementFunctions functions(task, analysis, layout);
  absl::StatusOr<std::string> load = functions.Load();
  if (!load.ok()) return load.status();
  absl::StatusOr<std::string> store = functions.Store();
  if (!store.ok()) return store.status();

  std::string source(KernelPrelude());
  absl::StrAppend(&source, kScanPrelude);
  std::vector<std::string> parameters;
  for (const auto& [name, value] : point.parameters) {
    parameters.push_back(absl::StrCat(name, " ", value));
  }
  absl::StrAppend(&source, "\n// Task ", task.digest(), ": ", analysis.node->op(), " along dim ",
                  analysis.axis, " of [", absl::StrJoin(analysis.shape, ", "), "] (", analysis.rows,
                  " rows of ", analysis.length, "); ", point.template_name, ", ",
                  absl::StrJoin(parameters, ", "), ".\n");
  const bool kahan = analysis.op->sum && analysis.value_type == "float";
  absl::StrAppend(&source, "using ForgeScanOp = ", analysis.op->functor, "<", analysis.value_type,
                  ">;\nusing ForgeScanAcc = ForgeScanOp::Acc;\n", "using ForgeScanCarry = ",
                  kahan ? "ForgeKahanCarry<float>" : "ForgePlainCarry<ForgeScanOp>", ";\n",
                  "using ForgeScanIndex = ", functions.index_type(), ";\n");
  std::vector<std::pair<std::string, int64_t>> constants = {{"kVectorWidth", layout.width}};
  std::string body = kRowScanBody;
  switch (layout.kind) {
    case Template::kRow:
      constants.insert(constants.end(), {{"kThreadsPerRow", layout.threads_per_row},
                                         {"kRowsPerBlock", layout.rows_per_block},
                                         {"kChunks", layout.chunks}});
      break;
    case Template::kColumn:
      constants.insert(constants.end(), {{"kThreads", layout.threads}, {"kUnroll", layout.unroll}});
      body = kColumnScanBody;
      break;
    case Template::kChained:
      constants.insert(constants.end(), {{"kThreadsPerRow", layout.threads_per_row},
                                         {"kChunks", layout.chunks},
                                         {"kTilesPerLane", layout.tiles_per_lane}});
      body = kChainedScanBody;
      break;
  }
  absl::StrAppend(&source, "constexpr long long kRows = ", analysis.rows,
                  "LL;\nconstexpr long long kLength = ", analysis.length, "LL;\n");
  if (layout.kind == Template::kChained) {
    absl::StrAppend(&source, "constexpr long long kTilesPerRow = ", TilesPerRow(analysis, layout),
                    "LL;\nconstexpr long long kGroupsPerRow = ", GroupsPerRow(analysis, layout),
                    "LL;\n");
  }
  for (const auto& [name, value] : constants) {
    absl::StrAppend(&source, "constexpr int ", name, " = ", value, ";\n");
  }
  absl::StrAppend(&source, *load, *store);
  // row_scan and chained_scan read their tiles through tile.cuh's functions.
  if (layout.kind != Template::kColumn) body = absl::StrCat(kScanTile, body);
  absl::StrAppend(&source,
                  absl::StrReplaceAll(body, {{"FORGE_SCAN_PARAMETERS", KernelParameterList(task)},
                                             {"FORGE_SCAN_ARGUMENTS", KernelArgumentList(task)}}));
  return source;
}

}  // namespace forge::codegen::scan
