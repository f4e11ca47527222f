#include "compiler/codegen/reduction/reduction_emitter.h"

#include <algorithm>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "compiler/codegen/kernel_abi.h"
#include "compiler/codegen/reduction/column_emitter.h"
#include "compiler/codegen/reduction/cuda_sources.h"
#include "compiler/codegen/reduction/reduction.h"
#include "compiler/codegen/reduction/row_emitter.h"
#include "compiler/codegen/reduction/transpose_emitter.h"

namespace forge::codegen::reduction {

using forge::v1::KernelTask;
using forge::v1::TensorSpec;

absl::StatusOr<std::string> EmitReductionKernel(const ReductionTask& analysis,
                                                const SchedulePoint& point) {
  if (point.template_name == ReductionFamily::kTransposeTemplateName) {
    return TransposeReduceEmitter(analysis, point).Write();
  }
  if (ColumnTemplate(analysis)) return ColumnReduceEmitter(analysis, point).Write();
  return RowReduceEmitter(analysis, point).Write();
}

Index ReductionEmitter::ElementIndex(int lane) const {
  Index index;
  for (int d = 0; d < static_cast<int>(analysis_.row_shape.size()); ++d) {
    if (d == analysis_.axis) {
      index.push_back(analysis_.columns == 1 ? "0"
                      : lane == 0            ? "c0"
                                             : absl::StrCat("(c0 + ", lane, ")"));
    } else {
      index.push_back(analysis_.row_shape[d] == 1 ? "0" : absl::StrCat("o", d));
    }
  }
  return index;
}

bool ReductionEmitter::InCurrentRow(const Index& index) const {
  const Index row = ElementIndex(0);
  if (index.size() != row.size()) return false;
  for (int d = 0; d < static_cast<int>(row.size()); ++d) {
    if (d != analysis_.axis && index[d] != row[d]) return false;
  }
  return true;
}

Index ReductionEmitter::RowIndex(const std::vector<int64_t>& shape) const {
  const bool keepdim = shape.size() == analysis_.row_shape.size();
  Index index;
  for (int d = 0; d < static_cast<int>(shape.size()); ++d) {
    const int row_dim = keepdim || d < analysis_.axis ? d : d + 1;
    index.push_back(shape[d] == 1 || row_dim == analysis_.axis ? "0"
                                                                : absl::StrCat("o", row_dim));
  }
  return index;
}

ElementEmitter ReductionEmitter::NewEmitter(const std::string& prefix) {
  return ElementEmitter(
      view_, index_type_, prefix,
      [this](absl::string_view value, const Index& index,
             ElementEmitter& self) -> absl::StatusOr<std::optional<Term>> {
        if (std::optional<Term> cached = CachedValue(value, index, self); cached.has_value()) {
          return cached;
        }
        if (auto it = analysis_.reduction_of_value.find(value);
            it != analysis_.reduction_of_value.end()) {
          const int r = it->second;
          const Reduction& reduction = analysis_.reductions[r];
          const forge::v1::DType dtype = view_.DType(value);
          const std::string reg = *RegisterType(dtype);
          const std::string& acc = analysis_.acc_type;
          std::string expr;
          // Which of the node's outputs: var_mean's mean and native_group_norm's mean and rstd
          // follow the first.
          int output = 0;
          while (output + 1 < reduction.node->outputs_size() &&
                 reduction.node->outputs(output) != value) {
            ++output;
          }
          if (!ElementwiseInRow(reduction.kind) || output > 0) {
            if (index != RowIndex(view_.Shape(value))) {
              return absl::UnimplementedError(absl::StrCat(
                  "reduction: the result of ", DescribeNode(*reduction.node),
                  " is broadcast against another row's elements"));
            }
            static constexpr const char* kStatistics[] = {"value", "mean", "rstd"};
            expr = RowVariable(r, reduction.kind == ReductionKind::kVar && output == 1
                                      ? "mean"
                                      : kStatistics[std::min(output, 2)]);
          } else {
            // Its row statistics are this row's: an element of another row (a view that moves
            // elements across rows, e.g. a transpose of the result) cannot be computed here.
            if (!InCurrentRow(index)) {
              return absl::UnimplementedError(absl::StrCat(
                  "reduction: the result of ", DescribeNode(*reduction.node),
                  " is read at another row's element (through a view)"));
            }
            absl::StatusOr<Term> x = self.Emit(reduction.input, index);
            if (!x.ok()) return x.status();
            const std::string xv = absl::StrCat("((", acc, ")", x->expr, ")");
            if (reduction.kind == ReductionKind::kSoftmax) {
              expr = absl::StrCat("forge_exp_from(", xv, ", ", RowVariable(r, "max_log2e"),
                                  ") * ", RowVariable(r, "inv_sum"));
            } else if (reduction.kind == ReductionKind::kLogSoftmax) {
              expr = absl::StrCat(xv, " - ", RowVariable(r, "max"), " - ",
                                  RowVariable(r, "log_sum"));
            } else {
              expr = absl::StrCat("(", xv, " - ", RowVariable(r, "mean"), ") * ",
                                  RowVariable(r, "rstd"));
              // Group norm's affine is per channel: g * channels_per_group + column / spatial.
              // Where width_ divides spatial, a chunk (starting at a multiple of width_) lies in
              // one channel: its lanes read the affine at c0's, loaded once.
              const int axis = analysis_.axis;
              const std::string column =
                  reduction.spatial % width_ == 0 && index[axis] == ElementIndex(lane_)[axis]
                      ? ElementIndex(0)[axis]
                      : index[axis];
              const Index affine_index =
                  reduction.channels_per_group == 0
                      ? Index()
                      : Index{absl::StrCat(
                            "(", index[axis - 1], " * ", reduction.channels_per_group, " + ",
                            column,
                            reduction.spatial > 1 ? absl::StrCat(" / ", reduction.spatial) : "",
                            ")")};
              for (const std::string* affine : {&reduction.weight, &reduction.bias}) {
                if (affine->empty()) continue;
                absl::StatusOr<Term> term = self.Emit(
                    *affine, reduction.channels_per_group > 0
                                 ? affine_index
                                 : ElementEmitter::Broadcast(index, view_.Shape(*affine)));
                if (!term.ok()) return term.status();
                expr = absl::StrCat("(", expr, affine == &reduction.weight ? " * " : " + ", "((",
                                    acc, ")", term->expr, "))");
              }
            }
          }
          const std::string variable = self.NewVariable();
          self.AddStatement(absl::StrCat("const ", reg, " ", variable, " = (", reg, ")(", expr, ");"));
          return Term{variable, dtype};
        }
        const int position = view_.InputPosition(value);
        if (position < 0) return std::optional<Term>();
        const TensorSpec& spec = view_.InputSpec(position);
        const std::string storage = *StorageType(spec.dtype());
        const std::string reg = *RegisterType(spec.dtype());
        // This chunk's element lane_ of a row-shaped or broadcast input (as layer norm's weight).
        // (Not inside an EmitChoice alternative: the chunk's vectors are declared at lane 0.)
        const bool chunk_element =
            !self.in_choice() &&
            spec.shape_size() <= static_cast<int>(analysis_.row_shape.size()) &&
            index == ElementEmitter::Broadcast(ElementIndex(lane_), ShapeOf(spec));
        const bool row_element = chunk_element && ShapeOf(spec) == analysis_.row_shape;
        std::string loaded;
        if (row_element && layout_.SharedCache()) {
          // The chunk's vector, as CacheRowInputs copied it: consecutive lanes' vectors at
          // consecutive addresses (no bank conflicts); each thread reads only what it copied.
          cached_inputs_.insert(position);
          const std::string vector = absl::StrCat("cvec", position);
          if (lane_ == 0) {
            self.AddStatement(absl::StrCat("const ForgeVec<", storage, ", ", width_, "> ", vector,
                                           " = cached", position, "[j * ", threads_per_row_,
                                           " + lane];"));
          }
          loaded = LoadConversion(spec.dtype(), absl::StrCat(vector, ".v[", lane_, "]"));
        } else if (row_element && cache_row_) {
          cached_inputs_.insert(position);
          loaded = CachedElement(position, absl::StrCat(lane_));
        } else if (chunk_element && VectorAccess(spec)) {
          const std::string vector = absl::StrCat("vec", position);
          if (lane_ == 0) {
            self.AddStatement(absl::StrCat(
                "const ForgeVec<", storage, ", ", width_, "> ", vector,
                " = *reinterpret_cast<const ForgeVec<", storage, ", ", width_, ">*>(in", position,
                " + ",
                ElementOffset(ElementEmitter::Broadcast(ElementIndex(0), ShapeOf(spec)), spec,
                              self),
                ");"));
          }
          loaded = LoadConversion(spec.dtype(), absl::StrCat(vector, ".v[", lane_, "]"));
        } else {
          loaded = LoadConversion(spec.dtype(),
                                  absl::StrCat("in", position, "[", ElementOffset(index, spec, self), "]"));
        }
        const std::string variable = self.NewVariable();
        self.AddStatement(absl::StrCat("const ", reg, " ", variable, " = ", loaded, ";"));
        return Term{variable, spec.dtype()};
      });
}

bool ReductionEmitter::ChunksCoverExactly() const {
  if (chunks_per_thread_ * threads_per_row_ * width_ != layout_.segment) return false;
  return layout_.segment * layout_.cluster_blocks == analysis_.columns;
}

std::string ReductionEmitter::ChunkColumn() const {
  return absl::StrCat(layout_.cluster_blocks > 1 ? "segment_begin + " : "", "(j * ",
                      threads_per_row_, " + lane) * ", width_);
}

std::string ReductionEmitter::ChunkGuard() const {
  // Without a bounds check where every chunk is in the row, the loop body is one basic block and
  // the compiler issues the unrolled chunks' loads together.
  if (ChunksCoverExactly()) return "{";
  return layout_.cluster_blocks > 1 ? "if (c0 < segment_end) {"
                                    : absl::StrCat("if (c0 < ", analysis_.columns, ") {");
}

std::string ReductionEmitter::ChunkLoopHeader() const {
  const std::string body =
      absl::StrCat("    const int c0 = ", ChunkColumn(), ";\n    ", ChunkGuard());
  if (layout_.cluster_blocks > 1) {
    // A cached cluster's first pass reads chunk j once its copies have landed, while the later
    // chunks' copies are still in flight.
    const bool wait_per_chunk = pass_ == 0 && PipelinedCache();
    return absl::StrCat(
        "#pragma unroll ", wait_per_chunk ? "" : absl::StrCat(ReductionFamily::kClusterChunkUnroll),
        "\n  for (int j = 0; j < ", chunks_per_thread_, "; ++j) {\n",
        wait_per_chunk ? absl::StrCat("    forge_cp_async_wait_pending(", chunks_per_thread_ - 1,
                                      " - j);\n")
                       : "",
        body);
  }
  // cache_row indexes its register arrays by j: the loop must unroll fully to keep them there.
  return absl::StrCat(cache_row_ ? "#pragma unroll\n  " : "", "for (int j = 0; j < ",
                      chunks_per_thread_, "; ++j) {\n", body);
}

std::string ReductionEmitter::CachedElement(int position, absl::string_view vector_lane) const {
  return absl::StrCat("cached", position, "[j * ", width_, " + ", vector_lane, "]");
}

absl::StatusOr<std::vector<std::string>> ReductionEmitter::Pass(
    int pass, const std::vector<Stage>& stages) {
  pass_ = pass;
  const std::string& acc = analysis_.acc_type;
  std::vector<std::string> lines;
  for (const Stage& stage : stages) {
    const Reduction& reduction = analysis_.reductions[stage.reduction];
    const bool softmax = Softmax(reduction.kind);
    std::string init;
    if (softmax && online_softmax_) {
      init = absl::StrCat("ForgeSoftmaxAcc<", acc, "> ", stage.accumulator, " = {-(", acc,
                          ")forge_inf(), (", acc, ")0};");
    } else if (Moments(reduction.kind) && welford_) {
      init = absl::StrCat("ForgeWelfordAcc<", acc, "> ", stage.accumulator, " = {0, 0, 0, 0};");
    } else if ((softmax && stage.step == 0) || reduction.kind == ReductionKind::kMax) {
      init = absl::StrCat(acc, " ", stage.accumulator, " = -(", acc, ")forge_inf();");
    } else if (reduction.kind == ReductionKind::kMin) {
      init = absl::StrCat(acc, " ", stage.accumulator, " = (", acc, ")forge_inf();");
    } else {
      init = absl::StrCat(acc, " ", stage.accumulator, " = 0;");
    }
    lines.push_back(init);
  }
  ElementEmitter emitter = NewEmitter(absl::StrCat("p", pass, "_"));
  // An online softmax and Welford add the whole chunk at once, after every lane's element is
  // loaded: the function that adds it and the chunk's elements, by accumulator.
  std::map<std::string, std::pair<std::string, std::vector<std::string>>> chunk_elements;
  for (lane_ = 0; lane_ < width_; ++lane_) {
    for (const Stage& stage : stages) {
      const Reduction& reduction = analysis_.reductions[stage.reduction];
      absl::StatusOr<Term> x = emitter.Emit(reduction.input, ElementIndex(lane_));
      if (!x.ok()) return x.status();
      const std::string xv = absl::StrCat("((", acc, ")", x->expr, ")");
      const std::string& a = stage.accumulator;
      const bool softmax = Softmax(reduction.kind);
      std::string update;
      if ((softmax && online_softmax_) || (Moments(reduction.kind) && welford_)) {
        chunk_elements[a].first = softmax ? "forge_softmax_add" : "forge_welford_add";
        chunk_elements[a].second.push_back(xv);
        continue;
      } else if (softmax && stage.step == 0) {
        update = absl::StrCat(a, " = forge_max<", acc, ">(", a, ", ", xv, ");");
      } else if (softmax) {
        update = absl::StrCat(a, " += forge_exp_from(", xv, ", ",
                              RowVariable(stage.reduction, "max_log2e"), ");");
      } else if (Moments(reduction.kind) && stage.step == 1) {
        const std::string deviation = emitter.NewVariable();
        emitter.AddStatement(absl::StrCat("const ", acc, " ", deviation, " = ", xv, " - ",
                                          RowVariable(stage.reduction, "mean"), ";"));
        update = absl::StrCat(a, " += ", deviation, " * ", deviation, ";");
      } else if (reduction.kind == ReductionKind::kMax) {
        update = absl::StrCat(a, " = forge_max<", acc, ">(", a, ", ", xv, ");");
      } else if (reduction.kind == ReductionKind::kMin) {
        update = absl::StrCat(a, " = forge_min<", acc, ">(", a, ", ", xv, ");");
      } else {
        update = absl::StrCat(a, " += ", xv, ";");
      }
      emitter.AddStatement(update);
    }
  }
  for (const auto& [accumulator, add] : chunk_elements) {
    const auto& [function, elements] = add;
    const std::string chunk = emitter.NewVariable();
    emitter.AddStatement(absl::StrCat("const ", acc, " ", chunk, "[", elements.size(), "] = {",
                                      absl::StrJoin(elements, ", "), "};"));
    emitter.AddStatement(absl::StrCat(function, "(", accumulator, ", ", chunk, ");"));
  }
  lines.push_back(ChunkLoopHeader());
  for (const std::string& statement : emitter.statements()) lines.push_back("      " + statement);
  lines.push_back("    }\n  }");
  pass_ = -1;

  const std::string columns = absl::StrCat("((", acc, ")", analysis_.columns, ")");
  for (const Stage& stage : stages) {
    const Reduction& reduction = analysis_.reductions[stage.reduction];
    const bool softmax = Softmax(reduction.kind);
    std::string acc_type = acc, op = "ForgeSumOp";
    if (softmax && online_softmax_) {
      acc_type = absl::StrCat("ForgeSoftmaxAcc<", acc, ">");
      op = "ForgeSoftmaxOp";
    } else if (Moments(reduction.kind) && welford_) {
      acc_type = absl::StrCat("ForgeWelfordAcc<", acc, ">");
      op = "ForgeWelfordOp";
    } else if ((softmax && stage.step == 0) || reduction.kind == ReductionKind::kMax) {
      op = "ForgeMaxOp";
    } else if (reduction.kind == ReductionKind::kMin) {
      op = "ForgeMinOp";
    }
    const std::string& a = stage.accumulator;
    Combine(scratch_count_++, acc_type, op, a, lines);
    const int r = stage.reduction;
    auto define = [&](absl::string_view what, const std::string& value) {
      row_variables_.push_back(RowVariable(r, what));
      lines.push_back(absl::StrCat("const ", acc, " ", RowVariable(r, what), " = ", value, ";"));
    };
    const std::string eps = absl::StrFormat("((%s)%.17g)", acc, reduction.eps);
    switch (reduction.kind) {
      case ReductionKind::kSum:
      case ReductionKind::kMax:
      case ReductionKind::kMin: define("value", a); break;
      case ReductionKind::kMean: define("value", absl::StrCat(a, " / ", columns)); break;
      case ReductionKind::kSoftmax:
      case ReductionKind::kLogSoftmax:
      case ReductionKind::kLogSumExp: {
        if (online_softmax_ || stage.step == 0) {
          define("max", online_softmax_ ? absl::StrCat(a, ".max") : a);
          define("max_log2e", absl::StrCat(RowVariable(r, "max"), " * (", acc, ")kForgeLog2e"));
        }
        if (!online_softmax_ && stage.step == 0) break;
        const std::string sum = online_softmax_ ? absl::StrCat(a, ".sum") : a;
        if (reduction.kind == ReductionKind::kSoftmax) {
          define("inv_sum", absl::StrCat("(", acc, ")1 / ", sum));
        } else {
          define("log_sum", absl::StrCat("forge_log(", sum, ")"));
        }
        // A row of -inf only: -inf + log(0) = -inf, as ATen's.
        if (reduction.kind == ReductionKind::kLogSumExp) {
          define("value", absl::StrCat(RowVariable(r, "max"), " + ", RowVariable(r, "log_sum")));
        }
        break;
      }
      case ReductionKind::kLayerNorm:
      case ReductionKind::kVar: {
        if (welford_ || stage.step == 0) {
          // Welford's mean is about a shift (an element of the row).
          define("mean", welford_ ? absl::StrCat(a, ".shift + ", a, ".mean")
                                  : absl::StrCat(a, " / ", columns));
        }
        if (!welford_ && stage.step == 0) break;
        const std::string m2 = welford_ ? absl::StrCat(a, ".m2") : a;
        if (reduction.kind == ReductionKind::kLayerNorm) {
          define("rstd", absl::StrCat("forge_rsqrt(", m2, " / ", columns, " + ", eps, ")"));
        } else {
          // ATen: length - correction <= 0 gives inf or NaN; so does this division.
          define("value", absl::StrFormat("%s / ((%s)%.17g)", m2, acc,
                                          static_cast<double>(analysis_.columns) -
                                              reduction.correction));
        }
        break;
      }
    }
  }
  return lines;
}

absl::StatusOr<std::vector<std::string>> ReductionEmitter::FinalPass() {
  const KernelTask& task = view_.task();
  ElementEmitter emitter = NewEmitter("e_");
  std::vector<std::vector<Term>> results(task.outputs_size());
  bool any = false;
  for (lane_ = 0; lane_ < width_; ++lane_) {
    for (int o = 0; o < task.outputs_size(); ++o) {
      if (ShapeOf(task.outputs(o)) != analysis_.row_shape) continue;
      any = true;
      absl::StatusOr<Term> term =
          emitter.Emit(task.group().outputs(o).value_name(), ElementIndex(lane_));
      if (!term.ok()) return term.status();
      results[o].push_back(*term);
    }
  }
  if (!any) return std::vector<std::string>();
  for (int o = 0; o < task.outputs_size(); ++o) {
    if (results[o].empty()) continue;
    const TensorSpec& spec = task.outputs(o);
    const std::string reg = *RegisterType(spec.dtype());
    auto converted = [&](const Term& term) { return absl::StrCat("((", reg, ")", term.expr, ")"); };
    auto stored = [&](const Term& term) { return StoreConversion(spec.dtype(), converted(term)); };
    if (VectorAccess(spec)) {
      std::vector<std::string> values;
      for (const Term& term : results[o]) values.push_back(converted(term));
      const std::string address =
          absl::StrCat("out", o, " + ", ElementOffset(ElementIndex(0), spec, emitter));
      for (const std::string& statement :
           VectorStore(spec.dtype(), values, emitter.NewVariable(), address, "active")) {
        emitter.AddStatement(statement);
      }
    } else {
      for (int v = 0; v < width_; ++v) {
        emitter.AddStatement(absl::StrCat("if (active) out", o, "[",
                                          ElementOffset(ElementIndex(v), spec, emitter),
                                          "] = ", stored(results[o][v]), ";"));
      }
    }
  }
  std::vector<std::string> lines = {FinalLoopHeader()};
  for (const std::string& statement : emitter.statements()) lines.push_back("      " + statement);
  lines.push_back("    }");
  // A cached cluster copies the next row's chunk in once this chunk's outputs are stored (the
  // stores wait for this chunk's reads, the copies follow them).
  if (layout_.SharedCache()) lines.push_back(RefillChunk());
  lines.push_back("  }");
  return lines;
}

std::string ReductionEmitter::RefillChunk() const {
  return absl::StrCat("    if (next_row < ", analysis_.rows,
                      "LL) forge_fill_row_chunk(next_row, j);");
}

absl::StatusOr<std::vector<std::string>> ReductionEmitter::RowOutputs() {
  const KernelTask& task = view_.task();
  ElementEmitter emitter = NewEmitter("r_");
  for (int o = 0; o < task.outputs_size(); ++o) {
    const TensorSpec& spec = task.outputs(o);
    if (ShapeOf(spec) == analysis_.row_shape) continue;
    const Index index = RowIndex(ShapeOf(spec));
    absl::StatusOr<Term> term = emitter.Emit(task.group().outputs(o).value_name(), index);
    if (!term.ok()) return term.status();
    const std::string reg = *RegisterType(spec.dtype());
    emitter.AddStatement(absl::StrCat(
        "out", o, "[", ElementOffset(index, spec, emitter), "] = ",
        StoreConversion(spec.dtype(), absl::StrCat("((", reg, ")", term->expr, ")")), ";"));
  }
  if (emitter.statements().empty()) return std::vector<std::string>();
  std::vector<std::string> lines = {
      layout_.cluster_blocks > 1 ? "if (active && lane == 0 && cluster_rank == 0) {"
                          : "if (active && lane == 0) {"};
  for (const std::string& statement : emitter.statements()) lines.push_back("  " + statement);
  lines.push_back("}");
  return lines;
}


std::vector<std::string> ReductionEmitter::CacheRowInputs() {
  std::vector<std::string> lines;
  for (int position : cached_inputs_) {
    const TensorSpec& spec = view_.InputSpec(position);
    const std::string storage = *StorageType(spec.dtype());
    const std::string reg = *RegisterType(spec.dtype());
    const std::string array = absl::StrCat("cached", position);
    lines.push_back(absl::StrCat(reg, " ", array, "[", chunks_per_thread_ * width_, "];"));
    ElementEmitter emitter = NewEmitter(absl::StrCat("c", position, "_"));
    if (VectorAccess(spec)) {
      const std::string vector = emitter.NewVariable();
      emitter.AddStatement(absl::StrCat("const ForgeVec<", storage, ", ", width_, "> ", vector,
                                        " = *reinterpret_cast<const ForgeVec<", storage, ", ",
                                        width_, ">*>(in", position, " + ",
                                        ElementOffset(ElementIndex(0), spec, emitter), ");"));
      for (int v = 0; v < width_; ++v) {
        emitter.AddStatement(absl::StrCat(CachedElement(position, absl::StrCat(v)), " = ",
                                          LoadConversion(spec.dtype(), absl::StrCat(vector, ".v[", v, "]")),
                                          ";"));
      }
    } else {
      for (int v = 0; v < width_; ++v) {
        emitter.AddStatement(absl::StrCat(
            CachedElement(position, absl::StrCat(v)), " = ",
            LoadConversion(spec.dtype(), absl::StrCat("in", position, "[",
                                                      ElementOffset(ElementIndex(v), spec, emitter),
                                                      "]")),
            ";"));
      }
    }
    lines.push_back(ChunkLoopHeader());
    for (const std::string& statement : emitter.statements()) lines.push_back("      " + statement);
    lines.push_back(ChunksCoverExactly()
                        ? "    }\n  }"
                        : absl::StrCat("    } else {\n#pragma unroll\n      for (int v = 0; v < ",
                                       width_, "; ++v) ", CachedElement(position, "v"),
                                       " = 0;\n    }\n  }"));
  }
  return lines;
}

std::vector<std::string> ReductionEmitter::RowCoordinates() const {
  // Row r is the r-th row-major position of the row shape without the reduced dim.
  std::vector<int64_t> others = analysis_.row_shape;
  others.erase(others.begin() + analysis_.axis);
  const Index coordinates = RowMajorCoordinates("row", others);
  std::vector<std::string> lines;
  for (int d = 0; d < static_cast<int>(others.size()); ++d) {
    if (others[d] == 1) continue;
    lines.push_back(absl::StrCat("const ", index_type_, " o", d < analysis_.axis ? d : d + 1,
                                 " = ", coordinates[d], ";"));
  }
  return lines;
}

absl::StatusOr<std::string> ReductionEmitter::Write() {
  const KernelTask& task = view_.task();
  if (absl::Status status = Prepare(); !status.ok()) return status;
  // Stages by pass: a reduction's first stage runs one pass after the last stage of every
  // reduction its input reads; two-pass variants take the following pass too.
  std::vector<int> last_pass(analysis_.reductions.size(), 0);
  std::map<int, std::vector<Stage>> passes;
  for (size_t r = 0; r < analysis_.reductions.size(); ++r) {
    const Reduction& reduction = analysis_.reductions[r];
    int first = 0;
    for (int dependency : reduction.depends_on) first = std::max(first, last_pass[dependency] + 1);
    const int steps = TwoStep(reduction) ? 2 : 1;
    for (int step = 0; step < steps; ++step) {
      passes[first + step].push_back(
          Stage{static_cast<int>(r), step, absl::StrCat("acc", r, "_", step)});
    }
    last_pass[r] = first + steps - 1;
  }
  std::vector<std::string> body;
  for (const auto& [pass, stages] : passes) {
    absl::StatusOr<std::vector<std::string>> lines = Pass(pass, stages);
    if (!lines.ok()) return lines.status();
    body.push_back(absl::StrCat("// pass ", pass));
    body.insert(body.end(), lines->begin(), lines->end());
  }
  absl::StatusOr<std::vector<std::string>> final_pass = FinalPass();
  if (!final_pass.ok()) return final_pass.status();
  absl::StatusOr<std::vector<std::string>> row_outputs = RowOutputs();
  if (!row_outputs.ok()) return row_outputs.status();

  std::string source(KernelPrelude());
  absl::StrAppend(&source, kReductionPrelude);
  AppendPreludes(source);
  absl::StrAppend(&source, "\n// Task ", task.digest(), ": ", analysis_.rows, " rows of ",
                  analysis_.columns, " (dim ", analysis_.axis, ", ", analysis_.inner,
                  " inner); ", TemplateName(), ", ", threads_per_row_, " threads per row, ",
                  rows_per_block_, " rows per block, vector ", width_, LayoutNotes(), ".\n",
                  DeviceGlobals());
  absl::StrAppend(&source, "extern \"C\" __global__ void ", KernelQualifiers(),
                  ReductionFamily::kKernelName, "(", KernelParameterList(task), ") {\n");
  std::vector<std::string> lines = scratch_;
  const std::vector<std::string> indices = ThreadIndices();
  lines.insert(lines.end(), indices.begin(), indices.end());
  Body(body, *final_pass, *row_outputs, lines);
  for (const std::string& line : lines) absl::StrAppend(&source, "  ", line, "\n");
  absl::StrAppend(&source, "}\n");
  return source;
}

void ReductionEmitter::Body(const std::vector<std::string>& passes,
                            const std::vector<std::string>& final_pass,
                            const std::vector<std::string>& row_outputs,
                            std::vector<std::string>& lines) {
  lines.push_back(layout_.cluster_blocks > 1
                      ? absl::StrCat("const long long row_wide = (long long)blockIdx.x / ",
                                     layout_.cluster_blocks, ";")
                      : absl::StrCat("const long long row_wide = (long long)blockIdx.x * ",
                                     rows_per_block_, " + row_in_block;"));
  lines.push_back("// Rows past the end recompute the last row (every thread must reach the");
  lines.push_back("// barriers of the cross-warp reduction) but store nothing.");
  lines.push_back(absl::StrCat("const bool active = row_wide < ", analysis_.rows, "LL;"));
  lines.push_back(absl::StrCat("const ", index_type_, " row = active ? (", index_type_,
                               ")row_wide : (", index_type_, ")", analysis_.rows - 1, ";"));
  for (const std::vector<std::string>& part :
       {RowCoordinates(), CacheRowInputs(), passes, final_pass, row_outputs}) {
    lines.insert(lines.end(), part.begin(), part.end());
  }
}

}  // namespace forge::codegen::reduction
