// The source of a scan kernel: the kernel prelude, scan_prelude.cuh, the task's types and
// constants, the element functions the template's kernel calls (forge_scan_load: the fused
// prologue that computes the scanned elements from the task's inputs; forge_scan_store: the fused
// epilogue that computes every task output from the scanned elements, and its stores, as vectors
// where the tensor allows) and the template's kernel (row_scan.cuh or chained_scan.cuh after
// tile.cuh, or column_scan.cuh).
//
// Emitting is a pure function of (task, analysis, point): the same inputs give byte-identical
// source. It fails (Unimplemented) when an op or view of the group cannot be expressed, e.g. an
// epilogue that reads the scan's result at another element than the one it writes.
#ifndef FORGE_COMPILER_CODEGEN_SCAN_EMITTER_H_
#define FORGE_COMPILER_CODEGEN_SCAN_EMITTER_H_

#include <string>

#include "absl/status/statusor.h"
#include "compiler/codegen/family.h"
#include "compiler/codegen/scan/analysis.h"
#include "forge/v1/task.pb.h"

namespace forge::codegen::scan {

// The source of a valid point of `analysis` (an analysis of `task`).
absl::StatusOr<std::string> EmitScanKernel(const forge::v1::KernelTask& task,
                                           const ScanTask& analysis, const SchedulePoint& point);

}  // namespace forge::codegen::scan

#endif  // FORGE_COMPILER_CODEGEN_SCAN_EMITTER_H_
