// Runs the kernel families on a real GPU: problems exported by problems.py are partitioned, and
// every task's candidates are generated, compiled (NVRTC, or nvcc for host-launched ones), judged
// against the float64 ATen reference and (for anchor problems) timed.
//
//   generators_bench validate PROBLEMS_DIR OUT.jsonl
//     For each "validate" problem of PROBLEMS_DIR/manifest.tsv, per task: the default schedule
//     point and kSampledPoints others of the task's family (POINTWISE, REDUCTION, or GEMM through
//     the gemm_library family's cuBLASLt calls) and of every other generated family that applies
//     (host-launched CUTLASS GEMMs), then the ATen fallback (the group run through
//     ATen on CUDA), each judged (3 draws). One JSON line per problem. Problems
//     already in OUT.jsonl are skipped, so after a kernel kills the CUDA context (exit code 75)
//     the caller reruns the same command to go on with the next problem.
//   generators_bench anchor PROBLEMS_DIR OUT.jsonl
//   (either mode: PROBLEM names after OUT.jsonl restrict the run to those problems;
//   FORGE_BENCH_POINTS adds given points to the sampled ones, see RequestedPoints;
//   FORGE_BENCH_SAMPLES sets how many are sampled, see PickPoints; FORGE_TEST_COMPILE_CACHE names
//   the compile pool's disk cache, shared with the GPU tests)
//     For each "anchor" problem: up to kAnchorPoints schedule points per applicable family timed
//     (L2 flushed, median of kTimedReps), the fastest judged (then the next, if it fails), timed
//     again on the judge's buffers with the outputs poisoned before every rep and re-checked;
//     roofline floors from the arch table and from the measured copy bandwidth. One JSON line
//     per problem.
//
// Host-launched candidates (CUTLASS: compiler/codegen/host_launch_abi.h) are built by the
// pool's nvcc into shared objects and loaded with worker/library/host_launched.h, then judged
// and timed like the others. nvcc is single-threaded and a CUTLASS configuration takes ~45 s,
// so the pool runs one compile per core (16 on the H200 machine: 16 configurations build at
// once, while earlier candidates are judged). $FORGE_NVCC and $FORGE_CUTLASS_INCLUDE override
// the build's nvcc and CUTLASS headers (the GPU machine has its own toolkit; the headers travel
// with the bundle).
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <cstdio>
#include <fstream>
#include <future>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <cuda_runtime_api.h>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "aten/aten.h"
#include "common/arch/arch.h"
#include "common/status/status_macros.h"
#include "common/text/json.h"
#include "compiler/codegen/family.h"
#include "compiler/codegen/gemm_library/gemm_library.h"
#include "compiler/codegen/sdpa_library/sdpa_library.h"
#include "compiler/graph/cost.h"
#include "compiler/graph/partition.h"
#include "forge/v1/graph.pb.h"
#include "forge/v1/task.pb.h"
#include "google/protobuf/util/json_util.h"
#include "worker/compile/compile_pool.h"
#include "worker/gpu/device.h"
#include "worker/judge/host_tensor.h"
#include "worker/judge/inputs.h"
#include "worker/judge/judge.h"
#if GENERATORS_BENCH_WITH_CUDNN
#include "worker/library/cudnn_conv.h"
#endif
#include "worker/library/cublaslt_gemm.h"
#include "worker/library/host_launched.h"
#include "worker/timer/timer.h"

