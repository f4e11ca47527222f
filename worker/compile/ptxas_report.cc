#include "worker/compile/ptxas_report.h"

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace forge::compile {
namespace {

// One "<number> <unit>" item of a comma-separated ptxas line, e.g. (384, "bytes smem").
struct Quantity {
  std::int64_t value;
  absl::string_view unit;
};

// The text after the "ptxas info    :" or "ptxas         ." prefix; empty for any other line
// (warnings, NVRTC's own messages, source errors).
absl::string_view PtxasPayload(absl::string_view line) {
  if (!absl::ConsumePrefix(&line, "ptxas")) return {};
  line = absl::StripLeadingAsciiWhitespace(line);
  if (absl::ConsumePrefix(&line, "info")) {
    line = absl::StripLeadingAsciiWhitespace(line);
    if (!absl::ConsumePrefix(&line, ":")) return {};
  } else if (!absl::ConsumePrefix(&line, ".")) {
    return {};
  }
  return absl::StripAsciiWhitespace(line);
}

// The quantities of a line such as "Used 32 registers, used 1 barriers, 1024 bytes smem". Items
// that are not "<number> <unit>" ("Compile time = 1.2 ms") are left out.
std::vector<Quantity> ParseQuantities(absl::string_view payload) {
  std::vector<Quantity> quantities;
  for (absl::string_view item : absl::StrSplit(payload, ',')) {
    item = absl::StripAsciiWhitespace(item);
    if (!absl::ConsumePrefix(&item, "Used ")) absl::ConsumePrefix(&item, "used ");
    const std::size_t space = item.find(' ');
    if (space == absl::string_view::npos) continue;
    Quantity quantity;
    if (!absl::SimpleAtoi(item.substr(0, space), &quantity.value)) continue;
    quantity.unit = absl::StripAsciiWhitespace(item.substr(space + 1));
    quantities.push_back(quantity);
  }
  return quantities;
}

// Applies a quantity from a "Used ..." line (reported for the entry function being compiled).
void ApplyEntryQuantity(const Quantity& quantity, PtxasFunctionReport& report) {
  if (quantity.unit == "registers") {
    report.registers = static_cast<int>(quantity.value);
  } else if (quantity.unit == "barriers") {
    report.barriers = static_cast<int>(quantity.value);
  } else if (quantity.unit == "bytes smem") {
    report.shared_memory_bytes = quantity.value;
  } else if (absl::StartsWith(quantity.unit, "bytes cmem[")) {
    report.constant_memory_bytes += quantity.value;
  } else if (quantity.unit == "bytes cumulative stack size") {
    report.cumulative_stack_bytes = quantity.value;
  }
}

// Applies a quantity from the line under "Function properties for ...".
void ApplyPropertiesQuantity(const Quantity& quantity, PtxasFunctionReport& report) {
  if (quantity.unit == "bytes stack frame") {
    report.stack_frame_bytes = quantity.value;
  } else if (quantity.unit == "bytes spill stores") {
    report.spill_store_bytes = quantity.value;
  } else if (quantity.unit == "bytes spill loads") {
    report.spill_load_bytes = quantity.value;
  }
}

}  // namespace

const PtxasFunctionReport* PtxasReport::Find(absl::string_view mangled_name) const {
  auto it = functions.find(std::string(mangled_name));
  return it == functions.end() ? nullptr : &it->second;
}

PtxasReport ParsePtxasReport(absl::string_view log) {
  PtxasReport report;
  // ptxas names the function once and reports its figures on the following lines: the "Used" line
  // belongs to the entry function being compiled, the stack/spill line to the latest "Function
  // properties for" (which may be a non-inlined device function).
  std::string compiling_entry;
  std::string properties_function;
  for (absl::string_view line : absl::StrSplit(log, '\n')) {
    absl::string_view payload = PtxasPayload(absl::StripTrailingAsciiWhitespace(line));
    if (payload.empty()) continue;

    if (absl::ConsumePrefix(&payload, "Compiling entry function ")) {
      // 'name' for 'sm_90'
      std::vector<absl::string_view> parts = absl::StrSplit(payload, '\'');
      if (parts.size() < 4 || parts[1].empty()) continue;
      compiling_entry = std::string(parts[1]);
      PtxasFunctionReport& entry = report.functions[compiling_entry];
      entry.is_entry = true;
      entry.arch = std::string(parts[3]);
      continue;
    }
    if (absl::ConsumePrefix(&payload, "Function properties for ")) {
      properties_function = std::string(absl::StripAsciiWhitespace(payload));
      report.functions[properties_function];  // a device function is listed even without figures
      continue;
    }

    const std::vector<Quantity> quantities = ParseQuantities(payload);
    bool module_line = false;
    for (const Quantity& quantity : quantities) {
      if (quantity.unit == "bytes gmem") {
        report.global_memory_bytes = quantity.value;
        module_line = true;
      }
    }
    // The gmem line's cmem banks are module-wide constants, not any one function's.
    if (module_line) continue;
    for (const Quantity& quantity : quantities) {
      if (!compiling_entry.empty()) ApplyEntryQuantity(quantity, report.functions[compiling_entry]);
      if (!properties_function.empty()) {
        ApplyPropertiesQuantity(quantity, report.functions[properties_function]);
      }
    }
  }
  return report;
}

}  // namespace forge::compile
