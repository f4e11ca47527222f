// The contract between the generators (compiler/codegen), the cost models that rank candidates
// without compiling them (compiler/search's prior, compiler/cost) and the worker stages that
// compile, judge and time a candidate (worker/compile, worker/judge, worker/timer).
#ifndef FORGE_COMPILER_CODEGEN_GENERATED_KERNEL_H_
#define FORGE_COMPILER_CODEGEN_GENERATED_KERNEL_H_

#include <array>
#include <cstdint>
#include <limits>
#include <map>
#include <string>
#include <vector>

namespace forge::codegen {

// CUDA's launch limits on every architecture Forge targets (sm_80 and newer): blocks along grid x,
// along grid y or z, and static shared memory per block. Validate refuses points past them.
inline constexpr int64_t kMaxGridBlocks = std::numeric_limits<int32_t>::max();
inline constexpr int64_t kMaxGridYZ = 65535;
inline constexpr int64_t kMaxStaticSharedBytes = 48 * 1024;

// Grid and block of one launch, and the dynamic shared memory it asks for.
struct LaunchDims {
  std::array<uint32_t, 3> grid = {1, 1, 1};
  std::array<uint32_t, 3> block = {1, 1, 1};
  uint32_t dynamic_shared_bytes = 0;
};

// What runs a candidate.
enum class Executor {
  kGeneratedKernel,  // a kernel of the candidate's source, compiled with NVRTC
  kCublasLt,         // a cuBLASLt call (then, when it has one, a generated epilogue kernel)
  kAten,             // the task's group through ATen, node by node
  kHostLaunched,     // a shared object built by nvcc from the candidate's source, whose host
                     // entry point launches it (host_launch_abi.h: CUTLASS kernels)
  kCudnn,            // a cuDNN fused graph (the cudnn_conv family), nothing compiled
};

// What the worker's compile stage makes of a candidate's source.
enum class CompileOutput {
  kNvrtcCubin,         // NVRTC -> cubin of kernel_name (generated kernels, epilogue kernels)
  kNvccSharedObject,   // nvcc -> a shared object with host_launch_abi.h's entry points
};

// Where a row-reduction kernel keeps each thread's share of the row between passes.
enum class RowCache {
  kNone,          // re-read from memory by every pass
  kRegisters,     // loaded into registers once (cache_row)
  kSharedMemory,  // copied into shared memory once (cache_row in a thread block cluster)
};

// The math a tiled GEMM kernel runs on.
enum class GemmMath {
  kNone,
  kTensorCore16Bit,   // bfloat16 / float16 on the tensor cores, float32 accumulation
  kTensorCore3xTf32,  // float32 as three TF32 products on the tensor cores (float32 accuracy)
                      // through mma.sync (sm80_3xtf32)
  kTensorCore3xTf32Wgmma,  // the same three products as one WGMMA GEMM over a tripled K, its
                           // partial sums promoted into float32 registers (sm90_3xtf32)
};

// Facts about a candidate's schedule that the cost models (the search's prior, the emulated
// backend's performance model: compiler/cost) read instead of the schedule's parameters: each
// family computes them from its own layout, so that a model needs no template names, parameter
// names or layout rules. Defaults describe a kernel of one scalar load per thread and step.
struct CostHints {
  Executor executor = Executor::kGeneratedKernel;
  // Kernels one execution launches (the ATen fallback: one per non-view node; cuBLASLt with an
  // epilogue kernel: 2).
  int kernel_launches = 1;
  // cuBLASLt with an epilogue kernel: the product goes through a scratch buffer of the outputs'
  // size, written by the library and read back by the epilogue.
  bool output_through_scratch = false;

  // Generated kernels.
  // Elements per vector load or store.
  int64_t vector_width = 1;
  // Elements a thread's main loop loads before it uses any of them: vector_width times the
  // chunks the loop issues together (elements_per_thread; a cluster's chunk loop unrolls 4 deep).
  int64_t unrolled_elements = 1;
  RowCache row_cache = RowCache::kNone;
  // Bytes of global loads a thread keeps outstanding, by the emulated backend's count: a vector of
  // each full-size (row-sized) input per element, times the chunks it loads before use (all of
  // them for a row cached in registers, counted over the whole row).
  double bytes_in_flight_per_thread = 0;
  // Row reductions that re-read their row: the passes after the first that read the row's inputs
  // from memory again (a second statistics pass, the pass that writes row-shaped outputs); what
  // of them misses L2 reaches DRAM. Zero for a kernel that reads its inputs once.
  int row_rereads = 0;
  double row_bytes = 0;         // bytes of one row of the re-read inputs
  double row_input_bytes = 0;   // bytes of every row of them: one re-read's traffic
  int64_t rows_per_block = 1;   // rows one block holds at once
  // The register cap per thread the kernel asks for (__launch_bounds__); 0: the compiler's.
  int64_t max_registers = 0;

  // Tiled matrix products (host-launched CUTLASS kernels): the math they run on, the CTA tile,
  // the CTAs one execution computes (output tiles times batches), how many of them an SM holds
  // at once, and the share of the tiles' padded work that is the product's (1: the tiles cover
  // the output exactly; tile quantization makes it smaller). gemm_math kNone: not a tiled GEMM.
  GemmMath gemm_math = GemmMath::kNone;
  int64_t gemm_tile_m = 0;
  int64_t gemm_tile_n = 0;
  int64_t gemm_tile_k = 0;
  int64_t gemm_ctas = 0;
  int64_t gemm_ctas_per_sm = 1;
  double gemm_tile_utilization = 1;
};

// A candidate's launch, before (and without) its source: what KernelFamily::Plan computes and
// Emit turns into source. The coordinator plans every point of a space (the prior reads the
// plan); only the worker emits.
struct LaunchPlan {
  std::string kernel_name;
  LaunchDims launch;
  // Template within the family and the schedule point it was planned from.
  std::string template_name;
  std::map<std::string, int64_t> parameters;
  // Enters the candidate digest: a change to a generator's output must bump it.
  std::string generator_version;
  CostHints hints;
  // Host-launched candidates (hints.executor == kHostLaunched, host_launch_abi.h): compiled to a
  // shared object; `runtime_args` are what the entry points receive besides the buffers (problem
  // sizes, strides, operand positions, scalars), so that the source depends on the configuration
  // alone and one compiled configuration serves every task it can run. `compile_options` are the
  // nvcc options the source needs beyond the worker's own (-std, -arch and include paths are the
  // worker's). Both are empty for every other executor.
  CompileOutput compile_output = CompileOutput::kNvrtcCubin;
  std::vector<int64_t> runtime_args;
  std::vector<std::string> compile_options;
};

// One generated candidate, ready for NVRTC: its plan and source.
//
// Kernel ABI: the kernel named `kernel_name` (extern "C", so unmangled) takes exactly one device
// pointer per task input, in forge.v1.KernelTask.inputs order, then one per task output, in
// KernelTask.outputs order, and nothing else. Shapes, strides and scalars are compile-time
// constants in the source, because a task has fixed shapes. Every output element must be written
// by the kernel: the judge poisons outputs with NaN before each launch.
struct GeneratedKernel : LaunchPlan {
  std::string source;
};

}  // namespace forge::codegen

#endif  // FORGE_COMPILER_CODEGEN_GENERATED_KERNEL_H_
