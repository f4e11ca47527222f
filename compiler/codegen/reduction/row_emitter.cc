#include "compiler/codegen/reduction/row_emitter.h"

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "compiler/codegen/reduction/cuda_sources.h"

namespace forge::codegen::reduction {

using forge::v1::TensorSpec;

void RowReduceEmitter::AppendPreludes(std::string& source) const {
  if (layout_.cluster_blocks == 1) return;
  std::string cases;
  for (int pending = 0; pending < kMaxPipelinedChunks; ++pending) {
    absl::StrAppend(&cases, "    case ", pending, ": asm volatile(\"cp.async.wait_group ",
                    pending, ";\" ::: \"memory\"); break;\n");
  }
  absl::StrAppend(&source,
                  absl::StrReplaceAll(kClusterPrelude, {{"FORGE_WAIT_PENDING_CASES\n", cases}}));
}

std::string RowReduceEmitter::LayoutNotes() const {
  std::string notes;
  if (layout_.cluster_blocks > 1) {
    absl::StrAppend(&notes, ", ", layout_.cluster_blocks, " blocks per row (a cluster) of ",
                    layout_.segment, " columns each",
                    layout_.SharedCache() ? ", row cached in shared memory" : "");
  }
  if (layout_.max_registers > 0) {
    absl::StrAppend(&notes, ", at most ", layout_.max_registers, " registers per thread");
  }
  return notes;
}

std::string RowReduceEmitter::DeviceGlobals() const {
  if (!layout_.SharedCache()) return "";
  return "// Rows taken and clusters finished in this launch; the last cluster to finish resets "
         "both\n// (launches of one module must not overlap: the judge and the timer launch one "
         "at a time).\n__device__ unsigned int forge_rows_taken;\n__device__ unsigned int "
         "forge_clusters_done;\n";
}

std::string RowReduceEmitter::KernelQualifiers() const {
  const std::string min_blocks =
      layout_.max_registers > 0 ? absl::StrCat(", ", layout_.MinBlocksPerSm()) : "";
  const std::string cluster_attribute =
      layout_.cluster_blocks > 1
          ? absl::StrCat("__cluster_dims__(", layout_.cluster_blocks, ", 1, 1) ")
          : "";
  return absl::StrCat("__launch_bounds__(", layout_.BlockThreads(), min_blocks, ") ",
                      cluster_attribute);
}

std::vector<std::string> RowReduceEmitter::ThreadIndices() const {
  std::vector<std::string> lines;
  lines.push_back(absl::StrCat("const int lane = threadIdx.x % ", threads_per_row_, ";"));
  lines.push_back(absl::StrCat("const int row_in_block = threadIdx.x / ", threads_per_row_, ";"));
  if (layout_.cluster_blocks > 1) {
    // A launch without the cluster shape would leave blocks waiting on partners that are not
    // there: refuse it loudly.
    lines.push_back(
        absl::StrCat("if (forge_cluster_blocks() != ", layout_.cluster_blocks, ") __trap();"));
    lines.push_back(
        absl::StrCat("const int cluster_rank = blockIdx.x % ", layout_.cluster_blocks, ";"));
    lines.push_back(absl::StrCat("const int segment_begin = cluster_rank * ", layout_.segment, ";"));
    lines.push_back(absl::StrCat("const int segment_end = min(segment_begin + ", layout_.segment,
                                 ", ", analysis_.columns, ");"));
  }
  return lines;
}

void RowReduceEmitter::Combine(int index, const std::string& acc_type, const std::string& op,
                               const std::string& accumulator,
                               std::vector<std::string>& lines) {
  const std::string& a = accumulator;
  const std::string scratch = absl::StrCat("scratch", index);
  std::string scratch_row = absl::StrCat("static_cast<", acc_type, "*>(nullptr)");
  if (threads_per_row_ > 32) {
    scratch_.push_back(absl::StrCat("__shared__ ", acc_type, " ", scratch, "[", rows_per_block_,
                                    "][", threads_per_row_ / 32, "];"));
    scratch_row = absl::StrCat(scratch, "[row_in_block]");
  }
  lines.push_back(absl::StrCat(a, " = forge_row_allreduce<", threads_per_row_, ">(", a, ", ", op,
                               "(), ", scratch_row, ");"));
  if (layout_.cluster_blocks > 1) {
    const std::string slot = absl::StrCat("cluster_slot", index);
    scratch_.push_back(absl::StrCat("__shared__ ", acc_type, " ", slot, ";"));
    lines.push_back(absl::StrCat(a, " = forge_cluster_allreduce<", layout_.cluster_blocks, ">(",
                                 a, ", ", op, "(), &", slot, ");"));
  }
}

void RowReduceEmitter::Body(const std::vector<std::string>& passes,
                            const std::vector<std::string>& final_pass,
                            const std::vector<std::string>& row_outputs,
                            std::vector<std::string>& lines) {
  if (layout_.SharedCache()) {
    PersistentRows(passes, final_pass, row_outputs, lines);
  } else {
    ReductionEmitter::Body(passes, final_pass, row_outputs, lines);
  }
}

std::vector<std::string> RowReduceEmitter::SharedRowCache() {
  std::vector<std::string> lines;
  const SharedCache shared_cache = SharedCacheOf(analysis_, layout_);
  // Every copy of a row in flight at once, none through registers. Each thread copies and
  // later reads only its own vectors, so no barrier orders the copies and the reads.
  lines.push_back("extern __shared__ __align__(16) unsigned char forge_row_cache[];");
  std::vector<std::string> fill = RowCoordinates();
  fill.push_back(absl::StrCat("const int c0 = ", ChunkColumn(), ";"));
  fill.push_back(ChunkGuard());
  for (int position : cached_inputs_) {
    const TensorSpec& spec = view_.InputSpec(position);
    const std::string vector_type =
        absl::StrCat("ForgeVec<", *StorageType(spec.dtype()), ", ", width_, ">");
    const std::string array = absl::StrCat("cached", position);
    lines.push_back(absl::StrCat(vector_type, "* const ", array, " = reinterpret_cast<",
                                 vector_type, "*>(forge_row_cache + ",
                                 shared_cache.offsets.at(position), ");"));
    ElementEmitter emitter = NewEmitter(absl::StrCat("c", position, "_"));
    emitter.AddStatement(absl::StrCat("forge_cp_async<", width_ * ElementBytes(spec.dtype()),
                                      ">(&", array, "[j * ", threads_per_row_, " + lane], in",
                                      position, " + ",
                                      ElementOffset(ElementIndex(0), spec, emitter), ");"));
    for (const std::string& statement : emitter.statements()) fill.push_back("  " + statement);
  }
  fill.push_back("}");
  // One group per chunk, copied or not: the first pass counts groups to wait for chunk j.
  fill.push_back("forge_cp_async_commit();");
  lines.push_back("const auto forge_fill_row_chunk = [&](const long long row, const int j) {");
  for (const std::string& line : fill) lines.push_back("  " + line);
  lines.push_back("};");
  return lines;
}

void RowReduceEmitter::PersistentRows(const std::vector<std::string>& passes,
                                      const std::vector<std::string>& final_pass,
                                      const std::vector<std::string>& row_outputs,
                                      std::vector<std::string>& lines) {
  auto take = [](absl::string_view slot) {
    return absl::StrCat("if (cluster_rank == 0 && threadIdx.x == 0) forge_row_slot[", slot,
                        "] = atomicAdd(&forge_rows_taken, 1u);");
  };
  const std::string rows = absl::StrCat(analysis_.rows, "LL");
  // Rank 0 takes the next row at the top of an iteration; the others read it after the
  // iteration's cluster reductions (whose barriers make it visible). Two slots: rank 0 writes a
  // slot again only after every block has passed the barriers that follow its reading it.
  lines.push_back("__shared__ long long forge_row_slot[2];");
  lines.push_back(take("0"));
  lines.push_back("forge_cluster_sync();");
  lines.push_back("long long row = *forge_cluster_map(&forge_row_slot[0], 0);");
  const std::vector<std::string> cache = SharedRowCache();
  lines.insert(lines.end(), cache.begin(), cache.end());
  lines.push_back(absl::StrCat("if (row < ", rows, ") {\n    for (int j = 0; j < ",
                               chunks_per_thread_, "; ++j) forge_fill_row_chunk(row, j);\n  }"));
  lines.push_back(absl::StrCat("for (int iteration = 0; row < ", rows, "; ++iteration) {"));
  std::vector<std::string> iteration = RowCoordinates();
  iteration.push_back("const bool active = true;");
  if (!PipelinedCache()) iteration.push_back("forge_cp_async_wait_all();");
  iteration.push_back(take("(iteration + 1) & 1"));
  iteration.insert(iteration.end(), passes.begin(), passes.end());
  iteration.push_back(
      "const long long next_row = *forge_cluster_map(&forge_row_slot[(iteration + 1) & 1], 0);");
  iteration.insert(iteration.end(), final_pass.begin(), final_pass.end());
  if (final_pass.empty()) {  // no row-shaped output: the next row's copies go out here
    iteration.push_back(absl::StrCat("for (int j = 0; j < ", chunks_per_thread_, "; ++j) {\n",
                                     RefillChunk(), "\n  }"));
  }
  iteration.insert(iteration.end(), row_outputs.begin(), row_outputs.end());
  iteration.push_back("row = next_row;");
  for (const std::string& line : iteration) lines.push_back("  " + line);
  lines.push_back("}");
  lines.push_back("// No block leaves while another may still read its shared memory.");
  lines.push_back("forge_cluster_sync();");
  lines.push_back(absl::StrCat(
      "if (cluster_rank == 0 && threadIdx.x == 0 && atomicAdd(&forge_clusters_done, 1u) == "
      "gridDim.x / ",
      layout_.cluster_blocks,
      " - 1) {\n    forge_rows_taken = 0;\n    forge_clusters_done = 0;\n  }"));
}

}  // namespace forge::codegen::reduction