namespace forge {
namespace {

constexpr int kSampledPoints = 4;   // besides the default, per task, in the validation sweep
constexpr int kAnchorPoints = 20;   // timed per anchor task, the default included
constexpr int kTimedReps = 30;
constexpr int kJudgeAttempts = 3;   // anchor candidates judged, fastest first, until one passes
constexpr int kContextLostExitCode = 75;
constexpr int64_t kTimingTileElements = int64_t{1} << 22;

struct Problem {
  std::string name;
  std::string family;  // the family the problem is meant to exercise
  std::string mode;    // "validate" or "anchor"
};

// A schedule point's kernel and its compile (for a gemm_library point: its epilogue kernel's, if
// any; nothing to compile for the ATen fallback).
struct Candidate {
  const codegen::KernelFamily* family;
  codegen::SchedulePoint point;
  absl::StatusOr<codegen::GeneratedKernel> kernel;
  std::optional<codegen::GemmLibraryCandidate> library;  // gemm_library points only
  bool needs_compile = false;
  std::future<compile::CompileResult> compiled_future;
  compile::CompileResult compiled;
};

std::string JsonDouble(double value) {
  return std::isfinite(value) ? absl::StrFormat("%.6g", value) : "null";
}

std::string ParametersJson(const codegen::SchedulePoint& point) {
  std::vector<std::string> fields;
  for (const auto& [name, value] : point.parameters) {
    fields.push_back(absl::StrCat(JsonString(name), ":", value));
  }
  return absl::StrCat("{", absl::StrJoin(fields, ","), "}");
}

std::string ParametersText(const codegen::SchedulePoint& point) {
  std::vector<std::string> fields;
  for (const auto& [name, value] : point.parameters) fields.push_back(absl::StrCat(name, "=", value));
  return absl::StrJoin(fields, " ");
}

std::string EvidenceJson(const forge::v1::JudgeEvidence& evidence) {
  std::string json;
  google::protobuf::util::JsonPrintOptions options;
  options.always_print_primitive_fields = true;
  options.preserve_proto_field_names = true;
  if (!google::protobuf::util::MessageToJsonString(evidence, &json, options).ok()) return "null";
  return json;
}

std::string TaskSummaryJson(const forge::v1::KernelTask& task) {
  std::vector<std::string> ops, inputs, outputs;
  for (const auto& node : task.group().nodes()) ops.push_back(JsonString(node.op()));
  for (const auto& spec : task.inputs()) inputs.push_back(JsonString(judge::DescribeSpec(spec)));
  for (const auto& spec : task.outputs()) outputs.push_back(JsonString(judge::DescribeSpec(spec)));
  return absl::StrCat("\"digest\":", JsonString(task.digest()), ",\"family\":",
                      JsonString(forge::v1::KernelFamily_Name(task.family())), ",\"ops\":[",
                      absl::StrJoin(ops, ","), "],\"inputs\":[", absl::StrJoin(inputs, ","),
                      "],\"outputs\":[", absl::StrJoin(outputs, ","), "]");
}

absl::StatusOr<std::vector<Problem>> ReadManifest(const std::string& dir) {
  std::ifstream file(dir + "/manifest.tsv");
  if (!file) return absl::NotFoundError(absl::StrCat("cannot open ", dir, "/manifest.tsv"));
  std::vector<Problem> problems;
  std::string line;
  while (std::getline(file, line)) {
    std::vector<std::string> fields = absl::StrSplit(line, '\t');
    if (fields.size() != 3) {
      return absl::InvalidArgumentError(absl::StrCat(dir, "/manifest.tsv: bad line '", line, "'"));
    }
    problems.push_back({fields[0], fields[1], fields[2]});
  }
  return problems;
}

absl::StatusOr<std::vector<forge::v1::KernelTask>> ProblemTasks(
    const std::string& dir, const Problem& problem, absl::string_view graph_file = "graph.pb") {
  const std::string path = absl::StrCat(dir, "/", problem.name, "/", graph_file);
  std::ifstream file(path, std::ios::binary);
  forge::v1::Graph graph;
  if (!file || !graph.ParseFromIstream(&file)) {
    return absl::InvalidArgumentError(absl::StrCat("cannot read a forge.v1.Graph from ", path));
  }
  FORGE_ASSIGN_OR_RETURN(graph::PartitionResult partition, graph::Partition(graph));
  return std::vector<forge::v1::KernelTask>(partition.tasks.begin(), partition.tasks.end());
}

// The tasks the anchors time: those of the families with a schedule space (pointwise,
// reduction, scan, stencil, GEMM through cuBLASLt, attention through flash_attention).
absl::StatusOr<std::vector<forge::v1::KernelTask>> GeneratedFamilyTasks(
    const std::string& dir, const Problem& problem, absl::string_view graph_file = "graph.pb") {
  FORGE_ASSIGN_OR_RETURN(std::vector<forge::v1::KernelTask> all,
                         ProblemTasks(dir, problem, graph_file));
  std::vector<forge::v1::KernelTask> tasks;
  for (const auto& task : all) {
    if (task.family() == forge::v1::KERNEL_FAMILY_POINTWISE ||
        task.family() == forge::v1::KERNEL_FAMILY_REDUCTION ||
        task.family() == forge::v1::KERNEL_FAMILY_SCAN ||
        task.family() == forge::v1::KERNEL_FAMILY_STENCIL ||
        task.family() == forge::v1::KERNEL_FAMILY_GEMM ||
        task.family() == forge::v1::KERNEL_FAMILY_ATTENTION) {
      tasks.push_back(task);
    }
  }
  return tasks;
}

// The family whose points an anchor samples first (the others that apply follow): the task's
// own, except for tasks whose families all have numbers of their own (ATTENTION: the generated
// flash_attention first, then sdpa_library's backends), and except when it does not apply (a
// gated GEMM task, which cuBLASLt cannot run: cutlass_gemm's), then the first that does.
const codegen::KernelFamily* AnchorFamily(const forge::v1::KernelTask& task) {
  static const std::map<forge::v1::KernelFamily, forge::v1::KernelFamily> kFirst = {
      {forge::v1::KERNEL_FAMILY_ATTENTION, forge::v1::KERNEL_FAMILY_FLASH_ATTENTION}};
  const auto first = kFirst.find(task.family());
  const codegen::KernelFamily* own =
      codegen::FindFamily(first != kFirst.end() ? first->second : task.family());
  if (own != nullptr && own->Applies(task).ok()) return own;
  for (const codegen::KernelFamily* family : codegen::ApplicableFamilies(task)) {
    if (family->kind() != forge::v1::KERNEL_FAMILY_ATEN) return family;
  }
  return own;
}

// FORGE_BENCH_POINTS: points to measure besides the sampled ones, ';'-separated, each a list of
// name=value overriding a space's default point ("cluster_blocks=8,cache_row=0;vector_width=2").
// A request naming a parameter the space lacks, or giving an invalid point, is left out.
std::vector<std::map<std::string, int64_t>> RequestedPoints() {
  std::vector<std::map<std::string, int64_t>> requested;
  const char* text = std::getenv("FORGE_BENCH_POINTS");
  if (text == nullptr) return requested;
  for (absl::string_view point : absl::StrSplit(text, ';', absl::SkipEmpty())) {
    std::map<std::string, int64_t> values;
    for (absl::string_view assignment : absl::StrSplit(point, ',', absl::SkipEmpty())) {
      std::pair<std::string, std::string> name_value = absl::StrSplit(assignment, '=');
      int64_t value = 0;
      if (!absl::SimpleAtoi(name_value.second, &value)) {
        std::fprintf(stderr, "FORGE_BENCH_POINTS: '%s' is not name=integer\n",
                     std::string(assignment).c_str());
        std::exit(2);
      }
      values[name_value.first] = value;
    }
    requested.push_back(std::move(values));
  }
  return requested;
}

// FORGE_BENCH_SAMPLES: how many points to sample in place of PickPoints' `others` (-1 when
// unset).
int SampledPointsOverride() {
  const char* text = std::getenv("FORGE_BENCH_SAMPLES");
  int samples = -1;
  if (text != nullptr && (!absl::SimpleAtoi(text, &samples) || samples < 0)) {
    std::fprintf(stderr, "FORGE_BENCH_SAMPLES: '%s' is not a count\n", text);
    std::exit(2);
  }
  return samples;
}

// The default point, the FORGE_BENCH_POINTS points that apply, then up to `others` distinct
// valid points drawn with a fixed seed. FORGE_BENCH_SAMPLES replaces a nonzero `others`; with
// FORGE_BENCH_SAMPLES=0, a space where requested points apply runs those alone (so a profiler's
// first kernel launch is the first requested point).
absl::StatusOr<std::vector<codegen::SchedulePoint>> PickPoints(const codegen::KernelFamily& family,
                                                              const forge::v1::KernelTask& task,
                                                              int others, uint64_t seed) {
  FORGE_ASSIGN_OR_RETURN(std::vector<codegen::TemplateSpace> spaces, family.ScheduleSpace(task));
  static const std::vector<std::map<std::string, int64_t>> requested = RequestedPoints();
  static const int samples = SampledPointsOverride();
  if (others > 0 && samples >= 0) others = samples;
  std::vector<codegen::SchedulePoint> picked;
  std::vector<codegen::SchedulePoint> valid;
  for (const auto& space : spaces) {
    codegen::SchedulePoint default_point = codegen::DefaultPoint(space);
    const size_t default_index = picked.size();
    picked.push_back(default_point);  // judged even when Validate rejects it: Generate says why
    for (const std::map<std::string, int64_t>& values : requested) {
      codegen::SchedulePoint point = default_point;
      bool applies = true;
      for (const auto& [name, value] : values) {
        applies = applies && point.parameters.contains(name);
        point.parameters[name] = value;
      }
      if (applies && point.parameters != default_point.parameters &&
          family.Validate(task, point).ok()) {
        picked.push_back(std::move(point));
      }
    }
    if (samples == 0 && picked.size() > default_index + 1) {
      picked.erase(picked.begin() + static_cast<std::ptrdiff_t>(default_index));
    }
    for (auto& point : codegen::EnumeratePoints(space)) {
      const bool picked_already = std::any_of(
          picked.begin(), picked.end(),
          [&](const codegen::SchedulePoint& other) { return other.parameters == point.parameters; });
      if (!picked_already && family.Validate(task, point).ok()) valid.push_back(std::move(point));
    }
  }
  std::mt19937_64 random(seed);
  std::shuffle(valid.begin(), valid.end(), random);
  for (int i = 0; i < others && i < static_cast<int>(valid.size()); ++i) picked.push_back(valid[i]);
  return picked;
}

std::vector<Candidate> GenerateAndSubmit(const codegen::KernelFamily& family,
                                         const forge::v1::KernelTask& task,
                                         std::vector<codegen::SchedulePoint> points,
                                         compile::CompilePool& pool, const std::string& arch) {
  std::vector<Candidate> candidates;
  for (auto& point : points) {
    Candidate candidate{&family, std::move(point), absl::UnknownError("not generated")};
    candidate.kernel = family.Generate(task, candidate.point);
    // What the pool compiles: the kernel (NVRTC's cubin, or nvcc's shared object for a
    // host-launched candidate), or for a gemm_library point its epilogue kernel if any.
    // A cuDNN graph (cudnn_conv) has nothing to compile: the executor builds it.
    const codegen::GeneratedKernel* to_compile =
        candidate.kernel.ok() && !codegen::IsAtenFallback(*candidate.kernel) &&
                candidate.kernel->hints.executor != codegen::Executor::kCudnn
            ? &*candidate.kernel
            : nullptr;
    if (candidate.kernel.ok() && candidate.kernel->hints.executor == codegen::Executor::kCublasLt) {
      absl::StatusOr<codegen::GemmLibraryCandidate> library =
          codegen::DescribeGemmLibrary(task, candidate.point);
      if (library.ok()) {
        candidate.library = *std::move(library);
        to_compile = candidate.library->epilogue ? &*candidate.library->epilogue : nullptr;
      } else {
        candidate.kernel = library.status();
      }
    }
    std::optional<compile::CompileRequest> request =
        to_compile != nullptr ? compile::CompileRequestFor(*to_compile, arch) : std::nullopt;
    candidate.needs_compile = request.has_value();
    if (candidate.needs_compile) candidate.compiled_future = pool.Submit(*std::move(request));
    candidates.push_back(std::move(candidate));
  }
  return candidates;
}

// The candidates of every other generated family that applies to `task` (not `own`, not the ATen
// fallback): a second family for the same kind of task, such as CUTLASS GEMMs beside
// gemm_library's cuBLASLt calls. Up to `others` sampled points each; why a family's points could
// not be picked is appended to `not_applicable`.
std::vector<Candidate> OtherFamiliesCandidates(const forge::v1::KernelTask& task,
                                               const codegen::KernelFamily* own, int others,
                                               uint64_t seed, compile::CompilePool& pool,
                                               const std::string& arch,
                                               std::string* not_applicable) {
  std::vector<Candidate> candidates;
  for (const codegen::KernelFamily* family : codegen::ApplicableFamilies(task)) {
    if (family == own || family->kind() == forge::v1::KERNEL_FAMILY_ATEN) continue;
    absl::StatusOr<std::vector<codegen::SchedulePoint>> points =
        PickPoints(*family, task, others, seed);
    if (!points.ok()) {
      absl::StrAppend(not_applicable, not_applicable->empty() ? "" : "; ", family->name(), ": ",
                      points.status().ToString());
      continue;
    }
    for (Candidate& candidate : GenerateAndSubmit(*family, task, *points, pool, arch)) {
      candidates.push_back(std::move(candidate));
    }
  }
  return candidates;
}

// Waits for the compile; empty when the candidate is ready to load, else why not.
std::string CompileProblem(Candidate& candidate) {
  if (!candidate.kernel.ok()) return absl::StrCat("generate: ", candidate.kernel.status().ToString());
  if (!candidate.needs_compile) return "";
  if (candidate.compiled_future.valid()) candidate.compiled = candidate.compiled_future.get();
  if (!candidate.compiled.ok()) {
    return absl::StrCat("compile: ", candidate.compiled.status.ToString(), "\n",
                        candidate.compiled.log);
  }
  return "";
}

std::string CompileJson(const Candidate& candidate) {
  // A host-launched candidate's log starts with the nvcc command line.
  return absl::StrCat("\"compile_seconds\":", JsonDouble(candidate.compiled.compile_seconds),
                      ",\"nvrtc_log\":", JsonString(candidate.compiled.log.substr(0, 600)));
}

std::set<std::string> ProblemsDone(const std::string& out_path) {
  std::set<std::string> done;
  std::ifstream file(out_path);
  std::string line;
  const std::string key = "{\"problem\":\"";
  while (std::getline(file, line)) {
    if (line.rfind(key, 0) == 0) {
      done.insert(line.substr(key.size(), line.find('"', key.size()) - key.size()));
    }
  }
  return done;
}

void AppendLine(const std::string& out_path, const std::string& line) {
  std::ofstream file(out_path, std::ios::app);
  file << line << "\n";
}

struct Context {
  std::unique_ptr<gpu::Device> device;
  std::unique_ptr<compile::CompilePool> pool;
  std::unique_ptr<library::CublasLtGemm> gemm;
  judge::ReferenceFn reference = aten::Float64Reference();
#if GENERATORS_BENCH_WITH_CUDNN
  std::unique_ptr<library::CudnnConv> cudnn;  // created at the first cudnn_conv candidate
#endif
};

// A copy between host memory and one of the judge's buffers. Through the CUDA runtime, which
// LibTorch already loads (the gpu library opens the driver API itself and exposes no raw-address
// copy); both work in the device's primary context.
absl::Status CopyBytes(void* destination, const void* source, size_t bytes, cudaMemcpyKind kind,
                       absl::string_view what) {
  const cudaError_t error = cudaMemcpy(destination, source, bytes, kind);
  if (error == cudaSuccess) return absl::OkStatus();
  return absl::InternalError(absl::StrCat("cudaMemcpy(", what, ", ", bytes,
                                          " bytes): ", cudaGetErrorString(error)));
}

// The ATen fallback as a judge candidate: each launch reads the task's inputs from the judge's
// buffers, runs the group through ATen on CUDA (aten::Baseline) on the judge's stream and writes
// what ATen produced into the judge's output buffers, in their layouts. Synchronous: the judge
// only needs the outputs in place when the launch returns.
judge::CandidateLaunch AtenFallbackLaunch(const forge::v1::KernelTask& task) {
  return [task](gpu::Stream& stream, absl::Span<const CUdeviceptr> args) -> absl::Status {
    FORGE_RETURN_IF_ERROR(stream.Synchronize());
    std::vector<aten::HostTensor> inputs;
    for (int i = 0; i < task.inputs_size(); ++i) {
      const forge::v1::TensorSpec& spec = task.inputs(i);
      FORGE_ASSIGN_OR_RETURN(int element_bytes, judge::ElementBytes(spec.dtype()));
      std::vector<std::byte> storage(judge::StorageElementCount(spec) * element_bytes);
      if (!storage.empty()) {
        FORGE_RETURN_IF_ERROR(CopyBytes(storage.data(), reinterpret_cast<const void*>(args[i]), storage.size(),
                                        cudaMemcpyDeviceToHost, "input"));
      }
      aten::HostTensor& input = inputs.emplace_back();
      input.dtype = spec.dtype();
      input.shape.assign(spec.shape().begin(), spec.shape().end());
      input.strides.assign(spec.strides().begin(), spec.strides().end());
      const int64_t count = judge::ElementCount(spec);
      input.bytes.resize(count * element_bytes);
      for (int64_t e = 0; e < count; ++e) {
        std::memcpy(input.bytes.data() + e * element_bytes,
                    storage.data() + judge::StorageOffsetOf(spec, e) * element_bytes, element_bytes);
      }
    }
    FORGE_ASSIGN_OR_RETURN(std::unique_ptr<aten::Baseline> baseline,
                           aten::Baseline::Create(task, inputs));
    FORGE_RETURN_IF_ERROR(baseline->Launch(stream.handle()));
    FORGE_ASSIGN_OR_RETURN(std::vector<aten::HostTensor> outputs, baseline->Outputs());
    if (static_cast<int>(outputs.size()) != task.outputs_size()) {
      return absl::InternalError(absl::StrCat("the ATen baseline gave ", outputs.size(),
                                              " outputs, the task has ", task.outputs_size()));
    }
    for (int o = 0; o < task.outputs_size(); ++o) {
      const forge::v1::TensorSpec& spec = task.outputs(o);
      const CUdeviceptr address = args[task.inputs_size() + o];
      FORGE_ASSIGN_OR_RETURN(int element_bytes, judge::ElementBytes(spec.dtype()));
      const int64_t count = judge::ElementCount(spec);
      if (outputs[o].dtype != spec.dtype() ||
          static_cast<int64_t>(outputs[o].bytes.size()) != count * element_bytes) {
        return absl::InternalError(absl::StrCat("the ATen baseline's output ", o, " is not ",
                                                judge::DescribeSpec(spec)));
      }
      // Read first so that storage the layout skips keeps what the judge put there.
      std::vector<std::byte> storage(judge::StorageElementCount(spec) * element_bytes);
      if (storage.empty()) continue;
      FORGE_RETURN_IF_ERROR(CopyBytes(storage.data(), reinterpret_cast<const void*>(address), storage.size(),
                                      cudaMemcpyDeviceToHost, "output"));
      for (int64_t e = 0; e < count; ++e) {
        std::memcpy(storage.data() + judge::StorageOffsetOf(spec, e) * element_bytes,
                    outputs[o].bytes.data() + e * element_bytes, element_bytes);
      }
      FORGE_RETURN_IF_ERROR(CopyBytes(reinterpret_cast<void*>(address), storage.data(),
                                      storage.size(), cudaMemcpyHostToDevice, "output"));
    }
    return absl::OkStatus();
  };
}

// The judge's launch of a cudnn_conv candidate through the worker's executor, created at the
// first one. OutOfRange (cuDNN's reason) when no engine of cuDNN runs its graph.
absl::StatusOr<judge::CandidateLaunch> LoadCudnnCandidate(Context& context,
                                                          const forge::v1::KernelTask& task,
                                                          const Candidate& candidate) {
#if GENERATORS_BENCH_WITH_CUDNN
  if (context.cudnn == nullptr) {
    FORGE_ASSIGN_OR_RETURN(context.cudnn, library::CudnnConv::Create(*context.device));
  }
  FORGE_ASSIGN_OR_RETURN(library::CudnnConvLaunch loaded,
                         library::LoadCudnnConvCandidate(*context.cudnn, task, candidate.point));
  return std::move(loaded.launch);
#else
  (void)context;
  (void)task;
  (void)candidate;
  return absl::FailedPreconditionError("generators_bench was built without cuDNN");
#endif
}

// Why `candidate` cannot run on this GPU, or empty: a gemm_library `algo` past the end of
// cuBLASLt's heuristic list for the call (the family's documented "unsupported there", which the
// judge would report as a crash of the launch), or a host-launched object whose
// forge_workspace_bytes refuses the candidate's runtime arguments, or a cuDNN graph no engine
// of cuDNN runs.
std::string UnsupportedOnThisGpu(Context& context, const forge::v1::KernelTask& task,
                                 const Candidate& candidate) {
  if (candidate.kernel.ok() &&
      candidate.kernel->hints.executor == codegen::Executor::kHostLaunched) {
    absl::StatusOr<std::unique_ptr<library::HostLaunchedObject>> object =
        library::HostLaunchedObject::Load(candidate.compiled.cubin);
    if (!object.ok()) return "";  // the judged launch reports it
    absl::StatusOr<int64_t> workspace = (*object)->WorkspaceBytes(candidate.kernel->runtime_args);
    return absl::IsOutOfRange(workspace.status()) ? std::string(workspace.status().message()) : "";
  }
  if (candidate.kernel.ok() && candidate.kernel->hints.executor == codegen::Executor::kCudnn) {
    absl::StatusOr<judge::CandidateLaunch> loaded = LoadCudnnCandidate(context, task, candidate);
    // Other errors: the judged launch reports them.
    return absl::IsOutOfRange(loaded.status()) ? std::string(loaded.status().message()) : "";
  }
  if (!candidate.library) return "";
  absl::StatusOr<int> algorithms = context.gemm->AlgorithmCount(candidate.library->gemm);
  if (!algorithms.ok()) return "";  // the judged launch reports it
  if (candidate.library->gemm.algo < *algorithms) return "";
  return absl::StrCat("cuBLASLt offers ", *algorithms, " algorithms for ",
                      codegen::DescribeCall(candidate.library->gemm));
}

// The judge's launch of `candidate`, whatever its family.
absl::StatusOr<judge::CandidateLaunch> LoadCandidate(Context& context,
                                                     const forge::v1::KernelTask& task,
                                                     const Candidate& candidate) {
  if (candidate.library) {
    return library::LoadGemmLibraryCandidate(*context.device, *context.gemm, *candidate.library,
                                             candidate.compiled.cubin);
  }
  if (candidate.kernel->hints.executor == codegen::Executor::kCudnn) {
    return LoadCudnnCandidate(context, task, candidate);
  }
  if (codegen::IsAtenFallback(*candidate.kernel)) {
    // The ATen fallback, or an SDPA backend's rewritten group (one SDPA call, that backend), as
    // the sandbox child runs it; the judge compares against the task's own ops.
    FORGE_ASSIGN_OR_RETURN(const forge::v1::KernelTask executed,
                           codegen::AtenExecutedTask(task, candidate.point));
    return AtenFallbackLaunch(executed);
  }
  if (candidate.kernel->hints.executor == codegen::Executor::kHostLaunched) {
    FORGE_ASSIGN_OR_RETURN(std::unique_ptr<library::HostLaunchedObject> object,
                           library::HostLaunchedObject::Load(candidate.compiled.cubin));
    return library::LoadHostLaunchedCandidate(*context.device, std::move(object),
                                              candidate.kernel->runtime_args);
  }
  return judge::LoadGeneratedKernel(*context.device, candidate.compiled.cubin, *candidate.kernel);
}

// The judge's options for `candidate`: its launches captured from the judge's stream, except the
// ATen fallback's (LibTorch allocates and synchronizes inside it), as the sandbox child does.
judge::JudgeOptions JudgeOptionsFor(const Candidate& candidate) {
  judge::JudgeOptions options;
  options.capture_launches =
      candidate.library || !codegen::IsAtenFallback(*candidate.kernel);
  return options;
}

// The task's roofline floor in microseconds on `gpu` with DRAM bandwidth `bandwidth`, in the
// math mode the worker's floors use (tensor cores for 16-bit GEMMs), or 0 if the GPU lacks it.
double FloorUs(const GpuArch& gpu, const forge::v1::KernelTask& task, double bandwidth) {
  GpuArch at_bandwidth = gpu;
  at_bandwidth.dram_bytes_per_second = bandwidth;
  absl::StatusOr<Roofline> floor =
      RooflineFloor(at_bandwidth, static_cast<double>(task.flops()),
                    static_cast<double>(task.min_bytes()), graph::FloorMathMode(task));
  return floor.ok() ? floor->seconds * 1e6 : 0;
}

// ---- validation sweep -------------------------------------------------------------------------

int RunValidation(Context& context, const std::string& dir, const std::vector<Problem>& problems,
                  const std::string& out_path) {
  const std::set<std::string> done = ProblemsDone(out_path);
  const std::string arch = context.device->properties().arch();
  struct Pending {
    const Problem* problem;
    std::string error;  // export / partition trouble
    std::vector<forge::v1::KernelTask> tasks;
    std::vector<std::vector<Candidate>> candidates;  // per task, the ATen fallback last
    std::vector<std::string> not_applicable;  // per task: why the task's family does not apply
  };
  // Everything is generated and submitted first, so NVRTC works on all cores while judging runs.
  std::vector<Pending> pending;
  for (const Problem& problem : problems) {
    if (problem.mode != "validate" || done.count(problem.name)) continue;
    Pending entry{&problem, "", {}, {}, {}};
    absl::StatusOr<std::vector<forge::v1::KernelTask>> tasks = ProblemTasks(dir, problem);
    if (!tasks.ok()) {
      entry.error = tasks.status().ToString();
    } else {
      entry.tasks = *tasks;
      if (entry.tasks.empty()) entry.error = "no task after partitioning";
    }
    const codegen::KernelFamily& aten_fallback =
        *codegen::FindFamily(forge::v1::KERNEL_FAMILY_ATEN);
    for (size_t t = 0; t < entry.tasks.size(); ++t) {
      const forge::v1::KernelTask& task = entry.tasks[t];
      std::vector<Candidate> candidates;
      std::string not_applicable;
      const codegen::KernelFamily* family = codegen::FindFamily(task.family());
      if (family == nullptr) {
        not_applicable = absl::StrCat("no family for ", forge::v1::KernelFamily_Name(task.family()));
      } else if (family != &aten_fallback) {
        absl::Status applies = family->Applies(task);
        absl::StatusOr<std::vector<codegen::SchedulePoint>> points =
            applies.ok() ? PickPoints(*family, task, kSampledPoints,
                                      std::hash<std::string>()(problem.name + task.digest()))
                         : absl::StatusOr<std::vector<codegen::SchedulePoint>>(applies);
        if (points.ok()) {
          candidates = GenerateAndSubmit(*family, task, *points, *context.pool, arch);
        } else {
          not_applicable = points.status().ToString();
        }
      }
      for (Candidate& candidate : OtherFamiliesCandidates(
               task, family, kSampledPoints, std::hash<std::string>()(problem.name + task.digest()),
               *context.pool, arch, &not_applicable)) {
        candidates.push_back(std::move(candidate));
      }
      // The ATen fallback applies to every well-formed task: always judged too.
      absl::StatusOr<std::vector<codegen::SchedulePoint>> fallback_points =
          PickPoints(aten_fallback, task, 0, 0);
      if (fallback_points.ok()) {
        for (Candidate& candidate :
             GenerateAndSubmit(aten_fallback, task, *fallback_points, *context.pool, arch)) {
          candidates.push_back(std::move(candidate));
        }
      } else {
        absl::StrAppend(&not_applicable, not_applicable.empty() ? "" : "; ", "aten fallback: ",
                        fallback_points.status().ToString());
      }
      entry.not_applicable.push_back(not_applicable);
      entry.candidates.push_back(std::move(candidates));
    }
    pending.push_back(std::move(entry));
  }

  for (Pending& entry : pending) {
    const Problem& problem = *entry.problem;
    bool context_lost = false;
    std::vector<std::string> task_json;
    for (size_t t = 0; t < entry.tasks.size(); ++t) {
      const forge::v1::KernelTask& task = entry.tasks[t];
      std::vector<std::string> point_json;
      for (Candidate& candidate : entry.candidates[t]) {
        std::string outcome;
        std::string problem_text = CompileProblem(candidate);
        std::string status = "pass";
        std::string detail;
        std::string evidence = "null";
        if (!problem_text.empty()) {
          status = candidate.kernel.ok() ? "compile_error" : "not_generated";
          detail = problem_text;
        } else if (std::string why = UnsupportedOnThisGpu(context, task, candidate); !why.empty()) {
          status = "unsupported";
          detail = why;
        } else if (!context_lost) {
          absl::StatusOr<judge::CandidateLaunch> launch = LoadCandidate(context, task, candidate);
          absl::StatusOr<std::unique_ptr<judge::JudgedCandidate>> judged =
              launch.ok() ? judge::Judge(*context.device, task, *launch, context.reference,
                                         JudgeOptionsFor(candidate))
                          : absl::StatusOr<std::unique_ptr<judge::JudgedCandidate>>(launch.status());
          if (!judged.ok()) {
            status = "judge_error";
            detail = judged.status().ToString();
            context_lost = gpu::IsStickyError(judged.status());
          } else {
            const judge::JudgeVerdict& verdict = (*judged)->verdict();
            status = verdict.passed() ? "pass" : "fail";
            detail = verdict.passed() ? "" : absl::StrCat(forge::v1::FailureReason_Name(verdict.reason),
                                                          ": ", verdict.detail);
            evidence = EvidenceJson(verdict.evidence);
            context_lost = verdict.context_lost;
          }
        } else {
          status = "skipped";
          detail = "CUDA context lost earlier in this problem";
        }
        const std::string family_name(candidate.family->name());
        std::printf("%-6s %-28s %-12s %s %s%s%s\n", status.c_str(), problem.name.c_str(),
                    family_name.c_str(), candidate.point.template_name.c_str(),
                    ParametersText(candidate.point).c_str(),
                    detail.empty() ? "" : "  -- ",
                    detail.substr(0, 400).c_str());
        std::fflush(stdout);
        point_json.push_back(absl::StrCat("{\"family\":", JsonString(family_name),
                                          ",\"template\":",
                                          JsonString(candidate.point.template_name),
                                          ",\"parameters\":", ParametersJson(candidate.point),
                                          ",\"status\":", JsonString(status), ",\"detail\":",
                                          JsonString(detail), ",\"evidence\":", evidence, ",",
                                          CompileJson(candidate), "}"));
      }
      task_json.push_back(absl::StrCat("{", TaskSummaryJson(task), ",\"not_applicable\":",
                                       JsonString(entry.not_applicable[t]), ",\"points\":[",
                                       absl::StrJoin(point_json, ","), "]}"));
    }
    if (!entry.error.empty()) {
      std::printf("error  %-28s %s\n", problem.name.c_str(), entry.error.c_str());
    }
    for (size_t t = 0; t < entry.tasks.size(); ++t) {
      if (!entry.not_applicable[t].empty()) {
        std::printf("n/a    %-28s %s\n", problem.name.c_str(), entry.not_applicable[t].c_str());
      }
    }
    AppendLine(out_path, absl::StrCat("{\"problem\":", JsonString(problem.name),
                                      ",\"family\":", JsonString(problem.family), ",\"error\":",
                                      JsonString(entry.error), ",\"tasks\":[",
                                      absl::StrJoin(task_json, ","), "]}"));
    if (context_lost) {
      std::printf("CUDA context lost in %s: exiting so the caller restarts\n", problem.name.c_str());
      return kContextLostExitCode;
    }
  }
  return 0;
}

// ---- anchors ----------------------------------------------------------------------------------

// Device buffers holding draw 0 of the task's inputs and room for its outputs.
struct TimingBuffers {
  std::vector<gpu::DeviceBuffer> buffers;
  std::vector<CUdeviceptr> args;
};

absl::StatusOr<TimingBuffers> MakeTimingBuffers(const gpu::Device& device,
                                                const forge::v1::KernelTask& task) {
  TimingBuffers result;
  std::vector<judge::InputDomain> domains = judge::InferInputDomains(task);
  for (int i = 0; i < task.inputs_size(); ++i) {
    // The judge's draw is single-threaded and takes minutes for a billion elements: draw a tile
    // of at most kTimingTileElements and repeat it over the storage.
    const int64_t elements = judge::StorageElementCount(task.inputs(i));
    forge::v1::TensorSpec tile_spec;
    tile_spec.set_dtype(task.inputs(i).dtype());
    tile_spec.add_shape(std::min(elements, kTimingTileElements));
    FORGE_ASSIGN_OR_RETURN(judge::HostTensor tile,
                           judge::DrawInput(tile_spec, domains[i], 0, i, 0xBE7C4ull));
    FORGE_ASSIGN_OR_RETURN(int element_bytes, judge::ElementBytes(task.inputs(i).dtype()));
    std::vector<std::byte> storage(elements * element_bytes);
    for (size_t offset = 0; offset < storage.size(); offset += tile.storage.size()) {
      std::memcpy(storage.data() + offset, tile.storage.data(),
                  std::min(tile.storage.size(), storage.size() - offset));
    }
    FORGE_ASSIGN_OR_RETURN(gpu::DeviceBuffer buffer, device.Allocate(storage.size()));
    FORGE_RETURN_IF_ERROR(buffer.CopyFromHost(storage.data(), storage.size()));
    result.args.push_back(buffer.address());
    result.buffers.push_back(std::move(buffer));
  }
  for (const auto& spec : task.outputs()) {
    FORGE_ASSIGN_OR_RETURN(int element_bytes, judge::ElementBytes(spec.dtype()));
    FORGE_ASSIGN_OR_RETURN(gpu::DeviceBuffer buffer,
                           device.Allocate(judge::StorageElementCount(spec) * element_bytes));
    result.args.push_back(buffer.address());
    result.buffers.push_back(std::move(buffer));
  }
  return result;
}

std::string TimingJson(const timer::Timing& timing) {
  return absl::StrCat("\"median_us\":", JsonDouble(timing.summary.median), ",\"min_us\":",
                      JsonDouble(timing.summary.min), ",\"max_us\":", JsonDouble(timing.summary.max),
                      ",\"kernel_median_us\":",
                      timing.kernel_summary ? JsonDouble(timing.kernel_summary->median) : "null",
                      ",\"reps\":", timing.rep_us.size());
}

int RunAnchors(Context& context, const std::string& dir, const std::vector<Problem>& problems,
               const std::string& out_path) {
  const std::string arch = context.device->properties().arch();
  absl::StatusOr<std::unique_ptr<timer::Timer>> timer = timer::Timer::Create(*context.device);
  if (!timer.ok()) {
    std::fprintf(stderr, "timer: %s\n", timer.status().ToString().c_str());
    return 1;
  }
  absl::StatusOr<double> bandwidth = (*timer)->CopyBandwidth();
  absl::StatusOr<GpuArch> gpu = FindGpu("H200");
  std::printf("copy bandwidth %.1f GB/s (arch table %.1f GB/s)\n",
              bandwidth.ok() ? *bandwidth / 1e9 : 0.0, gpu.ok() ? gpu->dram_bytes_per_second / 1e9 : 0.0);
  timer::TimerOptions timer_options;
  timer_options.reps = kTimedReps;

  for (const Problem& problem : problems) {
    if (problem.mode != "anchor") continue;
    absl::StatusOr<std::vector<forge::v1::KernelTask>> tasks = GeneratedFamilyTasks(dir, problem);
    if (!tasks.ok() || tasks->size() != 1) {
      std::string why = tasks.ok() ? absl::StrCat(tasks->size(), " generated-family tasks, want 1")
                                   : tasks.status().ToString();
      std::printf("error  %s: %s\n", problem.name.c_str(), why.c_str());
      AppendLine(out_path, absl::StrCat("{\"problem\":", JsonString(problem.name), ",\"error\":",
                                        JsonString(why), "}"));
      continue;
    }
    const forge::v1::KernelTask& task = tasks->front();
    const codegen::KernelFamily* family = AnchorFamily(task);
    absl::StatusOr<std::vector<codegen::SchedulePoint>> points =
        PickPoints(*family, task, kAnchorPoints - 1, 0xA11C40ull);
    if (!points.ok()) {
      std::printf("error  %s: %s\n", problem.name.c_str(), points.status().ToString().c_str());
      AppendLine(out_path, absl::StrCat("{\"problem\":", JsonString(problem.name), ",\"error\":",
                                        JsonString(points.status().ToString()), "}"));
      continue;
    }
    std::vector<Candidate> candidates =
        GenerateAndSubmit(*family, task, *points, *context.pool, arch);
    std::string other_families;
    for (Candidate& candidate : OtherFamiliesCandidates(task, family, kAnchorPoints - 1,
                                                        0xA11C40ull, *context.pool, arch,
                                                        &other_families)) {
      candidates.push_back(std::move(candidate));
    }
    if (!other_families.empty()) {
      std::printf("note   %s: %s\n", problem.name.c_str(), other_families.c_str());
    }

    struct Timed {
      size_t index;
      double median_us;
    };
    std::vector<Timed> timed;
    std::vector<std::string> point_json;
    {
      absl::StatusOr<TimingBuffers> buffers = MakeTimingBuffers(*context.device, task);
      if (!buffers.ok()) {
        std::printf("error  %s: %s\n", problem.name.c_str(), buffers.status().ToString().c_str());
        return 1;
      }
      for (size_t i = 0; i < candidates.size(); ++i) {
        Candidate& candidate = candidates[i];
        std::string problem_text = CompileProblem(candidate);
        if (problem_text.empty()) problem_text = UnsupportedOnThisGpu(context, task, candidate);
        std::string entry = absl::StrCat("{\"parameters\":", ParametersJson(candidate.point));
        if (problem_text.empty()) {
          absl::StatusOr<judge::CandidateLaunch> launch = LoadCandidate(context, task, candidate);
          absl::StatusOr<timer::Timing> timing =
              launch.ok() ? (*timer)->Time(
                                [&](gpu::Stream& stream) { return (*launch)(stream, buffers->args); },
                                timer_options)
                          : absl::StatusOr<timer::Timing>(launch.status());
          if (timing.ok()) {
            timed.push_back({i, timing->summary.median});
            absl::StrAppend(&entry, ",", TimingJson(*timing));
            std::printf("time   %-24s %10.1f us  %s\n", problem.name.c_str(),
                        timing->summary.median, ParametersText(candidate.point).c_str());
          } else {
            problem_text = absl::StrCat("time: ", timing.status().ToString());
            if (gpu::IsStickyError(timing.status())) {
              std::printf("CUDA context lost timing %s: %s\n", problem.name.c_str(),
                          problem_text.c_str());
              return kContextLostExitCode;
            }
          }
        }
        if (!problem_text.empty()) {
          std::printf("error  %-24s %s: %s\n", problem.name.c_str(),
                      ParametersText(candidate.point).c_str(), problem_text.substr(0, 400).c_str());
        }
        absl::StrAppend(&entry, ",\"error\":", JsonString(problem_text), ",",
                        CompileJson(candidate), "}");
        point_json.push_back(entry);
      }
    }  // frees the timing buffers before the judge allocates its own
    std::sort(timed.begin(), timed.end(),
              [](const Timed& a, const Timed& b) { return a.median_us < b.median_us; });

    // Anchors past the judge's reach (its inputs and comparison are single-threaded on the CPU)
    // come with judge_graph.pb: the same computation with fewer rows, where the point is judged.
    forge::v1::KernelTask judge_task = task;
    std::string judge_note = "judged at full size";
    if (std::ifstream(absl::StrCat(dir, "/", problem.name, "/judge_graph.pb"))) {
      absl::StatusOr<std::vector<forge::v1::KernelTask>> reduced =
          GeneratedFamilyTasks(dir, problem, "judge_graph.pb");
      if (!reduced.ok() || reduced->size() != 1) {
        std::printf("error  %s: judge_graph.pb gives no single task\n", problem.name.c_str());
        return 1;
      }
      judge_task = reduced->front();
      judge_note = absl::StrCat("judged on ", judge::DescribeSpec(judge_task.inputs(0)),
                                " (fewer rows, same schedule point)");
    }
    std::string best_json = "null";
    std::vector<std::string> judged_json;
    for (int attempt = 0; attempt < kJudgeAttempts && attempt < static_cast<int>(timed.size());
         ++attempt) {
      Candidate& candidate = candidates[timed[attempt].index];
      std::vector<Candidate> reduced_candidates;
      Candidate* judged_kernel = &candidate;
      if (judge_task.digest() != task.digest()) {
        reduced_candidates = GenerateAndSubmit(*candidate.family, judge_task, {candidate.point},
                                               *context.pool, arch);
        judged_kernel = &reduced_candidates.front();
      }
      if (std::string why = CompileProblem(*judged_kernel); !why.empty()) {
        std::printf("error  %s: judge-size kernel: %s\n", problem.name.c_str(), why.c_str());
        continue;
      }
      absl::StatusOr<judge::CandidateLaunch> launch =
          LoadCandidate(context, judge_task, *judged_kernel);
      if (!launch.ok()) continue;
      absl::StatusOr<std::unique_ptr<judge::JudgedCandidate>> judged =
          judge::Judge(*context.device, judge_task, *launch, context.reference,
                       JudgeOptionsFor(*judged_kernel));
      if (!judged.ok()) {
        std::printf("judge error %s: %s\n", problem.name.c_str(), judged.status().ToString().c_str());
        judged_json.push_back(absl::StrCat("{\"parameters\":", ParametersJson(candidate.point),
                                           ",\"judge_error\":", JsonString(judged.status().ToString()),
                                           "}"));
        if (gpu::IsStickyError(judged.status())) return kContextLostExitCode;
        continue;
      }
      judge::JudgedCandidate& judged_candidate = **judged;
      const judge::JudgeVerdict& verdict = judged_candidate.verdict();
      std::printf("judge  %-24s %s  %s %s %s\n", problem.name.c_str(), judge_note.c_str(),
                  ParametersText(candidate.point).c_str(), verdict.passed() ? "PASS" : "FAIL",
                  verdict.detail.c_str());
      judged_json.push_back(absl::StrCat(
          "{\"parameters\":", ParametersJson(candidate.point), ",\"judge\":",
          JsonString(judge_note), ",\"passed\":",
          verdict.passed() ? "true" : "false", ",\"detail\":", JsonString(verdict.detail),
          ",\"evidence\":", EvidenceJson(verdict.evidence), "}"));
      if (verdict.context_lost) return kContextLostExitCode;
      if (!verdict.passed()) continue;
      // The judged candidate on the judge's buffers, outputs poisoned before every rep, one
      // untimed run on other inputs amid the reps, and what the timed runs wrote checked again,
      // as the sandbox child times. It is the reported time when judged at full size.
      timer::TimerOptions judged_options = timer_options;
      judged_options.before_each_rep = [&](gpu::Stream& stream) {
        return judged_candidate.PoisonOutputs(stream);
      };
      judged_options.between_reps = [&] { return judged_candidate.RunOnOtherContents(); };
      absl::StatusOr<timer::Timing> timing = (*timer)->Time(
          [&](gpu::Stream& stream) { return judged_candidate.Launch(stream); }, judged_options);
      absl::StatusOr<judge::JudgeVerdict> recheck = judged_candidate.RecheckTimedOutputs();
      if (!timing.ok() || !recheck.ok()) {
        std::printf("error  %s: timing or recheck of the judged candidate failed\n",
                    problem.name.c_str());
        break;
      }
      const double floor_table_us = gpu.ok() ? FloorUs(*gpu, task, gpu->dram_bytes_per_second) : 0;
      const double floor_measured_us =
          gpu.ok() && bandwidth.ok() ? FloorUs(*gpu, task, *bandwidth) : 0;
      std::vector<std::string> reasons =
          judge::ReverificationReasons(timed[attempt].median_us, 0, floor_measured_us);
      const double full_size_median_us = judge_task.digest() == task.digest()
                                             ? timing->summary.median
                                             : timed[attempt].median_us;
      best_json = absl::StrCat(
          "{\"parameters\":", ParametersJson(candidate.point),
          ",\"median_us\":", JsonDouble(full_size_median_us),
          ",\"judge\":", JsonString(judge_note), ",\"judge_size_timing\":{",
          TimingJson(*timing), "}",
          ",\"recheck_passed\":", recheck->passed() ? "true" : "false",
          ",\"floor_table_us\":", JsonDouble(floor_table_us),
          ",\"floor_measured_bw_us\":", JsonDouble(floor_measured_us),
          ",\"reverification\":", JsonString(absl::StrJoin(reasons, "; ")), "}");
      std::printf("best   %-24s %10.1f us (recheck %s)  floor %.1f us (table) %.1f us (measured bw)\n",
                  problem.name.c_str(), timed[attempt].median_us, recheck->passed() ? "ok" : "FAILED",
                  floor_table_us, floor_measured_us);
      break;
    }
    AppendLine(out_path,
               absl::StrCat("{\"problem\":", JsonString(problem.name), ",", TaskSummaryJson(task),
                            ",\"flops\":", task.flops(), ",\"min_bytes\":", task.min_bytes(),
                            ",\"copy_bandwidth_bytes_per_s\":",
                            JsonDouble(bandwidth.ok() ? *bandwidth : 0), ",\"points\":[",
                            absl::StrJoin(point_json, ","), "],\"judged\":[",
                            absl::StrJoin(judged_json, ","), "],\"best\":", best_json, "}"));
    std::fflush(stdout);
  }
  return 0;
}

int Main(int argc, char** argv) {
  if (argc < 4 || (std::string(argv[1]) != "validate" && std::string(argv[1]) != "anchor")) {
    std::fprintf(stderr, "usage: %s validate|anchor PROBLEMS_DIR OUT.jsonl [PROBLEM...]\n", argv[0]);
    return 2;
  }
  const std::string mode = argv[1], dir = argv[2], out_path = argv[3];
  absl::StatusOr<std::vector<Problem>> problems = ReadManifest(dir);
  if (!problems.ok()) {
    std::fprintf(stderr, "%s\n", problems.status().ToString().c_str());
    return 1;
  }
  if (argc > 4) {  // only the named problems
    const std::set<std::string> only(argv + 4, argv + argc);
    std::erase_if(*problems, [&](const Problem& problem) { return !only.count(problem.name); });
  }
  Context context;
  absl::StatusOr<std::unique_ptr<gpu::Device>> device = gpu::Device::Open(0);
  compile::CompilePoolOptions pool_options;
  pool_options.threads = static_cast<int>(std::max(2u, std::thread::hardware_concurrency()));
  if (const char* nvcc = std::getenv("FORGE_NVCC")) pool_options.nvcc_path = nvcc;
  if (const char* cutlass = std::getenv("FORGE_CUTLASS_INCLUDE")) {
    pool_options.cutlass_include = cutlass;
  }
  // FORGE_TEST_COMPILE_CACHE (run_round.sh and run_families_check.sh set it for the GPU tests):
  // the compile pool's disk cache, so that an anchor reuses a shared object a test compiled (a
  // CUTLASS configuration is ~45 s of nvcc) and a rerun compiles nothing.
  if (const char* cache = std::getenv("FORGE_TEST_COMPILE_CACHE"); cache != nullptr && *cache) {
    pool_options.disk_cache_dir = cache;
  }
  absl::StatusOr<std::unique_ptr<compile::CompilePool>> pool =
      compile::CompilePool::Create(std::move(pool_options));
  if (!device.ok() || !pool.ok()) {
    std::fprintf(stderr, "device: %s; compile pool: %s\n", device.status().ToString().c_str(),
                 pool.status().ToString().c_str());
    return 1;
  }
  context.device = std::move(*device);
  context.pool = std::move(*pool);
  absl::StatusOr<std::unique_ptr<library::CublasLtGemm>> gemm =
      library::CublasLtGemm::Create(*context.device);
  if (!gemm.ok()) {
    std::fprintf(stderr, "cuBLASLt: %s\n", gemm.status().ToString().c_str());
    return 1;
  }
  context.gemm = std::move(*gemm);
  std::printf("%s: %s (%s), %d SMs\n", mode.c_str(), context.device->properties().name.c_str(),
              context.device->properties().arch().c_str(), context.device->properties().sm_count);
  return mode == "validate" ? RunValidation(context, dir, *problems, out_path)
                            : RunAnchors(context, dir, *problems, out_path);
}

}  // namespace
}  // namespace forge

int main(int argc, char** argv) { return forge::Main(argc, argv); }
