#include "compiler/cost/learned/features.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/digest/sha256.h"
#include "common/dtype/dtype.h"
#include "compiler/graph/cost.h"

namespace forge::cost {
namespace {

constexpr float kMissing = std::numeric_limits<float>::quiet_NaN();

// What the feature functions read: the description and the figures derived once from it.
struct Derived {
  explicit Derived(const CandidateDescription& candidate)
      : in(candidate),
        gpu(*candidate.gpu),
        task(*candidate.task),
        plan(*candidate.plan),
        hints(candidate.plan->hints) {}

  const CandidateDescription& in;
  const GpuArch& gpu;
  const forge::v1::KernelTask& task;
  const codegen::LaunchPlan& plan;
  const codegen::CostHints& hints;
  double threads_per_block = 0;
  double blocks = 0;
  double largest_elements = 1;
  double largest_dtype_bytes = 0;
  double floor_seconds = 0;
  std::optional<Occupancy> occupancy;  // with ptxas' or the estimated registers
  // Blocks (CTAs for a tiled GEMM) over the blocks one wave holds; unknown without occupancy.
  std::optional<double> waves;
};

// log2 of a positive figure, 0 for 0: sizes span many orders of magnitude.
double Log2(double value) { return value > 0 ? std::log2(value) : 0; }

struct Feature {
  const char* name;
  std::function<double(const Derived&)> value;  // NaN: unknown
};

double Known(bool known, double value) {
  return known ? value : std::numeric_limits<double>::quiet_NaN();
}

// Bytes of row re-reads that miss L2: the rows resident at once against the L2 size, as the
// emulated backend charges them (worker/emulated).
double RereadMissFraction(const Derived& d) {
  if (d.hints.row_rereads <= 0 || !d.occupancy.has_value()) return 0;
  const double resident = static_cast<double>(d.gpu.sm_count) * d.occupancy->blocks_per_sm *
                          static_cast<double>(d.hints.rows_per_block) * d.hints.row_bytes;
  if (resident <= 0) return 0;
  return std::clamp(1.0 - static_cast<double>(d.gpu.l2_bytes) / resident, 0.0, 1.0);
}

double SpillBytes(const Derived& d) {
  if (!d.in.resources.has_value()) return std::numeric_limits<double>::quiet_NaN();
  return d.threads_per_block * d.blocks *
         static_cast<double>(d.in.resources->spill_store_bytes + d.in.resources->spill_load_bytes);
}

const std::vector<Feature>& Table() {
  static const std::vector<Feature>* const table = new std::vector<Feature>{
      // The GPU (common/arch).
      {"gpu_sm_count", [](const Derived& d) { return d.gpu.sm_count; }},
      {"gpu_log2_l2_bytes", [](const Derived& d) { return Log2(d.gpu.l2_bytes); }},
      {"gpu_dram_tb_per_s", [](const Derived& d) { return d.gpu.dram_bytes_per_second / 1e12; }},
      {"gpu_log2_peak_flops",
       [](const Derived& d) { return Log2(d.gpu.PeakFlops(graph::FloorMathMode(d.task))); }},
      {"gpu_shared_kib_per_sm",
       [](const Derived& d) { return d.gpu.shared_memory_per_sm_bytes / 1024.0; }},
      {"gpu_registers_per_sm", [](const Derived& d) { return d.gpu.registers_per_sm; }},
      {"gpu_compute_capability", [](const Derived& d) { return d.gpu.compute_capability; }},
      // The task.
      {"task_family", [](const Derived& d) { return static_cast<double>(d.task.family()); }},
      {"task_log2_flops", [](const Derived& d) { return Log2(static_cast<double>(d.task.flops())); }},
      {"task_log2_min_bytes",
       [](const Derived& d) { return Log2(static_cast<double>(d.task.min_bytes())); }},
      {"task_flops_per_byte",
       [](const Derived& d) {
         return d.task.min_bytes() > 0
                    ? static_cast<double>(d.task.flops()) / static_cast<double>(d.task.min_bytes())
                    : 0;
       }},
      {"task_log2_largest_elements", [](const Derived& d) { return Log2(d.largest_elements); }},
      {"task_largest_dtype_bytes", [](const Derived& d) { return d.largest_dtype_bytes; }},
      {"task_inputs", [](const Derived& d) { return d.task.inputs_size(); }},
      {"task_outputs", [](const Derived& d) { return d.task.outputs_size(); }},
      {"task_log2_floor_us", [](const Derived& d) { return Log2(d.floor_seconds * 1e6); }},
      // The launch.
      {"launch_log2_blocks", [](const Derived& d) { return Log2(d.blocks); }},
      {"launch_threads_per_block", [](const Derived& d) { return d.threads_per_block; }},
      {"launch_dynamic_shared_kib",
       [](const Derived& d) { return d.plan.launch.dynamic_shared_bytes / 1024.0; }},
      {"launch_elements_per_thread",
       [](const Derived& d) {
         const double threads = d.threads_per_block * d.blocks;
         return threads > 0 ? d.largest_elements / threads : 0;
       }},
      // The family's cost hints.
      {"hint_executor", [](const Derived& d) { return static_cast<double>(d.hints.executor); }},
      {"hint_kernel_launches", [](const Derived& d) { return d.hints.kernel_launches; }},
      {"hint_output_through_scratch",
       [](const Derived& d) { return d.hints.output_through_scratch ? 1.0 : 0.0; }},
      {"hint_vector_width", [](const Derived& d) { return d.hints.vector_width; }},
      {"hint_unrolled_elements", [](const Derived& d) { return d.hints.unrolled_elements; }},
      {"hint_row_cache", [](const Derived& d) { return static_cast<double>(d.hints.row_cache); }},
      {"hint_bytes_in_flight_per_thread",
       [](const Derived& d) { return d.hints.bytes_in_flight_per_thread; }},
      {"hint_row_rereads", [](const Derived& d) { return d.hints.row_rereads; }},
      {"hint_log2_row_bytes", [](const Derived& d) { return Log2(d.hints.row_bytes); }},
      {"hint_rows_per_block", [](const Derived& d) { return d.hints.rows_per_block; }},
      {"hint_max_registers", [](const Derived& d) { return d.hints.max_registers; }},
      {"hint_gemm_math", [](const Derived& d) { return static_cast<double>(d.hints.gemm_math); }},
      {"hint_gemm_tile_m", [](const Derived& d) { return d.hints.gemm_tile_m; }},
      {"hint_gemm_tile_n", [](const Derived& d) { return d.hints.gemm_tile_n; }},
      {"hint_gemm_tile_k", [](const Derived& d) { return d.hints.gemm_tile_k; }},
      {"hint_log2_gemm_ctas", [](const Derived& d) { return Log2(d.hints.gemm_ctas); }},
      {"hint_gemm_ctas_per_sm", [](const Derived& d) { return d.hints.gemm_ctas_per_sm; }},
      {"hint_gemm_tile_utilization", [](const Derived& d) { return d.hints.gemm_tile_utilization; }},
      // Bytes per level of the memory hierarchy.
      {"bytes_log2_reread", [](const Derived& d) {
         return Log2(d.hints.row_rereads * d.hints.row_input_bytes);
       }},
      {"bytes_reread_l2_miss_fraction", [](const Derived& d) { return RereadMissFraction(d); }},
      {"bytes_log2_dram",
       [](const Derived& d) {
         const double spills = SpillBytes(d);
         return Log2(static_cast<double>(d.task.min_bytes()) + (std::isnan(spills) ? 0 : spills) +
                     d.hints.row_rereads * d.hints.row_input_bytes * RereadMissFraction(d));
       }},
      {"bytes_log2_spilled", [](const Derived& d) {
         const double spills = SpillBytes(d);
         return std::isnan(spills) ? spills : Log2(spills);
       }},
      // ptxas' resources.
      {"ptxas_registers",
       [](const Derived& d) {
         return Known(d.in.resources.has_value(),
                      d.in.resources ? d.in.resources->registers_per_thread : 0);
       }},
      {"ptxas_static_shared_kib",
       [](const Derived& d) {
         return Known(d.in.resources.has_value(),
                      d.in.resources ? d.in.resources->static_shared_bytes / 1024.0 : 0);
       }},
      {"ptxas_spill_bytes_per_thread",
       [](const Derived& d) {
         return Known(d.in.resources.has_value(),
                      d.in.resources ? static_cast<double>(d.in.resources->spill_store_bytes +
                                                           d.in.resources->spill_load_bytes)
                                     : 0);
       }},
      // Occupancy and waves.
      {"occupancy_blocks_per_sm",
       [](const Derived& d) {
         return Known(d.occupancy.has_value(), d.occupancy ? d.occupancy->blocks_per_sm : 0);
       }},
      {"occupancy_fraction",
       [](const Derived& d) {
         return Known(d.occupancy.has_value(), d.occupancy ? d.occupancy->fraction : 0);
       }},
      {"occupancy_limiter",
       [](const Derived& d) {
         return Known(d.occupancy.has_value(),
                      d.occupancy ? static_cast<double>(d.occupancy->limiter) : 0);
       }},
      {"waves", [](const Derived& d) { return Known(d.waves.has_value(), d.waves.value_or(0)); }},
      {"wave_efficiency",
       [](const Derived& d) {
         const double waves = d.waves.value_or(0);
         return Known(d.waves.has_value(), waves > 0 ? waves / std::ceil(waves) : 0);
       }},
      // The analytic model.
      {"analytic_log2_us", [](const Derived& d) { return Log2(d.in.analytic_seconds * 1e6); }},
      {"analytic_over_floor",
       [](const Derived& d) {
         return d.floor_seconds > 0 ? d.in.analytic_seconds / d.floor_seconds : 0;
       }},
  };
  return *table;
}

}  // namespace

const std::vector<std::string>& FeatureNames() {
  static const std::vector<std::string>* const names = [] {
    auto* out = new std::vector<std::string>();
    for (const Feature& feature : Table()) out->push_back(feature.name);
    return out;
  }();
  return *names;
}

const std::string& FeatureSchemaDigest() {
  static const std::string* const digest =
      new std::string(Sha256Hex(absl::StrJoin(FeatureNames(), ",")).substr(0, 16));
  return *digest;
}

int TaskFamilyOf(absl::Span<const float> row) {
  static const size_t column = [] {
    const std::vector<std::string>& names = FeatureNames();
    return static_cast<size_t>(std::find(names.begin(), names.end(), "task_family") -
                               names.begin());
  }();
  if (row.size() != FeatureNames().size() || std::isnan(row[column])) return 0;
  return static_cast<int>(row[column]);
}

absl::StatusOr<std::vector<float>> ExtractFeatures(const CandidateDescription& candidate) {
  if (candidate.gpu == nullptr || candidate.task == nullptr || candidate.plan == nullptr) {
    return absl::InvalidArgumentError("a candidate's features need its GPU, task and plan");
  }
  if (!(candidate.analytic_seconds > 0)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "a candidate's features need the analytic prediction, got ", candidate.analytic_seconds,
        " s"));
  }
  Derived d(candidate);
  const codegen::LaunchDims& launch = d.plan.launch;
  d.threads_per_block = static_cast<double>(launch.block[0]) * launch.block[1] * launch.block[2];
  d.blocks = static_cast<double>(launch.grid[0]) * launch.grid[1] * launch.grid[2];
  for (const auto* specs : {&d.task.inputs(), &d.task.outputs()}) {
    for (const forge::v1::TensorSpec& spec : *specs) {
      const double elements = static_cast<double>(graph::NumElements(spec));
      if (elements > d.largest_elements ||
          (elements == d.largest_elements && d.largest_dtype_bytes == 0)) {
        d.largest_elements = elements;
        d.largest_dtype_bytes = DTypeBytes(spec.dtype());
      }
    }
  }
  const absl::StatusOr<Roofline> floor =
      RooflineFloor(d.gpu, static_cast<double>(d.task.flops()),
                    static_cast<double>(d.task.min_bytes()), graph::FloorMathMode(d.task));
  d.floor_seconds = floor.ok() ? floor->seconds : 0;
  if (d.hints.executor == codegen::Executor::kGeneratedKernel && d.threads_per_block > 0) {
    KernelResources resources;
    if (candidate.resources.has_value()) {
      resources = *candidate.resources;
    } else {
      resources.registers_per_thread = candidate.estimated_registers;
    }
    resources.dynamic_shared_bytes = launch.dynamic_shared_bytes;
    absl::StatusOr<Occupancy> occupancy =
        ComputeOccupancy(d.gpu, static_cast<int64_t>(d.threads_per_block), resources);
    if (occupancy.ok()) {
      d.occupancy = *occupancy;
      d.waves = d.blocks / (static_cast<double>(d.gpu.sm_count) * occupancy->blocks_per_sm);
    }
  }
  if (d.hints.gemm_math != codegen::GemmMath::kNone) {
    d.waves = static_cast<double>(d.hints.gemm_ctas) /
              (static_cast<double>(d.gpu.sm_count) * std::max<int64_t>(1, d.hints.gemm_ctas_per_sm));
  }
  std::vector<float> row;
  row.reserve(Table().size());
  for (const Feature& feature : Table()) {
    const double value = feature.value(d);
    row.push_back(std::isfinite(value) ? static_cast<float>(value) : kMissing);
  }
  return row;
}

}  // namespace forge::cost
