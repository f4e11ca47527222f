// Parses the resource report that ptxas writes into the NVRTC program log when a program is
// compiled with --ptxas-options=-v: registers, shared/constant memory, stack frame and spills per
// function. The search and cost model use these figures to reject or rank candidates before timing.
#ifndef FORGE_WORKER_COMPILE_PTXAS_REPORT_H_
#define FORGE_WORKER_COMPILE_PTXAS_REPORT_H_

#include <cstdint>
#include <map>
#include <string>

#include "absl/strings/string_view.h"

namespace forge::compile {

// What ptxas reported for one function. Kernels ("entry functions") get every field; a
// non-inlined device function only gets its stack frame and spill line.
struct PtxasFunctionReport {
  bool is_entry = false;
  std::string arch;  // e.g. "sm_90", from "Compiling entry function '...' for 'sm_90'"
  int registers = 0;
  int barriers = 0;
  std::int64_t shared_memory_bytes = 0;    // static __shared__ ("smem")
  std::int64_t constant_memory_bytes = 0;  // sum over the cmem[N] banks of the "Used" line
  std::int64_t stack_frame_bytes = 0;
  std::int64_t spill_store_bytes = 0;
  std::int64_t spill_load_bytes = 0;
  std::int64_t cumulative_stack_bytes = 0;  // frame plus callees' frames, entry functions only

  friend bool operator==(const PtxasFunctionReport&, const PtxasFunctionReport&) = default;
};

struct PtxasReport {
  // Keyed by the mangled name ptxas prints (an extern "C" kernel keeps its plain name).
  std::map<std::string, PtxasFunctionReport> functions;
  std::int64_t global_memory_bytes = 0;  // module-wide __device__ variables ("gmem")

  // The report for `mangled_name`, or nullptr when ptxas said nothing about it.
  const PtxasFunctionReport* Find(absl::string_view mangled_name) const;

  friend bool operator==(const PtxasReport&, const PtxasReport&) = default;
};

// Reads every ptxas line of `log` it understands and ignores the rest (compiler warnings,
// "Compile time" lines, register-limit notices), so it never fails; a log without ptxas lines
// gives an empty report.
PtxasReport ParsePtxasReport(absl::string_view log);

}  // namespace forge::compile

#endif  // FORGE_WORKER_COMPILE_PTXAS_REPORT_H_
